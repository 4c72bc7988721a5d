/* mks_common.c - the common layer (mks_common.h). */
#include "mks_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void mc_vset_err(char *err, size_t errlen, const char *fmt, va_list ap) {
    if (!err || !errlen) return;
    vsnprintf(err, errlen, fmt, ap);
}

void mc_set_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mc_vset_err(err, errlen, fmt, ap);
    va_end(ap);
}

const char *mc_escape_text(const void *text, size_t n, char *out, size_t cap) {
    const uint8_t *p = text;
    size_t o = 0;
    if (!cap) return out;
    if (cap < 8) { /* no room for even one escape and "..." */
        out[0] = 0;
        return out;
    }
    for (size_t i = 0; i < n;) {
        size_t k = mc_utf8_seq(p + i, n - i);
        int c1 = k == 2 && p[i] == 0xC2 && p[i + 1] <= 0x9F; /* U+0080..U+009F */
        int esc = k == 0 || c1 || p[i] < 0x20 || p[i] == 0x7F || p[i] == '"' || p[i] == '\\';
        size_t need = esc ? 4 * (k ? k : 1) : k, used = k ? k : 1;
        /* the rest, or "..." after it, must still fit */
        if (o + need + (i + used < n ? 3 : 0) >= cap) {
            memcpy(out + o, "...", 4);
            return out;
        }
        for (size_t j = 0; j < used; j++) {
            if (esc) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i + j]);
            else out[o++] = (char)p[i + j];
        }
        i += used;
    }
    out[o] = 0;
    return out;
}

/* A path for this layer's messages (mc_escape_text into a buffer of the
 * caller's: 4 KiB shows any path that fits PATH_MAX unescaped). */
#define SHOWN 4200
static const char *shown(const char *path, char *buf) { return mc_escape_text(path, strlen(path), buf, SHOWN); }

double mc_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------- environment */

/* Digits [s, s+n) as a number <= max: 1, else -1 (no digits, too many,
 * or over max; 20 digits can overflow, so the length is bounded first). */
static int parse_digits(const char *s, size_t n, uint64_t max, uint64_t *v) {
    if (n == 0 || n > 19) return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) x = x * 10 + (uint64_t)(s[i] - '0');
    if (x > max) return -1;
    *v = x;
    return 1;
}

int mc_env_uint(const char *name, uint64_t max, uint64_t *v) {
    const char *s = getenv(name);
    if (!s || !*s) return 0;
    size_t n = strspn(s, "0123456789");
    if (s[n]) return -1;
    return parse_digits(s, n, max, v);
}

int mc_env_first_uint(const char *name, uint64_t max, uint64_t *v) {
    const char *s = getenv(name);
    if (!s || !*s) return 0;
    size_t n = strspn(s, "0123456789");
    if (s[n] && s[n] != '(' && s[n] != ',') return -1;
    return parse_digits(s, n, max, v);
}

/* ------------------------------------------------------------------ UTF-8 */

size_t mc_utf8_valid_prefix(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        /* ASCII runs 8 bytes at a time: most text is mostly ASCII */
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = mc_utf8_seq(p + i, n - i);
        if (!k) return i;
        i += k;
    }
    return n;
}

int mc_utf8_valid(const uint8_t *p, size_t n) { return mc_utf8_valid_prefix(p, n) == n; }

/* ------------------------------------------------------- reading a file */

int mc_open_regular(const char *path, uint64_t max_bytes, uint64_t *size, char *err, size_t errlen) {
    char sp[SHOWN];
    shown(path, sp);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        mc_set_err(err, errlen, "cannot open %s: %s", sp, strerror(errno));
        return MC_ERR_IO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        mc_set_err(err, errlen, "cannot stat %s: %s", sp, strerror(errno));
        close(fd);
        return MC_ERR_IO;
    }
    if (!S_ISREG(st.st_mode)) {
        mc_set_err(err, errlen, "%s: not a regular file (a FIFO, device, socket or folder is refused)", sp);
        close(fd);
        return MC_ERR_IO;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        mc_set_err(err, errlen, "%s: fcntl: %s", sp, strerror(errno));
        close(fd);
        return MC_ERR_IO;
    }
    if (size) *size = st.st_size < 0 ? 0 : (uint64_t)st.st_size;
    if (st.st_size < 0 || (max_bytes && (uint64_t)st.st_size > max_bytes)) {
        mc_set_err(err, errlen, "%s: %lld bytes, more than the %llu-byte limit", sp, (long long)st.st_size,
                   (unsigned long long)max_bytes);
        close(fd);
        return MC_ERR_LIMIT;
    }
    return fd;
}

int mc_read_regular(const char *path, size_t max_bytes, uint8_t **data, size_t *len, char *err, size_t errlen) {
    *data = NULL;
    *len = 0;
    char sp[SHOWN];
    shown(path, sp);
    if (!max_bytes || max_bytes == SIZE_MAX) {
        mc_set_err(err, errlen, "%s: no byte cap given for the read", sp);
        return MC_ERR_LIMIT;
    }
    uint64_t size64;
    int fd = mc_open_regular(path, max_bytes, &size64, err, errlen);
    if (fd == MC_ERR_LIMIT) *len = (size_t)size64;
    if (fd < 0) return fd;
    size_t size = (size_t)size64;
    /* one byte more than fstat said: a file that grows is caught, and the
     * buffer is NUL-terminated for the line parsers */
    uint8_t *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        mc_set_err(err, errlen, "%s: cannot allocate %zu bytes", sp, size + 1);
        return MC_ERR_NOMEM;
    }
    size_t got = 0;
    while (got < size + 1) {
        ssize_t r = read(fd, buf + got, size + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            mc_set_err(err, errlen, "cannot read %s: %s", sp, strerror(errno));
            free(buf);
            close(fd);
            return MC_ERR_IO;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != size) {
        mc_set_err(err, errlen, "%s: read %zu bytes where the file has %zu (it changed while being read)", sp, got,
                   size);
        free(buf);
        return MC_ERR_IO;
    }
    buf[size] = 0;
    *data = buf;
    *len = size;
    return MC_OK;
}

/* ------------------------------------------------------- atomic write */

int mc_write_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int mc_fsync_dir_of(const char *path) {
    size_t n = strlen(path);
    char *d = malloc(n + 2);
    if (!d) return -1;
    memcpy(d, path, n + 1);
    char *slash = strrchr(d, '/');
    if (!slash) strcpy(d, ".");
    else *(slash == d ? slash + 1 : slash) = 0; /* "/x" -> "/" */
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(d);
    if (fd < 0) return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

int mc_atomic_open(const char *tmp, unsigned mode, char *err, size_t errlen) {
    /* a FIFO or link planted as the temporary must neither block nor
     * redirect the write: remove it, then create a fresh file */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
    if (fd < 0) {
        int e = errno;
        char stmp[SHOWN];
        mc_set_err(err, errlen, "cannot write '%s': %s", shown(tmp, stmp), strerror(e));
        return MC_ERR_IO;
    }
    return fd;
}

int mc_atomic_commit(int fd, int failed, const char *tmp, const char *path, char *err, size_t errlen) {
    char stmp[SHOWN];
    int rc = failed ? MC_ERR_IO : MC_OK;
    if (rc == MC_OK && fsync(fd) != 0) {
        int e = errno;
        mc_set_err(err, errlen, "cannot sync '%s': %s", shown(tmp, stmp), strerror(e));
        rc = MC_ERR_IO;
    }
    if (close(fd) != 0 && rc == MC_OK) {
        int e = errno;
        mc_set_err(err, errlen, "cannot close '%s': %s", shown(tmp, stmp), strerror(e));
        rc = MC_ERR_IO;
    }
    if (rc == MC_OK && rename(tmp, path) != 0) {
        int e = errno;
        char sp[SHOWN];
        mc_set_err(err, errlen, "cannot rename '%s' to '%s': %s", shown(tmp, stmp), shown(path, sp), strerror(e));
        rc = MC_ERR_IO;
    }
    if (rc != MC_OK) unlink(tmp);
    else mc_fsync_dir_of(path); /* best effort: the data itself is already durable */
    return rc;
}

int mc_atomic_write_fn(const char *path, const char *tmp_name, unsigned mode, mc_fill_fn fill, void *ctx, char *err,
                       size_t errlen) {
    size_t n = strlen(tmp_name ? tmp_name : path);
    char *tmp = malloc(n + 8);
    if (!tmp) {
        mc_set_err(err, errlen, "out of memory");
        return MC_ERR_NOMEM;
    }
    snprintf(tmp, n + 8, tmp_name ? "%s" : "%s.tmp", tmp_name ? tmp_name : path);
    int fd = mc_atomic_open(tmp, mode, err, errlen);
    if (fd < 0) {
        free(tmp);
        return fd;
    }
    if (err && errlen) err[0] = 0;
    int failed = 0;
    if (fill(fd, ctx, err, errlen) != 0) {
        int e = errno;
        char stmp[SHOWN];
        if (err && errlen && !err[0]) mc_set_err(err, errlen, "cannot write '%s': %s", shown(tmp, stmp), strerror(e));
        failed = 1;
    }
    int rc = mc_atomic_commit(fd, failed, tmp, path, err, errlen);
    free(tmp);
    return rc;
}

typedef struct {
    const void *const *part;
    const size_t *len;
    size_t n;
} parts_ctx;

static int fill_parts(int fd, void *vctx, char *err, size_t errlen) {
    (void)err, (void)errlen;
    const parts_ctx *c = vctx;
    for (size_t i = 0; i < c->n; i++)
        if (mc_write_all(fd, c->part[i], c->len[i])) return -1;
    return 0;
}

int mc_atomic_write(const char *path, const char *tmp, unsigned mode, const void *const *part, const size_t *len,
                    size_t n, char *err, size_t errlen) {
    parts_ctx c = {part, len, n};
    return mc_atomic_write_fn(path, tmp, mode, fill_parts, &c, err, errlen);
}
