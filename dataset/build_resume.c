/* build_resume.c - ds_build's checkpoint DIR/build.ckpt (see
 * build_internal.h): saved at batch boundaries after a shard was written,
 * restored only after every byte of it was checked. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "build_internal.h"

#define CKPT_MAGIC "MKSCKPT1"

typedef struct {
    uint8_t *d;
    size_t n, cap;
    int oom;
} obuf;

static void ob_put(obuf *o, const void *p, size_t n) {
    if (o->oom) return;
    if (o->n + n > o->cap) {
        size_t nc = o->cap ? o->cap : 1 << 16;
        while (nc < o->n + n) nc *= 2;
        uint8_t *nd = realloc(o->d, nc);
        if (!nd) {
            o->oom = 1;
            return;
        }
        o->d = nd;
        o->cap = nc;
    }
    if (n) memcpy(o->d + o->n, p, n);
    o->n += n;
}
static void ob_u64(obuf *o, uint64_t v) { ob_put(o, &v, 8); }

typedef struct {
    const uint8_t *p;
    size_t n, at;
    int bad;
} ibuf;

static int ib_get(ibuf *b, void *dst, size_t n) {
    if (b->bad || b->n - b->at < n) {
        b->bad = 1;
        return -1;
    }
    if (n) memcpy(dst, b->p + b->at, n);
    b->at += n;
    return 0;
}
static uint64_t ib_u64(ibuf *b) {
    uint64_t v = 0;
    ib_get(b, &v, 8);
    return v;
}

uint64_t ds_build_config_hash(json_t *cfgj, const uint8_t fp[32]) {
    char *t = json_dumps(cfgj, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    uint64_t h = t ? XXH3_64bits_withSeed(t, strlen(t), XXH3_64bits(fp, 32)) : 0;
    free(t);
    return h;
}

int ds_ckpt_save(const char *dir, uint64_t cfg_hash, const ds_build_account *acc, uint64_t toks_total,
                 const char *cur_file, ds_packer *pk, ds_shard_writer *wr, const ds_shard_rec *recs, size_t n_recs,
                 uint64_t rej_len) {
    obuf o = {0};
    uint32_t L = pk[0].cfg->seq_len;
    ob_put(&o, CKPT_MAGIC, 8);
    ob_u64(&o, cfg_hash);
    ob_put(&o, acc, sizeof *acc);
    ob_u64(&o, toks_total);
    ob_u64(&o, rej_len);
    uint64_t fl = cur_file ? strlen(cur_file) + 1 : 0;
    ob_u64(&o, fl);
    ob_put(&o, cur_file, fl);
    ob_u64(&o, n_recs);
    ob_put(&o, recs, n_recs * sizeof *recs);
    for (int s = 0; s < 2; s++) {
        ds_packer *p = &pk[s];
        ds_shard_writer *w = &wr[s];
        ob_u64(&o, p->fill);
        ob_put(&o, p->row, p->fill * sizeof(uint32_t));
        ob_u64(&o, p->n_st);
        ob_put(&o, p->st, p->n_st * sizeof(uint32_t));
        ob_u64(&o, p->pool_len);
        ob_put(&o, p->pool, p->pool_len * sizeof(uint32_t));
        ob_u64(&o, p->n_pc);
        ob_put(&o, p->pc, p->n_pc * sizeof *p->pc);
        ob_u64(&o, w->shard_index);
        ob_u64(&o, w->n_rows);
        ob_u64(&o, w->n_starts);
        ob_put(&o, w->tok, w->n_rows * L * sizeof(uint32_t));
        ob_put(&o, w->valid, w->n_rows * sizeof(uint32_t));
        ob_put(&o, w->sidx, (w->n_rows ? w->n_rows + 1 : 0) * sizeof(uint32_t));
        ob_put(&o, w->starts, w->n_starts * sizeof(uint32_t));
        if (p->cfg->loss_bits) { /* the loss bits of the pending tokens follow them (version-2 builds only) */
            ob_put(&o, p->rowl, p->fill);
            ob_put(&o, p->pooll, p->pool_len);
            ob_put(&o, w->loss, (size_t)(w->n_rows * ds_shard_loss_row_bytes(L)));
        }
    }
    uint64_t h = XXH3_64bits(o.d, o.n);
    ob_u64(&o, h);
    if (o.oom) {
        free(o.d);
        return -1;
    }
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/build.ckpt", dir);
    int rc = ds_write_file_atomic(path, o.d, o.n, NULL, err, sizeof err);
    free(o.d);
    return rc;
}

static int grow_u32(uint32_t **a, size_t n) {
    uint32_t *x = realloc(*a, (n ? n : 1) * sizeof **a);
    if (!x) return -1;
    *a = x;
    return 0;
}

/* Bytes left in b; n_items of item_bytes each fit in them (no overflow). */
static int ib_fits(const ibuf *b, uint64_t n_items, uint64_t item_bytes) {
    uint64_t need;
    return !b->bad && !__builtin_mul_overflow(n_items, item_bytes, &need) && need <= b->n - b->at;
}

static int ids_below(const uint32_t *ids, size_t n, uint32_t vocab) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= vocab) return 0;
    return 1;
}

/* Document starts of one row: strictly increasing and below its valid count. */
static int starts_ok(const uint32_t *st, size_t n, uint32_t valid) {
    for (size_t i = 0; i < n; i++)
        if (st[i] >= valid || (i && st[i] <= st[i - 1])) return 0;
    return 1;
}

/* A shard the checkpoint says was written: its name is the one the writer
 * gives the split's next shard, and the file in DIR is a regular file with
 * the recorded size and whole-file XXH3 (what resume builds the manifest
 * from; a tampered or missing shard means starting over). */
static int ckpt_shard_ok(const char *dir, const ds_shard_rec *r, uint64_t index) {
    char want[64], path[4200], err[256];
    if ((r->split != 0 && r->split != 1) || !memchr(r->file, 0, sizeof r->file)) return 0;
    ds_shard_file_name(r->split, index, want, sizeof want);
    if (strcmp(want, r->file)) return 0;
    snprintf(path, sizeof path, "%s/%s", dir, r->file);
    struct stat st;
    uint64_t xx = 0;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != r->bytes) return 0;
    if (ds_shard_verify(path, &xx, err, sizeof err) != DS_OK || xx != r->xxh3) return 0;
    return 1;
}

/* 1 when each of the n bytes is 0 or 1 (a packer's per-token loss mask). */
static int mask_ok(const uint8_t *m, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (m[i] > 1) return 0;
    return 1;
}

/* The loss bits of a version-2 build's pending tokens (after the writer's
 * rows were restored: fill, pool_len, n_rows and valid are checked). The
 * buffers get the capacities the packer and writer grow from; a bit on a
 * row's padding is refused as the shard writer would refuse it. 0 or -1. */
static int ckpt_load_loss(ibuf *b, ds_packer *p, ds_shard_writer *w, uint32_t L) {
    uint64_t lb = ds_shard_loss_row_bytes(L), rows = w->n_rows;
    if (ib_get(b, p->rowl, p->fill) || !mask_ok(p->rowl, p->fill)) return -1;
    uint8_t *pl = realloc(p->pooll, p->pool_cap ? p->pool_cap : 1);
    if (!pl) return -1;
    p->pooll = pl;
    if (ib_get(b, p->pooll, p->pool_len) || !mask_ok(p->pooll, p->pool_len)) return -1;
    if (!ib_fits(b, rows, lb)) return -1;
    uint8_t *wl = realloc(w->loss, rows ? (size_t)(rows * lb) : 1);
    if (!wl) return -1;
    w->loss = wl;
    if (ib_get(b, w->loss, (size_t)(rows * lb))) return -1;
    for (uint64_t j = 0; j < rows; j++) { /* no target on padding or past the row */
        const uint8_t *r = w->loss + j * lb;
        uint32_t nv = w->valid[j];
        if (nv / 8 < lb && (r[nv / 8] >> (nv % 8))) return -1;
        for (uint64_t k = nv / 8 + 1; k < lb; k++)
            if (r[k]) return -1;
    }
    return 0;
}

/* Restore the state saved by ckpt_save. The file lies in the output folder,
 * which other users may be able to write: everything is checked before it is
 * used (checksum, every count against the bytes present and the limits the
 * writer keeps, ids < vocab, piece and start offsets inside their buffers,
 * the listed shards on disk), and memory is bounded by the file's size.
 * 0: restored; -1: no usable checkpoint (start from scratch).
 * Long (~150 lines): it reads the fields in the exact order ckpt_save wrote
 * them, each check next to its read, one cursor (b) and one verdict (b.bad)
 * for all; the blocks (accounting, shard list, packer, writer) are marked. */
int ds_ckpt_load(const char *dir, uint64_t cfg_hash, ds_build_account *acc, uint64_t *toks_total, char **cur_file,
                 ds_packer *pk, ds_shard_writer *wr, ds_shard_rec **recs, size_t *n_recs, size_t *cap_recs,
                 uint64_t *rej_len) {
    char path[4200], err[256];
    snprintf(path, sizeof path, "%s/build.ckpt", dir);
    int fd = ds_open_regular(path, err, sizeof err); /* a FIFO here must not hang the build */
    if (fd < 0) return -1;
    struct stat fst;
    if (fstat(fd, &fst) != 0 || fst.st_size <= 16 || (uint64_t)fst.st_size > SIZE_MAX / 2) {
        close(fd);
        return -1;
    }
    size_t sz = (size_t)fst.st_size, got = 0;
    uint8_t *d = malloc(sz);
    while (d && got < sz) {
        ssize_t r = read(fd, d + got, sz - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!d || got != sz) {
        free(d);
        return -1;
    }
    uint64_t h;
    memcpy(&h, d + sz - 8, 8);
    ibuf b = {d, sz - 8, 0, 0};
    char magic[8];
    const ds_build_config *cfg = pk[0].cfg;
    uint32_t L = cfg->seq_len, vocab = cfg->vocab_size;
    if (XXH3_64bits(d, sz - 8) != h || ib_get(&b, magic, 8) || memcmp(magic, CKPT_MAGIC, 8) || ib_u64(&b) != cfg_hash) {
        free(d);
        return -1;
    }
    ib_get(&b, acc, sizeof *acc);
    *toks_total = ib_u64(&b);
    *rej_len = ib_u64(&b);
    uint64_t fl = ib_u64(&b);
    if (fl) {
        /* the file being packed when the checkpoint was taken: one of this build's files */
        if (!ib_fits(&b, fl, 1) || !(*cur_file = malloc(fl)) || ib_get(&b, *cur_file, fl) ||
            memchr(*cur_file, 0, fl) != *cur_file + fl - 1) {
            b.bad = 1;
        } else {
            int known = 0;
            for (size_t i = 0; i < cfg->n_files && !known; i++) known = !strcmp(cfg->files[i], *cur_file);
            if (!known) b.bad = 1;
        }
    }
    uint64_t nr = ib_u64(&b);
    if (ib_fits(&b, nr, sizeof **recs)) {
        *recs = malloc((nr ? nr : 1) * sizeof **recs);
        *cap_recs = nr ? nr : 1;
        *n_recs = nr;
        if (!*recs || ib_get(&b, *recs, nr * sizeof **recs)) b.bad = 1;
    } else b.bad = 1;
    uint64_t per_split[2] = {0, 0};
    for (uint64_t i = 0; i < nr && !b.bad; i++) {
        const ds_shard_rec *r = &(*recs)[i];
        if (r->split != 0 && r->split != 1) b.bad = 1;
        else if (!ckpt_shard_ok(dir, r, per_split[r->split]++)) b.bad = 1;
    }
    if (!b.bad && (acc->shards[0] != per_split[0] || acc->shards[1] != per_split[1])) b.bad = 1;
    for (int s = 0; s < 2 && !b.bad; s++) {
        ds_packer *p = &pk[s];
        ds_shard_writer *w = &wr[s];
        /* concat: the row being filled and its document starts */
        uint64_t fill = ib_u64(&b);
        if (fill > L || ib_get(&b, p->row, (size_t)fill * sizeof(uint32_t))) {
            b.bad = 1;
            break;
        }
        p->fill = (uint32_t)fill;
        uint64_t nst = ib_u64(&b);
        if (nst > L || ib_get(&b, p->st, (size_t)nst * sizeof(uint32_t))) {
            b.bad = 1;
            break;
        }
        p->n_st = (uint32_t)nst;
        if (!ids_below(p->row, p->fill, vocab) || !starts_ok(p->st, p->n_st, p->fill)) {
            b.bad = 1;
            break;
        }
        /* bfd: the window's token pool (flushed at bfd_window x L) and its pieces */
        uint64_t pl = ib_u64(&b);
        if (pl > cfg->bfd_window * (uint64_t)L || !ib_fits(&b, pl, sizeof(uint32_t)) ||
            grow_u32(&p->pool, (size_t)pl)) {
            b.bad = 1;
            break;
        }
        p->pool_len = p->pool_cap = (size_t)pl;
        if (!p->pool_cap) p->pool_cap = 1;
        if (ib_get(&b, p->pool, (size_t)pl * sizeof(uint32_t)) || !ids_below(p->pool, p->pool_len, vocab)) {
            b.bad = 1;
            break;
        }
        uint64_t npc = ib_u64(&b);
        if (npc > pl || !ib_fits(&b, npc, sizeof *p->pc)) {
            b.bad = 1;
            break;
        }
        free(p->pc);
        p->pc = malloc((npc ? npc : 1) * sizeof *p->pc);
        p->cap_pc = (size_t)(npc ? npc : 1);
        p->n_pc = 0;
        if (!p->pc || ib_get(&b, p->pc, (size_t)npc * sizeof *p->pc)) {
            b.bad = 1;
            break;
        }
        p->n_pc = (size_t)npc;
        for (size_t i = 0; i < p->n_pc && !b.bad; i++) /* bfd_flush copies pool[off, off + len) into a row of L */
            if (p->pc[i].len == 0 || p->pc[i].len > L || p->pc[i].off > pl || p->pc[i].len > pl - p->pc[i].off)
                b.bad = 1;
        if (b.bad) break;
        /* the writer: rows not yet in a shard (fewer than a shard's worth) */
        w->shard_index = ib_u64(&b);
        uint64_t rows = ib_u64(&b), ns = ib_u64(&b);
        if (b.bad || w->shard_index != per_split[s] || rows >= w->rows_per_shard ||
            !ib_fits(&b, rows, (uint64_t)L * 4 + 8) || !ib_fits(&b, ns, 4) || grow_u32(&w->tok, (size_t)(rows * L)) ||
            grow_u32(&w->valid, (size_t)rows) || grow_u32(&w->sidx, (size_t)rows + 1) ||
            grow_u32(&w->starts, (size_t)ns)) {
            b.bad = 1;
            break;
        }
        /* capacity = what grow_u32 allocated: with no row pending that is one
         * element, not a row of L, so cap_rows stays 0 and ds_shard_writer_add grows
         * the buffers before the first row (cap_rows = 1 here overflowed them) */
        w->n_rows = w->cap_rows = (size_t)rows;
        w->n_starts = w->cap_starts = (size_t)ns;
        if (!w->cap_starts) w->cap_starts = 1;
        ib_get(&b, w->tok, (size_t)rows * L * sizeof(uint32_t));
        ib_get(&b, w->valid, (size_t)rows * sizeof(uint32_t));
        ib_get(&b, w->sidx, (rows ? (size_t)rows + 1 : 0) * sizeof(uint32_t));
        if (!rows) w->sidx[0] = 0;
        ib_get(&b, w->starts, (size_t)ns * sizeof(uint32_t));
        if (b.bad || w->sidx[0] != 0 || w->sidx[rows] != ns) {
            b.bad = 1;
            break;
        }
        for (size_t j = 0; j < rows && !b.bad; j++) {
            if (w->valid[j] > L || w->sidx[j] > w->sidx[j + 1] || w->sidx[j + 1] > ns ||
                !ids_below(w->tok + j * L, L, vocab) ||
                !starts_ok(w->starts + w->sidx[j], w->sidx[j + 1] - w->sidx[j], w->valid[j]))
                b.bad = 1;
        }
        if (!b.bad && cfg->loss_bits && ckpt_load_loss(&b, p, w, L)) b.bad = 1;
    }
    int ok = !b.bad && b.at == b.n;
    free(d);
    return ok ? 0 : -1;
}

void ds_ckpt_remove(const char *dir) {
    char cp[4200];
    snprintf(cp, sizeof cp, "%s/build.ckpt", dir);
    unlink(cp);
}
