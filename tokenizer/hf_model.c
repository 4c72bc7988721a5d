/* hf_model.c - the BPE model stage with HF's merge semantics: merge by
 * priority on bytes, from characters (chartab), SentencePiece-style words
 * on characters and ids, byte-level words with affixes / byte fallback / unk. */
#include "hf_internal.h"

/* ---- the BPE model with HF's merge semantics ------------------------------ */

/* The merge of symbols a and b, whose bytes are p[0..len): the token those
 * bytes spell (through the tiktoken engine's filtered maps, which answer
 * most non-tokens from cache) and then its merge. */
static inline bool pair_merge(const tk_tokenizer *t, const tk_hf *h, uint32_t a, uint32_t b, const uint8_t *p,
                              size_t len, uint32_t *midx, uint32_t *res) {
    if (len > t->max_token_len) return false;
    uint32_t r = tk_map_get(t, p, len);
    if (r == TK_NO_RANK) return false;
    const struct m1 *e = &h->m1[r];
    if (e->a == a && e->b == b) {
        *midx = e->midx;
        *res = r;
        return true;
    }
    if (e->b != M1_MULTI) return false;
    const mslot *m = merge_get(h, a, b);
    if (!m) return false;
    *midx = m->midx;
    *res = m->res;
    return true;
}

static inline bool hq_less(const hq_item *x, const hq_item *y) {
    return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

static void hq_push(hq_item *h, size_t *n, hq_item it) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!hq_less(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static hq_item hq_pop(hq_item *h, size_t *n) {
    hq_item top = h[0], last = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && hq_less(&h[c + 1], &h[c])) c++;
        if (!hq_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = last;
    return top;
}

static int bs_reserve(bpe_scratch *s, size_t n) {
    if (n <= s->cap) return TK_OK;
    size_t c = s->cap ? s->cap : 64;
    while (c < n) c *= 2;
    uint32_t *sym = realloc(s->sym, c * sizeof *sym);
    if (sym) s->sym = sym;
    int32_t *pv = realloc(s->prev, c * sizeof *pv);
    if (pv) s->prev = pv;
    int32_t *nx = realloc(s->next, c * sizeof *nx);
    if (nx) s->next = nx;
    uint8_t *g = realloc(s->gone, c);
    if (g) s->gone = g;
    if (!sym || !pv || !nx || !g) return TK_ERR_NOMEM;
    s->cap = c;
    return TK_OK;
}

static int hq_reserve(bpe_scratch *s, size_t n) {
    if (n <= s->hcap) return TK_OK;
    size_t c = s->hcap ? s->hcap : 64;
    while (c < n) c *= 2;
    hq_item *h = realloc(s->heap, c * sizeof *h);
    if (!h) return TK_ERR_NOMEM;
    s->heap = h;
    s->hcap = c;
    return TK_OK;
}

/* HF's Word::merge_all on the symbols sym[0..n) (ranks), appending the
 * ranks of the result to out. Same queue, same order (lowest merge rank,
 * then leftmost), same check of expired entries (the pair must still merge
 * into the entry's token). */
/* Short words: the same loop without a queue. An expired queue entry never
 * fires in HF's loop (the pair at its position can only have grown longer
 * than the entry's token), so the queue is exactly "lowest merge rank, then
 * leftmost", which this scan does directly. */
#define SMALL_WORD 48
/* The merge loop of merge_small on n parts: sym[i] the part's token, st[i]
 * its start in p (st[n]: the end), rk/rs[i] the priority / result of the
 * merge of parts i and i+1 (UINT32_MAX: none). */
static int merge_small_loop(const tk_tokenizer *t, const tk_hf *h, uint32_t *sym, uint32_t *rk, uint32_t *rs,
                            uint8_t *st, const uint8_t *p, size_t n, tk_ids *out) {
    while (n > 1) {
        size_t b = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rk[i] < rk[b]) b = i;
        if (rk[b] == UINT32_MAX) break;
        sym[b] = rs[b];
        for (size_t i = b + 1; i + 1 < n; i++) {
            sym[i] = sym[i + 1];
            rk[i] = rk[i + 1];
            rs[i] = rs[i + 1];
            st[i] = st[i + 1];
        }
        st[n - 1] = st[n];
        n--;
        if (b > 0 &&
            !pair_merge(t, h, sym[b - 1], sym[b], p + st[b - 1], st[b + 1] - st[b - 1], &rk[b - 1], &rs[b - 1]))
            rk[b - 1] = UINT32_MAX;
        if (b + 1 < n && !pair_merge(t, h, sym[b], sym[b + 1], p + st[b], st[b + 2] - st[b], &rk[b], &rs[b]))
            rk[b] = UINT32_MAX;
    }
    if (tk_ids_reserve(out, n)) return TK_ERR_NOMEM;
    memcpy(out->ids + out->len, sym, n * sizeof *sym);
    out->len += n;
    return TK_OK;
}

static int merge_small(const tk_tokenizer *t, const tk_hf *h, uint32_t *sym, const uint8_t *p, size_t n, tk_ids *out) {
    uint32_t rk[SMALL_WORD], rs[SMALL_WORD];
    uint8_t st[SMALL_WORD + 1]; /* start of each symbol in p */
    for (size_t i = 0; i <= n; i++) st[i] = (uint8_t)i;
    for (size_t i = 0; i + 1 < n; i++) {
        uint64_t m = h->pair1[(uint32_t)p[i] << 8 | p[i + 1]];
        rk[i] = (uint32_t)(m >> 32);
        rs[i] = (uint32_t)m;
    }
    return merge_small_loop(t, h, sym, rk, rs, st, p, n, out);
}

/* ---- merging from characters (bpe.c), with merge priorities in place of
 * ranks: the straddle minima come from every merge's result, a character's
 * own merges from the byte-pair merges and the merge of its two parts. */
typedef struct {
    const tk_tokenizer *t;
    const tk_hf *h;
} hf_pair;

static const char_slot *hf_char_slot(const void *ctx, tk_chartab *ct, uint32_t cp, const uint8_t *c, unsigned len) {
    const tk_tokenizer *t = ((const hf_pair *)ctx)->t;
    const tk_hf *h = ((const hf_pair *)ctx)->h;
    char_slot *e = tk_chartab_slot(ct, cp);
    if (!e || __atomic_load_n(&e->lim, __ATOMIC_ACQUIRE)) return e;
    uint32_t lim = ct->m->whole[cp] - 1, first = TK_NO_RANK, first_rank = TK_NO_RANK, whole = TK_NO_RANK,
             high = TK_NO_RANK;
    uint64_t ab = h->pair1[(uint32_t)c[0] << 8 | c[1]];
    if (len == 2) {
        if (ab != UINT64_MAX) first = whole = (uint32_t)ab, first_rank = high = (uint32_t)(ab >> 32);
    } else {
        uint64_t bc = h->pair1[(uint32_t)c[1] << 8 | c[2]];
        uint32_t pa = (uint32_t)(ab >> 32), pb = (uint32_t)(bc >> 32), m2, r2;
        uint32_t pv = (uint32_t)(ct->m->suf2[(c[1] & 63u) << 6 | (c[2] & 63u)] - 1),
                 pw = (uint32_t)(ct->m->pre2[(c[0] & 15u) << 6 | (c[1] & 63u)] - 1);
        if (pv < lim) lim = pv;
        if (pw < lim) lim = pw;
        if (ab != UINT64_MAX && pa <= pb) { /* bytes 0-1 first (distinct pairs have distinct priorities) */
            first = (uint32_t)ab, first_rank = pa;
            if (pair_merge(t, h, first, t->byte_rank[c[2]], c, 3, &m2, &r2)) whole = r2, high = m2 > pa ? m2 : pa;
        } else if (bc != UINT64_MAX) {
            first = (uint32_t)bc | CT_BC, first_rank = pb;
            if (pair_merge(t, h, t->byte_rank[c[0]], (uint32_t)bc, c, 3, &m2, &r2))
                whole = r2, high = m2 > pb ? m2 : pb;
        }
    }
    tk_char_slot_set(e, first, first_rank, whole, high, lim);
    return e;
}

static tk_chartab *hf_char_table(const tk_tokenizer *t, const tk_hf *h) {
    tk_chartab **slot = (tk_chartab **)&h->chartab, *ct = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (ct || t->n_ranks >= CT_BC) return ct;
    tk_charmin *cm = calloc(1, sizeof *cm);
    if (!cm) return NULL;
    /* every token a merge makes, at the lowest priority of those merges (in
     * rank order: the token bytes are read in sequence, not once per merge) */
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        const struct m1 *e = &h->m1[r];
        const uint8_t *b = t->arena + t->tok_off[r];
        size_t n = t->tok_off[r + 1] - t->tok_off[r], k = 0;
        if (e->a == M1_NONE || n < 2) continue;
        while (k < n && b[k] < 0x80) k++;
        if (k == n) continue;
        tk_charmin_note(cm, b, n, e->midx); /* its merge, or the lowest of several (m1_build) */
    }
    tk_chartab *mine = tk_chartab_new(cm, cm), *none = NULL;
    if (!mine) return NULL;
    if (__atomic_compare_exchange_n(slot, &none, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return mine;
    tk_chartab_free(mine); /* another thread was first */
    return none;
}

/* merge_small from characters; 1: the word starts from bytes. */
static int merge_small_chars(const tk_tokenizer *t, const tk_hf *h, uint32_t *sym, const uint8_t *p, size_t n,
                             tk_ids *out) {
    /* worth it for words of mostly multi-byte characters: one saves a merge
     * or two, less than working out the parts costs (an accent, curly quotes
     * or a dash around English words) */
    size_t k, leads = 0, ascii = 0;
    for (k = 0; k < n; k++) {
        leads += p[k] >= 0xC0;
        ascii += p[k] < 0x80;
    }
    if (leads < 2 || leads <= ascii) return 1;
    /* the table costs a pass over the vocabulary (2.5 ms for Llama 3): only
     * once the text shows it is multilingual, not for a few foreign words */
    tk_chartab *ct = __atomic_load_n(&h->chartab, __ATOMIC_ACQUIRE);
    if (!ct && __atomic_add_fetch((uint32_t *)&h->multi_words, 1, __ATOMIC_RELAXED) < 256) return 1;
    if (!ct) ct = hf_char_table(t, h);
    uint64_t start[4];
    uint32_t tok[SMALL_WORD + 1], rk[SMALL_WORD], rs[SMALL_WORD];
    uint8_t st[SMALL_WORD + 1];
    hf_pair ctx = {t, h};
    if (!ct || tk_char_parts(t, ct, hf_char_slot, &ctx, p, n, start, tok)) return 1;
    size_t m = 0;
    for (k = 0; k < n; k++)
        if (start[k >> 6] >> (k & 63) & 1) {
            st[m] = (uint8_t)k;
            sym[m++] = tok[k];
        }
    st[m] = (uint8_t)n;
    for (size_t i = 0; i + 1 < m; i++)
        if (!pair_merge(t, h, sym[i], sym[i + 1], p + st[i], (size_t)st[i + 2] - st[i], &rk[i], &rs[i]))
            rk[i] = UINT32_MAX;
    return merge_small_loop(t, h, sym, rk, rs, st, p, m, out);
}

static int merge_heap(const tk_hf *h, bpe_scratch *s, size_t n, tk_ids *out);

static int hf_merge(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n, tk_ids *out) {
    if (n > INT32_MAX) return TK_ERR_LIMIT;
    if (n <= SMALL_WORD) return merge_small(t, h, s->sym, p, n, out);
    return merge_heap(h, s, n, out);
}

/* The same loop on symbols that are ids (SentencePiece-style). */
static int hf_merge_ids(const tk_hf *h, bpe_scratch *s, size_t n, tk_ids *out) {
    if (n > INT32_MAX) return TK_ERR_LIMIT;
    if (n > SMALL_WORD) return merge_heap(h, s, n, out);
    uint32_t rk[SMALL_WORD], rs[SMALL_WORD], *sym = s->sym;
    for (size_t i = 0; i + 1 < n; i++) {
        const mslot *m = merge_get(h, sym[i], sym[i + 1]);
        rk[i] = m ? m->midx : UINT32_MAX;
        rs[i] = m ? m->res : 0;
    }
    while (n > 1) {
        size_t b = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rk[i] < rk[b]) b = i;
        if (rk[b] == UINT32_MAX) break;
        sym[b] = rs[b];
        for (size_t i = b + 1; i + 1 < n; i++) {
            sym[i] = sym[i + 1];
            rk[i] = rk[i + 1];
            rs[i] = rs[i + 1];
        }
        n--;
        for (size_t i = b ? b - 1 : 0; i <= b && i + 1 < n; i++) {
            const mslot *m = merge_get(h, sym[i], sym[i + 1]);
            rk[i] = m ? m->midx : UINT32_MAX;
            rs[i] = m ? m->res : 0;
        }
    }
    if (tk_ids_reserve(out, n)) return TK_ERR_NOMEM;
    memcpy(out->ids + out->len, sym, n * sizeof *sym);
    out->len += n;
    return TK_OK;
}

static int merge_heap(const tk_hf *h, bpe_scratch *s, size_t n, tk_ids *out) {
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        s->gone[i] = 0;
    }
    int rc;
    if ((rc = hq_reserve(s, n))) return rc;
    for (size_t i = 0; i + 1 < n; i++) {
        const mslot *m = merge_get(h, s->sym[i], s->sym[i + 1]);
        if (m) hq_push(s->heap, &hn, (hq_item){m->midx, (uint32_t)i, m->res});
    }
    while (hn) {
        hq_item top = hq_pop(s->heap, &hn);
        uint32_t p = top.pos;
        if (s->gone[p] || s->next[p] < 0) continue;
        uint32_t q = (uint32_t)s->next[p];
        const mslot *m = merge_get(h, s->sym[p], s->sym[q]);
        if (!m || m->res != top.res) continue;
        s->sym[p] = top.res;
        s->gone[q] = 1;
        s->next[p] = s->next[q];
        if (s->next[q] >= 0) s->prev[s->next[q]] = (int32_t)p;
        /* at most two pushes per merge, n - 1 merges: the heap never outgrows 3n */
        if (hn + 2 > s->hcap && (rc = hq_reserve(s, hn + 2))) return rc;
        if (s->prev[p] >= 0) {
            const mslot *m2 = merge_get(h, s->sym[s->prev[p]], s->sym[p]);
            if (m2) hq_push(s->heap, &hn, (hq_item){m2->midx, (uint32_t)s->prev[p], m2->res});
        }
        if (s->next[p] >= 0) {
            const mslot *m2 = merge_get(h, s->sym[p], s->sym[s->next[p]]);
            if (m2) hq_push(s->heap, &hn, (hq_item){m2->midx, p, m2->res});
        }
    }
    size_t cnt = 0;
    for (int32_t i = 0; i >= 0; i = s->next[i]) cnt++;
    if (tk_ids_reserve(out, cnt)) return TK_ERR_NOMEM;
    for (int32_t i = 0; i >= 0; i = s->next[i]) out->ids[out->len++] = s->sym[i];
    return TK_OK;
}

/* A byte-level piece through HF's BPE: ranks appended to out. */
int tk_hf_bpe_bytes(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n, tk_ids *out) {
    if (h->ignore_merges && n <= t->max_token_len) {
        uint32_t r = tk_map_get(t, p, n);
        if (r != TK_NO_RANK) {
            if (tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
            out->ids[out->len++] = r;
            return TK_OK;
        }
    }
    if (n == 1) {
        if (tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
        out->ids[out->len++] = t->byte_rank[p[0]];
        return TK_OK;
    }
    int rc;
    if ((rc = bs_reserve(s, n))) return rc;
    if (n <= SMALL_WORD && n > 2 && (rc = merge_small_chars(t, h, s->sym, p, n, out)) <= 0) return rc;
    for (size_t i = 0; i < n; i++) s->sym[i] = t->byte_rank[p[i]];
    return hf_merge(t, h, s, p, n, out);
}

/* A SentencePiece-style word (HF BPE::merge_word): characters looked up in
 * the vocabulary; a character that is not there becomes its <0xNN> byte
 * tokens (byte_fallback, when all exist), else unk (runs fused with
 * fuse_unk), else it is dropped, as HF does; then the merges. Ids out. */
int tk_hf_sp_word(const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n, tk_ids *out) {
    int rc;
    if (h->ignore_merges) {
        int e = tk_hfj_lookup(&h->voc, (const char *)p, n);
        if (e >= 0) {
            if (tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
            out->ids[out->len++] = h->voc.vid[e];
            return TK_OK;
        }
    }
    bool affix = h->prefix_len || h->suffix_len;
    /* a character can fall back to the bytes of its prefix + character + suffix */
    if ((rc = bs_reserve(s, affix ? n * (1 + h->prefix_len + h->suffix_len) + 1 : n + 1))) return rc;
    size_t ns = 0;
    bool have_unk = false;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t l = u8_len(p, n, i, &cp);
        if (affix) { /* HF's merge_word: prefix unless first, suffix if last */
            uint8_t w[2 * HF_AFFIX_MAX + 4];
            size_t wl = 0;
            if (i > 0) memcpy(w, h->prefix, h->prefix_len), wl = h->prefix_len;
            memcpy(w + wl, p + i, l);
            wl += l;
            if (i + l == n) memcpy(w + wl, h->suffix, h->suffix_len), wl += h->suffix_len;
            int e = cp >= 0 ? tk_hfj_lookup(&h->voc, (const char *)w, wl) : -1;
            bool all = e < 0;
            for (size_t k = 0; k < wl && all; k++) all = h->byte_id[w[k]] != TK_NO_RANK;
            if (e >= 0 || all) {
                if (have_unk) s->sym[ns++] = h->unk;
                have_unk = false;
                if (e >= 0) s->sym[ns++] = h->voc.vid[e];
                else
                    for (size_t k = 0; k < wl; k++) s->sym[ns++] = h->byte_id[w[k]];
            } else if (h->unk != TK_NO_RANK) {
                if (have_unk && !h->fuse_unk) s->sym[ns++] = h->unk;
                have_unk = true;
            }
            i += l;
            continue;
        }
        int e = cp >= 0 ? tk_hfj_lookup(&h->voc, (const char *)p + i, l) : -1;
        if (e >= 0) {
            if (have_unk) s->sym[ns++] = h->unk;
            have_unk = false;
            s->sym[ns++] = h->voc.vid[e];
            i += l;
            continue;
        }
        bool all = true;
        for (size_t k = 0; k < l && all; k++) all = h->byte_id[p[i + k]] != TK_NO_RANK;
        if (all) {
            if (have_unk) s->sym[ns++] = h->unk;
            have_unk = false;
            for (size_t k = 0; k < l; k++) s->sym[ns++] = h->byte_id[p[i + k]];
            i += l;
            continue;
        }
        if (h->unk != TK_NO_RANK) {
            if (have_unk && !h->fuse_unk) s->sym[ns++] = h->unk;
            have_unk = true;
        }
        i += l;
    }
    if (have_unk) s->sym[ns++] = h->unk;
    if (!ns) return TK_OK;
    return hf_merge_ids(h, s, ns, out);
}

/* ---- byte-level words HF's way, character by character ------------------- */

/* A symbol of bl_word: a rank, or BL_ID | id for a model.vocab entry that is
 * no mergeable token (an added token's entry: never part of a merge), or
 * BL_NONE: the vocabulary has no such entry. */

/* HF's BPE::merge_word on a byte-level word whose characters are not all
 * single-byte tokens, or with a continuing_subword_prefix /
 * end_of_word_suffix: each character (one byte) with its affixes is looked
 * up; one that is not in the vocabulary becomes the <0xNN> tokens of its
 * UTF-8 bytes (byte_fallback, when all exist), else unk (runs fused with
 * fuse_unk), else it is dropped and its neighbours meet. Then the merges by
 * the symbols' ids (hf_merge_ids). Ids out. */
int tk_hf_bl_word(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n, tk_ids *out) {
    size_t from = out->len;
    if (h->ignore_merges && n <= t->max_token_len) {
        uint32_t r = tk_map_get(t, p, n);
        if (r != TK_NO_RANK) {
            if (tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
            out->ids[out->len++] = t->rank_to_id ? t->rank_to_id[r] : r;
            return TK_OK;
        }
    }
    /* a character can fall back to the bytes of prefix + character (2) + suffix */
    int rc;
    if ((rc = bs_reserve(s, n * (2 + h->prefix_len + h->suffix_len) + 1))) return rc;
    size_t ns = 0;
    bool have_unk = false;
    for (size_t i = 0; i < n; i++) {
        uint32_t sym = h->bsym[(i > 0) | (i + 1 == n) << 1][p[i]];
        if (sym == BL_NONE && h->bl_byte_fallback) {
            uint8_t w[2 * HF_AFFIX_MAX + 2];
            size_t wl = 0;
            if (i > 0) memcpy(w, h->prefix, h->prefix_len), wl = h->prefix_len;
            uint32_t cp = tk_byte_to_cp(p[i]);
            if (cp < 0x80) w[wl++] = (uint8_t)cp;
            else w[wl++] = (uint8_t)(0xC0 | cp >> 6), w[wl++] = (uint8_t)(0x80 | (cp & 63));
            if (i + 1 == n) memcpy(w + wl, h->suffix, h->suffix_len), wl += h->suffix_len;
            bool all = true;
            for (size_t k = 0; k < wl && all; k++) all = h->fb_sym[w[k]] != BL_NONE;
            if (all) {
                if (have_unk) s->sym[ns++] = h->unk_sym;
                have_unk = false;
                for (size_t k = 0; k < wl; k++) s->sym[ns++] = h->fb_sym[w[k]];
                continue;
            }
        }
        if (sym != BL_NONE) {
            if (have_unk) s->sym[ns++] = h->unk_sym;
            have_unk = false;
            s->sym[ns++] = sym;
        } else if (h->unk_sym != BL_NONE) {
            if (have_unk && !h->fuse_unk) s->sym[ns++] = h->unk_sym;
            have_unk = true;
        }
    }
    if (have_unk) s->sym[ns++] = h->unk_sym;
    if (!ns) return TK_OK;
    /* BL_ID symbols match no merge (merge keys are ranks < 2^24) */
    if ((rc = hf_merge_ids(h, s, ns, out))) return rc;
    for (size_t k = from; k < out->len; k++) {
        uint32_t x = out->ids[k];
        out->ids[k] = x & BL_ID ? x & ~BL_ID : t->rank_to_id ? t->rank_to_id[x] : x;
    }
    return TK_OK;
}

/* HF's merge loop on a token's own bytes: 1 if it yields that token. */
int tk_hf_reaches(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, uint32_t r, tk_ids *tmp) {
    const uint8_t *p = t->arena + t->tok_off[r];
    size_t n = t->tok_off[r + 1] - t->tok_off[r];
    tmp->len = 0;
    if (n < 2) return 1;
    int rc;
    if ((rc = bs_reserve(s, n))) return rc;
    for (size_t i = 0; i < n; i++) s->sym[i] = t->byte_rank[p[i]];
    if ((rc = hf_merge(t, h, s, p, n, tmp))) return rc;
    return tmp->len == 1 && tmp->ids[0] == r;
}
