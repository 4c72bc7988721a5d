/* shard_writer.c - the shard writer of ds_build and ds_merge: rows of one
 * split accumulate until a shard's worth, then are permuted by the seeded
 * per-shard shuffle and written crash-safe (see build_internal.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_internal.h"

/* ---------------------------------------------------------- shuffle */
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ds_shard_shuffle_perm(uint64_t seed, int split, uint64_t shard_index, uint32_t *perm, uint64_t n) {
    uint64_t st = seed ^ (0xA0761D6478BD642Full * (uint64_t)(split + 1)) ^ (0xE7037ED1A0B428DBull * (shard_index + 1));
    for (uint64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (uint64_t i = n; i > 1;
         i--) { /* Fisher-Yates; j uniform in [0, i) (128-bit multiply, no modulo bias to speak of) */
        uint64_t j = (uint64_t)(((unsigned __int128)splitmix64(&st) * i) >> 64);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

void ds_shard_file_name(int split, uint64_t index, char *out, size_t outlen) {
    snprintf(out, outlen, "%s-%05" PRIu64 ".mks", ds_split_name(split ? DS_SPLIT_VAL : DS_SPLIT_TRAIN), index);
}

/* ---------------------------------------------------------- writer */
void ds_shard_writer_init(ds_shard_writer *w, const ds_build_config *cfg, int split, const char *out_dir,
                          ds_shard_rec **recs, size_t *n_recs, size_t *cap_recs) {
    memset(w, 0, sizeof *w);
    w->cfg = cfg;
    w->split = split;
    w->rows_per_shard = ds_build_rows_per_shard(cfg);
    w->out_dir = out_dir;
    w->recs = recs;
    w->n_recs = n_recs;
    w->cap_recs = cap_recs;
}

static int push_rec(ds_shard_writer *w, const ds_shard_rec *r) {
    ds_shard_rec **list = w->recs;
    if (*w->n_recs == *w->cap_recs) {
        size_t nc = *w->cap_recs ? 2 * *w->cap_recs : 64;
        ds_shard_rec *nl = realloc(*list, nc * sizeof *nl);
        if (!nl) return DS_ERR_NOMEM;
        *list = nl;
        *w->cap_recs = nc;
    }
    (*list)[(*w->n_recs)++] = *r;
    return DS_OK;
}

static int flush_shard(ds_shard_writer *w, ds_build_account *acc) {
    if (w->n_rows == 0) return DS_OK;
    const ds_build_config *c = w->cfg;
    uint64_t n = w->n_rows;
    uint32_t *perm = NULL;
    int rc = DS_OK;
    if (c->shuffle) {
        perm = malloc(n * sizeof *perm);
        if (!perm) {
            snprintf(w->err, sizeof w->err, "out of memory");
            return DS_ERR_NOMEM;
        }
        ds_shard_shuffle_perm(c->seed, w->split, w->shard_index, perm, n);
    }
    uint64_t ntok = 0;
    for (uint64_t j = 0; j < n; j++) ntok += w->valid[j];
    ds_shard_header h = {0};
    h.dtype_bytes = c->vocab_size <= 65536 ? 2 : 4;
    h.flags = (w->split ? DS_SHARD_F_VAL : 0) | (c->shuffle ? DS_SHARD_F_SHUFFLED : 0) |
              (c->zstd_level ? DS_SHARD_F_ZSTD : 0);
    h.row_len = c->seq_len;
    h.n_rows = n;
    h.vocab_size = c->vocab_size;
    h.pad_id = c->eot_id;
    h.eot_id = c->eot_id;
    h.frame_rows = c->frame_rows;
    memcpy(h.fingerprint, c->fingerprint, 32);
    ds_shard_image img = {0};
    uint64_t nloss = ntok;
    if (c->loss_bits) {
        uint64_t lb = ds_shard_loss_row_bytes(c->seq_len);
        nloss = 0;
        for (uint64_t i = 0; i < n * lb; i++) nloss += (uint64_t)__builtin_popcount(w->loss[i]);
    }
    rc = ds_shard_build_image_loss(&h, w->tok, perm, w->valid, w->sidx, w->starts, c->loss_bits ? w->loss : NULL,
                                   c->zstd_level, &img, w->err, sizeof w->err);
    free(perm);
    if (rc != DS_OK) return rc;
    ds_shard_rec rec = {0};
    ds_shard_file_name(w->split, w->shard_index, rec.file, sizeof rec.file);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", w->out_dir, rec.file);
    int skipped = 0;
    rc = ds_write_file_atomic(path, img.data, img.len, &skipped, w->err, sizeof w->err);
    w->written_skipped += skipped;
    rec.split = w->split;
    rec.rows = n;
    rec.tokens = ntok;
    rec.loss_tokens = nloss;
    rec.bytes = img.len;
    rec.xxh3 = img.file_xxh3;
    ds_shard_image_free(&img);
    if (rc != DS_OK) return rc;
    rc = push_rec(w, &rec);
    acc->shards[w->split]++;
    w->shard_index++;
    w->n_rows = 0;
    w->n_starts = 0;
    return rc;
}

int ds_shard_writer_add(ds_shard_writer *w, const uint32_t *tokens, uint32_t n_valid, const uint32_t *starts,
                        uint32_t n_starts, ds_build_account *acc) {
    return ds_shard_writer_add_loss(w, tokens, NULL, n_valid, starts, n_starts, acc);
}

int ds_shard_writer_add_loss(ds_shard_writer *w, const uint32_t *tokens, const uint8_t *loss, uint32_t n_valid,
                             const uint32_t *starts, uint32_t n_starts, ds_build_account *acc) {
    uint64_t L = w->cfg->seq_len, lb = ds_shard_loss_row_bytes(w->cfg->seq_len);
    int bits = w->cfg->loss_bits;
    if (loss && !bits) {
        snprintf(w->err, sizeof w->err, "a loss mask needs a build with loss bits (version-2 shards)");
        return DS_ERR_ARG;
    }
    if (n_valid > L) {
        snprintf(w->err, sizeof w->err, "row of %u tokens exceeds the row length %" PRIu64, n_valid, L);
        return DS_ERR_ARG;
    }
    if (w->n_rows == w->cap_rows) {
        size_t nc = w->cap_rows ? 2 * w->cap_rows : 64;
        if (nc > w->rows_per_shard) nc = (size_t)w->rows_per_shard;
        if (nc <= w->n_rows) nc = w->n_rows + 1;
        uint32_t *t = realloc(w->tok, nc * L * sizeof *t);
        if (t) w->tok = t;
        uint32_t *v = realloc(w->valid, nc * sizeof *v);
        if (v) w->valid = v;
        uint32_t *s = realloc(w->sidx, (nc + 1) * sizeof *s);
        if (s) w->sidx = s;
        uint8_t *lm = bits ? realloc(w->loss, nc * lb) : NULL;
        if (lm) w->loss = lm;
        if (!t || !v || !s || (bits && !lm)) {
            snprintf(w->err, sizeof w->err, "out of memory");
            return DS_ERR_NOMEM;
        }
        w->cap_rows = nc;
    }
    if (w->n_starts + n_starts > w->cap_starts) {
        size_t nc = w->cap_starts ? 2 * w->cap_starts : 256;
        while (nc < w->n_starts + n_starts) nc *= 2;
        uint32_t *s = realloc(w->starts, nc * sizeof *s);
        if (!s) {
            snprintf(w->err, sizeof w->err, "out of memory");
            return DS_ERR_NOMEM;
        }
        w->starts = s;
        w->cap_starts = nc;
    }
    uint32_t *row = w->tok + w->n_rows * L;
    memcpy(row, tokens, n_valid * sizeof *row);
    for (uint64_t i = n_valid; i < L; i++) row[i] = w->cfg->eot_id;
    if (bits) { /* one bit per token, least significant first; none on padding */
        uint8_t *b = w->loss + w->n_rows * lb;
        memset(b, 0, (size_t)lb);
        for (uint32_t i = 0; i < n_valid; i++) b[i >> 3] |= (uint8_t)((loss ? loss[i] != 0 : 1) << (i & 7));
    }
    w->valid[w->n_rows] = n_valid;
    w->sidx[w->n_rows] = (uint32_t)w->n_starts;
    if (n_starts) memcpy(w->starts + w->n_starts, starts, n_starts * sizeof *starts);
    w->n_starts += n_starts;
    w->n_rows++;
    w->sidx[w->n_rows] = (uint32_t)w->n_starts;
    acc->rows[w->split]++;
    acc->pad += L - n_valid;
    if (w->n_rows == w->rows_per_shard) return flush_shard(w, acc);
    return DS_OK;
}

int ds_shard_writer_finish(ds_shard_writer *w, ds_build_account *acc) { return flush_shard(w, acc); }

void ds_shard_writer_free(ds_shard_writer *w) {
    free(w->tok), free(w->valid), free(w->sidx), free(w->starts), free(w->loss);
    w->tok = w->valid = w->sidx = w->starts = NULL;
    w->loss = NULL;
}
