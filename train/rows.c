/* rows.c - row sources: in-memory rows and the shard-set adapter over
 * dataset/ds_shard.h (see tr.h). */
#include "tr.h"

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

static int mem_read(void *ctx, int split, uint64_t i, uint32_t *tokens, uint32_t *pos, uint8_t *mask)
{
    memsrc *m = ctx;
    uint64_t n = split == TR_SPLIT_VAL ? m->n_val : m->n_train;
    if (i >= n)
        return TR_ERR_ARG;
    size_t o = (size_t)((split == TR_SPLIT_VAL ? m->n_train : 0) + i) * (size_t)m->L;
    if (tokens)
        memcpy(tokens, m->tok + o, (size_t)m->L * 4);
    for (int j = 0; j < m->L; j++) {
        if (pos)
            pos[j] = m->pos ? m->pos[o + (size_t)j] : (uint32_t)j;
        if (mask)
            mask[j] = m->mask ? m->mask[o + (size_t)j] : 1;
    }
    return TR_OK;
}

static void mem_close(void *ctx)
{
    memsrc *m = ctx;
    if (!m)
        return;
    free(m->tok);
    free(m->pos);
    free(m->mask);
    free(m);
}

int tr_rows_mem(tr_rows *out, uint64_t n_train, uint64_t n_val, int row_len, uint32_t vocab_size,
                const uint32_t *tokens, const uint32_t *pos, const uint8_t *mask)
{
    memset(out, 0, sizeof *out);
    if (row_len < 1 || !tokens)
        return TR_ERR_ARG;
    memsrc *m = calloc(1, sizeof *m);
    if (!m)
        return TR_ERR_NOMEM;
    size_t n = (size_t)(n_train + n_val) * (size_t)row_len;
    m->n_train = n_train;
    m->n_val = n_val;
    m->L = row_len;
    m->tok = malloc(n * 4 + 1);
    if (pos)
        m->pos = malloc(n * 4 + 1);
    if (mask)
        m->mask = malloc(n + 1);
    if (!m->tok || (pos && !m->pos) || (mask && !m->mask)) {
        mem_close(m);
        return TR_ERR_NOMEM;
    }
    memcpy(m->tok, tokens, n * 4);
    if (pos)
        memcpy(m->pos, pos, n * 4);
    if (mask)
        memcpy(m->mask, mask, n);
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
static int shard_read(void *ctx, int split, uint64_t i, uint32_t *tokens, uint32_t *pos, uint8_t *mask)
{
    int rc = ds_shardset_read((const ds_shardset *)ctx, split == TR_SPLIT_VAL ? DS_SPLIT_VAL : DS_SPLIT_TRAIN, i,
                              tokens, pos, NULL, mask);
    if (rc == DS_OK)
        return TR_OK;
    return rc == DS_ERR_NOMEM ? TR_ERR_NOMEM : rc == DS_ERR_IO ? TR_ERR_IO : rc == DS_ERR_ARG ? TR_ERR_ARG
                                                                                                : TR_ERR_CORRUPT;
}

static void shard_close(void *ctx) { ds_shardset_close((ds_shardset *)ctx); }

int tr_rows_open_shards(tr_rows *out, const char *dir, char *err, size_t errlen)
{
    return tr_rows_open_shards_ex(out, dir, 1, err, errlen);
}

int tr_rows_open_shards_ex(tr_rows *out, const char *dir, int verify, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    ds_shardset *s = NULL;
    char e[512] = "";
    int rc = ds_shardset_open(dir, verify ? DS_SHARD_OPEN_VERIFY : 0, &s, e, sizeof e);
    if (rc != DS_OK) {
        if (err && errlen)
            snprintf(err, errlen, "%s", e[0] ? e : ds_strerror(rc));
        return rc == DS_ERR_IO ? TR_ERR_IO : rc == DS_ERR_NOMEM ? TR_ERR_NOMEM : TR_ERR_CORRUPT;
    }
    ds_shardset_info info;
    ds_shardset_get_info(s, &info);
    out->ctx = s;
    out->n_rows[0] = info.rows[DS_SPLIT_TRAIN];
    out->n_rows[1] = info.rows[DS_SPLIT_VAL];
    out->row_len = (int)info.row_len;
    out->vocab_size = info.vocab_size;
    memcpy(out->fingerprint, info.fingerprint, 32);
    out->has_pos = 1;
    out->eot_id = info.eot_id;
    snprintf(out->tokenizer, sizeof out->tokenizer, "%s", info.tokenizer);
    out->read_row = shard_read;
    out->close = shard_close;
    snprintf(out->desc, sizeof out->desc, "%s", dir);
    return TR_OK;
}

void tr_rows_close(tr_rows *r)
{
    if (r && r->close)
        r->close(r->ctx);
    if (r)
        memset(r, 0, sizeof *r);
}
