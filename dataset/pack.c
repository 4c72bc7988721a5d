/* pack.c - the packers of ds_build: documents (ids + EOT) -> rows of L for
 * a split's shard writer (see build_internal.h). Every one counts what it
 * does to a document in the accounting. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_internal.h"
#include "tk.h"

/* lm: the row's loss mask (cfg->loss_bits), NULL otherwise */
static int emit(ds_packer *p, const uint32_t *toks, const uint8_t *lm, uint32_t n, const uint32_t *starts,
                uint32_t ns) {
    return ds_shard_writer_add_loss(p->wr, toks, lm, n, starts, ns, p->acc);
}

/* The loss bit of token i of a framed document (nb BOS, t ids, then the
 * EOS): a masked document's BOS is no target and its EOS is one when its
 * last token is; an unmasked document's tokens all are (ds_packer_add_loss). */
static uint8_t framed_loss(const uint8_t *loss, uint64_t i, uint64_t nb, uint64_t t) {
    if (!loss) return 1;
    if (i < nb) return 0;
    if (i - nb < t) return loss[i - nb] != 0;
    return t ? loss[t - 1] != 0 : 0;
}

/* src / n tokens with their loss bits: srcl[i] (srcl NULL: `fill` for each) */
static int concat_push(ds_packer *p, const uint32_t *src, const uint8_t *srcl, uint8_t fill, uint32_t n,
                       int doc_start) {
    uint32_t L = p->cfg->seq_len;
    while (n) {
        if (doc_start) {
            p->st[p->n_st++] = p->fill;
            doc_start = 0;
        }
        uint32_t k = L - p->fill < n ? L - p->fill : n;
        memcpy(p->row + p->fill, src, k * sizeof *src);
        if (p->rowl) {
            if (srcl)
                for (uint32_t i = 0; i < k; i++) p->rowl[p->fill + i] = srcl[i] != 0;
            else memset(p->rowl + p->fill, fill, k);
            if (srcl) srcl += k;
        }
        p->fill += k;
        src += k;
        n -= k;
        if (p->fill == L) {
            int rc = emit(p, p->row, p->rowl, L, p->st, p->n_st);
            p->fill = 0;
            p->n_st = 0;
            if (rc) return rc;
        }
    }
    return 0;
}

/* The framing of the build: [BOS] ids [EOS] (cfg->bos_id / eos_id < 0: none). */
static uint32_t n_bos(const ds_packer *p) { return p->cfg->bos_id >= 0; }
static uint32_t n_eos(const ds_packer *p) { return p->cfg->eos_id >= 0; }

static int concat_add(ds_packer *p, const tk_ids *ids, const uint8_t *loss) {
    uint32_t bos = (uint32_t)p->cfg->bos_id, eos = (uint32_t)p->cfg->eos_id;
    uint64_t t = ids->len, nb = n_bos(p);
    p->acc->docs_whole++;
    p->acc->tok_whole += ids->len;
    p->acc->eot += n_eos(p);
    p->acc->bos += n_bos(p);
    int rc = 0, start = 1;
    if (nb) rc = concat_push(p, &bos, NULL, framed_loss(loss, 0, nb, t), 1, start), start = 0;
    if (!rc && ids->len) rc = concat_push(p, ids->ids, loss, 1, (uint32_t)ids->len, start), start = 0;
    if (!rc && n_eos(p)) rc = concat_push(p, &eos, NULL, framed_loss(loss, nb + t, nb, t), 1, start);
    return rc;
}

static int concat_flush(ds_packer *p) {
    int rc = 0;
    if (p->fill) rc = emit(p, p->row, p->rowl, p->fill, p->st, p->n_st);
    p->fill = 0;
    p->n_st = 0;
    return rc;
}

/* n tokens and (cfg->loss_bits) their loss bits: srcl[i], or `fill` for each when srcl is NULL */
static int pool_add(ds_packer *p, const uint32_t *src, const uint8_t *srcl, uint8_t fill, size_t n) {
    if (p->pool_len + n > p->pool_cap) {
        size_t nc = p->pool_cap ? p->pool_cap : 65536;
        while (nc < p->pool_len + n) nc *= 2;
        uint32_t *np = realloc(p->pool, nc * sizeof *np);
        if (!np) return DS_ERR_NOMEM;
        p->pool = np;
        if (p->cfg->loss_bits) {
            uint8_t *nl = realloc(p->pooll, nc);
            if (!nl) return DS_ERR_NOMEM; /* pool_cap unchanged: the next add grows both again */
            p->pooll = nl;
        }
        p->pool_cap = nc;
    }
    if (n) memcpy(p->pool + p->pool_len, src, n * sizeof *src);
    if (n && p->cfg->loss_bits) {
        if (srcl)
            for (size_t i = 0; i < n; i++) p->pooll[p->pool_len + i] = srcl[i] != 0;
        else memset(p->pooll + p->pool_len, fill, n);
    }
    p->pool_len += n;
    return 0;
}

static int cmp_piece(const void *a, const void *b) {
    const ds_piece *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Best-fit decreasing over the window's pieces: each piece goes into the open
 * row with the least room that still fits it (ties: the most recently
 * refilled such row), else into a new row. Rows are written in the order they
 * were opened; inside a row pieces keep their placement order. */
static int bfd_flush(ds_packer *p) {
    if (!p->n_pc) return 0;
    uint32_t L = p->cfg->seq_len;
    qsort(p->pc, p->n_pc, sizeof *p->pc, cmp_piece);
    size_t nb = 0;
    uint32_t *rem = malloc(p->n_pc * sizeof *rem), *head = malloc(p->n_pc * sizeof *head),
             *tail = malloc(p->n_pc * sizeof *tail), *bnext = malloc(p->n_pc * sizeof *bnext);
    uint32_t *bucket = malloc(((size_t)L + 1) * sizeof *bucket);
    size_t words = (L + 64) / 64;
    uint64_t *bits = calloc(words, sizeof *bits);
    uint32_t *row = malloc((size_t)L * sizeof *row), *st = malloc((size_t)L * sizeof *st);
    uint8_t *rowl = p->cfg->loss_bits ? malloc(L) : NULL;
    int rc = 0;
    if (!rem || !head || !tail || !bnext || !bucket || !bits || !row || !st || (p->cfg->loss_bits && !rowl)) {
        rc = DS_ERR_NOMEM;
        goto out;
    }
    for (uint32_t r = 0; r <= L; r++) bucket[r] = UINT32_MAX;
    for (size_t i = 0; i < p->n_pc; i++) {
        ds_piece *pc = &p->pc[i];
        pc->next = UINT32_MAX;
        uint32_t need = pc->len, found = UINT32_MAX;
        for (size_t wd = need / 64; wd < words; wd++) {
            uint64_t m = bits[wd];
            if (wd == need / 64) m &= ~0ull << (need % 64);
            if (m) {
                found = (uint32_t)(wd * 64 + (size_t)__builtin_ctzll(m));
                break;
            }
        }
        uint32_t b;
        if (found != UINT32_MAX && found <= L) {
            b = bucket[found];
            bucket[found] = bnext[b];
            if (bucket[found] == UINT32_MAX) bits[found / 64] &= ~(1ull << (found % 64));
            p->pc[tail[b]].next = (uint32_t)i;
            tail[b] = (uint32_t)i;
            rem[b] -= need;
        } else {
            b = (uint32_t)nb++;
            head[b] = tail[b] = (uint32_t)i;
            rem[b] = L - need;
        }
        if (rem[b] > 0) {
            bnext[b] = bucket[rem[b]];
            bucket[rem[b]] = b;
            bits[rem[b] / 64] |= 1ull << (rem[b] % 64);
        }
    }
    for (size_t b = 0; b < nb && !rc; b++) {
        uint32_t n = 0, ns = 0;
        for (uint32_t i = head[b]; i != UINT32_MAX; i = p->pc[i].next) {
            st[ns++] = n;
            memcpy(row + n, p->pool + p->pc[i].off, p->pc[i].len * sizeof *row);
            if (rowl) memcpy(rowl + n, p->pooll + p->pc[i].off, p->pc[i].len);
            n += p->pc[i].len;
        }
        rc = emit(p, row, rowl, n, st, ns);
    }
out:
    free(rem), free(head), free(tail), free(bnext), free(bucket), free(bits), free(row), free(st), free(rowl);
    p->n_pc = 0;
    p->pool_len = 0;
    return rc;
}

static int bfd_add(ds_packer *p, const tk_ids *ids, const uint8_t *loss) {
    uint32_t L = p->cfg->seq_len, bos = (uint32_t)p->cfg->bos_id, eos = (uint32_t)p->cfg->eos_id;
    uint64_t t = ids->len, n = t + n_bos(p) + n_eos(p);
    uint64_t npieces = (n + L - 1) / L;
    if (npieces <= 1) {
        p->acc->docs_whole++;
        p->acc->tok_whole += t;
    } else {
        p->acc->docs_chunked++;
        p->acc->tok_chunked += t;
    }
    p->acc->pieces += npieces;
    p->acc->eot += n_eos(p);
    p->acc->bos += n_bos(p);
    size_t off = p->pool_len;
    uint64_t nb = n_bos(p);
    if (pool_add(p, &bos, NULL, framed_loss(loss, 0, nb, t), nb) || pool_add(p, ids->ids, loss, 1, t) ||
        pool_add(p, &eos, NULL, framed_loss(loss, nb + t, nb, t), n_eos(p)))
        return DS_ERR_NOMEM;
    for (uint64_t k = 0; k < npieces; k++) {
        if (p->n_pc == p->cap_pc) {
            size_t nc = p->cap_pc ? 2 * p->cap_pc : 1024;
            ds_piece *np = realloc(p->pc, nc * sizeof *np);
            if (!np) return DS_ERR_NOMEM;
            p->pc = np;
            p->cap_pc = nc;
        }
        ds_piece *pc = &p->pc[p->n_pc];
        pc->off = (uint32_t)(off + k * L);
        pc->len = (uint32_t)(k + 1 < npieces ? L : n - k * L);
        pc->order = (uint32_t)p->n_pc;
        p->n_pc++;
    }
    if (p->pool_len >= p->cfg->bfd_window * (uint64_t)L) return bfd_flush(p);
    return 0;
}

/* --pack none; returns 1 when the document was dropped. */
static int none_add(ds_packer *p, const tk_ids *ids, const uint8_t *loss, int *dropped) {
    uint32_t L = p->cfg->seq_len, nb = n_bos(p), ne = n_eos(p);
    uint32_t bos = (uint32_t)p->cfg->bos_id, eos = (uint32_t)p->cfg->eos_id;
    uint64_t t = ids->len, n = t + nb + ne;
    uint32_t zero = 0;
    *dropped = 0;
    /* token i of the framed document */
#define FRAMED(i) ((i) < nb ? bos : (i)-nb < t ? ids->ids[(i)-nb] : eos)
    /* row + its loss mask (p->rowl, cfg->loss_bits) from framed tokens a .. a + len */
#define FILL_ROW(a, len)                                                                                               \
    do {                                                                                                               \
        for (uint64_t i_ = 0; i_ < (len); i_++) p->row[i_] = FRAMED((a) + i_);                                         \
        if (p->rowl)                                                                                                   \
            for (uint64_t i_ = 0; i_ < (len); i_++) p->rowl[i_] = framed_loss(loss, (a) + i_, nb, t);                  \
    } while (0)
    if (n <= L) {
        p->acc->docs_whole++;
        p->acc->tok_whole += t;
        p->acc->eot += ne;
        p->acc->bos += nb;
        if (!n) return 0; /* an empty document without framing: nothing to write */
        FILL_ROW(0, n);
        return emit(p, p->row, p->rowl, (uint32_t)n, &zero, 1);
    }
    switch (p->cfg->over_long) {
    case DS_OL_TRUNCATE: { /* the first L tokens of the framed document: the EOS is lost */
        uint64_t kept = t < L - nb ? t : L - nb;
        p->acc->docs_truncated++;
        p->acc->tok_trunc_kept += kept;
        p->acc->tok_trunc_lost += t - kept;
        p->acc->bos += nb;
        if (!nb && !p->rowl) return emit(p, ids->ids, NULL, L, &zero, 1);
        FILL_ROW(0, L);
        return emit(p, p->row, p->rowl, L, &zero, 1);
    }
    case DS_OL_DROP_TURNS: /* a conversation policy: the build fits conversations before packing; else drop */
    case DS_OL_DROP:
        p->acc->docs_dropped++;
        p->acc->tok_dropped += t;
        *dropped = 1;
        return 0;
    case DS_OL_CHUNK: {
        p->acc->docs_chunked++;
        p->acc->tok_chunked += t;
        p->acc->eot += ne;
        p->acc->bos += nb;
        uint64_t np = (n + L - 1) / L;
        p->acc->pieces += np;
        for (uint64_t k = 0; k < np; k++) {
            uint64_t a = k * L, len = k + 1 < np ? L : n - a;
            FILL_ROW(a, len);
            int rc = emit(p, p->row, p->rowl, (uint32_t)len, &zero, 1);
            if (rc) return rc;
        }
        return 0;
    }
    }
    return 0;
#undef FILL_ROW
#undef FRAMED
}

int ds_packer_init(ds_packer *p, const ds_build_config *cfg, ds_shard_writer *wr, ds_build_account *acc) {
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    p->wr = wr;
    p->acc = acc;
    p->row = malloc((size_t)cfg->seq_len * sizeof *p->row);
    p->st = malloc(((size_t)cfg->seq_len + 1) * sizeof *p->st);
    p->rowl = cfg->loss_bits ? malloc((size_t)cfg->seq_len) : NULL;
    return p->row && p->st && (p->rowl || !cfg->loss_bits) ? DS_OK : DS_ERR_NOMEM;
}

void ds_packer_free(ds_packer *p) {
    free(p->row);
    free(p->st);
    free(p->pool);
    free(p->pc);
    free(p->rowl);
    free(p->pooll);
    p->rowl = p->pooll = NULL;
    p->row = p->st = p->pool = NULL;
    p->pc = NULL;
}

void ds_packer_reset(ds_packer *p) {
    p->fill = p->n_st = 0;
    p->pool_len = p->n_pc = 0;
}

int ds_packer_add(ds_packer *p, const uint32_t *ids, size_t n, int *dropped) {
    return ds_packer_add_loss(p, ids, NULL, n, dropped);
}

int ds_packer_add_loss(ds_packer *p, const uint32_t *ids, const uint8_t *loss, size_t n, int *dropped) {
    tk_ids v = {.ids = (uint32_t *)ids, .len = n, .cap = n};
    *dropped = 0;
    if (loss && !p->cfg->loss_bits) {
        snprintf(p->wr->err, sizeof p->wr->err, "a loss mask needs a build with loss bits (version-2 shards)");
        return DS_ERR_ARG;
    }
    if (p->cfg->pack == DS_PACK_CONCAT) return concat_add(p, &v, loss);
    if (p->cfg->pack == DS_PACK_BFD) return bfd_add(p, &v, loss);
    return none_add(p, &v, loss, dropped);
}

int ds_packer_flush(ds_packer *p) {
    if (p->cfg->pack == DS_PACK_CONCAT) return concat_flush(p);
    if (p->cfg->pack == DS_PACK_BFD) return bfd_flush(p);
    return 0;
}
