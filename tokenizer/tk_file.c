/* tk_file.c - reading untrusted tokenizer files.
 *
 * Regular files only: a FIFO, device or socket named as a tokenizer (or as
 * its sidecar, encoder.json or vocab.bpe) would block a plain open() or
 * read() forever, so the file is opened with O_NONBLOCK, checked with fstat
 * and only then switched back to blocking reads. The size is bounded
 * (TK_MAX_FILE_BYTES) and the read must return exactly the size fstat gave.
 * tk cannot use the dataset module's ds_open_regular (ds depends on tk).
 *
 * JSON files are parsed from that buffer by jansson under a memory budget
 * (TK_JSON_MEM_FACTOR x the file size): jansson spends ~80 bytes per "{}" of
 * input, so without a budget a 1 GiB file of empty objects would take ~80 GiB. */
#include "tk_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int tk_open_regular(const char *path, size_t max_bytes, size_t *size, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        tk_set_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return TK_ERR_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        tk_set_err(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return TK_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        tk_set_err(err, errlen, "%s: not a regular file (a FIFO, device, socket or folder is refused)", path);
        close(fd);
        return TK_ERR_IO;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        tk_set_err(err, errlen, "%s: fcntl: %s", path, strerror(errno));
        close(fd);
        return TK_ERR_IO;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > max_bytes) {
        tk_set_err(err, errlen, "%s: %lld bytes, more than the %zu-byte limit for a tokenizer file", path,
                   (long long)st.st_size, max_bytes);
        close(fd);
        return TK_ERR_LIMIT;
    }
    *size = (size_t)st.st_size;
    return fd;
}

int tk_read_regular(const char *path, size_t max_bytes, uint8_t **data, size_t *len, char *err, size_t errlen) {
    *data = NULL;
    *len = 0;
    size_t size;
    int fd = tk_open_regular(path, max_bytes, &size, err, errlen);
    if (fd < 0) return fd;
    /* one byte more than fstat said: a file that grows is caught, and the
     * buffer is NUL-terminated for the line parsers */
    uint8_t *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        tk_set_err(err, errlen, "%s: cannot allocate %zu bytes", path, size + 1);
        return TK_ERR_NOMEM;
    }
    size_t got = 0;
    while (got < size + 1) {
        ssize_t r = read(fd, buf + got, size + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            tk_set_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return TK_ERR_IO;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != size) {
        tk_set_err(err, errlen, "%s: read %zu bytes where the file has %zu (it changed while being read)", path, got,
                   size);
        free(buf);
        return TK_ERR_IO;
    }
    buf[size] = 0;
    *data = buf;
    *len = size;
    return TK_OK;
}

/* ---- jansson under a memory budget ----------------------------------------- */

/* jansson has one process-wide pair of allocation functions. Ours forward to
 * the ones installed before (malloc/free by default) and only count while a
 * thread is inside tk_json_load, so every other user of jansson is unaffected
 * and an object allocated before or outside a load is freed the same way. */
static json_malloc_t prev_malloc;
static json_free_t prev_free;
static pthread_once_t budget_once = PTHREAD_ONCE_INIT;
static _Thread_local struct {
    bool active, exceeded;
    size_t left;
} budget;

static void *budget_malloc(size_t n) {
    if (budget.active) {
        size_t cost = n + 16; /* malloc's own header and rounding */
        if (cost < n || cost > budget.left) {
            budget.exceeded = true;
            return NULL;
        }
        budget.left -= cost;
    }
    return prev_malloc(n);
}

static void budget_free(void *p) { prev_free(p); }

static void budget_install(void) {
    json_get_alloc_funcs(&prev_malloc, &prev_free);
    if (!prev_malloc || !prev_free) {
        prev_malloc = malloc;
        prev_free = free;
    }
    json_set_alloc_funcs(budget_malloc, budget_free);
}

int tk_json_load(const char *path, json_t **out, char *err, size_t errlen) {
    *out = NULL;
    uint8_t *data;
    size_t len;
    int rc = tk_read_regular(path, TK_MAX_FILE_BYTES, &data, &len, err, errlen);
    if (rc) return rc;
    rc = tk_json_loadb(path, data, len, len, out, err, errlen);
    free(data);
    return rc;
}

int tk_json_loadb(const char *path, const uint8_t *data, size_t len, size_t file_len, json_t **out, char *err,
                  size_t errlen) {
    *out = NULL;
    pthread_once(&budget_once, budget_install);
    /* the budget counts every allocation made while parsing (frees are not
     * credited back), so it bounds the peak; 1 MiB covers small files */
    size_t allowance;
    if (__builtin_mul_overflow(file_len, (size_t)TK_JSON_MEM_FACTOR, &allowance) ||
        __builtin_add_overflow(allowance, (size_t)1 << 20, &allowance))
        allowance = SIZE_MAX;
    budget.active = true;
    budget.exceeded = false;
    budget.left = allowance;
    json_error_t je;
    /* duplicate keys would let a file name one token twice with the last
     * one silently winning; \u0000 inside a string stays refused (no
     * JSON_ALLOW_NUL): token texts are C strings */
    json_t *root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je);
    bool exceeded = budget.exceeded;
    budget.active = false;
    if (!root) {
        if (exceeded) {
            tk_set_err(err, errlen, "%s: parsing it needs more than %zu bytes of memory (%u x its %zu bytes + 1 MiB)",
                       path, allowance, TK_JSON_MEM_FACTOR, file_len);
            return TK_ERR_LIMIT;
        }
        tk_set_err(err, errlen, "%s: line %d column %d: %s", path, je.line, je.column, je.text);
        return TK_ERR_FORMAT;
    }
    *out = root;
    return TK_OK;
}
