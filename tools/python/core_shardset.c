/* core_shardset.c - mkshards._core.ShardSet (core.h): ds_shardset_open /
 * ds_shardset_read over dataset/ds.h, rows into caller buffers with the GIL
 * released; RowMaker (ShardDataset's per-row reader); row_order, llmtrain's
 * seeded row order from the trainer library (tr_row_at, train/tr.h). */
#include "core.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "tr.h"

/* ================================================================ ShardSet */
/* Direct row metadata (docs/shard-format.md): fill() reads each row's valid /
 * sidx / starts entries and, for uncompressed shards, its token ids in place
 * from a second read-only mapping of the shard file, and writes llmtrain's
 * layout from them in runs (the segments of the row), instead of having
 * ds_shardset_read expand positions, segments and mask per token first.
 * Every offset is bounds-checked here (a crafted file may carry valid
 * checksums); a shard whose sizes do not add up, or any shard on a
 * big-endian host, goes through ds_shardset_read. */
typedef struct {
    uint64_t first, n_rows; /* rows of the split before this shard; its rows */
    void *map;              /* NULL: read through ds_shardset_read */
    size_t map_len;
    const uint8_t *tok; /* uncompressed token rows, or NULL (zstd frames) */
    const uint8_t *valid, *sidx, *starts;
    uint64_t n_starts;
    uint32_t dt;
    /* zstd shards: the token section and frames[n_frames + 1] (offsets in it) */
    const uint8_t *zsec, *frames;
    uint64_t zsec_bytes, n_frames;
    uint32_t frame_rows;
    int loss_bits;       /* version 2: the loss mask is the stored bits */
    const uint8_t *loss; /* version 2: the loss section (n_rows x ceil(L / 8) bytes) */
} sh_map;

/* The last decoded zstd frame, so that reading the rows of a compressed shard
 * in order decodes each frame once instead of once per row. */
typedef struct {
    pthread_mutex_t mu;
    const sh_map *m; /* NULL: empty */
    uint64_t f;
    uint8_t *buf;
    size_t cap;
} frame_cache;

typedef struct {
    PyObject_HEAD ds_shardset *ss;
    ds_shardset_info info;
    int busy; /* reads running with the GIL released: close() must wait for them */
    sh_map *maps[2];
    size_t n_maps[2];
    frame_cache fc;
    int fc_init;
} SSObj;

static uint32_t get32le(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t get64le(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void maps_free(SSObj *s) {
    if (s->fc_init) {
        free(s->fc.buf);
        s->fc.buf = NULL;
        s->fc.cap = 0;
        s->fc.m = NULL;
    }
    for (int sp = 0; sp < 2; sp++) {
        for (size_t k = 0; k < s->n_maps[sp]; k++)
            if (s->maps[sp][k].map) munmap(s->maps[sp][k].map, s->maps[sp][k].map_len);
        free(s->maps[sp]);
        s->maps[sp] = NULL;
        s->n_maps[sp] = 0;
    }
}

/* Map one shard when its sections fit the file; leaves m->map NULL otherwise. */
static void map_shard(sh_map *m, const char *path, const ds_shard_header *h) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t N = h->n_rows, S = h->n_starts, L = h->row_len;
    if (N > (1ull << 40) || S > (1ull << 40) || h->tokens_bytes > (1ull << 50) || h->meta_bytes > (1ull << 50)) return;
    int zstd = (h->flags & DS_SHARD_F_ZSTD) != 0;
    uint64_t F = zstd ? h->n_frames : 0;
    if (F > (1ull << 40) || (zstd && (h->frame_rows == 0 || F != (N + h->frame_rows - 1) / h->frame_rows ||
                                      (uint64_t)h->frame_rows * L * h->dtype_bytes > DS_SHARD_MAX_FRAME_BYTES)))
        return;
    uint64_t meta_need = 4 * N + 4 * (N + 1) + 4 * S + (zstd ? 8 * (F + 1) : 0);
    uint64_t meta_off = DS_SHARD_HEADER_BYTES + h->tokens_bytes;
    int v2 = h->version == DS_SHARD_VERSION_LOSS;
    /* version 2: the loss section follows the metadata, one ceil(L / 8)-byte row of bits per row */
    uint64_t loss_need = v2 ? N * ds_shard_loss_row_bytes((uint32_t)L) : 0;
    if (h->meta_bytes < meta_need || (h->dtype_bytes != 2 && h->dtype_bytes != 4) || L > (1ull << 24) ||
        (!zstd && h->tokens_bytes < N * L * h->dtype_bytes) || (v2 && h->loss_bytes != loss_need) ||
        (!v2 && h->version != DS_SHARD_VERSION))
        return;
    /* the library opened and checked this file; if a FIFO or device has
     * taken its name since, opening it must not block, nor be mapped */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size >= meta_off + h->meta_bytes + loss_need)
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return;
    const uint8_t *b = p;
    m->map = p;
    m->map_len = (size_t)st.st_size;
    m->tok = zstd ? NULL : b + DS_SHARD_HEADER_BYTES;
    m->valid = b + meta_off;
    m->sidx = m->valid + 4 * N;
    m->starts = m->sidx + 4 * (N + 1);
    m->n_starts = S;
    m->dt = h->dtype_bytes;
    m->loss_bits = v2;
    m->loss = v2 ? b + meta_off + h->meta_bytes : NULL;
    if (zstd) {
        m->zsec = b + DS_SHARD_HEADER_BYTES;
        m->zsec_bytes = h->tokens_bytes;
        m->frames = m->starts + 4 * S;
        m->n_frames = F;
        m->frame_rows = h->frame_rows;
    }
#else
    (void)m, (void)path, (void)h;
#endif
}

static int maps_open(SSObj *s) {
    if (!s->fc_init) {
        pthread_mutex_init(&s->fc.mu, NULL);
        s->fc_init = 1;
    }
    for (int sp = 0; sp < 2; sp++) {
        size_t n = ds_shardset_n_shards(s->ss, (ds_split)sp);
        s->maps[sp] = calloc(n ? n : 1, sizeof(sh_map));
        if (!s->maps[sp]) return -1;
        s->n_maps[sp] = n;
        uint64_t first = 0;
        for (size_t k = 0; k < n; k++) {
            const char *path = NULL;
            const ds_shard *sh = ds_shardset_shard(s->ss, (ds_split)sp, k, &path);
            const ds_shard_header *h = ds_shard_get_header(sh);
            sh_map *m = &s->maps[sp][k];
            m->first = first;
            m->n_rows = h->n_rows;
            first += h->n_rows;
            if (path && h->row_len == s->info.row_len) map_shard(m, path, h);
        }
    }
    return 0;
}

/* The shard holding row `row` of split sp (row < the split's rows). */
static const sh_map *map_of(const SSObj *s, int sp, uint64_t row) {
    size_t lo = 0, hi = s->n_maps[sp];
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s->maps[sp][mid].first <= row) lo = mid;
        else hi = mid;
    }
    return &s->maps[sp][lo];
}

/* Row r of mapped zstd shard m as u32 ids (L entries) through the frame cache. */
static int zstd_row(SSObj *s, const sh_map *m, uint64_t r, size_t L, uint32_t *out) {
    if (r >= m->n_rows) return DS_ERR_FORMAT;
    uint64_t f = r / m->frame_rows, r0 = f * m->frame_rows;
    size_t rows_in = (size_t)(m->n_rows - r0 < m->frame_rows ? m->n_rows - r0 : m->frame_rows);
    size_t fb = rows_in * L * m->dt;
    int rc = DS_OK;
    pthread_mutex_lock(&s->fc.mu);
    frame_cache *c = &s->fc;
    if (c->m != m || c->f != f) {
        uint64_t o0 = get64le(m->frames + 8 * f), o1 = get64le(m->frames + 8 * (f + 1));
        c->m = NULL;
        if (o0 > o1 || o1 > m->zsec_bytes) rc = DS_ERR_FORMAT;
        else if (fb > c->cap) {
            uint8_t *nb = realloc(c->buf, fb);
            if (!nb) rc = DS_ERR_NOMEM;
            else {
                c->buf = nb;
                c->cap = fb;
            }
        }
        if (rc == DS_OK) {
            size_t z = ZSTD_decompress(c->buf, fb, m->zsec + o0, (size_t)(o1 - o0));
            if (ZSTD_isError(z) || z != fb) rc = DS_ERR_FORMAT;
            else {
                c->m = m;
                c->f = f;
            }
        }
    }
    if (rc == DS_OK) {
        const uint8_t *src = c->buf + (size_t)(r - r0) * L * m->dt;
        if (m->dt == 4) memcpy(out, src, L * 4);
        else
            for (size_t j = 0; j < L; j++) out[j] = ((const uint16_t *)src)[j];
    }
    pthread_mutex_unlock(&s->fc.mu);
    /* the id checks of ds_shard_read (a crafted frame may carry valid checksums) */
    uint32_t nv = rc == DS_OK ? get32le(m->valid + 4 * r) : 0;
    if (rc == DS_OK && ds_shard_check_ids(out, 4, (uint32_t)L, nv, s->info.vocab_size, s->info.pad_id) != DS_OK)
        rc = DS_ERR_FORMAT;
    return rc;
}

static void ss_dealloc(SSObj *s) {
    maps_free(s);
    if (s->fc_init) pthread_mutex_destroy(&s->fc.mu);
    if (s->ss) ds_shardset_close(s->ss);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int ss_init(SSObj *s, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"dir", "verify", NULL};
    PyObject *dir_o = NULL;
    int verify = 1;
    if (s->ss) {
        PyErr_SetString(PyExc_RuntimeError, "ShardSet is already open");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|p", kwl, PyUnicode_FSConverter, &dir_o, &verify)) return -1;
    char err[512] = "";
    ds_shardset *ss = NULL;
    int rc;
    const char *dir = PyBytes_AS_STRING(dir_o);
    Py_BEGIN_ALLOW_THREADS
        rc = ds_shardset_open(dir, verify ? DS_SHARD_OPEN_FULL : 0, &ss, err,
                              sizeof err); /* verify: `mkshards verify` */
    Py_END_ALLOW_THREADS
    if (rc != DS_OK || !ss) {
        char msg[800];
        snprintf(msg, sizeof msg, "%s", err[0] ? err : ds_strerror(rc));
        Py_DECREF(dir_o);
        raise_c(rc ? rc : DS_ERR_IO, msg);
        return -1;
    }
    Py_DECREF(dir_o);
    if (s->ss) {
        ds_shardset_close(ss);
        PyErr_SetString(PyExc_RuntimeError, "ShardSet is already open");
        return -1;
    }
    s->ss = ss;
    ds_shardset_get_info(ss, &s->info);
    if (maps_open(s)) /* out of memory: every read goes through ds_shardset_read */
        maps_free(s);
    return 0;
}

static int ss_ready(SSObj *s) {
    if (!s->ss) {
        PyErr_SetString(PyExc_ValueError, "shard set is closed");
        return 0;
    }
    return 1;
}

static int parse_split(PyObject *o, ds_split *sp) {
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (!s) PyErr_Clear(); /* a str that is not UTF-8: not a split's name either */
    if (s && ds_split_parse(s, sp) == 0) return 0;
    char names[32];
    PyErr_Format(PyExc_ValueError, "split %R: must be %s", o, ds_names_list(ds_split_name, names, sizeof names));
    return -1;
}

static PyObject *ss_info(SSObj *s, PyObject *unused) {
    (void)unused;
    if (!ss_ready(s)) return NULL;
    const ds_shardset_info *i = &s->info;
    char hex[65];
    ds_shard_hex(i->fingerprint, 32, hex);
    /* framing: bos_id / eos_id, None when the documents have none (-1) */
    PyObject *bos = i->bos_id < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(i->bos_id);
    PyObject *eos = i->eos_id < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(i->eos_id);
    if (!bos || !eos) {
        Py_XDECREF(bos);
        Py_XDECREF(eos);
        return NULL;
    }
    return Py_BuildValue("{s:I,s:I,s:I,s:I,s:N,s:N,s:I,s:s,s:s,s:{s:K,s:K},s:{s:K,s:K},s:{s:n,s:n},s:I,s:{s:K,s:K}}",
                         "row_len", i->row_len, "vocab_size", i->vocab_size, "eot_id", i->eot_id, "pad_id", i->pad_id,
                         "bos_id", bos, "eos_id", eos, "dtype_bytes", i->dtype_bytes, "fingerprint", hex, "tokenizer",
                         i->tokenizer, "rows", "train", (unsigned long long)i->rows[0], "val",
                         (unsigned long long)i->rows[1], "tokens", "train", (unsigned long long)i->tokens[0], "val",
                         (unsigned long long)i->tokens[1], "n_shards", "train", (Py_ssize_t)i->n_shards[0], "val",
                         (Py_ssize_t)i->n_shards[1], "shard_version", i->shard_version, "loss_tokens", "train",
                         (unsigned long long)i->loss_tokens[0], "val", (unsigned long long)i->loss_tokens[1]);
}

static PyObject *ss_shards(SSObj *s, PyObject *split_o) {
    ds_split sp;
    if (!ss_ready(s) || parse_split(split_o, &sp)) return NULL;
    size_t n = ds_shardset_n_shards(s->ss, sp);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; l && k < n; k++) {
        const char *path = NULL;
        const ds_shard *sh = ds_shardset_shard(s->ss, sp, k, &path);
        const ds_shard_header *h = ds_shard_get_header(sh);
        PyObject *d = Py_BuildValue("{s:s,s:K,s:I,s:I,s:I,s:K,s:K,s:O}", "path", path ? path : "", "rows",
                                    (unsigned long long)h->n_rows, "row_len", h->row_len, "dtype_bytes", h->dtype_bytes,
                                    "flags", h->flags, "tokens_offset", (unsigned long long)DS_SHARD_HEADER_BYTES,
                                    "tokens_bytes", (unsigned long long)h->tokens_bytes, "compressed",
                                    (h->flags & DS_SHARD_F_ZSTD) ? Py_True : Py_False);
        if (!d) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)k, d);
    }
    return l;
}

/* A writable C-contiguous buffer of count items of itemsize bytes (None: no
 * buffer). */
static int out_buffer(PyObject *o, Py_buffer *v, int *have, size_t count, const char *what, int size_a, int size_b) {
    *have = 0;
    if (o == Py_None) return 0;
    if (PyObject_GetBuffer(o, v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)) return -1;
    *have = 1;
    if ((v->itemsize != size_a && v->itemsize != size_b) || (size_t)v->len != count * (size_t)v->itemsize) {
        PyErr_Format(PyExc_ValueError,
                     "%s: need a writable buffer of %zu items of %d bytes (got %zd bytes, itemsize %zd)", what, count,
                     size_a, v->len, v->itemsize);
        PyBuffer_Release(v);
        *have = 0;
        return -1;
    }
    return 0;
}

/* Row numbers for read/fill: an int or a C-contiguous buffer of 8-byte ints,
 * each checked against the split's row count. */
typedef struct {
    Py_buffer v;
    int have;
    int64_t one;
    const int64_t *rows;
    size_t n;
} rows_arg;

static void rows_release(rows_arg *r) {
    if (r->have) PyBuffer_Release(&r->v);
    r->have = 0;
}

static int rows_parse(SSObj *s, ds_split sp, PyObject *o, rows_arg *r) {
    memset(r, 0, sizeof *r);
    if (PyLong_Check(o)) {
        int overflow = 0;
        r->one = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (r->one == -1 && !overflow && PyErr_Occurred()) return -1;
        if (overflow) { /* beyond int64: out of range, named as given */
            char t[96];
            int_text(o, t, sizeof t);
            PyErr_Format(PyExc_IndexError, "row %s out of range: the %s split has %llu rows", t,
                         sp == DS_SPLIT_VAL ? "val" : "train", (unsigned long long)ds_shardset_rows(s->ss, sp));
            return -1;
        }
        r->rows = &r->one;
        r->n = 1;
    } else {
        if (PyObject_GetBuffer(o, &r->v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) return -1;
        r->have = 1;
        const char *f = r->v.format;
        if (r->v.itemsize != 8 || !f || !f[0] || !strchr("qlQL", f[strlen(f) - 1])) {
            rows_release(r);
            PyErr_SetString(PyExc_TypeError, "rows: an int or a buffer of int64");
            return -1;
        }
        r->rows = r->v.buf;
        r->n = (size_t)(r->v.len / 8);
    }
    uint64_t nrows = ds_shardset_rows(s->ss, sp);
    /* uint64 rows are named as given (2^64 - 1 is not row -1) */
    int uns = r->have && strchr("QL", r->v.format[strlen(r->v.format) - 1]) != NULL;
    for (size_t i = 0; i < r->n; i++)
        if (r->rows[i] < 0 || (uint64_t)r->rows[i] >= nrows) {
            char t[32];
            if (uns) snprintf(t, sizeof t, "%llu", (unsigned long long)r->rows[i]);
            else snprintf(t, sizeof t, "%lld", (long long)r->rows[i]);
            PyErr_Format(PyExc_IndexError, "row %s out of range: the %s split has %llu rows", t,
                         sp == DS_SPLIT_VAL ? "val" : "train", (unsigned long long)nrows);
            rows_release(r);
            return -1;
        }
    return 0;
}

/* A refused row: MkshardsError with what is wrong, as `mkshards verify` says
 * it ("train row 7: DIR/train-00000.mks: offset 5236: row 7 document start 3
 * invalid"). The reads that go through the library have that reason; the
 * direct paths (fill, the row maker, ShardSet.row over the mapped files)
 * return a status only, so the library is asked to read the row again for
 * it: the same checks, made once more on the error path only. */
static PyObject *raise_row(SSObj *s, ds_split sp, int64_t row, int rc) {
    const char *split = sp == DS_SPLIT_VAL ? "val" : "train";
    char err[600] = "", msg[800];
    if (rc == DS_ERR_NOMEM) return PyErr_NoMemory();
    uint32_t *tok = malloc((size_t)s->info.row_len * 5 + 4); /* the ids, then the loss mask (its checks too) */
    int lrc = tok ? ds_shardset_read_msg(s->ss, sp, (uint64_t)row, tok, NULL, NULL, (uint8_t *)(tok + s->info.row_len),
                                         err, sizeof err)
                  : DS_ERR_NOMEM;
    free(tok);
    if (lrc != DS_OK && err[0]) {
        snprintf(msg, sizeof msg, "%s row %lld: %s", split, (long long)row, err);
        return raise_c(lrc, msg);
    }
    /* the library reads the row: a mapped section of its shard does not
     * hold what the header says (the direct path's own bounds checks) */
    const char *path = "";
    uint64_t first = 0, r = (uint64_t)row;
    for (size_t k = 0; k < ds_shardset_n_shards(s->ss, sp); k++) {
        const ds_shard *sh = ds_shardset_shard(s->ss, sp, k, &path);
        uint64_t nr = ds_shard_get_header(sh)->n_rows;
        if (r < first + nr) {
            r -= first;
            break;
        }
        first += nr;
    }
    snprintf(msg, sizeof msg, "%s row %lld: %s: row %llu of the shard: its row metadata or token section is corrupt",
             split, (long long)row, path ? path : "", (unsigned long long)r);
    return raise_c(rc, msg);
}

/* read(split, rows, tokens, pos_ids, doc_ids, loss_mask): rows = an int or a
 * buffer of int64 row numbers; outputs (any may be None) are writable
 * buffers of len(rows) x row_len items: tokens of 4 (uint32) or 2 bytes
 * (uint16, for 2-byte shard sets), pos/doc of 4 bytes, loss_mask of 1. */
static PyObject *ss_read(SSObj *s, PyObject *args) {
    PyObject *split_o, *rows_o, *tok_o, *pos_o, *doc_o, *mask_o;
    if (!ss_ready(s) || !PyArg_ParseTuple(args, "OOOOOO", &split_o, &rows_o, &tok_o, &pos_o, &doc_o, &mask_o))
        return NULL;
    ds_split sp;
    rows_arg ra;
    if (parse_split(split_o, &sp) || rows_parse(s, sp, rows_o, &ra)) return NULL;
    const int64_t *rows = ra.rows;
    size_t n = ra.n, L = s->info.row_len;
    Py_buffer bt, bp, bd, bm;
    int ht = 0, hp = 0, hd = 0, hm = 0;
    PyObject *ret = NULL;
    uint32_t *scratch = NULL;
    if (n && L > SIZE_MAX / 4 / n) {
        PyErr_NoMemory();
        goto out;
    }
    if (out_buffer(tok_o, &bt, &ht, n * L, "tokens", 4, s->info.dtype_bytes == 2 ? 2 : 4) ||
        out_buffer(pos_o, &bp, &hp, n * L, "pos_ids", 4, 4) || out_buffer(doc_o, &bd, &hd, n * L, "doc_ids", 4, 4) ||
        out_buffer(mask_o, &bm, &hm, n * L, "loss_mask", 1, 1))
        goto out;
    int narrow = ht && bt.itemsize == 2;
    if (narrow && !(scratch = malloc(L * 4))) {
        PyErr_NoMemory();
        goto out;
    }
    int rc = DS_OK;
    size_t bad = 0;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS
        for (size_t i = 0; i < n && rc == DS_OK; i++) {
            size_t o = i * L;
            uint32_t *t = ht ? (narrow ? scratch : (uint32_t *)bt.buf + o) : NULL;
            const sh_map *m = t && s->n_maps[sp] ? map_of(s, (int)sp, (uint64_t)rows[i]) : NULL;
            if (m && m->map && !m->tok) { /* zstd: the ids through the frame cache */
                rc = zstd_row(s, m, (uint64_t)rows[i] - m->first, L, t);
                t = NULL;
            }
            if (rc == DS_OK && (t || hp || hd || hm))
                rc = ds_shardset_read(s->ss, sp, (uint64_t)rows[i], t, hp ? (uint32_t *)bp.buf + o : NULL,
                                      hd ? (uint32_t *)bd.buf + o : NULL, hm ? (uint8_t *)bm.buf + o : NULL);
            if (rc == DS_OK && !ht && s->n_maps[sp]) { /* ShardSet.row takes the ids from its memory map: */
                const sh_map *mm = map_of(s, (int)sp, (uint64_t)rows[i]); /* the id checks of ds_shard_read */
                uint64_t rr = (uint64_t)rows[i] - mm->first;
                if (mm->map && mm->tok &&
                    (rr >= mm->n_rows ||
                     ds_shard_check_ids(mm->tok + rr * L * mm->dt, mm->dt, (uint32_t)L, get32le(mm->valid + 4 * rr),
                                        s->info.vocab_size, s->info.pad_id) != DS_OK))
                    rc = DS_ERR_FORMAT;
            }
            if (rc == DS_OK && narrow) {
                uint16_t *d = (uint16_t *)bt.buf + o;
                for (size_t j = 0; j < L; j++) d[j] = (uint16_t)scratch[j];
            }
            bad = i;
        }
    Py_END_ALLOW_THREADS
    s->busy--;
    if (rc != DS_OK) {
        raise_row(s, sp, rows[bad], rc);
        goto out;
    }
    ret = Py_None;
    Py_INCREF(ret);
out:
    free(scratch);
    if (ht) PyBuffer_Release(&bt);
    if (hp) PyBuffer_Release(&bp);
    if (hd) PyBuffer_Release(&bd);
    if (hm) PyBuffer_Release(&bm);
    rows_release(&ra);
    return ret;
}

/* ---- fill: llmtrain's layout. The int outputs are int64 (wide) or int32;
 * each loop is a plain pass the compiler vectorises. */
typedef struct {
    char *d[5];  /* this row's input_ids, labels, position_ids, doc_ids, loss_mask (NULL: not wanted) */
    int wide[5]; /* 8-byte (1) or 4-byte (0) ints */
    size_t T, L;
    int doc_mask;
    int64_t ignore;
} fill_row_out;

/* dst[j] = src[j], j < n: u16 or u32 ids (dt bytes) into int64 or int32 */
/* x86-64 GCC: the per-row copy loops compiled for AVX2 too and picked at load
 * time (ifunc), as kernels/ does: a portable build otherwise gets SSE2 only,
 * and these loops are most of what a mapped row costs. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(KN_NO_CLONES)
#define ROW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ROW_CLONES
#endif

ROW_CLONES
static void put_src(void *dst, int wide, const void *src, int dt, size_t n) {
    if (dt == 4) {
        const uint32_t *s = src;
        if (wide)
            for (size_t j = 0; j < n; j++) ((int64_t *)dst)[j] = (int64_t)s[j];
        else
            for (size_t j = 0; j < n; j++) ((int32_t *)dst)[j] = (int32_t)s[j];
    } else {
        const uint16_t *s = src;
        if (wide)
            for (size_t j = 0; j < n; j++) ((int64_t *)dst)[j] = (int64_t)s[j];
        else
            for (size_t j = 0; j < n; j++) ((int32_t *)dst)[j] = (int32_t)s[j];
    }
}

/* dst[j] = v (step 0) or v + j - from (step 1), from <= j < to */
ROW_CLONES
static void put_run1(void *dst, int wide, size_t from, size_t to, int64_t v, int step) {
    if (wide) {
        int64_t *d = dst;
        for (size_t j = from; j < to; j++) d[j] = step ? (int64_t)(j - from) : v;
    } else {
        int32_t *d = dst;
        for (size_t j = from; j < to; j++) d[j] = step ? (int32_t)(j - from) : (int32_t)v;
    }
}

/* One segment [from, to): positions restart, one segment number. */
static void put_run(const fill_row_out *o, size_t from, size_t to, size_t seg) {
    if (o->d[2]) put_run1(o->d[2], o->wide[2], from, to, 0, 1);
    if (o->d[3]) put_run1(o->d[3], o->wide[3], from, to, (int64_t)seg, 0);
}

/* position_ids / doc_ids of a row from its document starts: segments begin
 * at 0, at every start and at valid (padding), as ds_shard_read expands them. */
static int put_segments(const sh_map *m, uint32_t a, uint32_t b, uint32_t nv, const fill_row_out *o) {
    size_t start = 0, seg = 0, T = o->T;
    uint32_t prev = 0;
    for (uint64_t k = a; k <= b && start < T; k++) {
        size_t x;
        if (k < b) {
            uint32_t st = get32le(m->starts + 4 * k);
            if (st >= nv || (k > a && st <= prev)) return DS_ERR_FORMAT;
            prev = st;
            if (st == 0) continue;
            x = st;
        } else {
            if (nv == 0 || nv >= o->L) break;
            x = nv;
        }
        put_run(o, start, x < T ? x : T, seg);
        seg++;
        start = x;
    }
    if (start < T) put_run(o, start, T, seg);
    return DS_OK;
}

/* A version-2 row's loss bits lb (rb bytes, bit i = byte i / 8, bit i % 8)
 * as one byte per token in bits[0, 8 rb): each byte's 8 bits spread to 8
 * bytes through a 2 KiB table (little-endian host: the mapped path's). */
static uint64_t spread8[256]; /* byte b -> 8 bytes, byte k = bit k of b */
static pthread_once_t spread8_once = PTHREAD_ONCE_INIT;
static void spread8_init(void) {
    for (unsigned b = 0; b < 256; b++) {
        uint64_t x = b;
        x = (x | (x << 28)) & 0x0000000F0000000FULL;
        x = (x | (x << 14)) & 0x0003000300030003ULL;
        x = (x | (x << 7)) & 0x0101010101010101ULL;
        spread8[b] = x;
    }
}
static void expand_bits(const uint8_t *lb, size_t rb, uint8_t *bits) {
    pthread_once(&spread8_once, spread8_init);
    for (size_t i = 0; i < rb; i++) memcpy(bits + 8 * i, &spread8[lb[i]], 8);
}

/* dst[j] = src[j] where keep[j], else ignore, j < n: a version-2 row's
 * labels in one branch-free pass (src: the ids after the first, keep: the
 * expanded bits after the first). */
#define PUT_KEPT(DT, ST)                                                                                               \
    do {                                                                                                               \
        DT *d = dst;                                                                                                   \
        const ST *s = src;                                                                                             \
        for (size_t j = 0; j < n; j++) { /* a bitwise select, which vectorises */                                      \
            DT m = (DT)0 - (DT)keep[j];                                                                                \
            d[j] = ((DT)s[j] & m) | ((DT)ignore & ~m);                                                                 \
        }                                                                                                              \
    } while (0)
ROW_CLONES
static void put_kept(void *dst, int wide, const void *src, int dt, const uint8_t *keep, size_t n, int64_t ignore) {
    if (dt == 4 && wide) PUT_KEPT(int64_t, uint32_t);
    else if (dt == 4) PUT_KEPT(int32_t, uint32_t);
    else if (wide) PUT_KEPT(int64_t, uint16_t);
    else PUT_KEPT(int32_t, uint16_t);
}
#undef PUT_KEPT

/* Row r of mapped shard m; tok32: its ids when the shard is compressed (NULL: in place). */
static int fill_direct(const sh_map *m, uint64_t r, const uint32_t *tok32, uint8_t *bits, const fill_row_out *o) {
    size_t L = o->L, T = o->T;
    if (r >= m->n_rows) return DS_ERR_FORMAT;
    uint32_t nv = get32le(m->valid + 4 * r), a = get32le(m->sidx + 4 * r), b = get32le(m->sidx + 4 * (r + 1));
    if (nv > L || a > b || b > m->n_starts) return DS_ERR_FORMAT;
    size_t lab_n = nv > 0 ? nv - 1 : 0; /* labels where j + 1 < valid */
    if (lab_n > T) lab_n = T;
    int v2 = m->loss && (o->d[1] || o->d[4]); /* bits: this row's loss bits, a byte per token */
    if (v2) {
        size_t rb = (L + 7) / 8;
        const uint8_t *lb = m->loss + r * rb;
        /* no target on padding nor past the row (ds_shard_read's check; raise_row names it) */
        if (nv / 8 < rb && (lb[nv / 8] >> (nv % 8))) return DS_ERR_FORMAT;
        for (size_t k = nv / 8 + 1; k < rb; k++)
            if (lb[k]) return DS_ERR_FORMAT;
        expand_bits(lb, rb, bits);
    }
    if (o->d[0] || o->d[1]) {
        const void *src = tok32 ? (const void *)tok32 : (const void *)(m->tok + r * L * m->dt);
        int dt = tok32 ? 4 : (int)m->dt;
        if (o->d[0]) put_src(o->d[0], o->wide[0], src, dt, T);
        if (o->d[1]) {
            if (v2) put_kept(o->d[1], o->wide[1], (const uint8_t *)src + dt, dt, bits + 1, lab_n, o->ignore);
            else put_src(o->d[1], o->wide[1], (const uint8_t *)src + dt, dt, lab_n);
            put_run1(o->d[1], o->wide[1], lab_n, T, o->ignore, 0);
        }
    }
    if (o->d[4]) {
        if (v2) memcpy(o->d[4], bits + 1, lab_n);
        else memset(o->d[4], 1, lab_n);
        memset(o->d[4] + lab_n, 0, T - lab_n);
    }
    if (!o->d[2] && !o->d[3]) return DS_OK;
    if (o->doc_mask) return put_segments(m, a, b, nv, o);
    put_run(o, 0, T, 0);
    return DS_OK;
}

/* labels[j] = tok[j+1] where loss_mask[j+1] (j+1 < L), else ignore */
static void put_labels(void *dst, int wide, const uint32_t *tok, const uint8_t *mask, size_t L, size_t T,
                       int64_t ignore) {
    size_t m_end = T < L - 1 ? T : L - 1;
    if (wide) {
        int64_t *d = dst;
        for (size_t j = 0; j < m_end; j++) d[j] = mask[j + 1] ? (int64_t)tok[j + 1] : ignore;
        for (size_t j = m_end; j < T; j++) d[j] = ignore;
    } else {
        int32_t *d = dst, ig = (int32_t)ignore;
        for (size_t j = 0; j < m_end; j++) d[j] = mask[j + 1] ? (int32_t)tok[j + 1] : ig;
        for (size_t j = m_end; j < T; j++) d[j] = ig;
    }
}

/* The same through ds_shardset_read's per-position arrays (scratch: 3 x L
 * u32 + L bytes), for shards that are not mapped. */
static int fill_read(SSObj *s, ds_split sp, uint64_t row, uint32_t *scratch, const fill_row_out *o) {
    size_t L = o->L, T = o->T;
    uint32_t *tok = scratch, *pos = scratch + L, *doc = scratch + 2 * L;
    uint8_t *mask = (uint8_t *)(scratch + 3 * L);
    int need_tok = o->d[0] || o->d[1], need_mask = o->d[1] || o->d[4];
    int rc = ds_shardset_read(s->ss, sp, row, need_tok ? tok : NULL, o->doc_mask && o->d[2] ? pos : NULL,
                              o->doc_mask && o->d[3] ? doc : NULL, need_mask ? mask : NULL);
    if (rc != DS_OK) return rc;
    if (o->d[0]) put_src(o->d[0], o->wide[0], tok, 4, T);
    if (o->d[1]) put_labels(o->d[1], o->wide[1], tok, mask, L, T, o->ignore);
    if (o->d[2]) {
        if (o->doc_mask) put_src(o->d[2], o->wide[2], pos, 4, T);
        else put_run1(o->d[2], o->wide[2], 0, T, 0, 1);
    }
    if (o->d[3]) {
        if (o->doc_mask) put_src(o->d[3], o->wide[3], doc, 4, T);
        else put_run1(o->d[3], o->wide[3], 0, T, 0, 0);
    }
    if (o->d[4]) {
        size_t m_end = T < L - 1 ? T : L - 1;
        for (size_t j = 0; j < m_end; j++) ((uint8_t *)o->d[4])[j] = mask[j + 1] != 0;
        memset(o->d[4] + m_end, 0, T - m_end);
    }
    return DS_OK;
}

/* *scratch (3 x L u32 + L + 8 bytes) is allocated on first use: rows of mapped
 * uncompressed shards need none. */
static int fill_row(SSObj *s, ds_split sp, uint64_t row, uint32_t **scratch, const fill_row_out *o) {
    const sh_map *m = s->n_maps[sp] ? map_of(s, (int)sp, row) : NULL;
    int need_tok = o->d[0] || o->d[1];
    /* fill_direct derives the mask from the valid count (version 1) or
     * reads the mapped loss bits (version 2) */
    int direct = m && m->map && (!m->loss_bits || m->loss);
    if ((!direct || (!m->tok && need_tok) || m->loss) && !*scratch && !(*scratch = malloc(o->L * 13 + 8)))
        return DS_ERR_NOMEM;
    if (!direct) return fill_read(s, sp, row, *scratch, o);
    const uint32_t *tok = NULL;
    if (!m->tok && need_tok) { /* zstd: the ids through the frame cache */
        int rc = zstd_row(s, m, row - m->first, o->L, *scratch);
        if (rc != DS_OK) return rc;
        tok = *scratch;
    }
    uint64_t r = row - m->first; /* in place: the id checks of ds_shard_read (zstd_row made them) */
    if (m->tok && need_tok &&
        (r >= m->n_rows || ds_shard_check_ids(m->tok + r * o->L * m->dt, m->dt, (uint32_t)o->L,
                                              get32le(m->valid + 4 * r), s->info.vocab_size, s->info.pad_id) != DS_OK))
        return DS_ERR_FORMAT;
    /* the loss bits a byte per token after the zstd ids (L u32): 8 ceil(L / 8) <= L + 7 bytes */
    return fill_direct(m, r, tok, m->loss ? (uint8_t *)(*scratch + o->L) : NULL, o);
}

/* fill(split, rows, T, doc_mask, ignore_index, input_ids, labels, position_ids, doc_ids, loss_mask):
 * llmtrain's micro-batch layout (train/loader.c, fill_one) for rows (an int
 * or a buffer of int64), the GIL released. The int outputs hold len(rows) x T
 * items of 8 or 4 bytes (any may be None), loss_mask 1 byte:
 *   input_ids[j] = tokens[j]
 *   labels[j]    = tokens[j+1] when j+1 < row_len and loss_mask[j+1], else ignore_index
 *   loss_mask[j] = labels[j] carries loss
 *   doc_mask: position_ids / doc_ids are the row's pos_ids / doc_ids (they
 *   restart where a document starts); without, position j and segment 0. */
static PyObject *ss_fill(SSObj *s, PyObject *args) {
    PyObject *split_o, *rows_o, *outs_o[5];
    int doc_mask;
    num_arg Ta = {"seq_len", 1, DS_SHARD_MAX_ROW_LEN, 0, 0, 0, 0};
    i64_arg ig = {"ignore_index", 0};
    if (!ss_ready(s) || !PyArg_ParseTuple(args, "OOO&pO&OOOOO", &split_o, &rows_o, conv_num, &Ta, &doc_mask, conv_i64,
                                          &ig, &outs_o[0], &outs_o[1], &outs_o[2], &outs_o[3], &outs_o[4]))
        return NULL;
    ds_split sp;
    if (parse_split(split_o, &sp)) return NULL;
    size_t L = s->info.row_len;
    if (Ta.v > L) {
        PyErr_Format(PyExc_ValueError, "seq_len %llu: must be 1..%zu (the rows' length)", Ta.v, L);
        return NULL;
    }
    int T = (int)Ta.v;
    long long ignore = ig.v;
    rows_arg ra;
    if (rows_parse(s, sp, rows_o, &ra)) return NULL;
    static const char *names[5] = {"input_ids", "labels", "position_ids", "doc_ids", "loss_mask"};
    Py_buffer ob[5];
    int have[5] = {0, 0, 0, 0, 0};
    PyObject *ret = NULL;
    uint32_t *scratch = NULL;
    size_t n = ra.n, Tz = (size_t)T;
    if (n > SIZE_MAX / 8 / Tz) {
        PyErr_NoMemory();
        goto out;
    }
    for (int k = 0; k < 5; k++)
        if (out_buffer(outs_o[k], &ob[k], &have[k], n * Tz, names[k], k == 4 ? 1 : 8, k == 4 ? 1 : 4)) goto out;
    fill_row_out o = {.T = Tz, .L = L, .doc_mask = doc_mask, .ignore = (int64_t)ignore};
    for (int k = 0; k < 5; k++) o.wide[k] = have[k] && ob[k].itemsize == 8;
    if (have[1] && !o.wide[1] && (ignore < INT32_MIN || ignore > INT32_MAX)) { /* it would be cut to 32 bits */
        PyErr_Format(PyExc_ValueError, "ignore_index %lld: int32 labels hold -2^31..2^31-1", ignore);
        goto out;
    }
    int rc = DS_OK;
    size_t r = 0;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS
        for (; r < n; r++) {
            for (int k = 0; k < 5; k++) o.d[k] = have[k] ? (char *)ob[k].buf + r * Tz * (size_t)ob[k].itemsize : NULL;
            if ((rc = fill_row(s, sp, (uint64_t)ra.rows[r], &scratch, &o)) != DS_OK) break;
        }
    Py_END_ALLOW_THREADS
    s->busy--;
    if (rc != DS_OK) {
        raise_row(s, sp, ra.rows[r], rc);
        goto out;
    }
    ret = Py_None;
    Py_INCREF(ret);
out:
    free(scratch);
    for (int k = 0; k < 5; k++)
        if (have[k]) PyBuffer_Release(&ob[k]);
    rows_release(&ra);
    return ret;
}

/* ---- RowMaker: ShardDataset[i] with every field, in one C call. Creating
 * the five tensors is most of the cost of a row (torch.from_numpy is ~0.7 us
 * each), so the rest is kept out of the interpreter: the arrays come from
 * the given numpy.empty, the tensors from the given torch.from_numpy, the
 * dict is built here. */
typedef struct {
    PyObject_HEAD SSObj *ss;
    ds_split sp;
    long T;
    int doc_mask;
    int64_t ignore;
    PyObject *len_T, *i64, *boolean, *empty, *to_tensor, *keys[5];
} RMObj;

static void rm_dealloc(RMObj *r) {
    Py_XDECREF(r->ss);
    Py_XDECREF(r->len_T);
    Py_XDECREF(r->i64);
    Py_XDECREF(r->boolean);
    Py_XDECREF(r->empty);
    Py_XDECREF(r->to_tensor);
    for (int k = 0; k < 5; k++) Py_XDECREF(r->keys[k]);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* row(i): dict of the five (T,) tensors of row i (negative i counts from the end). */
static PyObject *rm_row(RMObj *r, PyObject *idx) {
    SSObj *s = r->ss;
    if (!ss_ready(s)) return NULL;
    int overflow = 0;
    long long i = PyLong_AsLongLongAndOverflow(idx, &overflow);
    if (i == -1 && !overflow && PyErr_Occurred()) {
        PyErr_Clear();
        PyObject *ix = PyNumber_Index(idx); /* numpy integers */
        if (!ix) return NULL;
        i = PyLong_AsLongLongAndOverflow(ix, &overflow);
        Py_DECREF(ix);
        if (i == -1 && !overflow && PyErr_Occurred()) return NULL;
    }
    long long n = (long long)s->info.rows[r->sp];
    long long row = i < 0 ? i + n : i;
    if (overflow || row < 0 || row >= n) {
        char t[96] = "";
        PyObject *ix = PyNumber_Index(idx);
        if (ix) {
            int_text(ix, t, sizeof t);
            Py_DECREF(ix);
        }
        PyErr_Clear();
        PyErr_Format(PyExc_IndexError, "row %s: the %s split has %lld rows", t,
                     r->sp == DS_SPLIT_TRAIN ? "train" : "val", n);
        return NULL;
    }
    PyObject *arr[5] = {NULL}, *ret = NULL;
    Py_buffer b[5];
    int have = 0;
    for (int k = 0; k < 5; k++) {
        PyObject *a[2] = {r->len_T, k < 4 ? r->i64 : r->boolean};
        if (!(arr[k] = PyObject_Vectorcall(r->empty, a, 2, NULL))) goto out;
    }
    for (; have < 5; have++)
        if (out_buffer(arr[have], &b[have], &(int){0}, (size_t)r->T, "row", have < 4 ? 8 : 1, have < 4 ? 8 : 1))
            goto out;
    fill_row_out o = {
        .T = (size_t)r->T, .L = s->info.row_len, .doc_mask = r->doc_mask, .ignore = r->ignore, .wide = {1, 1, 1, 1, 1}};
    for (int k = 0; k < 5; k++) o.d[k] = b[k].buf;
    uint32_t *scratch = NULL;
    int rc;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS
        rc = fill_row(s, r->sp, (uint64_t)row, &scratch, &o);
    Py_END_ALLOW_THREADS
    s->busy--;
    free(scratch);
    if (rc != DS_OK) {
        raise_row(s, r->sp, row, rc);
        goto out;
    }
    PyObject *d = PyDict_New();
    for (int k = 0; d && k < 5; k++) {
        PyObject *tensor = PyObject_Vectorcall(r->to_tensor, &arr[k], 1, NULL);
        if (!tensor || PyDict_SetItem(d, r->keys[k], tensor)) {
            Py_XDECREF(tensor);
            Py_CLEAR(d);
            break;
        }
        Py_DECREF(tensor);
    }
    ret = d;
out:
    for (int k = 0; k < have; k++) PyBuffer_Release(&b[k]);
    for (int k = 0; k < 5; k++) Py_XDECREF(arr[k]);
    return ret;
}

static PyMethodDef rm_methods[] = {
    {"row", (PyCFunction)rm_row, METH_O, "row(i) -> dict of the row's five tensors"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RMType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mkshards._core.RowMaker",
    .tp_basicsize = sizeof(RMObj),
    .tp_dealloc = (destructor)rm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ShardSet.row_maker(...): ShardDataset's per-row reader",
    .tp_methods = rm_methods,
};

/* row_maker(split, T, doc_mask, ignore_index, empty, int64, bool, to_tensor, keys): a RowMaker. */
static PyObject *ss_row_maker(SSObj *s, PyObject *args) {
    PyObject *split_o, *empty, *i64, *boolean, *to_tensor, *keys;
    int doc_mask;
    num_arg Ta = {"seq_len", 1, DS_SHARD_MAX_ROW_LEN, 0, 0, 0, 0};
    i64_arg ig = {"ignore_index", 0};
    if (!ss_ready(s) || !PyArg_ParseTuple(args, "OO&pO&OOOOO", &split_o, conv_num, &Ta, &doc_mask, conv_i64, &ig,
                                          &empty, &i64, &boolean, &to_tensor, &keys))
        return NULL;
    ds_split sp;
    if (parse_split(split_o, &sp)) return NULL;
    if (Ta.v > s->info.row_len) {
        PyErr_Format(PyExc_ValueError, "seq_len %llu: must be 1..%u (the rows' length)", Ta.v, s->info.row_len);
        return NULL;
    }
    long T = (long)Ta.v;
    long long ignore = ig.v;
    if (!PyTuple_Check(keys) || PyTuple_GET_SIZE(keys) != 5 || !PyCallable_Check(empty) ||
        !PyCallable_Check(to_tensor)) {
        PyErr_SetString(PyExc_TypeError, "row_maker: keys must be a tuple of 5 names, empty and to_tensor callables");
        return NULL;
    }
    RMObj *r = PyObject_New(RMObj, &RMType);
    if (!r) return NULL;
    r->ss = (SSObj *)Py_NewRef(s);
    r->sp = sp;
    r->T = T;
    r->doc_mask = doc_mask;
    r->ignore = (int64_t)ignore;
    r->len_T = PyLong_FromLong(T);
    r->i64 = Py_NewRef(i64);
    r->boolean = Py_NewRef(boolean);
    r->empty = Py_NewRef(empty);
    r->to_tensor = Py_NewRef(to_tensor);
    for (int k = 0; k < 5; k++) r->keys[k] = Py_NewRef(PyTuple_GET_ITEM(keys, k));
    if (!r->len_T) {
        Py_DECREF(r);
        return NULL;
    }
    return (PyObject *)r;
}

static PyObject *ss_close(SSObj *s, PyObject *unused) {
    (void)unused;
    if (s->busy) {
        PyErr_SetString(PyExc_RuntimeError, "ShardSet.close: another thread is reading from it");
        return NULL;
    }
    maps_free(s);
    if (s->ss) ds_shardset_close(s->ss);
    s->ss = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef ss_methods[] = {
    {"info", FN(ss_info), METH_NOARGS,
     "dict: row_len, vocab_size, eot_id, pad_id, bos_id, eos_id, dtype_bytes, fingerprint, ..."},
    {"shards", FN(ss_shards), METH_O, "shards(split) -> list of dicts (path, rows, dtype_bytes, compressed, ...)"},
    {"read", FN(ss_read), METH_VARARGS, "read(split, rows, tokens, pos_ids, doc_ids, loss_mask)"},
    {"row_maker", FN(ss_row_maker), METH_VARARGS,
     "row_maker(split, T, doc_mask, ignore_index, empty, int64, bool, to_tensor, keys): ShardDataset's per-row reader"},
    {"fill", FN(ss_fill), METH_VARARGS,
     "fill(split, rows, T, doc_mask, ignore_index, input_ids, labels, position_ids, doc_ids, loss_mask): "
     "llmtrain's batch layout"},
    {"close", FN(ss_close), METH_NOARGS, "release the mappings"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject SSType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mkshards._core.ShardSet",
    .tp_basicsize = sizeof(SSObj),
    .tp_dealloc = (destructor)ss_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "ShardSet(dir, verify=True): ds_shardset_open",
    .tp_methods = ss_methods,
    .tp_init = (initproc)ss_init,
    .tp_new = PyType_GenericNew,
};

/* ================================================================ row order */
/* llmtrain's row order: the train row visited at loader position p, from the
 * trainer library itself (tr_row_at, train/row_order.c), so the sampler
 * cannot drift from the loader. */
static PyObject *py_row_order(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwl[] = {"start", "count", "n", "seed", "shuffle", NULL};
    num_arg sa = {"start", 0, UINT64_MAX, 0, 0, 0, 0}, ca = {"count", 0, 1ULL << 40, 0, 0, 0, 0};
    num_arg na = {"n_rows", 1, UINT64_MAX, 0, 0, 0, 0}, se = {"seed", 0, UINT64_MAX, 0, 0, 0, 0}; /* llmtrain --seed */
    int shuffle = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&O&O&|p", kwl, conv_num, &sa, conv_num, &ca, conv_num, &na, conv_num,
                                     &se, &shuffle))
        return NULL;
    unsigned long long start = sa.v, count = ca.v, n = na.v, seed = se.v;
    if (count && start > UINT64_MAX - (count - 1)) { /* the last position must not wrap to 0 */
        PyErr_Format(PyExc_ValueError, "start %llu + count %llu: beyond the last loader position 2^64 - 1", start,
                     count);
        return NULL;
    }
    uint64_t *out = malloc(count ? count * 8 : 8);
    if (!out) return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
        for (uint64_t i = 0; i < count; i++) out[i] = tr_row_at(start + i, n, seed, shuffle);
    Py_END_ALLOW_THREADS
    return idbuf_new(out, (Py_ssize_t)count, 8, "Q");
}

static PyMethodDef shardset_functions[] = {
    {"row_order", FN(py_row_order), METH_VARARGS | METH_KEYWORDS,
     "row_order(start, count, n, seed, shuffle=True) -> IdBuffer (uint64): llmtrain's rows at positions "
     "start..start+count-1"},
    {NULL, NULL, 0, NULL}};

int core_add_shardset(PyObject *m) {
    if (PyType_Ready(&SSType) < 0 || PyType_Ready(&RMType) < 0) return -1;
    Py_INCREF(&SSType);
    if (PyModule_AddObject(m, "ShardSet", (PyObject *)&SSType)) return -1;
    return PyModule_AddFunctions(m, shardset_functions);
}
