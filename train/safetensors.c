/* safetensors.c - safetensors reader and writer (see safetensors.h).
 *
 * The header is parsed by a small parser of exactly the JSON the format
 * uses (an object of tensor entries and one __metadata__ object of
 * strings), not by a general JSON library: it stores strings in one arena
 * of the header's size and entries in a table, so a hostile header cannot
 * make it allocate more than a few times its own size (a general DOM of a
 * 100 MB header of tiny entries takes gigabytes). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "safetensors.h"
#include "mks_common.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ds.h"
#include "tk.h"
#include "tr.h"

static const char *const DT_NAME[TR_ST_NDTYPES] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
                                                   "BF16", "I32", "U32", "F32",     "F64",     "I64", "U64"};
static const unsigned char DT_SIZE[TR_ST_NDTYPES] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8};

const char *tr_st_dtype_name(tr_st_dtype d) { return (unsigned)d < TR_ST_NDTYPES ? DT_NAME[d] : NULL; }
size_t tr_st_dtype_size(tr_st_dtype d) { return (unsigned)d < TR_ST_NDTYPES ? DT_SIZE[d] : 0; }

/* ------------------------------------------------------------ parser */
typedef struct {
    const uint8_t *p, *end, *start;
    char *arena; /* unescaped strings, NUL-terminated, one after another */
    size_t arena_used;
    const char *what;
    char *err;
    size_t errlen;
    int failed;
} ps;

static void fail(ps *s, const char *msg, const char *name) {
    if (s->failed) return;
    s->failed = 1;
    char esc[200];
    if (name)
        snprintf(s->err, s->errlen, "%s: safetensors header: %s (tensor \"%s\")", s->what, msg,
                 tk_escape_text(name, strlen(name), esc, sizeof esc));
    else snprintf(s->err, s->errlen, "%s: safetensors header: %s at byte %zu", s->what, msg, (size_t)(s->p - s->start));
}

static void ws(ps *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static int lit(ps *s, char c) {
    ws(s);
    if (s->p < s->end && *s->p == (uint8_t)c) {
        s->p++;
        return 1;
    }
    return 0;
}

static int hex4(const uint8_t *p, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        *v = *v << 4 | (unsigned)d;
    }
    return 1;
}

/* A JSON string into the arena; returns it (NULL on error). An unescaped
 * string is never longer than its quoted form, so the arena (header size + 1)
 * cannot overflow. A \u0000 is refused (names are C strings). */
static char *str(ps *s) {
    ws(s);
    if (s->p >= s->end || *s->p != '"') {
        fail(s, "expected a string", NULL);
        return NULL;
    }
    s->p++;
    char *out = s->arena + s->arena_used, *o = out;
    for (;;) {
        if (s->p >= s->end) {
            fail(s, "unterminated string", NULL);
            return NULL;
        }
        uint8_t c = *s->p++;
        if (c == '"') break;
        if (c < 0x20) {
            fail(s, "control byte in a string", NULL);
            return NULL;
        }
        if (c != '\\') {
            *o++ = (char)c;
            continue;
        }
        if (s->p >= s->end) {
            fail(s, "unterminated string", NULL);
            return NULL;
        }
        c = *s->p++;
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned u, lo;
            if (s->end - s->p < 4 || !hex4(s->p, &u)) {
                fail(s, "bad \\u escape", NULL);
                return NULL;
            }
            s->p += 4;
            if (u >= 0xD800 && u < 0xDC00) { /* a surrogate pair */
                if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' || !hex4(s->p + 2, &lo) || lo < 0xDC00 ||
                    lo >= 0xE000) {
                    fail(s, "lone surrogate in a \\u escape", NULL);
                    return NULL;
                }
                s->p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            } else if (u >= 0xDC00 && u < 0xE000) {
                fail(s, "lone surrogate in a \\u escape", NULL);
                return NULL;
            }
            if (u == 0) {
                fail(s, "NUL (\\u0000) in a string", NULL);
                return NULL;
            }
            if (u < 0x80) {
                *o++ = (char)u;
            } else if (u < 0x800) {
                *o++ = (char)(0xC0 | u >> 6);
                *o++ = (char)(0x80 | (u & 63));
            } else if (u < 0x10000) {
                *o++ = (char)(0xE0 | u >> 12);
                *o++ = (char)(0x80 | (u >> 6 & 63));
                *o++ = (char)(0x80 | (u & 63));
            } else {
                *o++ = (char)(0xF0 | u >> 18);
                *o++ = (char)(0x80 | (u >> 12 & 63));
                *o++ = (char)(0x80 | (u >> 6 & 63));
                *o++ = (char)(0x80 | (u & 63));
            }
            break;
        }
        default: fail(s, "bad escape in a string", NULL); return NULL;
        }
    }
    *o++ = 0;
    s->arena_used += (size_t)(o - out);
    return out;
}

/* A non-negative integer without fraction, exponent or leading zeros, < 2^64. */
static int num_u64(ps *s, uint64_t *v) {
    ws(s);
    if (s->p >= s->end || *s->p < '0' || *s->p > '9') {
        fail(s, "expected a non-negative integer", NULL);
        return 0;
    }
    if (*s->p == '0' && s->p + 1 < s->end && s->p[1] >= '0' && s->p[1] <= '9') {
        fail(s, "leading zero in a number", NULL);
        return 0;
    }
    uint64_t x = 0;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
        unsigned d = (unsigned)(*s->p++ - '0');
        if (x > (UINT64_MAX - d) / 10) {
            fail(s, "number does not fit 64 bits", NULL);
            return 0;
        }
        x = x * 10 + d;
    }
    if (s->p < s->end && (*s->p == '.' || *s->p == 'e' || *s->p == 'E')) {
        fail(s, "expected an integer", NULL);
        return 0;
    }
    *v = x;
    return 1;
}

/* One tensor entry: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}. */
static int entry(ps *s, tr_st_tensor *t) {
    int have_dt = 0, have_shape = 0, have_off = 0;
    if (!lit(s, '{')) {
        fail(s, "a tensor's entry is not an object", t->name);
        return 0;
    }
    if (lit(s, '}')) {
        fail(s, "empty tensor entry", t->name);
        return 0;
    }
    do {
        const char *k = str(s);
        if (!k) return 0;
        if (!lit(s, ':')) {
            fail(s, "expected ':'", NULL);
            return 0;
        }
        if (!strcmp(k, "dtype")) {
            const char *d = str(s);
            if (!d) return 0;
            int found = -1;
            for (int i = 0; i < TR_ST_NDTYPES; i++)
                if (!strcmp(d, DT_NAME[i])) found = i;
            if (found < 0 || have_dt) {
                fail(s, found < 0 ? "unknown dtype" : "duplicate key dtype", t->name);
                return 0;
            }
            t->dtype = (tr_st_dtype)found;
            have_dt = 1;
        } else if (!strcmp(k, "shape")) {
            if (have_shape || !lit(s, '[')) {
                fail(s, have_shape ? "duplicate key shape" : "shape is not an array", t->name);
                return 0;
            }
            t->rank = 0;
            if (!lit(s, ']')) {
                do {
                    uint64_t d;
                    if (!num_u64(s, &d)) return 0;
                    if (t->rank == TR_ST_MAX_RANK) {
                        fail(s, "rank over 8", t->name);
                        return 0;
                    }
                    t->shape[t->rank++] = d;
                } while (lit(s, ','));
                if (!lit(s, ']')) {
                    fail(s, "expected ']'", NULL);
                    return 0;
                }
            }
            have_shape = 1;
        } else if (!strcmp(k, "data_offsets")) {
            if (have_off || !lit(s, '[') || !num_u64(s, &t->begin) || !lit(s, ',') || !num_u64(s, &t->end) ||
                !lit(s, ']')) {
                fail(s, have_off ? "duplicate key data_offsets" : "data_offsets is not [begin, end]", t->name);
                return 0;
            }
            have_off = 1;
        } else {
            fail(s, "unknown key in a tensor's entry", t->name);
            return 0;
        }
    } while (lit(s, ','));
    if (!lit(s, '}')) {
        fail(s, "expected '}'", NULL);
        return 0;
    }
    if (!have_dt || !have_shape || !have_off) {
        fail(s, !have_dt ? "no dtype" : !have_shape ? "no shape" : "no data_offsets", t->name);
        return 0;
    }
    return 1;
}

/* Whole-buffer UTF-8 check (no overlongs, no surrogates, <= U+10FFFF). */
static size_t utf8_bad(const uint8_t *p, size_t n) {
    size_t ok = mc_utf8_valid_prefix(p, n);
    return ok == n ? 0 : ok + 1;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const tr_st_tensor *)a)->name, ((const tr_st_tensor *)b)->name);
}
static int cmp_off(const void *a, const void *b) {
    const tr_st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void tr_st_close(tr_st_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    free(f->arena_);
    free(f->t);
    free(f->meta_key);
    free(f->meta_val);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* Table growth: doubling, never past what the header can hold. */
static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap * 2 : 16;
    if (c < need) c = need;
    void *q = realloc(*p, c * elem);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

/* The safetensors header: untrusted JSON checked entry by entry against
 * the spec and the file (dtype, shape x dtype = byte length, offsets in the
 * data, no overlap, no duplicate). Long (~190 lines) because the checks run
 * in the one scan over the JSON, each beside the value it reads. */
int tr_st_parse(const uint8_t *json, size_t n, uint64_t data_len, const char *what, tr_st_file *out, char *err,
                size_t errlen) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    snprintf(out->path, sizeof out->path, "%s", what ? what : "safetensors");
    ps s = {json, json + n, json, NULL, 0, out->path, err, errlen, 0};
    if (n > TR_ST_MAX_HEADER) {
        snprintf(err, errlen, "%s: safetensors header of %zu bytes is over the %llu-byte limit", out->path, n,
                 (unsigned long long)TR_ST_MAX_HEADER);
        return TR_ERR_CORRUPT;
    }
    size_t bad = utf8_bad(json, n);
    if (bad) {
        snprintf(err, errlen, "%s: safetensors header is not UTF-8 (byte %zu)", out->path, bad - 1);
        return TR_ERR_CORRUPT;
    }
    if (n == 0 || json[0] != '{') {
        snprintf(err, errlen, "%s: safetensors header does not start with '{'", out->path);
        return TR_ERR_CORRUPT;
    }
    s.arena = malloc(n + 1);
    if (!s.arena) {
        snprintf(err, errlen, "%s: out of memory for a %zu-byte header", out->path, n);
        return TR_ERR_NOMEM;
    }
    char *arena = s.arena;
    size_t cap_t = 0, cap_m = 0, n_t = 0, n_m = 0;
    tr_st_tensor *t = NULL;
    char **mk = NULL, **mv = NULL;
    int have_meta = 0, rc = TR_ERR_CORRUPT;
    s.p++;
    if (!lit(&s, '}')) {
        do {
            char *name = str(&s);
            if (!name) goto out;
            if (!lit(&s, ':')) {
                fail(&s, "expected ':'", NULL);
                goto out;
            }
            if (!strcmp(name, "__metadata__")) {
                if (have_meta) {
                    fail(&s, "duplicate __metadata__", NULL);
                    goto out;
                }
                have_meta = 1;
                if (!lit(&s, '{')) {
                    fail(&s, "__metadata__ is not an object", NULL);
                    goto out;
                }
                if (lit(&s, '}')) continue;
                do {
                    char *k = str(&s), *v = NULL;
                    if (!k) goto out;
                    if (!lit(&s, ':')) {
                        fail(&s, "expected ':'", NULL);
                        goto out;
                    }
                    ws(&s);
                    if (s.p < s.end && *s.p != '"') {
                        fail(&s, "a __metadata__ value is not a string", NULL);
                        goto out;
                    }
                    if (!(v = str(&s))) goto out;
                    size_t c0 = cap_m;
                    if (!grow((void **)&mk, &c0, n_m + 1, sizeof *mk) ||
                        !grow((void **)&mv, &cap_m, n_m + 1, sizeof *mv)) {
                        rc = TR_ERR_NOMEM;
                        snprintf(err, errlen, "%s: out of memory", out->path);
                        goto out;
                    }
                    mk[n_m] = k;
                    mv[n_m++] = v;
                } while (lit(&s, ','));
                if (!lit(&s, '}')) {
                    fail(&s, "expected '}'", NULL);
                    goto out;
                }
                continue;
            }
            if (!name[0]) {
                fail(&s, "empty tensor name", NULL);
                goto out;
            }
            if (!grow((void **)&t, &cap_t, n_t + 1, sizeof *t)) {
                rc = TR_ERR_NOMEM;
                snprintf(err, errlen, "%s: out of memory", out->path);
                goto out;
            }
            memset(&t[n_t], 0, sizeof t[n_t]);
            t[n_t].name = name;
            if (!entry(&s, &t[n_t])) goto out;
            n_t++;
        } while (lit(&s, ','));
        if (!lit(&s, '}')) {
            fail(&s, "expected ',' or '}'", NULL);
            goto out;
        }
    }
    /* the reference writer pads with spaces; other JSON whitespace is JSON too */
    ws(&s);
    if (s.p != s.end) {
        fail(&s, "bytes after the header's object", NULL);
        goto out;
    }
    /* sizes: element count x dtype size == end - begin, with overflow checks */
    for (size_t i = 0; i < n_t; i++) {
        uint64_t ne = 1;
        for (int d = 0; d < t[i].rank; d++) {
            if (t[i].shape[d] && ne > UINT64_MAX / t[i].shape[d]) {
                fail(&s, "shape's element count overflows 64 bits", t[i].name);
                goto out;
            }
            ne *= t[i].shape[d];
        }
        uint64_t sz = DT_SIZE[t[i].dtype];
        if (ne > UINT64_MAX / sz) {
            fail(&s, "shape x dtype size overflows 64 bits", t[i].name);
            goto out;
        }
        t[i].numel = ne;
        if (t[i].end < t[i].begin) {
            fail(&s, "data_offsets end before they begin", t[i].name);
            goto out;
        }
        if (t[i].end - t[i].begin != ne * sz) {
            char m[160];
            snprintf(m, sizeof m, "shape x dtype size is %llu bytes but data_offsets span %llu",
                     (unsigned long long)(ne * sz), (unsigned long long)(t[i].end - t[i].begin));
            fail(&s, m, t[i].name);
            goto out;
        }
    }
    /* offsets tile the byte buffer: no overlap, no hole, nothing past its end */
    if (n_t) qsort(t, n_t, sizeof *t, cmp_off);
    uint64_t at = 0;
    for (size_t i = 0; i < n_t; i++) {
        if (t[i].begin != at) {
            fail(&s, t[i].begin < at ? "data overlaps the previous tensor's" : "hole in the byte buffer before it",
                 t[i].name);
            goto out;
        }
        at = t[i].end;
    }
    if (at != data_len) {
        char m[160];
        snprintf(m, sizeof m, "the tensors cover %llu bytes but the byte buffer holds %llu", (unsigned long long)at,
                 (unsigned long long)data_len);
        snprintf(err, errlen, "%s: safetensors header: %s", out->path, m);
        goto out;
    }
    if (n_t) qsort(t, n_t, sizeof *t, cmp_name);
    for (size_t i = 1; i < n_t; i++)
        if (!strcmp(t[i - 1].name, t[i].name)) {
            fail(&s, "duplicate tensor name", t[i].name);
            goto out;
        }
    if (n_m > 1) {
        char **sorted = malloc(n_m * sizeof *sorted);
        if (!sorted) {
            rc = TR_ERR_NOMEM;
            snprintf(err, errlen, "%s: out of memory", out->path);
            goto out;
        }
        memcpy(sorted, mk, n_m * sizeof *sorted);
        qsort(sorted, n_m, sizeof *sorted, cmp_str);
        for (size_t i = 1; i < n_m; i++)
            if (!strcmp(sorted[i - 1], sorted[i])) {
                fail(&s, "duplicate __metadata__ key", NULL);
                free(sorted);
                goto out;
            }
        free(sorted);
    }
    out->t = t;
    out->n = n_t;
    out->meta_key = mk;
    out->meta_val = mv;
    out->n_meta = n_m;
    out->data_len = data_len;
    rc = TR_OK;
out:
    if (rc != TR_OK) {
        free(t);
        free(mk);
        free(mv);
        free(arena);
        return rc;
    }
    out->arena_ = arena;
    return TR_OK;
}

int tr_st_open(const char *path, tr_st_file *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->fd = -1;
    char e[512] = "", esc[300];
    tk_escape_text(path, strlen(path), esc, sizeof esc);
    int fd = ds_open_regular(path, e, sizeof e); /* a FIFO or device is refused without blocking */
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s", e);
        return TR_ERR_IO;
    }
    struct stat st;
    uint8_t h8[8];
    if (fstat(fd, &st) || pread(fd, h8, 8, 0) != 8) {
        snprintf(err, errlen, "%s: not a safetensors file (shorter than its 8-byte header size)", esc);
        close(fd);
        return st.st_size < 8 ? TR_ERR_CORRUPT : TR_ERR_IO;
    }
    uint64_t n = 0, size = (uint64_t)st.st_size;
    for (int i = 7; i >= 0; i--) n = n << 8 | h8[i];
    if (n > TR_ST_MAX_HEADER || n > size - 8) {
        snprintf(err, errlen, "%s: safetensors header size %llu is %s", esc, (unsigned long long)n,
                 n > TR_ST_MAX_HEADER ? "over the 100,000,000-byte limit" : "past the end of the file");
        close(fd);
        return TR_ERR_CORRUPT;
    }
    uint8_t *hdr = malloc(n ? (size_t)n : 1);
    if (!hdr) {
        snprintf(err, errlen, "%s: out of memory for a %llu-byte header", esc, (unsigned long long)n);
        close(fd);
        return TR_ERR_NOMEM;
    }
    for (uint64_t got = 0; got < n;) {
        ssize_t r = pread(fd, hdr + got, (size_t)(n - got), (off_t)(8 + got));
        if (r <= 0) {
            snprintf(err, errlen, "cannot read %s: %s", esc, r < 0 ? strerror(errno) : "file shrank");
            free(hdr);
            close(fd);
            return TR_ERR_IO;
        }
        got += (uint64_t)r;
    }
    int rc = tr_st_parse(hdr, (size_t)n, size - 8 - n, esc, out, err, errlen);
    free(hdr);
    if (rc) {
        close(fd);
        return rc;
    }
    out->fd = fd;
    out->data_start = 8 + n;
    return TR_OK;
}

const tr_st_tensor *tr_st_find(const tr_st_file *f, const char *name) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->t[mid].name, name);
        if (!c) return &f->t[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *tr_st_meta(const tr_st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_key[i], key)) return f->meta_val[i];
    return NULL;
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static float f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = h >> 10 & 31, m = h & 1023, u;
    if (e == 0) {
        if (m == 0) {
            u = s;
        } else { /* subnormal: normalise */
            e = 127 - 15 + 1;
            while (!(m & 1024)) {
                m <<= 1;
                e--;
            }
            u = s | e << 23 | (m & 1023) << 13;
        }
    } else if (e == 31) {
        u = s | 0xFFu << 23 | m << 13;
    } else {
        u = s | (e - 15 + 127) << 23 | m << 13;
    }
    float x;
    memcpy(&x, &u, 4);
    return x;
}

int tr_st_read_f32(const tr_st_file *f, const tr_st_tensor *t, float *dst, uint64_t n, char *err, size_t errlen) {
    char esc[200];
    tk_escape_text(t->name, strlen(t->name), esc, sizeof esc);
    if (t->dtype != TR_ST_F32 && t->dtype != TR_ST_BF16 && t->dtype != TR_ST_F16) {
        snprintf(err, errlen, "%s: tensor \"%s\" has dtype %s (F32, BF16 or F16 expected)", f->path, esc,
                 DT_NAME[t->dtype]);
        return TR_ERR_CORRUPT;
    }
    if (n != t->numel) {
        snprintf(err, errlen, "%s: tensor \"%s\" has %llu elements, %llu expected", f->path, esc,
                 (unsigned long long)t->numel, (unsigned long long)n);
        return TR_ERR_CORRUPT;
    }
    if (f->fd < 0) return TR_ERR_ARG;
    size_t es = DT_SIZE[t->dtype];
    /* 16-bit data is read into the second half of dst and widened forwards
     * (element i is read from bytes 2i.. of that half before dst[i] is
     * written, and 4i >= 2n + 2i only once i >= n) */
    uint8_t *buf = t->dtype == TR_ST_F32 ? (uint8_t *)dst : (uint8_t *)dst + 2 * n;
    uint64_t bytes = n * es;
    for (uint64_t got = 0; got < bytes;) {
        size_t chunk = bytes - got > (1u << 30) ? (1u << 30) : (size_t)(bytes - got);
        ssize_t r = pread(f->fd, buf + got, chunk, (off_t)(f->data_start + t->begin + got));
        if (r <= 0) {
            snprintf(err, errlen, "cannot read tensor \"%s\" of %s: %s", esc, f->path,
                     r < 0 ? strerror(errno) : "file shrank");
            return TR_ERR_IO;
        }
        got += (uint64_t)r;
    }
    if (t->dtype != TR_ST_F32) {
        const uint8_t *h = buf;
        for (uint64_t i = 0; i < n; i++) {
            uint16_t v = (uint16_t)(h[2 * i] | h[2 * i + 1] << 8);
            dst[i] = t->dtype == TR_ST_BF16 ? bf16_to_f32(v) : f16_to_f32(v);
        }
    }
    return TR_OK;
}

/* ------------------------------------------------------------ writer */
int tr_st_write_atomic(const char *path, const void *const *part, const size_t *len, size_t n, char *err,
                       size_t errlen) {
    /* the common layer's one policy: PATH.tmp (O_EXCL|O_NOFOLLOW), fsync,
     * rename, fsync of the folder; its messages escape the path */
    return mc_atomic_write(path, NULL, 0644, part, len, n, err, errlen) == MC_OK ? TR_OK : TR_ERR_IO;
}

/* JSON string of s (the writer's names and metadata) appended to a growable buffer. */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->len + n + 1) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_json(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[8];
        if (*p == '"' || *p == '\\') {
            e[0] = '\\', e[1] = (char)*p;
            sb_put(b, e, 2);
        } else if (*p < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", *p);
            sb_put(b, e, 6);
        } else {
            sb_put(b, (const char *)p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

typedef struct {
    const tr_st_out *t;
    uint64_t bytes;
} wr_item;

static int cmp_wr(const void *a, const void *b) {
    const wr_item *x = a, *y = b;
    size_t sx = DT_SIZE[x->t->dtype], sy = DT_SIZE[y->t->dtype];
    if (sx != sy) return sx > sy ? -1 : 1; /* larger elements first: every tensor aligned to its element size */
    return strcmp(x->t->name, y->t->name);
}

uint16_t tr_st_f32_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40);
    u += 0x7fffu + (u >> 16 & 1);
    return (uint16_t)(u >> 16);
}

typedef struct {
    const uint8_t *n8;
    const char *hdr;
    size_t hlen;
    const wr_item *it;
    size_t n;
    uint8_t *chunk; /* TR_ST_CHUNK fp32 values (allocated on the first src tensor) */
} wr_fill;

/* Element e of vals (fp32) into chunk as dtype. */
static void put_el(uint8_t *chunk, uint64_t e, float v, tr_st_dtype dt) {
    if (dt == TR_ST_BF16) {
        uint16_t b = tr_st_f32_to_bf16(v);
        chunk[2 * e] = (uint8_t)b, chunk[2 * e + 1] = (uint8_t)(b >> 8);
    } else {
        memcpy(chunk + 4 * e, &v, 4); /* little-endian hosts (the format's order) */
    }
}

/* A src tensor's bytes, converted TR_ST_CHUNK elements at a time: the only
 * memory an fp32 -> bf16 (or transposed) tensor costs beyond its source.
 * Transposed (src (rows, cols) -> out (cols, rows)): whole output rows per
 * chunk, the source read row by row (contiguous runs of the chunk's
 * columns), not one strided element at a time. */
static int write_src(int fd, const tr_st_out *t, uint64_t ne, uint8_t *chunk) {
    uint64_t rows = t->src_rows ? t->src_rows : 1, cols = ne / rows;
    uint64_t per = t->src_rows ? TR_ST_CHUNK / rows : 0; /* output rows per chunk */
    for (uint64_t at = 0; at < ne;) {
        uint64_t k;
        if (!t->src_rows || !per) { /* in order (or a column longer than a chunk: element by element) */
            k = ne - at < TR_ST_CHUNK ? ne - at : TR_ST_CHUNK;
            for (uint64_t e = 0; e < k; e++) {
                uint64_t o = at + e; /* transposed: out[j][i] = src[i][j] */
                put_el(chunk, e, t->src_rows ? t->src[(o % rows) * cols + o / rows] : t->src[o], t->dtype);
            }
        } else {
            uint64_t j0 = at / rows, nj = cols - j0 < per ? cols - j0 : per;
            k = nj * rows;
            for (uint64_t i = 0; i < rows; i++)
                for (uint64_t j = 0; j < nj; j++) put_el(chunk, j * rows + i, t->src[i * cols + j0 + j], t->dtype);
        }
        if (mc_write_all(fd, chunk, (size_t)(k * DT_SIZE[t->dtype]))) return -1;
        at += k;
    }
    return 0;
}

static int fill_st(int fd, void *ctx, char *err, size_t errlen) {
    wr_fill *f = ctx;
    if (mc_write_all(fd, f->n8, 8) || mc_write_all(fd, f->hdr, f->hlen)) goto io;
    for (size_t i = 0; i < f->n; i++) {
        const tr_st_out *t = f->it[i].t;
        if (t->data) {
            if (mc_write_all(fd, t->data, (size_t)f->it[i].bytes)) goto io;
            continue;
        }
        if (!f->chunk && !(f->chunk = malloc((size_t)TR_ST_CHUNK * 4))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (write_src(fd, t, f->it[i].bytes / DT_SIZE[t->dtype], f->chunk)) goto io;
    }
    return 0;
io:
    snprintf(err, errlen, "write failed: %s", strerror(errno));
    return -1;
}

int tr_st_write(const char *path, const tr_st_out *t, size_t n, const char *const *meta_key,
                const char *const *meta_val, size_t n_meta, char *err, size_t errlen) {
    wr_item *it = calloc(n ? n : 1, sizeof *it);
    sbuf h = {0};
    int rc = TR_ERR_NOMEM;
    if (!it) {
        snprintf(err, errlen, "out of memory writing %s", path);
        goto done;
    }
    rc = TR_ERR_ARG;
    for (size_t i = 0; i < n; i++) {
        if (!t[i].name || !t[i].name[0] || (unsigned)t[i].dtype >= TR_ST_NDTYPES || t[i].rank < 0 ||
            t[i].rank > TR_ST_MAX_RANK || (!t[i].data && !t[i].src) ||
            (!t[i].data && t[i].dtype != TR_ST_F32 && t[i].dtype != TR_ST_BF16)) {
            snprintf(err, errlen, "tr_st_write: bad tensor %zu", i);
            goto done;
        }
        uint64_t ne = 1;
        for (int d = 0; d < t[i].rank; d++) {
            if (t[i].shape[d] && ne > UINT64_MAX / t[i].shape[d] / 8) {
                snprintf(err, errlen, "tr_st_write: tensor %s too large", t[i].name);
                goto done;
            }
            ne *= t[i].shape[d];
        }
        if (!t[i].data && t[i].src_rows && ne % t[i].src_rows) {
            snprintf(err, errlen, "tr_st_write: tensor %s: %llu rows do not divide it", t[i].name,
                     (unsigned long long)t[i].src_rows);
            goto done;
        }
        it[i].t = &t[i];
        it[i].bytes = ne * DT_SIZE[t[i].dtype];
    }
    if (n) qsort(it, n, sizeof *it, cmp_wr);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(it[i - 1].t->name, it[i].t->name)) {
            snprintf(err, errlen, "tr_st_write: duplicate tensor name %s", it[i].t->name);
            goto done;
        }
    sb_str(&h, "{");
    int first = 1;
    if (n_meta) {
        sb_str(&h, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i) sb_str(&h, ",");
            sb_json(&h, meta_key[i]);
            sb_str(&h, ":");
            sb_json(&h, meta_val[i]);
        }
        sb_str(&h, "}");
        first = 0;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        char num[64];
        if (!first) sb_str(&h, ",");
        first = 0;
        sb_json(&h, it[i].t->name);
        sb_str(&h, ":{\"dtype\":\"");
        sb_str(&h, DT_NAME[it[i].t->dtype]);
        sb_str(&h, "\",\"shape\":[");
        for (int d = 0; d < it[i].t->rank; d++) {
            snprintf(num, sizeof num, "%s%llu", d ? "," : "", (unsigned long long)it[i].t->shape[d]);
            sb_str(&h, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + it[i].bytes));
        sb_str(&h, num);
        off += it[i].bytes;
    }
    sb_str(&h, "}");
    while (h.len % 8) /* the reference writer's padding: the byte buffer starts 8-aligned */
        sb_str(&h, " ");
    if (h.oom) {
        rc = TR_ERR_NOMEM;
        snprintf(err, errlen, "out of memory writing %s", path);
        goto done;
    }
    uint8_t n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    /* the 8-byte size, then the header, then the tensors in header order */
    wr_fill f = {n8, h.p, h.len, it, n, NULL};
    rc = mc_atomic_write_fn(path, NULL, 0644, fill_st, &f, err, errlen) == MC_OK ? TR_OK : TR_ERR_IO;
    free(f.chunk);
done:
    free(it);
    free(h.p);
    return rc;
}

/* ------------------------------------------------------------ model folders */
void tr_st_set_close(tr_st_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_files; i++) tr_st_close(&s->files[i]);
    free(s->files);
    s->files = NULL;
    s->n_files = 0;
}

const tr_st_tensor *tr_st_set_find(const tr_st_set *s, const char *name, const tr_st_file **file) {
    for (size_t i = 0; i < s->n_files; i++) {
        const tr_st_tensor *t = tr_st_find(&s->files[i], name);
        if (t) {
            if (file) *file = &s->files[i];
            return t;
        }
    }
    return NULL;
}

size_t tr_st_set_count(const tr_st_set *s) {
    size_t c = 0;
    for (size_t i = 0; i < s->n_files; i++) c += s->files[i].n;
    return c;
}

static int plain_name(const char *f) { return f[0] && !strchr(f, '/') && strcmp(f, ".") && strcmp(f, ".."); }

/* A model folder's tensors: model.safetensors, or the shards an index names.
 * Long (~120 lines): the index is untrusted too (names, files, each tensor in
 * exactly one listed file), checked in the same pass that opens the files. */
int tr_st_set_open(const char *dir, tr_st_set *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    char p[4200], esc[300];
    tk_escape_text(dir, strlen(dir), esc, sizeof esc);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    struct stat st;
    if (stat(p, &st)) {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        out->files = calloc(1, sizeof *out->files);
        if (!out->files) {
            snprintf(err, errlen, "out of memory");
            return TR_ERR_NOMEM;
        }
        int rc = tr_st_open(p, &out->files[0], err, errlen);
        if (rc) {
            free(out->files);
            out->files = NULL;
            return rc;
        }
        out->n_files = 1;
        return TR_OK;
    }
    char e[512] = "";
    int fd = ds_open_regular(p, e, sizeof e);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s", e);
        return TR_ERR_IO;
    }
    if (fstat(fd, &st) || (uint64_t)st.st_size > TR_ST_MAX_INDEX) {
        snprintf(err, errlen, "%s/model.safetensors.index.json is over %llu bytes", esc,
                 (unsigned long long)TR_ST_MAX_INDEX);
        close(fd);
        return TR_ERR_CORRUPT;
    }
    FILE *f = fdopen(fd, "rb");
    json_error_t je;
    json_t *root = f ? json_loadf(f, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (f) fclose(f);
    else close(fd);
    json_t *wm = root ? json_object_get(root, "weight_map") : NULL;
    if (!root || !json_is_object(wm)) {
        snprintf(err, errlen, "%s/model.safetensors.index.json: %s", esc, root ? "no \"weight_map\" object" : je.text);
        json_decref(root);
        return TR_ERR_CORRUPT;
    }
    /* the distinct files, in first-seen order */
    int rc = TR_ERR_CORRUPT;
    const char *key;
    json_t *val;
    const char **names = NULL;
    size_t nn = 0, cap = 0;
    json_object_foreach(wm, key, val) {
        const char *fn = json_string_value(val);
        char k[200];
        if (!fn || !plain_name(fn) || strlen(fn) != json_string_length(val)) {
            snprintf(err, errlen, "%s/model.safetensors.index.json: tensor \"%s\" maps to %s", esc,
                     tk_escape_text(key, strlen(key), k, sizeof k),
                     fn ? "a name that is not a file in the folder" : "something that is not a string");
            goto fail;
        }
        size_t j = 0;
        while (j < nn && strcmp(names[j], fn)) j++;
        if (j == nn) {
            if (nn == TR_ST_MAX_SHARDS) {
                snprintf(err, errlen, "%s/model.safetensors.index.json names over %d files", esc, TR_ST_MAX_SHARDS);
                goto fail;
            }
            if (!grow((void **)&names, &cap, nn + 1, sizeof *names)) {
                rc = TR_ERR_NOMEM;
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            names[nn++] = fn;
        }
    }
    out->files = calloc(nn ? nn : 1, sizeof *out->files);
    if (!out->files) {
        rc = TR_ERR_NOMEM;
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t j = 0; j < nn; j++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[j]);
        out->files[j].fd = -1;
        if ((rc = tr_st_open(p, &out->files[j], err, errlen))) goto fail;
        out->n_files = j + 1;
        /* every tensor of the file is mapped to it */
        for (size_t i = 0; i < out->files[j].n; i++) {
            const char *m = json_string_value(json_object_get(wm, out->files[j].t[i].name));
            if (!m || strcmp(m, names[j])) {
                char k[200], fe[200];
                snprintf(err, errlen, "%s/%s: tensor \"%s\" is %s", esc,
                         tk_escape_text(names[j], strlen(names[j]), fe, sizeof fe),
                         tk_escape_text(out->files[j].t[i].name, strlen(out->files[j].t[i].name), k, sizeof k),
                         m ? "mapped to another file by the index" : "not in the index's weight_map");
                rc = TR_ERR_CORRUPT;
                goto fail;
            }
        }
    }
    /* every mapped tensor is in its file (then no name is in two files) */
    json_object_foreach(wm, key, val) {
        size_t j = 0;
        while (strcmp(names[j], json_string_value(val))) j++;
        if (!tr_st_find(&out->files[j], key)) {
            char k[200];
            snprintf(err, errlen, "%s/model.safetensors.index.json: tensor \"%s\" is not in its file", esc,
                     tk_escape_text(key, strlen(key), k, sizeof k));
            rc = TR_ERR_CORRUPT;
            goto fail;
        }
    }
    free(names);
    json_decref(root);
    return TR_OK;
fail:
    free(names);
    json_decref(root);
    tr_st_set_close(out);
    return rc;
}
