/* tk_file.c - reading untrusted tokenizer files.
 *
 * Regular files only: a FIFO, device or socket named as a tokenizer (or as
 * its sidecar, encoder.json or vocab.bpe) would block a plain open() or
 * read() forever, so the file is opened with O_NONBLOCK, checked with fstat
 * and only then switched back to blocking reads. The size is bounded
 * (TK_MAX_FILE_BYTES) and the read must return exactly the size fstat gave.
 * The checks and the read are the common layer's (mks_common.h: below tk,
 * so tk and ds share them).
 *
 * JSON files are parsed from that buffer by jansson under a memory budget
 * (TK_JSON_MEM_FACTOR x the file size): jansson spends ~80 bytes per "{}" of
 * input, so without a budget a 1 GiB file of empty objects would take ~80 GiB. */
#include "tk_internal.h"
#include "mks_common.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The common layer's reads (mks_common.h), with its codes mapped to tk's
 * and tk's message for an over-large file. */
static int tk_code(int mc) { return mc == MC_ERR_LIMIT ? TK_ERR_LIMIT : mc == MC_ERR_NOMEM ? TK_ERR_NOMEM : TK_ERR_IO; }

static int limit_msg(const char *path, uint64_t size, size_t max_bytes, char *err, size_t errlen) {
    tk_set_err(err, errlen, "%s: %llu bytes, more than the %zu-byte limit for a tokenizer file", path,
               (unsigned long long)size, max_bytes);
    return TK_ERR_LIMIT;
}

int tk_open_regular(const char *path, size_t max_bytes, size_t *size, char *err, size_t errlen) {
    uint64_t sz;
    int fd = mc_open_regular(path, max_bytes, &sz, err, errlen);
    if (fd == MC_ERR_LIMIT) return limit_msg(path, sz, max_bytes, err, errlen);
    if (fd < 0) return tk_code(fd);
    *size = (size_t)sz;
    return fd;
}

int tk_read_regular(const char *path, size_t max_bytes, uint8_t **data, size_t *len, char *err, size_t errlen) {
    int rc = mc_read_regular(path, max_bytes, data, len, err, errlen);
    if (rc == MC_ERR_LIMIT) return limit_msg(path, *len, max_bytes, err, errlen);
    return rc == MC_OK ? TK_OK : tk_code(rc);
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
