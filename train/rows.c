/* rows.c - row sources: in-memory rows and the shard-set adapter over
 * dataset/ds_shard.h (see tr.h). */
#include "tr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ds.h"
#include "ds_shard.h"

typedef struct {
    uint64_t n_train, n_val;
    int L;
    uint32_t *tok, *pos;
    uint8_t *mask;
} memsrc;

static int mem_read(void *ctx, int split, uint64_t i, uint32_t *tokens, uint32_t *pos, uint8_t *mask, char *why,
                    size_t whylen) {
    (void)why, (void)whylen;
    memsrc *m = ctx;
    uint64_t n = split == TR_SPLIT_VAL ? m->n_val : m->n_train;
    if (i >= n) return TR_ERR_ARG;
    size_t o = (size_t)((split == TR_SPLIT_VAL ? m->n_train : 0) + i) * (size_t)m->L;
    if (tokens) memcpy(tokens, m->tok + o, (size_t)m->L * 4);
    for (int j = 0; j < m->L; j++) {
        if (pos) pos[j] = m->pos ? m->pos[o + (size_t)j] : (uint32_t)j;
        if (mask) mask[j] = m->mask ? m->mask[o + (size_t)j] : 1;
    }
    return TR_OK;
}

static void mem_close(void *ctx) {
    memsrc *m = ctx;
    if (!m) return;
    free(m->tok);
    free(m->pos);
    free(m->mask);
    free(m);
}

int tr_rows_mem(tr_rows *out, uint64_t n_train, uint64_t n_val, int row_len, uint32_t vocab_size,
                const uint32_t *tokens, const uint32_t *pos, const uint8_t *mask) {
    memset(out, 0, sizeof *out);
    if (row_len < 1 || !tokens) return TR_ERR_ARG;
    uint64_t n_all, n64, n4;
    if (__builtin_add_overflow(n_train, n_val, &n_all) || __builtin_mul_overflow(n_all, (uint64_t)row_len, &n64) ||
        __builtin_mul_overflow(n64, (uint64_t)4, &n4) || n4 >= SIZE_MAX)
        return TR_ERR_ARG;
    size_t n = (size_t)n64;
    memsrc *m = calloc(1, sizeof *m);
    if (!m) return TR_ERR_NOMEM;
    m->n_train = n_train;
    m->n_val = n_val;
    m->L = row_len;
    m->tok = malloc(n * 4 + 1);
    if (pos) m->pos = malloc(n * 4 + 1);
    if (mask) m->mask = malloc(n + 1);
    if (!m->tok || (pos && !m->pos) || (mask && !m->mask)) {
        mem_close(m);
        return TR_ERR_NOMEM;
    }
    memcpy(m->tok, tokens, n * 4);
    if (pos) memcpy(m->pos, pos, n * 4);
    if (mask) memcpy(m->mask, mask, n);
    out->ctx = m;
    out->n_rows[0] = n_train;
    out->n_rows[1] = n_val;
    out->row_len = row_len;
    out->vocab_size = vocab_size;
    out->has_pos = pos != NULL;
    out->read_row = mem_read;
    out->close = mem_close;
    snprintf(out->desc, sizeof out->desc, "memory rows");
    return TR_OK;
}

/* ------------------------------------------------------------ shard sets */
/* The shard-set source: the set, its folder (outputs are kept out of it) and,
 * per split, the first split row of every shard (to name the file and row
 * of a bad row in messages). */
typedef struct {
    ds_shardset *set;
    char *dir;
    size_t n_shards[2];
    uint64_t *first_row[2];
} shardsrc;

/* ds_shardset_read_msg checks the row as `mkshards verify` does (metadata,
 * frame, ids < vocabulary, padding); why gets its reason. */
static int shard_read(void *ctx, int split, uint64_t i, uint32_t *tokens, uint32_t *pos, uint8_t *mask, char *why,
                      size_t whylen) {
    const shardsrc *src = ctx;
    char e[512];
    int rc = ds_shardset_read_msg(src->set, split == TR_SPLIT_VAL ? DS_SPLIT_VAL : DS_SPLIT_TRAIN, i, tokens, pos, NULL,
                                  mask, e, sizeof e);
    if (rc == DS_ERR_FORMAT && why && whylen) {
        const char *r = strstr(e, ".mks: "); /* the loader's "where" names the shard already */
        snprintf(why, whylen, "%s", r ? r + 6 : e);
    }
    if (rc == DS_OK) return TR_OK;
    return rc == DS_ERR_NOMEM ? TR_ERR_NOMEM
           : rc == DS_ERR_IO  ? TR_ERR_IO
           : rc == DS_ERR_ARG ? TR_ERR_ARG
                              : TR_ERR_CORRUPT;
}

static void shard_where(void *ctx, int split, uint64_t i, char *buf, size_t len) {
    const shardsrc *src = ctx;
    int k = split == TR_SPLIT_VAL;
    size_t n = src->n_shards[k], lo = 0, hi = n;
    while (hi - lo > 1) { /* last shard whose first row <= i */
        size_t mid = lo + (hi - lo) / 2;
        if (src->first_row[k][mid] <= i) lo = mid;
        else hi = mid;
    }
    const char *path = NULL;
    if (n == 0 || !ds_shardset_shard(src->set, k ? DS_SPLIT_VAL : DS_SPLIT_TRAIN, lo, &path) || !path) {
        snprintf(buf, len, "%s row %llu", k ? "val" : "train", (unsigned long long)i);
        return;
    }
    snprintf(buf, len, "shard %s row %llu (%s row %llu)", path, (unsigned long long)(i - src->first_row[k][lo]),
             k ? "val" : "train", (unsigned long long)i);
}

static void shard_close(void *ctx) {
    shardsrc *src = ctx;
    if (!src) return;
    ds_shardset_close(src->set);
    free(src->dir);
    free(src->first_row[0]);
    free(src->first_row[1]);
    free(src);
}

int tr_rows_open_shards(tr_rows *out, const char *dir, char *err, size_t errlen) {
    return tr_rows_open_shards_ex(out, dir, 1, err, errlen);
}

int tr_rows_open_shards_ex(tr_rows *out, const char *dir, int verify, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    ds_shardset *s = NULL;
    char e[512] = "";
    int rc = ds_shardset_open(dir, verify ? DS_SHARD_OPEN_VERIFY : 0, &s, e, sizeof e);
    if (rc != DS_OK) {
        if (err && errlen) snprintf(err, errlen, "%s", e[0] ? e : ds_strerror(rc));
        return rc == DS_ERR_IO ? TR_ERR_IO : rc == DS_ERR_NOMEM ? TR_ERR_NOMEM : TR_ERR_CORRUPT;
    }
    ds_shardset_info info;
    ds_shardset_get_info(s, &info);
    /* what the manifest declares sizes the trainer's allocations (row
     * scratch, model): bounded here, and every shard header must agree */
    if (info.row_len < 1 || info.row_len > TR_MAX_ROW_LEN || info.vocab_size < 1 || info.vocab_size > TR_MAX_VOCAB) {
        if (err && errlen)
            snprintf(err, errlen, "%s: row length %u / vocabulary %u out of range (at most %u / %u)", dir, info.row_len,
                     info.vocab_size, TR_MAX_ROW_LEN, TR_MAX_VOCAB);
        ds_shardset_close(s);
        return TR_ERR_CORRUPT;
    }
    shardsrc *src = calloc(1, sizeof *src);
    if (src) src->dir = strdup(dir);
    if (!src || !src->dir) {
        free(src);
        ds_shardset_close(s);
        return TR_ERR_NOMEM;
    }
    src->set = s;
    for (int k = 0; k < 2; k++) {
        ds_split sp = k ? DS_SPLIT_VAL : DS_SPLIT_TRAIN;
        size_t n = ds_shardset_n_shards(s, sp);
        src->n_shards[k] = n;
        src->first_row[k] = calloc(n ? n : 1, sizeof(uint64_t));
        if (!src->first_row[k]) {
            shard_close(src);
            return TR_ERR_NOMEM;
        }
        uint64_t acc = 0;
        for (size_t i = 0; i < n; i++) {
            const char *path = NULL;
            const ds_shard *sh = ds_shardset_shard(s, sp, i, &path);
            const ds_shard_header *h = sh ? ds_shard_get_header(sh) : NULL;
            if (!h || h->vocab_size > info.vocab_size || h->row_len != info.row_len ||
                __builtin_add_overflow(acc, h->n_rows, &acc)) {
                if (err && errlen)
                    snprintf(err, errlen,
                             "%s: header (vocabulary %u, row length %u) disagrees with the manifest's "
                             "model vocabulary %u / row length %u",
                             path ? path : dir, h ? h->vocab_size : 0, h ? h->row_len : 0, info.vocab_size,
                             info.row_len);
                shard_close(src);
                return TR_ERR_CORRUPT;
            }
            src->first_row[k][i] = acc - h->n_rows;
        }
        if (acc != info.rows[k]) {
            if (err && errlen)
                snprintf(err, errlen, "%s: the shards hold %llu %s rows, the set counts %llu", dir,
                         (unsigned long long)acc, k ? "val" : "train", (unsigned long long)info.rows[k]);
            shard_close(src);
            return TR_ERR_CORRUPT;
        }
    }
    out->ctx = src;
    out->n_rows[0] = info.rows[DS_SPLIT_TRAIN];
    out->n_rows[1] = info.rows[DS_SPLIT_VAL];
    out->row_len = (int)info.row_len;
    out->vocab_size = info.vocab_size;
    memcpy(out->fingerprint, info.fingerprint, 32);
    out->has_pos = 1;
    out->eot_id = info.eot_id;
    out->frame_known = 1;
    out->bos_id = info.bos_id;
    out->eos_id = info.eos_id;
    snprintf(out->tokenizer, sizeof out->tokenizer, "%s", info.tokenizer);
    out->read_row = shard_read;
    out->close = shard_close;
    out->where = shard_where;
    out->set_dir = src->dir;
    snprintf(out->desc, sizeof out->desc, "%s", dir);
    return TR_OK;
}

void tr_rows_close(tr_rows *r) {
    if (r && r->close) r->close(r->ctx);
    if (r) memset(r, 0, sizeof *r);
}
