/* hf.c - the HF tokenizer.json pipeline: normalizers, pre-tokenizers, the BPE
 * model with HF's merge semantics, and added tokens.
 *
 * A tokenizer.json whose pipeline is exactly what the tiktoken engine does
 * (no normalizer; Split with the gpt2/cl100k/o200k regex + ByteLevel, or
 * ByteLevel with its own regex; merges proven equivalent to merge-by-rank;
 * no non-special added tokens) is encoded by the fast path and gets no
 * tk_hf at all. Every other supported pipeline is run here, component by
 * component, with HF's semantics (docs/tokenizer.md has the table). Anything
 * else is refused at load, naming the JSON path and the component.
 */
#include "normalize.h"
#include "tk_engine.h"

#include <jansson.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

size_t tk_pretok_next(tk_pattern pat, const uint8_t *s, size_t n, size_t i);

/* This engine's state of t (tk_engine.h). */
#define HF_OF(t) ((tk_hf *)(t)->engine_state)

enum { NM_NFC, NM_NFD, NM_NFKC, NM_NFKD, NM_LOWER, NM_STRIP, NM_REPLACE, NM_PREPEND, NM_PRECOMPILED };
enum { PT_SPLIT, PT_BYTELEVEL, PT_DIGITS, PT_PUNCT, PT_WSSPLIT, PT_METASPACE };
enum { B_REMOVED, B_ISOLATED, B_MERGED_PREV, B_MERGED_NEXT, B_CONTIGUOUS };
enum { MS_ALWAYS, MS_FIRST, MS_NEVER };

#define HF_MAX_STEPS 32

typedef struct {
    int kind;
    bool left, right; /* Strip */
    uint8_t *a, *b;   /* Replace: content (b); Prepend: a */
    size_t alen, blen;
    tk_regex *re; /* Replace pattern */
} nm_step;

typedef struct {
    int kind;
    int beh;
    bool invert;
    tk_regex *re;                 /* Split (regex engine) */
    tk_pattern fast;              /* Split whose regex is a built-in scanner's */
    bool prefix_space, use_regex; /* ByteLevel */
    uint8_t repl[8];              /* Metaspace replacement (UTF-8) */
    size_t repl_len;
    int scheme;
    bool split;
    bool individual; /* Digits */
} pt_step;

typedef struct {
    uint8_t *text; /* content (normalized content for normalized tokens) */
    size_t len;
    uint32_t id;
    bool special, normalized;
    bool lstrip, rstrip; /* the match takes the whitespace before / after it */
    bool single_word;    /* a match counts only between non-word characters (else it is skipped) */
} hf_added;

typedef struct {
    uint64_t key;       /* ((a << 32) | b) + 1; 0 = empty */
    uint32_t midx, res; /* merge priority, result rank */
} mslot;

#define HF_AFFIX_MAX 64 /* bytes of continuing_subword_prefix / end_of_word_suffix */
struct tk_hf {
    nm_step nm[HF_MAX_STEPS];
    size_t n_nm;
    pt_step pt[HF_MAX_STEPS];
    size_t n_pt;
    bool fast_bpe; /* tk_bpe_piece gives HF's ids */
    bool ignore_merges;
    mslot *merges;
    uint64_t mmask;
    uint64_t *pair1; /* 65536: merge of the byte pair (b1, b2): midx << 32 | res, UINT64_MAX if none */
    struct m1 {
        uint32_t a, b, midx;
    } * m1;               /* per result rank: its only merge; a = NONE: none, b = MULTI: several
                                             * (midx: then the lowest of their priorities) */
    tk_chartab *chartab;  /* merging from characters (bpe.c), by merge priority; built on first use */
    uint32_t multi_words; /* words of multi-byte characters seen before the chartab is built */
    hf_added *added;
    size_t n_added;
    /* SentencePiece-style BPE: the model works on characters and ids */
    bool sp;
    tk_hfj voc;            /* vocabulary strings -> entries (own copy) */
    uint32_t byte_id[256]; /* id of <0xNN>, TK_NO_RANK if none or no byte_fallback */
    uint32_t unk;          /* unk_token id, TK_NO_RANK if none */
    bool fuse_unk;
    /* model.continuing_subword_prefix / end_of_word_suffix (as written in
     * the vocabulary): put before every character but a word's first /
     * after its last */
    uint8_t prefix[HF_AFFIX_MAX], suffix[HF_AFFIX_MAX];
    size_t prefix_len, suffix_len;
    /* Byte-level words that merge_small and merging from characters cannot
     * take (bl_word): a byte without a single-byte token, or an affix. */
    bool bl_general;       /* every word goes to bl_word (an affix) */
    uint8_t bl_odd[32];    /* bitmap: bytes whose character is no mergeable token */
    bool bl_byte_fallback; /* model.byte_fallback */
    bool bl_plain;         /* the model is merge-by-rank's: no affix, no odd byte, no raw entry */
    uint32_t bsym[4][256]; /* symbol of a byte's character [1: not first | 2: last] (BL_*) */
    uint32_t fb_sym[256];  /* symbol of <0xNN> (byte_fallback), BL_NONE if none */
    uint32_t unk_sym;      /* symbol of unk_token, BL_NONE if none */
    struct dec_step {
        int kind;
        uint8_t *a, *b;
        size_t alen, blen;
        uint32_t start, stop;
        int scheme;
        tk_regex *re; /* Replace with a {"Regex": ...} pattern */
    } dec[HF_MAX_STEPS];
    size_t n_dec;
    uint8_t first_byte[32]; /* bitmap of the first bytes of added tokens */
};

/* ---- small helpers ------------------------------------------------------ */

static inline size_t u8_len(const uint8_t *s, size_t n, size_t i, int32_t *cp) {
    utf8proc_int32_t c;
    utf8proc_ssize_t l = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i > 4 ? 4 : n - i), &c);
    if (l <= 0) {
        *cp = -1;
        return 1;
    }
    *cp = c;
    return (size_t)l;
}

static int hexd(uint8_t c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; }

static bool is_ws(int32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

static bool is_numeric(int32_t cp) { /* Rust char::is_numeric: Nd, Nl, No */
    if (cp < 0) return false;
    int c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

static bool is_punct(int32_t cp) { /* ASCII punctuation or Unicode P* */
    if (cp < 0) return false;
    if (cp < 128)
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
               (cp >= 0x7B && cp <= 0x7E);
    int c = utf8proc_category(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

static int bput(tk_bytes *b, const void *p, size_t n) { return n ? tk_bytes_append(b, p, n) : TK_OK; }

/* ---- normalizers ---------------------------------------------------------- */

static int nm_lower(const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] < 0x80) j++;
        if (j > i) {
            size_t o = out->len;
            int rc = tk_bytes_put_capped(out, s + i, j - i, cap);
            if (rc) return rc;
            for (size_t k = o; k < out->len; k++)
                if (out->data[k] >= 'A' && out->data[k] <= 'Z') out->data[k] += 32;
            i = j;
            if (i >= n) break;
        }
        int32_t cp;
        size_t l = u8_len(s, n, i, &cp);
        int rc;
        if (cp < 0) {
            rc = tk_bytes_put_capped(out, s + i, 1, cap);
        } else if (cp == 0x130) { /* Rust: U+0130 -> i + U+0307 */
            rc = tk_bytes_put_capped(out, "i\xCC\x87", 3, cap);
        } else {
            uint8_t buf[4];
            utf8proc_ssize_t bl = utf8proc_encode_char(utf8proc_tolower(cp), buf);
            rc = tk_bytes_put_capped(out, buf, (size_t)bl, cap);
        }
        if (rc) return rc;
        i += l;
    }
    return TK_OK;
}

typedef struct {
    const uint8_t *s;
    tk_bytes *out;
    size_t pos;
    const uint8_t *rep;
    size_t rep_len;
    size_t cap; /* the step's output bound */
} repl_ctx;

static int repl_cb(void *u, size_t a, size_t b) {
    repl_ctx *c = u;
    int rc;
    if ((rc = tk_bytes_put_capped(c->out, c->s + c->pos, a - c->pos, c->cap))) return rc;
    if ((rc = tk_bytes_put_capped(c->out, c->rep, c->rep_len, c->cap))) return rc;
    c->pos = b;
    return TK_OK;
}

/* One normalizer step: s[0..n) into out, at most cap bytes (tk_expand_cap). */
static int nm_apply(const nm_step *st, const uint8_t *s, size_t n, tk_bytes *out, size_t cap, tk_re_budget *budget) {
    switch (st->kind) {
    case NM_NFC:
    case NM_NFD:
    case NM_NFKC:
    case NM_NFKD: return tk_nm_unicode(TK_NF_C + (st->kind - NM_NFC), s, n, out, cap); /* normalize.c */
    case NM_LOWER: return nm_lower(s, n, out, cap);
    case NM_STRIP: {
        size_t a = 0, b = n;
        if (st->left)
            while (a < b) {
                int32_t cp;
                size_t l = u8_len(s, n, a, &cp);
                if (!is_ws(cp)) break;
                a += l;
            }
        if (st->right)
            while (b > a) {
                size_t k = b - 1;
                while (k > a && (s[k] & 0xC0) == 0x80 && b - k < 4) k--;
                int32_t cp;
                size_t l = u8_len(s, b, k, &cp);
                if (k + l != b || !is_ws(cp)) break;
                b = k;
            }
        return tk_bytes_put_capped(out, s + a, b - a, cap);
    }
    case NM_REPLACE: {
        repl_ctx c = {s, out, 0, st->b, st->blen, cap};
        int rc = tk_regex_find_all(st->re, s, n, budget, repl_cb, &c);
        if (rc) return rc;
        return tk_bytes_put_capped(out, s + c.pos, n - c.pos, cap);
    }
    case NM_PRECOMPILED: return tk_spm_precompiled_hf(st->a, st->alen, s, n, out, cap); /* normalize.c */
    case NM_PREPEND: {
        if (!n) return TK_OK;
        int rc = tk_bytes_put_capped(out, st->a, st->alen, cap);
        return rc ? rc : tk_bytes_put_capped(out, s, n, cap);
    }
    }
    return TK_ERR_ARG;
}

/* Normalize s into *res (points into buf a or b, or at s when no steps).
 * Every step writes at most tk_expand_cap(its input, n) bytes: a chain of 32
 * steps cannot multiply the text 16^32 times. Regex steps pay from budget. */
static int normalize(const tk_hf *h, const uint8_t *s, size_t n, tk_bytes *a, tk_bytes *b, const uint8_t **res,
                     size_t *rn, tk_re_budget *budget) {
    const uint8_t *cur = s;
    size_t cn = n;
    tk_bytes *bufs[2] = {a, b};
    for (size_t k = 0; k < h->n_nm; k++) {
        tk_bytes *o = bufs[k & 1];
        o->len = 0;
        int rc = nm_apply(&h->nm[k], cur, cn, o, tk_expand_cap(cn, n), budget);
        if (rc) return rc;
        cur = o->data ? o->data : (const uint8_t *)"";
        cn = o->len;
    }
    *res = cur;
    *rn = cn;
    return TK_OK;
}

/* ---- the BPE model with HF's merge semantics ------------------------------ */

static inline const mslot *merge_get(const tk_hf *h, uint32_t a, uint32_t b) {
    uint64_t key = (((uint64_t)a << 32) | b) + 1;
    uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & h->mmask;
    for (;;) {
        const mslot *s = &h->merges[i];
        if (!s->key) return NULL;
        if (s->key == key) return s;
        i = (i + 1) & h->mmask;
    }
}

#define M1_NONE UINT32_MAX
#define M1_MULTI (UINT32_MAX - 1)

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

typedef struct {
    uint32_t rank, pos, res;
} hq_item;

typedef struct {
    uint32_t *sym; /* rank of each symbol */
    int32_t *prev, *next;
    uint8_t *gone;
    hq_item *heap;
    size_t cap, hcap;
} bpe_scratch;

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
static int hf_bpe_bytes(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n,
                        tk_ids *out) {
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
static int sp_word(const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n, tk_ids *out) {
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
#define BL_ID 0x80000000u
#define BL_NONE UINT32_MAX

/* HF's BPE::merge_word on a byte-level word whose characters are not all
 * single-byte tokens, or with a continuing_subword_prefix /
 * end_of_word_suffix: each character (one byte) with its affixes is looked
 * up; one that is not in the vocabulary becomes the <0xNN> tokens of its
 * UTF-8 bytes (byte_fallback, when all exist), else unk (runs fused with
 * fuse_unk), else it is dropped and its neighbours meet. Then the merges by
 * the symbols' ids (hf_merge_ids). Ids out. */
static int bl_word(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n, tk_ids *out) {
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

/* Does the byte-level word p[0..n) need bl_word? */
static inline bool bl_needs_word(const tk_hf *h, const uint8_t *p, size_t n) {
    if (h->bl_general) return true;
    if (h->bl_plain) return false;
    for (size_t i = 0; i < n; i++)
        if (h->bl_odd[p[i] >> 3] >> (p[i] & 7) & 1) return true;
    return false;
}

/* ---- added tokens --------------------------------------------------------- */

/* Leftmost-longest match of an active added token in s[i..n); returns its
 * index or -1, with its start in *at. */
typedef struct {
    const char *const *allowed;
    size_t n_allowed;
    bool all;
    bool any; /* some added token is active */
} active_set;

static bool active(const hf_added *a, const active_set *as) {
    if (!a->special || as->all) return true;
    for (size_t k = 0; k < as->n_allowed; k++)
        if (strlen(as->allowed[k]) == a->len && memcmp(as->allowed[k], a->text, a->len) == 0) return true;
    return false;
}

/* Rust regex's Unicode \w (HF's single_word test): Alphabetic (letters, Nl,
 * Other_Alphabetic: marks and the circled / squared Latin letters), M, Nd,
 * Pc, Join_Control. Invalid UTF-8 (cp < 0): not a word character. */
static bool is_word(int32_t cp) {
    if (cp < 0) return false;
    if (cp < 128) return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_';
    if (cp == 0x200C || cp == 0x200D || (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
        (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189))
        return true;
    int c = utf8proc_category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_MN && c <= UTF8PROC_CATEGORY_ME) || c == UTF8PROC_CATEGORY_ND ||
           c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_PC;
}

/* The character that ends at s[i] (i > 0): its code point, -1 if invalid. */
static int32_t char_before(const uint8_t *s, size_t i) {
    size_t k = i - 1;
    while (k > 0 && (s[k] & 0xC0) == 0x80 && i - k < 4) k--;
    int32_t cp;
    size_t l = u8_len(s, i, k, &cp);
    return k + l == i ? cp : -1;
}

static long find_added(const tk_hf *h, const uint8_t *s, size_t n, size_t i, bool normalized, const active_set *as,
                       size_t *at, size_t *end) {
    if (!as->any) return -1;
    size_t from = i;
    for (; i < n; i++) {
        if (!(h->first_byte[s[i] >> 3] >> (s[i] & 7) & 1)) continue;
        long best = -1;
        size_t blen = 0;
        for (size_t k = 0; k < h->n_added; k++) {
            const hf_added *a = &h->added[k];
            if (a->normalized != normalized || a->len > n - i || a->len <= blen) continue;
            if (a->text[0] != s[i] || memcmp(a->text, s + i, a->len) != 0 || !active(a, as)) continue;
            best = (long)k;
            blen = a->len;
        }
        if (best >= 0) {
            const hf_added *a = &h->added[best];
            size_t st = i, e = i + a->len;
            if (a->single_word) { /* HF: a match inside a word is dropped, and its text is not searched again */
                int32_t cp = -1;
                bool before = st == 0 || !is_word(char_before(s, st));
                bool after = e == n || (u8_len(s, n, e, &cp), !is_word(cp));
                if (!before || !after) {
                    i = e - 1;
                    continue;
                }
            }
            if (a->lstrip) /* back over whitespace, not into the text before from */
                while (st > from) {
                    size_t k = st - 1;
                    while (k > from && (s[k] & 0xC0) == 0x80 && st - k < 4) k--;
                    int32_t cp;
                    size_t l = u8_len(s, st, k, &cp);
                    if (k + l != st || !is_ws(cp)) break;
                    st = k;
                }
            if (a->rstrip)
                while (e < n) {
                    int32_t cp;
                    size_t l = u8_len(s, n, e, &cp);
                    if (!is_ws(cp)) break;
                    e += l;
                }
            *at = st;
            *end = e;
            return best;
        }
    }
    return -1;
}

/* ---- pre-tokenizers and the whole encode ---------------------------------- */

typedef struct {
    size_t a, b;
    bool m;
} span;

typedef struct {
    span *v;
    size_t n, cap;
} spanv;

/* Pieces repeat: a direct-mapped cache of piece -> ids (HF keeps one too). */
#define WC_SLOTS 8192
#define WC_KEY 30
#define WC_IDS 8
typedef struct {
    uint8_t key[WC_KEY];
    uint8_t len, n; /* len 0: empty */
    uint32_t ids[WC_IDS];
} wc_slot;

typedef struct {
    const tk_tokenizer *t;
    const tk_hf *h;
    tk_ids *out;
    uint64_t serial; /* the tokenizer the cache belongs to */
    wc_slot *wc;
    bpe_scratch bs;
    tk_bytes nbuf[2];
    tk_bytes mod[HF_MAX_STEPS];
    spanv sp[HF_MAX_STEPS];
    tk_re_budget budget; /* the document's regex work (tk_hf_encode sets it) */
} hf_ctx;

static int sv_push(spanv *v, size_t a, size_t b, bool m) {
    if (v->n == v->cap) {
        size_t c = v->cap ? v->cap * 2 : 64;
        span *q = realloc(v->v, c * sizeof *q);
        if (!q) return TK_ERR_NOMEM;
        v->v = q;
        v->cap = c;
    }
    v->v[v->n++] = (span){a, b, m};
    return TK_OK;
}

typedef struct {
    spanv *v;
    size_t prev;
} match_ctx;

static int match_cb(void *u, size_t a, size_t b) {
    match_ctx *c = u;
    int rc;
    if (c->prev != a && (rc = sv_push(c->v, c->prev, a, false))) return rc;
    if ((rc = sv_push(c->v, a, b, true))) return rc;
    c->prev = b;
    return TK_OK;
}

/* (offsets, is_match) of a char predicate: each matching char is a match */
static int char_matches(spanv *v, const uint8_t *s, size_t n, bool (*pred)(int32_t), const uint8_t *ch, size_t chl) {
    size_t prev = 0, i = 0;
    int rc;
    while (i < n) {
        int32_t cp;
        size_t l = u8_len(s, n, i, &cp);
        bool m = pred ? pred(cp) : (l == chl && memcmp(s + i, ch, chl) == 0 && cp >= 0);
        if (m) {
            if (prev < i && (rc = sv_push(v, prev, i, false))) return rc;
            if ((rc = sv_push(v, i, i + l, true))) return rc;
            prev = i + l;
        }
        i += l;
    }
    if (prev < n && (rc = sv_push(v, prev, n, false))) return rc;
    return TK_OK;
}

/* HF NormalizedString::split: fold (offsets, is_match) by the behavior; the
 * result's m flag means "remove". */
static void fold(spanv *v, int beh, bool invert) {
    if (invert)
        for (size_t k = 0; k < v->n; k++) v->v[k].m = !v->v[k].m;
    size_t o = 0;
    bool prev_match = false;
    switch (beh) {
    case B_ISOLATED:
        for (size_t k = 0; k < v->n; k++) v->v[k].m = false;
        return;
    case B_REMOVED: return;
    case B_CONTIGUOUS:
        for (size_t k = 0; k < v->n; k++) {
            span s = v->v[k];
            if (s.m == prev_match && o) v->v[o - 1].b = s.b;
            else v->v[o++] = (span){s.a, s.b, false};
            prev_match = s.m;
        }
        break;
    case B_MERGED_PREV:
        for (size_t k = 0; k < v->n; k++) {
            span s = v->v[k];
            if (s.m && !prev_match && o) v->v[o - 1].b = s.b;
            else v->v[o++] = (span){s.a, s.b, false};
            prev_match = s.m;
        }
        break;
    case B_MERGED_NEXT: {
        /* right to left, building from the end */
        size_t w = v->n;
        for (size_t k = v->n; k-- > 0;) {
            span s = v->v[k];
            if (s.m && !prev_match && w < v->n) v->v[w].a = s.a;
            else v->v[--w] = (span){s.a, s.b, false};
            prev_match = s.m;
        }
        memmove(v->v, v->v + w, (v->n - w) * sizeof *v->v);
        o = v->n - w;
        break;
    }
    }
    v->n = o;
}

static int run_pre(hf_ctx *c, size_t k, const uint8_t *p, size_t n, bool at_start);

static int model(hf_ctx *c, const uint8_t *p, size_t n) {
    const tk_tokenizer *t = c->t;
    tk_ids *out = c->out;
    size_t from = out->len;
    int rc;
    wc_slot *w = NULL;
    if (c->wc && n <= WC_KEY) {
        w = &c->wc[tk_hash_bytes(p, n) & (WC_SLOTS - 1)];
        if (w->len == n && memcmp(w->key, p, n) == 0) {
            if (!w->n) return TK_OK;
            if (tk_ids_reserve(out, w->n)) return TK_ERR_NOMEM;
            memcpy(out->ids + out->len, w->ids, w->n * sizeof *w->ids);
            out->len += w->n;
            return TK_OK;
        }
    }
    bool ids = c->h->sp || (!c->h->fast_bpe && bl_needs_word(c->h, p, n));
    if (c->h->sp) rc = sp_word(c->h, &c->bs, p, n, out);
    else if (ids) rc = bl_word(t, c->h, &c->bs, p, n, out);
    else if (c->h->fast_bpe) rc = tk_bpe_piece(t, p, n, TK_NO_RANK, out);
    else rc = hf_bpe_bytes(t, c->h, &c->bs, p, n, out);
    if (rc) return rc;
    if (t->rank_to_id && !ids)
        for (size_t k = from; k < out->len; k++) out->ids[k] = t->rank_to_id[out->ids[k]];
    if (w && out->len - from <= WC_IDS) {
        memcpy(w->key, p, n);
        w->len = (uint8_t)n;
        w->n = (uint8_t)(out->len - from);
        if (w->n) memcpy(w->ids, out->ids + from, w->n * sizeof *w->ids);
    }
    return TK_OK;
}

/* Hand the pieces in c->sp[k] (spans of p) to step k + 1. */
static int emit_spans(hf_ctx *c, size_t k, const uint8_t *p, bool at_start) {
    spanv *v = &c->sp[k];
    for (size_t j = 0; j < v->n; j++) {
        span s = v->v[j];
        if (s.m || s.a == s.b) continue;
        int rc = run_pre(c, k + 1, p + s.a, s.b - s.a, at_start && s.a == 0);
        if (rc) return rc;
    }
    return TK_OK;
}

static int run_pre(hf_ctx *c, size_t k, const uint8_t *p, size_t n, bool at_start) {
    if (!n) return TK_OK;
    if (k == c->h->n_pt) return model(c, p, n);
    const pt_step *st = &c->h->pt[k];
    spanv *v = &c->sp[k];
    int rc;
    switch (st->kind) {
    case PT_SPLIT:
        if (st->fast != TK_PAT_NONE && st->beh == B_ISOLATED && !st->invert) {
            for (size_t i = 0; i < n;) {
                size_t e = tk_pretok_next(st->fast, p, n, i);
                if ((rc = run_pre(c, k + 1, p + i, e - i, at_start && i == 0))) return rc;
                i = e;
            }
            return TK_OK;
        }
        v->n = 0;
        if (st->fast != TK_PAT_NONE) {
            for (size_t i = 0; i < n;) {
                size_t e = tk_pretok_next(st->fast, p, n, i);
                if ((rc = sv_push(v, i, e, true))) return rc;
                i = e;
            }
        } else {
            match_ctx mc = {v, 0};
            if ((rc = tk_regex_find_all(st->re, p, n, &c->budget, match_cb, &mc))) return rc;
            if (mc.prev != n && (rc = sv_push(v, mc.prev, n, false))) return rc;
        }
        fold(v, st->beh, st->invert);
        /* the spans of step k are used while deeper steps run: they own
         * their own span vectors, so this one stays valid */
        return emit_spans(c, k, p, at_start);
    case PT_DIGITS:
    case PT_PUNCT:
    case PT_WSSPLIT:
        v->n = 0;
        if ((rc = char_matches(v, p, n,
                               st->kind == PT_DIGITS  ? is_numeric
                               : st->kind == PT_PUNCT ? is_punct
                                                      : is_ws,
                               NULL, 0)))
            return rc;
        fold(v, st->kind == PT_DIGITS ? (st->individual ? B_ISOLATED : B_CONTIGUOUS) : st->beh, false);
        return emit_spans(c, k, p, at_start);
    case PT_BYTELEVEL: {
        const uint8_t *q = p;
        size_t qn = n;
        if (st->prefix_space && p[0] != ' ') {
            tk_bytes *m = &c->mod[k];
            m->len = 0;
            if ((rc = bput(m, " ", 1)) || (rc = bput(m, p, n))) return rc;
            q = m->data;
            qn = m->len;
        }
        if (!st->use_regex) return run_pre(c, k + 1, q, qn, at_start);
        for (size_t i = 0; i < qn;) {
            size_t e = tk_pretok_next(TK_PAT_GPT2, q, qn, i);
            if ((rc = run_pre(c, k + 1, q + i, e - i, at_start && i == 0))) return rc;
            i = e;
        }
        return TK_OK;
    }
    case PT_METASPACE: {
        tk_bytes *m = &c->mod[k];
        m->len = 0;
        bool starts = n >= st->repl_len && memcmp(p, st->repl, st->repl_len) == 0;
        if (p[0] == ' ') starts = true; /* replaced below */
        if (!starts && (st->scheme == MS_ALWAYS || (st->scheme == MS_FIRST && at_start)))
            if ((rc = bput(m, st->repl, st->repl_len))) return rc;
        for (size_t i = 0; i < n; i++) {
            size_t j = i;
            while (j < n && p[j] != ' ') j++;
            if ((rc = bput(m, p + i, j - i))) return rc;
            if (j < n && (rc = bput(m, st->repl, st->repl_len))) return rc;
            i = j;
        }
        if (!st->split) return run_pre(c, k + 1, m->data, m->len, at_start);
        v->n = 0;
        if ((rc = char_matches(v, m->data, m->len, NULL, st->repl, st->repl_len))) return rc;
        fold(v, B_MERGED_NEXT, false);
        return emit_spans(c, k, m->data, at_start);
    }
    }
    return TK_ERR_ARG;
}

/* A stretch of text with no added token of the raw stage in it. */
static int encode_segment(hf_ctx *c, const uint8_t *s, size_t n, bool at_start, const active_set *as) {
    const uint8_t *ns;
    size_t nn;
    int rc = normalize(c->h, s, n, &c->nbuf[0], &c->nbuf[1], &ns, &nn, &c->budget);
    if (rc) return rc;
    size_t i = 0;
    while (i < nn) {
        size_t at = nn, end = nn;
        long k = c->h->n_added ? find_added(c->h, ns, nn, i, true, as, &at, &end) : -1;
        if ((rc = run_pre(c, 0, ns + i, at - i, at_start && i == 0))) return rc;
        if (k < 0) break;
        if (tk_ids_reserve(c->out, 1)) return TK_ERR_NOMEM;
        c->out->ids[c->out->len++] = c->h->added[k].id;
        i = end;
    }
    return TK_OK;
}

static void ctx_free(hf_ctx *c) {
    free(c->wc);
    free(c->bs.sym);
    free(c->bs.prev);
    free(c->bs.next);
    free(c->bs.gone);
    free(c->bs.heap);
    tk_bytes_free(&c->nbuf[0]);
    tk_bytes_free(&c->nbuf[1]);
    for (size_t k = 0; k < HF_MAX_STEPS; k++) {
        tk_bytes_free(&c->mod[k]);
        free(c->sp[k].v);
    }
}

/* One context per thread, kept between documents (scratch buffers and the
 * piece cache); the cache is cleared when another tokenizer uses it. */
static _Thread_local hf_ctx *g_ctx;
static pthread_key_t g_ctx_key;
static pthread_once_t g_ctx_once = PTHREAD_ONCE_INIT;

static void ctx_destroy(void *p) {
    if (!p) return;
    ctx_free(p);
    free(p);
}
static void ctx_key_init(void) { pthread_key_create(&g_ctx_key, ctx_destroy); }

int tk_hf_encode(const tk_tokenizer *t, const uint8_t *s, size_t n, const char *const *allowed, size_t n_allowed,
                 bool all, tk_ids *out) {
    const tk_hf *h = HF_OF(t);
    pthread_once(&g_ctx_once, ctx_key_init);
    hf_ctx *c = g_ctx;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return TK_ERR_NOMEM;
        c->wc = tk_zalloc_written(WC_SLOTS, sizeof *c->wc); /* without it: no cache */
        g_ctx = c;
        pthread_setspecific(g_ctx_key, c); /* freed when the thread ends */
    }
    if (c->serial != t->serial) {
        if (c->wc) memset(c->wc, 0, WC_SLOTS * sizeof *c->wc);
        c->serial = t->serial;
    }
    c->t = t;
    c->h = h;
    c->out = out;
    tk_re_budget_init(&c->budget, n); /* one budget for the whole document, every regex step */
    size_t from = out->len;
    active_set as = {allowed, n_allowed, all, false};
    for (size_t k = 0; k < h->n_added && !as.any; k++) as.any = active(&h->added[k], &as);
    int rc = TK_OK;
    size_t i = 0;
    while (i < n) {
        size_t at = n, end = n;
        long k = h->n_added ? find_added(h, s, n, i, false, &as, &at, &end) : -1;
        if ((rc = encode_segment(c, s + i, at - i, i == 0, &as))) break;
        if (k < 0) break;
        if (tk_ids_reserve(out, 1)) {
            rc = TK_ERR_NOMEM;
            break;
        }
        out->ids[out->len++] = h->added[k].id;
        i = end;
    }
    c->out = NULL;
    if (rc) out->len = from; /* a refused document leaves no ids behind */
    return rc;
}

static int hf_lossless(const tk_tokenizer *t) {
    const tk_hf *h = HF_OF(t);
    if (h->n_nm || h->sp) return 0;         /* SentencePiece-style: unk, dropped characters, decoder chain */
    if (!h->bl_plain) return 0;             /* bytes without a token (unk, dropped, <0xNN>); affixes in the tokens */
    for (size_t k = 0; k < h->n_added; k++) /* an added token that takes whitespace in */
        if (!h->added[k].special && (h->added[k].lstrip || h->added[k].rstrip)) return 0;
    for (size_t k = 0; k < h->n_pt; k++) {
        const pt_step *st = &h->pt[k];
        if ((st->kind == PT_SPLIT || st->kind == PT_PUNCT) && st->beh == B_REMOVED) return 0;
        if (st->kind == PT_WSSPLIT || st->kind == PT_METASPACE || (st->kind == PT_BYTELEVEL && st->prefix_space))
            return 0;
    }
    return 1;
}

/* HF's merge loop on a token's own bytes: 1 if it yields that token. */
static int hf_reaches(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, uint32_t r, tk_ids *tmp) {
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

/* ---- loading -------------------------------------------------------------- */

void tk_hf_free(tk_hf *h) {
    if (!h) return;
    for (size_t k = 0; k < h->n_nm; k++) {
        free(h->nm[k].a);
        free(h->nm[k].b);
        tk_regex_free(h->nm[k].re);
    }
    for (size_t k = 0; k < h->n_pt; k++) tk_regex_free(h->pt[k].re);
    for (size_t k = 0; k < h->n_added; k++) free(h->added[k].text);
    for (size_t k = 0; k < h->n_dec; k++) {
        free(h->dec[k].a);
        free(h->dec[k].b);
        tk_regex_free(h->dec[k].re);
    }
    tk_hfj_free(&h->voc);
    free(h->added);
    free(h->merges);
    free(h->pair1);
    free(h->m1);
    tk_chartab_free(h->chartab);
    free(h);
}

#define REFUSE(path, ...)                                                                                              \
    do {                                                                                                               \
        char _m[200];                                                                                                  \
        snprintf(_m, sizeof _m, __VA_ARGS__);                                                                          \
        tk_set_err(err, errlen, "%s: %s: %s", file, path, _m);                                                         \
        return TK_ERR_UNSUPPORTED;                                                                                     \
    } while (0)

static const char *type_of(json_t *o) { return json_string_value(json_object_get(o, "type")); }

/* Keys of o other than those listed are refused: an option we do not know
 * could change the ids. */
static int only_keys(json_t *o, const char *file, const char *path, const char *comp, const char *const *keys,
                     char *err, size_t errlen) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        bool ok = strcmp(k, "type") == 0;
        for (size_t i = 0; keys[i] && !ok; i++) ok = strcmp(k, keys[i]) == 0;
        if (!ok) {
            char sb[64];
            snprintf(sb, sizeof sb, "%.40s", k);
            for (char *q = sb; *q; q++)
                if ((unsigned char)*q < 0x20 || *q == 0x7f) *q = '?';
            REFUSE(path, "%s: option \"%s\" is not supported", comp, sb);
        }
    }
    return TK_OK;
}

static int get_bool(json_t *o, const char *key, bool dflt, bool *out, const char *file, const char *path, char *err,
                    size_t errlen) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return TK_OK;
    }
    if (!json_is_boolean(v)) {
        tk_set_err(err, errlen, "%s: %s.%s is not a boolean", file, path, key);
        return TK_ERR_FORMAT;
    }
    *out = json_is_true(v);
    return TK_OK;
}

static int get_str(json_t *o, const char *key, const uint8_t **s, size_t *n, const char *file, const char *path,
                   char *err, size_t errlen) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        tk_set_err(err, errlen, "%s: %s.%s is not a string", file, path, key);
        return TK_ERR_FORMAT;
    }
    *s = (const uint8_t *)json_string_value(v);
    *n = json_string_length(v);
    return TK_OK;
}

static int dup_bytes(const uint8_t *s, size_t n, uint8_t **out, size_t *on) {
    *out = malloc(n + 1);
    if (!*out) return TK_ERR_NOMEM;
    memcpy(*out, s, n);
    (*out)[n] = 0;
    *on = n;
    return TK_OK;
}

/* pattern: {"Regex": "..."} or {"String": "..."} */
static int parse_pattern(json_t *pat, const char *file, const char *path, tk_regex **re, tk_pattern *fast, char *err,
                         size_t errlen) {
    json_t *rx = json_object_get(pat, "Regex"), *st = json_object_get(pat, "String");
    if (!json_is_object(pat) || json_object_size(pat) != 1 || (!json_is_string(rx) && !json_is_string(st))) {
        tk_set_err(err, errlen, "%s: %s.pattern is not {\"Regex\": ...} or {\"String\": ...}", file, path);
        return TK_ERR_FORMAT;
    }
    json_t *v = rx ? rx : st;
    if (!json_string_length(v)) REFUSE(path, "an empty pattern is not supported");
    if (fast) {
        *fast = TK_PAT_NONE;
        if (rx) *fast = tk_pattern_from_regex(json_string_value(rx));
        if (*fast != TK_PAT_NONE) return TK_OK;
    }
    char e2[200] = "";
    int rc = tk_regex_compile(json_string_value(v), json_string_length(v), st != NULL, re, e2, sizeof e2);
    if (rc) tk_set_err(err, errlen, "%s: %s.pattern: %s", file, path, e2[0] ? e2 : tk_strerror(rc));
    return rc;
}

static int parse_normalizer(tk_hf *h, json_t *n, const char *file, const char *path, char *err, size_t errlen) {
    if (!n || json_is_null(n)) return TK_OK;
    const char *ty = type_of(n);
    if (!json_is_object(n) || !ty) {
        tk_set_err(err, errlen, "%s: %s is not an object with a \"type\"", file, path);
        return TK_ERR_FORMAT;
    }
    int rc;
    if (strcmp(ty, "Sequence") == 0) {
        json_t *l = json_object_get(n, "normalizers");
        if (!json_is_array(l)) {
            tk_set_err(err, errlen, "%s: %s.normalizers is not an array", file, path);
            return TK_ERR_FORMAT;
        }
        static const char *const keys[] = {"normalizers", NULL};
        if ((rc = only_keys(n, file, path, "Sequence", keys, err, errlen))) return rc;
        size_t i;
        json_t *e;
        json_array_foreach(l, i, e) {
            char p2[256];
            snprintf(p2, sizeof p2, "%.200s.normalizers[%zu]", path, i);
            if ((rc = parse_normalizer(h, e, file, p2, err, errlen))) return rc;
        }
        return TK_OK;
    }
    if (h->n_nm >= HF_MAX_STEPS) REFUSE(path, "more than %d normalizers", HF_MAX_STEPS);
    nm_step *st = &h->nm[h->n_nm];
    memset(st, 0, sizeof *st);
    static const char *const none[] = {NULL};
    if (!strcmp(ty, "NFC") || !strcmp(ty, "NFD") || !strcmp(ty, "NFKC") || !strcmp(ty, "NFKD") ||
        !strcmp(ty, "Lowercase")) {
        if ((rc = only_keys(n, file, path, ty, none, err, errlen))) return rc;
        st->kind = !strcmp(ty, "NFC")    ? NM_NFC
                   : !strcmp(ty, "NFD")  ? NM_NFD
                   : !strcmp(ty, "NFKC") ? NM_NFKC
                   : !strcmp(ty, "NFKD") ? NM_NFKD
                                         : NM_LOWER;
    } else if (!strcmp(ty, "Strip")) {
        static const char *const keys[] = {"strip_left", "strip_right", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = NM_STRIP;
        if ((rc = get_bool(n, "strip_left", true, &st->left, file, path, err, errlen)) ||
            (rc = get_bool(n, "strip_right", true, &st->right, file, path, err, errlen)))
            return rc;
    } else if (!strcmp(ty, "Replace")) {
        static const char *const keys[] = {"pattern", "content", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = NM_REPLACE;
        const uint8_t *cs;
        size_t cn;
        if ((rc = get_str(n, "content", &cs, &cn, file, path, err, errlen))) return rc;
        if ((rc = parse_pattern(json_object_get(n, "pattern"), file, path, &st->re, NULL, err, errlen))) return rc;
        h->n_nm++; /* owns st->re from here */
        return dup_bytes(cs, cn, &st->b, &st->blen);
    } else if (!strcmp(ty, "Prepend")) {
        static const char *const keys[] = {"prepend", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = NM_PREPEND;
        const uint8_t *cs;
        size_t cn;
        if ((rc = get_str(n, "prepend", &cs, &cn, file, path, err, errlen))) return rc;
        h->n_nm++;
        return dup_bytes(cs, cn, &st->a, &st->alen);
    } else if (!strcmp(ty, "Precompiled")) { /* SentencePiece's charsmap (spm.c) */
        static const char *const keys[] = {"precompiled_charsmap", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        json_t *b = json_object_get(n, "precompiled_charsmap");
        st->kind = NM_PRECOMPILED;
        if (!json_is_string(b) || tk_spm_charsmap_b64(json_string_value(b), json_string_length(b), &st->a, &st->alen))
            REFUSE(path, "Precompiled: precompiled_charsmap is not a base64 SentencePiece charsmap");
    } else {
        char sb[48];
        snprintf(sb, sizeof sb, "%.40s", ty);
        for (char *q = sb; *q; q++)
            if ((unsigned char)*q < 0x20) *q = '?';
        REFUSE(path,
               "normalizer \"%s\" is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
               "Replace, Prepend, Precompiled, Sequence)",
               sb);
    }
    h->n_nm++;
    return TK_OK;
}

static int parse_behavior(json_t *o, const char *file, const char *path, int dflt, int *beh, char *err, size_t errlen) {
    json_t *b = json_object_get(o, "behavior");
    if (!b) {
        *beh = dflt;
        return TK_OK;
    }
    const char *s = json_string_value(b);
    static const struct {
        const char *n;
        int b;
    } names[] = {{"Removed", B_REMOVED},
                 {"Isolated", B_ISOLATED},
                 {"MergedWithPrevious", B_MERGED_PREV},
                 {"MergedWithNext", B_MERGED_NEXT},
                 {"Contiguous", B_CONTIGUOUS}};
    for (size_t k = 0; s && k < 5; k++)
        if (!strcmp(s, names[k].n)) {
            *beh = names[k].b;
            return TK_OK;
        }
    REFUSE(path, "behavior is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

static int parse_pretok(tk_hf *h, json_t *n, const char *file, const char *path, char *err, size_t errlen) {
    if (!n || json_is_null(n)) return TK_OK;
    const char *ty = type_of(n);
    if (!json_is_object(n) || !ty) {
        tk_set_err(err, errlen, "%s: %s is not an object with a \"type\"", file, path);
        return TK_ERR_FORMAT;
    }
    int rc;
    if (h->n_pt && h->pt[h->n_pt - 1].kind == PT_BYTELEVEL)
        REFUSE(path, "%.40s after ByteLevel is not supported (ByteLevel must be the last pre-tokenizer)", ty);
    if (strcmp(ty, "Sequence") == 0) {
        json_t *l = json_object_get(n, "pretokenizers");
        if (!json_is_array(l)) {
            tk_set_err(err, errlen, "%s: %s.pretokenizers is not an array", file, path);
            return TK_ERR_FORMAT;
        }
        static const char *const keys[] = {"pretokenizers", NULL};
        if ((rc = only_keys(n, file, path, "Sequence", keys, err, errlen))) return rc;
        size_t i;
        json_t *e;
        json_array_foreach(l, i, e) {
            char p2[256];
            snprintf(p2, sizeof p2, "%.200s.pretokenizers[%zu]", path, i);
            if ((rc = parse_pretok(h, e, file, p2, err, errlen))) return rc;
        }
        return TK_OK;
    }
    if (h->n_pt >= HF_MAX_STEPS) REFUSE(path, "more than %d pre-tokenizers", HF_MAX_STEPS);
    pt_step *st = &h->pt[h->n_pt];
    memset(st, 0, sizeof *st);
    st->fast = TK_PAT_NONE;
    if (!strcmp(ty, "Split")) {
        static const char *const keys[] = {"pattern", "behavior", "invert", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_SPLIT;
        if ((rc = parse_behavior(n, file, path, B_ISOLATED, &st->beh, err, errlen)) ||
            (rc = get_bool(n, "invert", false, &st->invert, file, path, err, errlen)))
            return rc;
        if ((rc = parse_pattern(json_object_get(n, "pattern"), file, path, &st->re, &st->fast, err, errlen))) return rc;
    } else if (!strcmp(ty, "ByteLevel")) {
        static const char *const keys[] = {"add_prefix_space", "trim_offsets", "use_regex", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_BYTELEVEL;
        /* HF refuses a ByteLevel without add_prefix_space; absent = false,
         * as this loader always read such files */
        if ((rc = get_bool(n, "add_prefix_space", false, &st->prefix_space, file, path, err, errlen)) ||
            (rc = get_bool(n, "use_regex", true, &st->use_regex, file, path, err, errlen)))
            return rc;
    } else if (!strcmp(ty, "Digits")) {
        static const char *const keys[] = {"individual_digits", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_DIGITS;
        if ((rc = get_bool(n, "individual_digits", false, &st->individual, file, path, err, errlen))) return rc;
    } else if (!strcmp(ty, "Punctuation")) {
        static const char *const keys[] = {"behavior", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_PUNCT;
        if ((rc = parse_behavior(n, file, path, B_ISOLATED, &st->beh, err, errlen))) return rc;
    } else if (!strcmp(ty, "WhitespaceSplit")) {
        static const char *const none[] = {NULL};
        if ((rc = only_keys(n, file, path, ty, none, err, errlen))) return rc;
        st->kind = PT_WSSPLIT;
        st->beh = B_REMOVED;
    } else if (!strcmp(ty, "Whitespace")) {
        static const char *const none[] = {NULL};
        if ((rc = only_keys(n, file, path, ty, none, err, errlen))) return rc;
        /* HF: \w+|[^\w\s]+, the matches kept (Removed, inverted) */
        st->kind = PT_SPLIT;
        st->beh = B_REMOVED;
        st->invert = true;
        char e2[200] = "";
        static const char re[] = "\\w+|[^\\w\\s]+";
        if ((rc = tk_regex_compile(re, sizeof re - 1, false, &st->re, e2, sizeof e2))) {
            tk_set_err(err, errlen, "%s: %s: %s", file, path, e2);
            return rc;
        }
    } else if (!strcmp(ty, "Metaspace")) {
        static const char *const keys[] = {"replacement",      "prepend_scheme", "split",
                                           "add_prefix_space", "str_rep",        NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_METASPACE;
        const uint8_t *r;
        size_t rl;
        if ((rc = get_str(n, "replacement", &r, &rl, file, path, err, errlen))) return rc;
        int32_t cp;
        if (rl == 0 || rl > 4 || u8_len(r, rl, 0, &cp) != rl || cp < 0)
            REFUSE(path, "Metaspace: replacement is not one character");
        memcpy(st->repl, r, rl);
        st->repl_len = rl;
        if ((rc = get_bool(n, "split", true, &st->split, file, path, err, errlen))) return rc;
        json_t *ps = json_object_get(n, "prepend_scheme");
        if (ps && !json_is_null(ps)) {
            const char *s = json_string_value(ps);
            if (!s) REFUSE(path, "Metaspace: prepend_scheme is not a string");
            if (!strcmp(s, "always")) st->scheme = MS_ALWAYS;
            else if (!strcmp(s, "first")) st->scheme = MS_FIRST;
            else if (!strcmp(s, "never")) st->scheme = MS_NEVER;
            else REFUSE(path, "Metaspace: prepend_scheme is not always/first/never");
        } else {
            bool aps;
            if ((rc = get_bool(n, "add_prefix_space", true, &aps, file, path, err, errlen))) return rc;
            st->scheme = aps ? MS_ALWAYS : MS_NEVER;
        }
    } else {
        char sb[48];
        snprintf(sb, sizeof sb, "%.40s", ty);
        for (char *q = sb; *q; q++)
            if ((unsigned char)*q < 0x20) *q = '?';
        REFUSE(path,
               "pre-tokenizer \"%s\" is not supported (supported: ByteLevel, Split, Digits, Punctuation, "
               "WhitespaceSplit, Whitespace, Metaspace, Sequence)",
               sb);
    }
    h->n_pt++;
    return TK_OK;
}

static int merges_build(tk_hf *h, const uint32_t (*m)[3], size_t nm) {
    size_t slots = 16;
    while (slots < nm * 2 + 16) slots *= 2;
    h->merges = tk_table_alloc(slots * sizeof *h->merges);
    if (!h->merges) return TK_ERR_NOMEM;
    h->mmask = slots - 1;
    for (size_t i = 0; i < nm; i++) {
        if (m[i][0] == TK_NO_RANK) continue; /* a merge that never applies (load_hf.c) */
        uint64_t key = (((uint64_t)m[i][0] << 32) | m[i][1]) + 1;
        uint64_t j = (key * 0x9E3779B97F4A7C15ull) >> 20 & h->mmask;
        while (h->merges[j].key && h->merges[j].key != key) j = (j + 1) & h->mmask;
        /* a pair listed twice: HF's map keeps the last */
        h->merges[j] = (mslot){key, (uint32_t)i, m[i][2]};
    }
    return TK_OK;
}

static int m1_build(const tk_tokenizer *t, tk_hf *h) {
    h->m1 = malloc((t->n_ranks ? t->n_ranks : 1) * sizeof *h->m1);
    if (!h->m1) return TK_ERR_NOMEM;
    for (uint32_t r = 0; r < t->n_ranks; r++) h->m1[r] = (struct m1){M1_NONE, M1_NONE, 0};
    for (uint64_t i = 0; i <= h->mmask; i++) {
        const mslot *m = &h->merges[i];
        if (!m->key) continue;
        struct m1 *e = &h->m1[m->res];
        uint32_t a = (uint32_t)((m->key - 1) >> 32), b = (uint32_t)(m->key - 1);
        if (e->a == M1_NONE && e->b == M1_NONE) {
            *e = (struct m1){a, b, m->midx};
        } else { /* several merges make it: midx keeps the lowest priority (merging from characters) */
            e->a = e->b = M1_MULTI;
            if (m->midx < e->midx) e->midx = m->midx;
        }
    }
    return TK_OK;
}

static int pair1_build(const tk_tokenizer *t, tk_hf *h) {
    h->pair1 = malloc(65536 * sizeof *h->pair1);
    if (!h->pair1) return TK_ERR_NOMEM;
    for (uint32_t k = 0; k < 65536; k++) {
        const mslot *m = merge_get(h, t->byte_rank[k >> 8], t->byte_rank[k & 255]);
        h->pair1[k] = m ? (uint64_t)m->midx << 32 | m->res : UINT64_MAX;
    }
    return TK_OK;
}

/* Is merge-by-rank (tk_bpe_piece) provably HF's merge loop for these
 * merges? (1) merges listed in the order of the ranks of their results;
 * (2) every split of every token into two tokens is a listed merge with
 * that token as result; (3) a token spelled x.y = y.z by two listed splits
 * sharing y (the only way two different splits of one token can both be
 * candidates at once, overlapping) has its left split ranked first, as
 * merge-by-rank takes the leftmost; (4) without ignore_merges, the merge
 * loop on every token's bytes yields that token (merge-by-rank looks whole
 * pieces up first). docs/tokenizer.md, "tokenizer.json fast path". */
static int fast_equivalent(const tk_tokenizer *t, tk_hf *h, const uint32_t (*m)[3], size_t nm, bool *yes) {
    *yes = false;
    for (size_t i = 1; i < nm; i++)
        if (m[i][2] < m[i - 1][2] && merge_get(h, m[i][0], m[i][1])->midx == i) return TK_OK;
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        const uint8_t *p = t->arena + t->tok_off[r];
        size_t n = t->tok_off[r + 1] - t->tok_off[r];
        for (size_t k = 1; k < n; k++) {
            uint32_t a = tk_map_get(t, p, k), b = a == TK_NO_RANK ? TK_NO_RANK : tk_map_get(t, p + k, n - k);
            if (b == TK_NO_RANK) continue;
            const mslot *s = merge_get(h, a, b);
            if (!s || s->res != r) return TK_OK;
            /* (3): border y = p[k..n) = p[0..n-k) */
            if (2 * k != n && memcmp(p + k, p, n - k) == 0) {
                uint32_t c = tk_map_get(t, p, n - k), d = tk_map_get(t, p + n - k, k);
                const mslot *s2 = c != TK_NO_RANK && d != TK_NO_RANK ? merge_get(h, c, d) : NULL;
                if (s2 && s2->midx < s->midx) return TK_OK;
            }
        }
    }
    if (!h->ignore_merges) {
        bpe_scratch s = {0};
        tk_ids tmp = {0};
        int ok = 1;
        for (uint32_t r = 0; r < t->n_ranks && ok == 1; r++) ok = hf_reaches(t, h, &s, r, &tmp);
        free(s.sym);
        free(s.prev);
        free(s.next);
        free(s.gone);
        free(s.heap);
        tk_ids_free(&tmp);
        if (ok < 0) return ok;
        if (!ok) return TK_OK;
    }
    *yes = true;
    return TK_OK;
}

/* Canonical text of the parts of the definition that decide ids beyond the
 * ranks and specials: folded into the fingerprint. */
static void fold_fingerprint(tk_tokenizer *t, json_t *root) {
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, 32, t->fingerprint);
    static const char *const parts[] = {"normalizer", "pre_tokenizer", "added_tokens", "decoder"};
    for (size_t k = 0; k < 4; k++) {
        char *s = json_dumps(json_object_get(root, parts[k]) ? json_object_get(root, parts[k]) : json_null(),
                             JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        uint32_t len = s ? (uint32_t)strlen(s) : 0;
        sha256_update(&c, 4, (const uint8_t *)&len);
        if (s) sha256_update(&c, len, (const uint8_t *)s);
        free(s);
    }
    json_t *model = json_object_get(root, "model");
    static const char *const mk[] = {
        "ignore_merges", "byte_fallback", "fuse_unk", "unk_token", "continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t k = 0; k < 6; k++) {
        char *s = json_dumps(json_object_get(model, mk[k]) ? json_object_get(model, mk[k]) : json_null(),
                             JSON_COMPACT | JSON_ENCODE_ANY);
        uint32_t len = s ? (uint32_t)strlen(s) : 0;
        sha256_update(&c, 4, (const uint8_t *)&len);
        if (s) sha256_update(&c, len, (const uint8_t *)s);
        free(s);
    }
    uint8_t tag[8] = {'t', 'k', 'h', 'f', 1, 0, 0, 0};
    sha256_update(&c, sizeof tag, tag);
    sha256_digest(&c, 32, t->fingerprint);
}

static int parse_added(tk_hf *h, json_t *added, const char *file, char *err, size_t errlen) {
    size_t na = json_array_size(added);
    h->added = calloc(na ? na : 1, sizeof *h->added);
    if (!h->added) return TK_ERR_NOMEM;
    size_t i;
    json_t *a;
    int rc;
    json_array_foreach(added, i, a) {
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        bool special, normalized, lstrip, rstrip, single;
        if ((rc = get_bool(a, "special", false, &special, file, path, err, errlen)) ||
            (rc = get_bool(a, "normalized", !special, &normalized, file, path, err, errlen)) ||
            (rc = get_bool(a, "lstrip", false, &lstrip, file, path, err, errlen)) ||
            (rc = get_bool(a, "rstrip", false, &rstrip, file, path, err, errlen)) ||
            (rc = get_bool(a, "single_word", false, &single, file, path, err, errlen)))
            return rc;
        hf_added *d = &h->added[h->n_added];
        const char *c = json_string_value(json_object_get(a, "content"));
        size_t cl = json_string_length(json_object_get(a, "content"));
        d->id = (uint32_t)json_integer_value(json_object_get(a, "id"));
        d->special = special;
        d->normalized = normalized;
        d->lstrip = lstrip;
        d->rstrip = rstrip;
        d->single_word = single;
        if (normalized && h->n_nm) {
            /* HF matches normalized tokens by their normalized content */
            tk_bytes x = {0}, y = {0};
            const uint8_t *ns;
            size_t nn;
            tk_re_budget budget;
            tk_re_budget_init(&budget, cl);
            rc = normalize(h, (const uint8_t *)c, cl, &x, &y, &ns, &nn, &budget);
            if (!rc) rc = nn ? dup_bytes(ns, nn, &d->text, &d->len) : TK_OK;
            tk_bytes_free(&x);
            tk_bytes_free(&y);
            if (tk_err_is_document(rc)) {
                tk_set_err(err, errlen, "%s: %s: the normalizer refuses its content: %s", file, path, tk_strerror(rc));
                return TK_ERR_LIMIT;
            }
            if (rc) return rc;
            if (!nn) continue;
        } else if ((rc = dup_bytes((const uint8_t *)c, cl, &d->text, &d->len))) {
            return rc;
        }
        h->first_byte[d->text[0] >> 3] |= (uint8_t)(1u << (d->text[0] & 7));
        h->n_added++;
    }
    return TK_OK;
}

/* The symbol (bl_word) of vocabulary string k[0..kl): its rank, BL_ID | id,
 * or BL_NONE. */
static uint32_t bl_sym_of(const tk_tokenizer *t, const tk_hfj *J, const char *k, size_t kl) {
    int e = tk_hfj_lookup(J, k, kl);
    if (e < 0) return BL_NONE;
    uint32_t id = J->vid[e], r = id < t->vocab_size ? t->id_to_rank[id] : TK_NO_RANK;
    return r != TK_NO_RANK ? r : BL_ID | id;
}

/* A string option of model (absent or null: empty) into buf (cap bytes). */
static int get_affix(json_t *model, const char *key, uint8_t *buf, size_t *len, const char *file, char *err,
                     size_t errlen) {
    json_t *v = json_object_get(model, key);
    *len = 0;
    if (!v || json_is_null(v)) return TK_OK;
    if (!json_is_string(v)) {
        tk_set_err(err, errlen, "%s: model.%s is not a string", file, key);
        return TK_ERR_FORMAT;
    }
    if (json_string_length(v) > HF_AFFIX_MAX) {
        tk_set_err(err, errlen, "%s: model.%s is longer than %d bytes", file, key, HF_AFFIX_MAX);
        return TK_ERR_LIMIT;
    }
    *len = json_string_length(v);
    memcpy(buf, json_string_value(v), *len);
    return TK_OK;
}

/* The byte-level model's options (HF's BPE: unk_token, fuse_unk,
 * byte_fallback, continuing_subword_prefix, end_of_word_suffix) as the
 * tables of bl_word: the symbol of each byte's character in each position,
 * of each <0xNN>, of unk. bl_plain when none of them changes what the
 * merge loop on the bytes gives. */
static int bl_model(const tk_tokenizer *t, tk_hf *h, json_t *model, const tk_hfj *J, bool raw_entries, const char *file,
                    char *err, size_t errlen) {
    int rc;
    if ((rc = get_bool(model, "fuse_unk", false, &h->fuse_unk, file, "model", err, errlen)) ||
        (rc = get_bool(model, "byte_fallback", false, &h->bl_byte_fallback, file, "model", err, errlen)) ||
        (rc = get_affix(model, "continuing_subword_prefix", h->prefix, &h->prefix_len, file, err, errlen)) ||
        (rc = get_affix(model, "end_of_word_suffix", h->suffix, &h->suffix_len, file, err, errlen)))
        return rc;
    h->bl_general = h->prefix_len || h->suffix_len;
    char k[2 * HF_AFFIX_MAX + 8];
    for (int pos = 0; pos < 4; pos++)
        for (int b = 0; b < 256; b++) {
            size_t kl = 0;
            if (pos & 1) memcpy(k, h->prefix, h->prefix_len), kl = h->prefix_len;
            uint32_t cp = tk_byte_to_cp((uint8_t)b);
            if (cp < 0x80) k[kl++] = (char)cp;
            else k[kl++] = (char)(0xC0 | cp >> 6), k[kl++] = (char)(0x80 | (cp & 63));
            if (pos & 2) memcpy(k + kl, h->suffix, h->suffix_len), kl += h->suffix_len;
            h->bsym[pos][b] = bl_sym_of(t, J, k, kl);
        }
    for (int b = 0; b < 256; b++) {
        snprintf(k, sizeof k, "<0x%02X>", b);
        h->fb_sym[b] = h->bl_byte_fallback ? bl_sym_of(t, J, k, 6) : BL_NONE;
        /* without affixes a byte's character is its single-byte token */
        if (h->bsym[0][b] == BL_NONE || h->bsym[0][b] != t->byte_rank[b]) h->bl_odd[b >> 3] |= (uint8_t)(1u << (b & 7));
    }
    h->unk = TK_NO_RANK;
    h->unk_sym = BL_NONE;
    json_t *unk = json_object_get(model, "unk_token");
    if (unk && !json_is_null(unk) && !json_is_string(unk)) {
        tk_set_err(err, errlen, "%s: model.unk_token is not a string", file);
        return TK_ERR_FORMAT;
    }
    if (json_is_string(unk)) {
        h->unk_sym = bl_sym_of(t, J, json_string_value(unk), json_string_length(unk));
        h->unk = h->unk_sym == BL_NONE ? TK_NO_RANK
                 : h->unk_sym & BL_ID  ? h->unk_sym & ~BL_ID
                 : t->rank_to_id       ? t->rank_to_id[h->unk_sym]
                                       : h->unk_sym;
    }
    bool odd = false;
    for (int b = 0; b < 32; b++) odd |= h->bl_odd[b] != 0;
    h->bl_plain = !h->bl_general && !odd && !raw_entries;
    /* HF fails every text with a character that has no token, no fallback
     * and an unk_token missing from the vocabulary: no ids to give there */
    if (json_is_string(unk) && h->unk_sym == BL_NONE)
        for (int pos = 0; pos < 4; pos++)
            for (int b = 0; b < 256; b++) {
                if (h->bsym[pos][b] != BL_NONE || (!h->bl_general && pos)) continue;
                /* byte_fallback covers it when <0xNN> exist for every byte of prefix + char + suffix */
                bool covered = h->bl_byte_fallback;
                uint8_t w[2 * HF_AFFIX_MAX + 2];
                size_t wl = 0;
                if (pos & 1) memcpy(w, h->prefix, h->prefix_len), wl = h->prefix_len;
                uint32_t cp = tk_byte_to_cp((uint8_t)b);
                if (cp < 0x80) w[wl++] = (uint8_t)cp;
                else w[wl++] = (uint8_t)(0xC0 | cp >> 6), w[wl++] = (uint8_t)(0x80 | (cp & 63));
                if (pos & 2) memcpy(w + wl, h->suffix, h->suffix_len), wl += h->suffix_len;
                for (size_t q = 0; q < wl && covered; q++) covered = h->fb_sym[w[q]] != BL_NONE;
                if (covered) continue;
                tk_set_err(err, errlen,
                           "%s: model.unk_token \"%s\" is not in model.vocab, and byte 0x%02x has no token: "
                           "HF fails every text with that byte (unsupported byte-level vocabulary)",
                           file, json_string_value(unk), b);
                return TK_ERR_UNSUPPORTED;
            }
    return TK_OK;
}

int tk_hf_setup(tk_tokenizer *t, json_t *root, const char *file, const uint32_t (*merges)[3], size_t nm,
                const tk_hfj *J, bool raw_entries, tk_pattern forced, char *err, size_t errlen) {
    tk_hf *h = calloc(1, sizeof *h);
    if (!h) return TK_ERR_NOMEM;
    int rc;
    json_t *model = json_object_get(root, "model");
    if ((rc = get_bool(model, "ignore_merges", false, &h->ignore_merges, file, "model", err, errlen))) goto fail;
    {
        static const char *const keys[] = {"vocab",
                                           "merges",
                                           "dropout",
                                           "unk_token",
                                           "continuing_subword_prefix",
                                           "end_of_word_suffix",
                                           "fuse_unk",
                                           "byte_fallback",
                                           "ignore_merges",
                                           NULL};
        if ((rc = only_keys(model, file, "model", "BPE", keys, err, errlen))) goto fail;
        json_t *d = json_object_get(model, "dropout");
        if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0.0)) {
            tk_set_err(err, errlen, "%s: model.dropout: BPE dropout is not supported (ids would be random)", file);
            rc = TK_ERR_UNSUPPORTED;
            goto fail;
        }
        if ((rc = bl_model(t, h, model, J, raw_entries, file, err, errlen))) goto fail;
    }
    if ((rc = parse_normalizer(h, json_object_get(root, "normalizer"), file, "normalizer", err, errlen))) goto fail;
    if ((rc = parse_pretok(h, json_object_get(root, "pre_tokenizer"), file, "pre_tokenizer", err, errlen))) goto fail;
    if (!h->n_pt || h->pt[h->n_pt - 1].kind != PT_BYTELEVEL) {
        tk_set_err(err, errlen,
                   "%s: pre_tokenizer: a byte-level vocabulary needs a ByteLevel pre-tokenizer last "
                   "(this one has %s)",
                   file, h->n_pt ? "another last" : "none");
        rc = TK_ERR_UNSUPPORTED;
        goto fail;
    }
    for (size_t k = 0; k < h->n_pt; k++)
        if (h->pt[k].kind == PT_METASPACE) {
            tk_set_err(err, errlen, "%s: pre_tokenizer: Metaspace with a byte-level vocabulary is not supported", file);
            rc = TK_ERR_UNSUPPORTED;
            goto fail;
        }
    {
        const char *dt = type_of(json_object_get(root, "decoder"));
        json_t *dec = json_object_get(root, "decoder");
        if (dec && !json_is_null(dec) && (!dt || strcmp(dt, "ByteLevel") != 0)) {
            tk_set_err(err, errlen, "%s: decoder: only ByteLevel is supported with a byte-level vocabulary", file);
            rc = TK_ERR_UNSUPPORTED;
            goto fail;
        }
    }
    if ((rc = parse_added(h, json_object_get(root, "added_tokens"), file, err, errlen))) goto fail;
    if ((rc = merges_build(h, merges, nm)) || (rc = pair1_build(t, h)) || (rc = m1_build(t, h))) goto fail;
    if (h->bl_plain && (rc = fast_equivalent(t, h, merges, nm, &h->fast_bpe))) goto fail;
    bool any_nonspecial = false;
    for (size_t k = 0; k < h->n_added; k++) any_nonspecial |= !h->added[k].special;
    /* the tiktoken engine alone does exactly this pipeline? */
    tk_pattern pat = TK_PAT_NONE;
    if (h->n_nm == 0 && !any_nonspecial) {
        const pt_step *bl = &h->pt[h->n_pt - 1];
        if (!bl->prefix_space) {
            if (h->n_pt == 1 && bl->use_regex) pat = TK_PAT_GPT2;
            if (h->n_pt == 2 && !bl->use_regex && h->pt[0].kind == PT_SPLIT && h->pt[0].fast != TK_PAT_NONE &&
                h->pt[0].beh == B_ISOLATED && !h->pt[0].invert)
                pat = h->pt[0].fast;
        }
    }
    if (forced != TK_PAT_NONE && forced != pat) {
        tk_set_err(err, errlen,
                   "%s: --pattern %s cannot replace this tokenizer's own pre-tokenizer and normalizer "
                   "(they would give other ids than HF): leave it out",
                   file, tk_pattern_name(forced));
        rc = TK_ERR_PATTERN;
        goto fail;
    }
    /* t->pattern: the pre-tokens are exactly that pattern's (tk_get_pattern) */
    t->pattern = pat;
    tk_compute_fingerprint(t);
    if (pat != TK_PAT_NONE && h->fast_bpe) {
        tk_hf_free(h);
        return TK_OK;
    }
    /* ids = HF's pipeline: the fingerprint covers it */
    fold_fingerprint(t, root);
    tk_engine_attach(t, &tk_engine_hf, h);
    return TK_OK;
fail:
    tk_hf_free(h);
    return rc;
}

/* ---- SentencePiece-style: setup and the decoder chain --------------------- */

enum { D_REPLACE, D_BYTEFB, D_FUSE, D_STRIP, D_METASPACE };

static int parse_decoder(tk_hf *h, json_t *n, const char *file, const char *path, char *err, size_t errlen) {
    if (!n || json_is_null(n)) return TK_OK;
    const char *ty = type_of(n);
    if (!json_is_object(n) || !ty) {
        tk_set_err(err, errlen, "%s: %s is not an object with a \"type\"", file, path);
        return TK_ERR_FORMAT;
    }
    int rc;
    if (!strcmp(ty, "Sequence")) {
        json_t *l = json_object_get(n, "decoders");
        if (!json_is_array(l)) {
            tk_set_err(err, errlen, "%s: %s.decoders is not an array", file, path);
            return TK_ERR_FORMAT;
        }
        size_t i;
        json_t *e;
        json_array_foreach(l, i, e) {
            char p2[256];
            snprintf(p2, sizeof p2, "%.200s.decoders[%zu]", path, i);
            if ((rc = parse_decoder(h, e, file, p2, err, errlen))) return rc;
        }
        return TK_OK;
    }
    if (h->n_dec >= HF_MAX_STEPS) REFUSE(path, "more than %d decoders", HF_MAX_STEPS);
    struct dec_step *d = &h->dec[h->n_dec];
    memset(d, 0, sizeof *d);
    static const char *const none[] = {NULL};
    if (!strcmp(ty, "ByteFallback") || !strcmp(ty, "Fuse")) {
        if ((rc = only_keys(n, file, path, ty, none, err, errlen))) return rc;
        d->kind = !strcmp(ty, "Fuse") ? D_FUSE : D_BYTEFB;
    } else if (!strcmp(ty, "Replace")) {
        static const char *const keys[] = {"pattern", "content", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        json_t *pat = json_object_get(n, "pattern"), *st = json_object_get(pat, "String");
        const uint8_t *cs;
        size_t cn;
        if ((rc = get_str(n, "content", &cs, &cn, file, path, err, errlen))) return rc;
        d->kind = D_REPLACE;
        if (!json_is_string(st)) { /* {"Regex": ...}: the pattern's matches (onig find_iter), as the normalizer */
            if ((rc = parse_pattern(pat, file, path, &d->re, NULL, err, errlen))) return rc;
            h->n_dec++; /* owns d->re from here */
            return dup_bytes(cs, cn, &d->b, &d->blen);
        }
        if (!json_string_length(st)) REFUSE(path, "Replace decoder: an empty pattern is not supported");
        if ((rc = dup_bytes((const uint8_t *)json_string_value(st), json_string_length(st), &d->a, &d->alen)) ||
            (rc = dup_bytes(cs, cn, &d->b, &d->blen)))
            return rc;
    } else if (!strcmp(ty, "Strip")) {
        static const char *const keys[] = {"content", "start", "stop", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        const uint8_t *cs;
        size_t cn;
        if ((rc = get_str(n, "content", &cs, &cn, file, path, err, errlen))) return rc;
        int32_t cp;
        json_t *a = json_object_get(n, "start"), *b = json_object_get(n, "stop");
        if (!cn || cn > 4 || u8_len(cs, cn, 0, &cp) != cn || !json_is_integer(a) || !json_is_integer(b) ||
            json_integer_value(a) < 0 || json_integer_value(b) < 0 || json_integer_value(a) > 1024 ||
            json_integer_value(b) > 1024)
            REFUSE(path, "Strip decoder: content must be one character, start/stop small integers");
        d->kind = D_STRIP;
        d->start = (uint32_t)json_integer_value(a);
        d->stop = (uint32_t)json_integer_value(b);
        if ((rc = dup_bytes(cs, cn, &d->a, &d->alen))) return rc;
    } else if (!strcmp(ty, "Metaspace")) {
        static const char *const keys[] = {"replacement",      "prepend_scheme", "split",
                                           "add_prefix_space", "str_rep",        NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        const uint8_t *r;
        size_t rl;
        if ((rc = get_str(n, "replacement", &r, &rl, file, path, err, errlen))) return rc;
        d->kind = D_METASPACE;
        json_t *ps = json_object_get(n, "prepend_scheme");
        const char *sc = json_string_value(ps);
        bool aps = !json_is_false(json_object_get(n, "add_prefix_space"));
        d->scheme = sc ? (!strcmp(sc, "never") ? MS_NEVER : MS_ALWAYS) : (aps ? MS_ALWAYS : MS_NEVER);
        if ((rc = dup_bytes(r, rl, &d->a, &d->alen))) return rc;
    } else {
        char sb[48];
        snprintf(sb, sizeof sb, "%.40s", ty);
        for (char *q = sb; *q; q++)
            if ((unsigned char)*q < 0x20) *q = '?';
        REFUSE(path,
               "decoder \"%s\" is not supported with a SentencePiece-style vocabulary (supported: Replace, "
               "ByteFallback, Fuse, Strip, Metaspace, Sequence)",
               sb);
    }
    h->n_dec++;
    return TK_OK;
}

int tk_hf_setup_sp(tk_tokenizer *t, json_t *root, const char *file, const uint32_t (*merges)[3], size_t nm, tk_hfj *J,
                   char *err, size_t errlen) {
    tk_hf *h = calloc(1, sizeof *h);
    if (!h) return TK_ERR_NOMEM;
    h->sp = true;
    int rc;
    json_t *model = json_object_get(root, "model");
    {
        static const char *const keys[] = {"vocab",
                                           "merges",
                                           "dropout",
                                           "unk_token",
                                           "continuing_subword_prefix",
                                           "end_of_word_suffix",
                                           "fuse_unk",
                                           "byte_fallback",
                                           "ignore_merges",
                                           NULL};
        if ((rc = only_keys(model, file, "model", "BPE", keys, err, errlen))) goto fail;
        json_t *d = json_object_get(model, "dropout");
        if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0.0)) {
            tk_set_err(err, errlen, "%s: model.dropout: BPE dropout is not supported (ids would be random)", file);
            rc = TK_ERR_UNSUPPORTED;
            goto fail;
        }
        static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
        for (size_t k = 0; k < 2; k++) {
            json_t *v = json_object_get(model, affixes[k]);
            if (!v || json_is_null(v)) continue;
            if (!json_is_string(v) || json_string_length(v) > HF_AFFIX_MAX ||
                strlen(json_string_value(v)) != json_string_length(v)) {
                tk_set_err(err, errlen, "%s: model.%s must be a string of at most %d bytes", file, affixes[k],
                           HF_AFFIX_MAX);
                rc = TK_ERR_UNSUPPORTED;
                goto fail;
            }
            memcpy(k ? h->suffix : h->prefix, json_string_value(v), json_string_length(v));
            *(k ? &h->suffix_len : &h->prefix_len) = json_string_length(v);
        }
    }
    bool bfb;
    if ((rc = get_bool(model, "ignore_merges", false, &h->ignore_merges, file, "model", err, errlen)) ||
        (rc = get_bool(model, "byte_fallback", false, &bfb, file, "model", err, errlen)) ||
        (rc = get_bool(model, "fuse_unk", false, &h->fuse_unk, file, "model", err, errlen)))
        goto fail;
    /* own copy of the vocabulary strings (J may point into a jansson tree) */
    {
        size_t bytes = 1;
        for (size_t e = 0; e < J->nv; e++) bytes += J->vlen[e] + 1;
        h->voc.arena = malloc(bytes);
        h->voc.vkey = malloc((J->nv + 1) * sizeof *h->voc.vkey);
        h->voc.vlen = malloc((J->nv + 1) * sizeof *h->voc.vlen);
        h->voc.vid = malloc((J->nv + 1) * sizeof *h->voc.vid);
        if (!h->voc.arena || !h->voc.vkey || !h->voc.vlen || !h->voc.vid) {
            rc = TK_ERR_NOMEM;
            goto fail;
        }
        size_t o = 0;
        for (size_t e = 0; e < J->nv; e++) {
            memcpy(h->voc.arena + o, J->vkey[e], J->vlen[e] + 1);
            h->voc.vkey[e] = (const char *)h->voc.arena + o;
            h->voc.vlen[e] = J->vlen[e];
            h->voc.vid[e] = J->vid[e];
            o += J->vlen[e] + 1;
        }
        h->voc.nv = J->nv;
        if ((rc = tk_hfj_index(&h->voc))) {
            rc = rc < 0 ? rc : TK_ERR_FORMAT;
            goto fail;
        }
    }
    for (int b = 0; b < 256; b++) {
        char code[8];
        snprintf(code, sizeof code, "<0x%02X>", b);
        int e = bfb ? tk_hfj_lookup(&h->voc, code, 6) : -1;
        h->byte_id[b] = e >= 0 ? h->voc.vid[e] : TK_NO_RANK;
    }
    h->unk = TK_NO_RANK;
    json_t *unk = json_object_get(model, "unk_token");
    if (unk && !json_is_null(unk)) {
        int e = json_is_string(unk) ? tk_hfj_lookup(&h->voc, json_string_value(unk), json_string_length(unk)) : -1;
        if (e < 0) {
            tk_set_err(err, errlen, "%s: model.unk_token is not a string naming a model.vocab entry", file);
            rc = TK_ERR_FORMAT;
            goto fail;
        }
        h->unk = h->voc.vid[e];
    }
    if ((rc = parse_normalizer(h, json_object_get(root, "normalizer"), file, "normalizer", err, errlen))) goto fail;
    if ((rc = parse_pretok(h, json_object_get(root, "pre_tokenizer"), file, "pre_tokenizer", err, errlen))) goto fail;
    if ((rc = parse_decoder(h, json_object_get(root, "decoder"), file, "decoder", err, errlen))) goto fail;
    if ((rc = parse_added(h, json_object_get(root, "added_tokens"), file, err, errlen))) goto fail;
    if ((rc = merges_build(h, merges, nm))) goto fail;
    fold_fingerprint(t, root);
    t->pattern = TK_PAT_NONE;
    tk_engine_attach(t, &tk_engine_hf, h);
    return TK_OK;
fail:
    tk_hf_free(h);
    return rc;
}

bool tk_hf_decodes(const tk_tokenizer *t) { return t && t->engine == &tk_engine_hf && HF_OF(t)->sp; }

typedef struct {
    tk_bytes b;  /* all token strings, back to back */
    size_t *off; /* n + 1 offsets */
    size_t n, cap;
} strv;

/* Append a token string; TK_ERR_DOC_EXPAND when the strings would pass cap bytes. */
static int sv_add(strv *v, const uint8_t *p, size_t n, size_t cap) {
    if (n > cap || v->b.len > cap - n) return TK_ERR_DOC_EXPAND;
    if (v->n + 2 > v->cap) {
        size_t c = v->cap ? v->cap * 2 : 64;
        size_t *o = realloc(v->off, c * sizeof *o);
        if (!o) return TK_ERR_NOMEM;
        v->off = o;
        v->cap = c;
    }
    if (!v->n) v->off[0] = v->b.len;
    int rc = bput(&v->b, p, n);
    if (rc) return rc;
    v->off[++v->n] = v->b.len;
    return TK_OK;
}

static bool byte_token(const uint8_t *p, size_t n, uint8_t *out) {
    if (n != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return false;
    int hi = hexd(p[3]), lo = hexd(p[4]);
    if (hi < 0 || lo < 0) return false;
    *out = (uint8_t)(hi << 4 | lo);
    return true;
}

/* One decoder step over the token strings of in, into out: at most
 * tk_expand_cap(its input, in0) bytes (in0: the bytes of the ids' own
 * strings); Replace regexes pay from budget. */
static int dec_apply(const struct dec_step *d, const strv *in, strv *out, bool first, size_t in0,
                     tk_re_budget *budget) {
    int rc = TK_OK;
    out->n = 0;
    out->b.len = 0;
    size_t cap = tk_expand_cap(in->n ? in->off[in->n] - in->off[0] : 0, in0);
    if (d->kind == D_FUSE) {
        if (!in->n) return TK_OK;
        size_t len = in->off[in->n] - in->off[0];
        return sv_add(out, len ? in->b.data + in->off[0] : (const uint8_t *)"", len, cap);
    }
    for (size_t k = 0; k < in->n && !rc; k++) {
        const uint8_t *p = in->b.data ? in->b.data + in->off[k] : (const uint8_t *)"";
        size_t n = in->off[k + 1] - in->off[k];
        switch (d->kind) {
        case D_BYTEFB: {
            uint8_t byte;
            if (!byte_token(p, n, &byte)) {
                rc = sv_add(out, p, n, cap);
                break;
            }
            /* a run of byte tokens: one string if valid UTF-8, else U+FFFD per byte */
            uint8_t run[256];
            size_t r = 0, k0 = k;
            while (k < in->n && r < sizeof run &&
                   byte_token(in->b.data + in->off[k], in->off[k + 1] - in->off[k], &run[r]))
                r++, k++;
            k--;
            size_t i = 0;
            bool valid = true;
            while (i < r && valid) {
                int32_t cp;
                size_t l = u8_len(run, r, i, &cp);
                valid = cp >= 0;
                i += l;
            }
            (void)k0;
            if (valid) rc = sv_add(out, run, r, cap);
            else
                for (size_t j = 0; j < r && !rc; j++) rc = sv_add(out, (const uint8_t *)"\xEF\xBF\xBD", 3, cap);
            break;
        }
        case D_REPLACE: {
            tk_bytes tmp = {0};
            size_t i = 0, room = cap - out->b.len; /* what this token's string may still take */
            if (d->re) {
                repl_ctx c = {p, &tmp, 0, d->b, d->blen, room};
                rc = tk_regex_find_all(d->re, p, n, budget, repl_cb, &c);
                if (!rc) rc = tk_bytes_put_capped(&tmp, p + c.pos, n - c.pos, room);
                i = n;
            }
            while (i < n && !rc) {
                if (n - i >= d->alen && memcmp(p + i, d->a, d->alen) == 0) {
                    rc = tk_bytes_put_capped(&tmp, d->b, d->blen, room);
                    i += d->alen;
                } else {
                    rc = tk_bytes_put_capped(&tmp, p + i, 1, room);
                    i++;
                }
            }
            if (!rc) rc = sv_add(out, tmp.data ? tmp.data : (const uint8_t *)"", tmp.len, cap);
            tk_bytes_free(&tmp);
            break;
        }
        case D_STRIP: {
            size_t a = 0, b = n;
            for (uint32_t j = 0; j < d->start && b - a >= d->alen && memcmp(p + a, d->a, d->alen) == 0; j++)
                a += d->alen;
            for (uint32_t j = 0; j < d->stop && b - a >= d->alen && memcmp(p + b - d->alen, d->a, d->alen) == 0; j++)
                b -= d->alen;
            rc = sv_add(out, p + a, b - a, cap);
            break;
        }
        case D_METASPACE: {
            /* HF: in the first token every replacement character is dropped
             * (not only a leading one) unless prepend_scheme is never */
            bool drop = k == 0 && first && d->scheme != MS_NEVER;
            tk_bytes tmp = {0};
            size_t i = 0;
            while (i < n && !rc) {
                if (n - i >= d->alen && memcmp(p + i, d->a, d->alen) == 0) {
                    if (!drop) rc = bput(&tmp, " ", 1);
                    i += d->alen;
                } else {
                    rc = bput(&tmp, p + i, 1);
                    i++;
                }
            }
            if (!rc) rc = sv_add(out, tmp.data ? tmp.data : (const uint8_t *)"", tmp.len, cap);
            tk_bytes_free(&tmp);
            break;
        }
        }
    }
    return rc;
}

int tk_hf_decode(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, tk_bytes *out) {
    const tk_hf *h = HF_OF(t);
    strv a = {0}, b = {0};
    int rc = TK_OK;
    for (size_t k = 0; k < n && !rc; k++) {
        if (ids[k] >= t->vocab_size) {
            rc = TK_ERR_RANGE;
            break;
        }
        /* the token's own string: vocab entry or added token */
        uint32_t r = t->id_to_rank[ids[k]];
        const char *str = NULL;
        size_t len = 0;
        if (r != TK_NO_RANK) {
            /* vocabulary entries are in rank order */
            for (size_t e = r; e < h->voc.nv; e++)
                if (h->voc.vid[e] == ids[k]) {
                    str = h->voc.vkey[e];
                    len = h->voc.vlen[e];
                    break;
                }
        }
        if (!str) {
            const uint8_t *p;
            if (tk_token_bytes(t, ids[k], &p, &len)) {
                rc = TK_ERR_RANGE;
                break;
            }
            str = (const char *)p;
        }
        rc = sv_add(&a, (const uint8_t *)str, len, SIZE_MAX);
    }
    /* the ids' own strings are the decoder chain's input: its steps' bound */
    size_t in0 = a.n ? a.off[a.n] - a.off[0] : 0;
    tk_re_budget budget;
    tk_re_budget_init(&budget, in0);
    strv *cur = &a, *nxt = &b;
    for (size_t k = 0; k < h->n_dec && !rc; k++) {
        rc = dec_apply(&h->dec[k], cur, nxt, first, in0, &budget);
        strv *x = cur;
        cur = nxt;
        nxt = x;
    }
    if (!rc && cur->n && cur->off[cur->n] > cur->off[0])
        rc = bput(out, cur->b.data + cur->off[0], cur->off[cur->n] - cur->off[0]);
    tk_bytes_free(&a.b);
    tk_bytes_free(&b.b);
    free(a.off);
    free(b.off);
    return rc;
}

static void hf_describe(const tk_tokenizer *t, char *buf, size_t len) {
    static const char *const nm[] = {"NFC",   "NFD",     "NFKC",    "NFKD",       "Lowercase",
                                     "Strip", "Replace", "Prepend", "Precompiled"};
    static const char *const pt[] = {"Split", "ByteLevel", "Digits", "Punctuation", "WhitespaceSplit", "Metaspace"};
    static const char *const bh[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const tk_hf *h = HF_OF(t);
    size_t o = 0;
#define PUT(...)                                                                                                       \
    do {                                                                                                               \
        if (o < len) o += (size_t)snprintf(buf + o, len - o, __VA_ARGS__);                                             \
    } while (0)
    PUT("tokenizer.json:");
    for (size_t k = 0; k < h->n_nm; k++) PUT(" %s", nm[h->nm[k].kind]);
    PUT("%s |", h->n_nm ? "" : " (no normalizer)");
    for (size_t k = 0; k < h->n_pt; k++) {
        const pt_step *st = &h->pt[k];
        if (st->kind == PT_SPLIT)
            PUT(" Split(%s, %s%s)", st->fast != TK_PAT_NONE ? tk_pattern_name(st->fast) : "regex", bh[st->beh],
                st->invert ? ", invert" : "");
        else PUT(" %s", pt[st->kind]);
    }
    if (!h->n_pt) PUT(" (no pre-tokenizer)");
    PUT(" | BPE (%s%s%s", h->sp ? "characters, " : "", h->fast_bpe ? "merge by rank" : "HF merge loop",
        h->sp && h->byte_id[0] != TK_NO_RANK ? ", byte fallback" : "");
    if (!h->sp) {
        int odd = 0;
        for (int b = 0; b < 256; b++) odd += h->bl_odd[b >> 3] >> (b & 7) & 1;
        if (h->suffix_len) PUT(", end_of_word_suffix");
        if (h->prefix_len) PUT(", continuing_subword_prefix");
        if (odd)
            PUT(", %d bytes without a token: %s", odd,
                h->bl_byte_fallback     ? "byte fallback"
                : h->unk_sym != BL_NONE ? (h->fuse_unk ? "fused unk" : "unk")
                                        : "dropped");
    }
    PUT(")");
#undef PUT
}

/* ---- the engine (tk_engine.h) ---------------------------------------------- */

static bool hf_sniff(const char *path, const uint8_t *head, size_t n) {
    (void)head;
    (void)n;
    size_t a = strlen(path);
    return a >= 5 && strcmp(path + a - 5, ".json") == 0;
}

static int hf_encode_ordinary(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out) {
    return tk_hf_encode(t, s, n, NULL, 0, false, out);
}

/* Only a SentencePiece-style pipeline has a decoder chain of its own; a
 * byte-level one decodes as the token bytes (the generic path). */
static int hf_decode_op(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, bool stream, tk_bytes *out) {
    (void)stream;
    return HF_OF(t)->sp ? tk_hf_decode(t, ids, n, first, out) : 1;
}

/* tiktoken format: only a pipeline that is one of the built-in patterns
 * over merge-by-rank tokens; neither format carries the rest of the
 * pipeline. */
static int hf_savable(const tk_tokenizer *t, int fmt) {
    if (fmt == 0 && t->pattern != TK_PAT_NONE && !t->decode_only && HF_OF(t)->bl_plain) return TK_OK;
    return TK_ERR_UNSUPPORTED;
}

static void hf_free_state(void *state) { tk_hf_free(state); }

const tk_engine tk_engine_hf = {
    .name = "hf",
    .sniff = hf_sniff,
    .load = tk_load_hf_json,
    .encode = hf_encode_ordinary,
    .encode_special = tk_hf_encode,
    .decode = hf_decode_op,
    .describe = hf_describe,
    .lossless = hf_lossless,
    .savable = hf_savable,
    .image = false,
    .default_pp = TK_PP_NONE,
    .free = hf_free_state,
};
