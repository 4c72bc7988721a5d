/* hf_encode.c - one document through the HF pipeline: added tokens,
 * normalizer, pre-tokenizers, then the model stage (model(): the dispatch on
 * the model kind), with a per-thread context and piece cache. */
#include "hf_internal.h"
#include "ucd_categories.h"

#include <pthread.h>

/* ---- added tokens --------------------------------------------------------- */

/* The first added token of s[i..n) that is used: the leftmost-longest match
 * of all of them, skipping the ones dropped (below); returns its index or
 * -1, with its start in *at. */
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
 * Pc, Join_Control. Invalid UTF-8 (cp < 0): not a word character. The
 * categories are Unicode 16.0's (tk_ucd_category), as regex-syntax 0.8 in
 * HF tokenizers 0.23 has them: with utf8proc's 15.0, the 5,055 code points
 * assigned since (U+0897, U+1C89, U+A7CB, Todhri, Garay, CJK Extension I
 * ...) were not word characters, so a single_word token next to one
 * matched where HF's does not (tests/python/test_unicode_scan.py). */
static bool is_word(int32_t cp) {
    if (cp < 0) return false;
    if (cp < 128) return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_';
    if (cp == 0x200C || cp == 0x200D || (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
        (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189))
        return true;
    int c = tk_ucd_category((uint32_t)cp);
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
        /* the longest added text at i: the deepest terminal on the walk down the trie */
        long best = -1;
        uint32_t node = 0;
        for (size_t j = i; j < n; j++) {
            uint32_t c = h->trie[node].child;
            while (c && h->trie[c].byte != s[j]) c = h->trie[c].next;
            if (!c) break;
            node = c;
            if (h->trie[node].term[normalized] >= 0) best = h->trie[node].term[normalized];
        }
        if (best >= 0) {
            const hf_added *a = &h->added[best];
            size_t st = i, e = i + a->len;
            /* HF finds the leftmost-longest of all added tokens, inactive
             * specials included, then drops a match it does not use: a
             * special one taken as text, a single_word one inside a word.
             * A dropped match's text is not searched again, so a shorter
             * active token inside an inactive special is text too. */
            bool drop = !active(a, as);
            if (!drop && a->single_word) {
                int32_t cp = -1;
                bool before = st == 0 || !is_word(char_before(s, st));
                bool after = e == n || (u8_len(s, n, e, &cp), !is_word(cp));
                drop = !before || !after;
            }
            if (drop) {
                i = e - 1;
                continue;
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
    hf_uni_scratch us; /* Unigram's lattice */
    tk_bytes nbuf[2];
    tk_bytes mod[HF_MAX_STEPS];
    spanv sp[HF_MAX_STEPS];
    tk_bytes blmap, blraw; /* steps after ByteLevel: its piece as characters, and a piece of them as bytes again */
    bool mapped;           /* run_pre is below ByteLevel on blmap's text */
    tk_re_budget budget;   /* the document's regex work (tk_hf_encode sets it) */
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
    bool ids = c->h->sp || (!c->h->fast_bpe && tk_hf_bl_needs_word(c->h, p, n));
    if (c->h->wm) rc = c->h->wm->word(c->h, p, n, out);
    else if (c->h->uni) rc = tk_hf_uni_word(c->h->uni, &c->us, p, n, out);
    else if (c->h->sp) rc = tk_hf_sp_word(c->h, &c->bs, p, n, out);
    else if (ids) rc = tk_hf_bl_word(t, c->h, &c->bs, p, n, out);
    else if (c->h->fast_bpe) rc = tk_bpe_piece(t, p, n, TK_NO_RANK, out);
    else rc = tk_hf_bpe_bytes(t, c->h, &c->bs, p, n, out);
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

/* A piece of ByteLevel's characters (each U+0021..U+0143, one per byte:
 * run_mapped wrote them) as the bytes they stand for, for the model. */
static int model_unmapped(hf_ctx *c, const uint8_t *p, size_t n) {
    tk_bytes *r = &c->blraw;
    r->len = 0;
    if (tk_bytes_append(r, NULL, n)) return TK_ERR_NOMEM; /* room for n bytes */
    r->len = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = p[i] < 0x80 ? p[i] : (uint32_t)(p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F);
        i += p[i] < 0x80 ? 1 : 2;
        r->data[r->len++] = (uint8_t)tk_cp_to_byte(cp);
    }
    return model(c, r->data, r->len);
}

static int run_pre(hf_ctx *c, size_t k, const uint8_t *p, size_t n, bool at_start);

/* HF's ByteLevel hands on its pieces with every byte replaced by its
 * character ('Ġ' for a space, '²' for 0xB2 ...): pre-tokenizers after it
 * (Falcon's Digits and Split) split that text, so a digit test sees '²'
 * (numeric) where the piece holds "\xC2\xB2". Step k + 1 on gets the
 * characters and the model each piece's bytes (model_unmapped). */
static int run_mapped(hf_ctx *c, size_t k, const uint8_t *p, size_t n, bool at_start) {
    tk_bytes *m = &c->blmap;
    m->len = 0;
    if (n > SIZE_MAX / 2 || tk_bytes_append(m, NULL, 2 * n)) return TK_ERR_NOMEM; /* room for 2n bytes */
    m->len = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = tk_byte_to_cp(p[i]); /* < 0x800: one or two UTF-8 bytes */
        if (cp < 0x80) {
            m->data[m->len++] = (uint8_t)cp;
        } else {
            m->data[m->len++] = (uint8_t)(0xC0 | cp >> 6);
            m->data[m->len++] = (uint8_t)(0x80 | (cp & 0x3F));
        }
    }
    c->mapped = true; /* one ByteLevel at most (hf_config.c): no nesting */
    int rc = run_pre(c, k + 1, m->data, m->len, at_start);
    c->mapped = false;
    return rc;
}

/* A match of the Whitespace pre-tokenizer's regex in a stretch at off. */
typedef struct {
    spanv *v;
    size_t off;
} ws_ctx;

static int ws_cb(void *u, size_t a, size_t b) {
    ws_ctx *w = u;
    return sv_push(w->v, w->off + a, w->off + b, false);
}

/* ASCII \s and \w of Oniguruma's Unicode classes (hf_regex.c WS_CLASS,
 * W_CLASS_CATEGORIES: no M, Nl or other listed character is ASCII). */
static inline bool ascii_ws(uint8_t b) { return b == ' ' || (b >= 0x09 && b <= 0x0D); }
static inline bool ascii_word(uint8_t b) {
    return (b >= '0' && b <= '9') || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b == '_';
}

/* HF's Whitespace pre-tokenizer: the matches of \w+|[^\w\s]+ kept. No
 * match takes in a whitespace character, so the text is cut at its ASCII
 * whitespace bytes, and a stretch between them that is all ASCII is one
 * run of \w or [^\w\s] after another, scanned here; a stretch with any
 * other byte goes to the regex engine, alone (its matches there are the
 * whole text's: the regex has no anchors, and a match starts after the
 * whitespace before the stretch). PCRE2 on every byte was 40% of
 * hf_ws_nfkc.json's encode (perf). */
static int ws_split(hf_ctx *c, size_t k, const uint8_t *p, size_t n, bool at_start) {
    spanv *v = &c->sp[k];
    v->n = 0;
    int rc;
    for (size_t i = 0; i < n;) {
        while (i < n && ascii_ws(p[i])) i++;
        size_t a = i;
        bool ascii = true;
        for (; i < n && !ascii_ws(p[i]); i++) ascii &= p[i] < 0x80;
        if (a == i) break;
        if (!ascii) {
            ws_ctx w = {v, a};
            if ((rc = tk_regex_find_all(c->h->pt[k].re, p + a, i - a, &c->budget, ws_cb, &w))) return rc;
            continue;
        }
        for (size_t j = a; j < i;) {
            bool wd = ascii_word(p[j]);
            size_t e = j + 1;
            while (e < i && ascii_word(p[e]) == wd) e++;
            if ((rc = sv_push(v, j, e, false))) return rc;
            j = e;
        }
    }
    return emit_spans(c, k, p, at_start);
}

/* The end of the piece at i by a Split's built-in scanner (st->fast). */
static inline size_t fast_next(const pt_step *st, const uint8_t *p, size_t n, size_t i) {
    if (st->cl100k_hf == 3) return tk_pretok_deepseek_next(p, n, i);
    return st->cl100k_hf ? tk_pretok_cl100k_hf_next(p, n, i, st->cl100k_hf == 2) : tk_pretok_next(st->fast, p, n, i);
}

static int run_pre(hf_ctx *c, size_t k, const uint8_t *p, size_t n, bool at_start) {
    if (!n) return TK_OK;
    if (k == c->h->n_pt) return c->mapped ? model_unmapped(c, p, n) : model(c, p, n);
    const pt_step *st = &c->h->pt[k];
    spanv *v = &c->sp[k];
    int rc;
    switch (st->kind) {
    case PT_SPLIT:
        if (st->ws_scan) return ws_split(c, k, p, n, at_start);
        if (st->fast != TK_PAT_NONE && st->beh == B_ISOLATED && !st->invert) {
            for (size_t i = 0; i < n;) {
                size_t e = fast_next(st, p, n, i);
                if ((rc = run_pre(c, k + 1, p + i, e - i, at_start && i == 0))) return rc;
                i = e;
            }
            return TK_OK;
        }
        v->n = 0;
        if (st->fast != TK_PAT_NONE && st->cl100k_hf != 3) { /* DeepSeek's pieces include text between matches */
            for (size_t i = 0; i < n;) {
                size_t e = fast_next(st, p, n, i);
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
        bool after = k + 1 < c->h->n_pt; /* steps after it: they see its characters */
        if (!st->use_regex) return after ? run_mapped(c, k, q, qn, at_start) : run_pre(c, k + 1, q, qn, at_start);
        for (size_t i = 0; i < qn;) {
            size_t e = tk_pretok_next(TK_PAT_GPT2, q, qn, i);
            bool first = at_start && i == 0;
            if ((rc = after ? run_mapped(c, k, q + i, e - i, first) : run_pre(c, k + 1, q + i, e - i, first)))
                return rc;
            i = e;
        }
        return TK_OK;
    }
    case PT_BERT: /* WhitespaceSplit then Punctuation (Isolated) in one pass: no span vectors */
        for (size_t i = 0, a = 0; i <= n;) {
            int32_t cp = -1;
            size_t l = 1;
            bool cut = i == n, punct = false;
            if (!cut) {
                if (p[i] < 0x80) cp = p[i];
                else l = u8_len(p, n, i, &cp);
                punct = is_punct(cp);
                cut = punct || is_ws(cp);
            }
            if (cut) {
                if (a < i && (rc = run_pre(c, k + 1, p + a, i - a, at_start && a == 0))) return rc;
                if (punct && (rc = run_pre(c, k + 1, p + i, l, at_start && i == 0))) return rc;
                a = i + l;
            }
            i += l;
        }
        return TK_OK;
    case PT_METASPACE: {
        tk_bytes *m = &c->mod[k];
        m->len = 0;
        bool starts = n >= st->repl_len && memcmp(p, st->repl, st->repl_len) == 0;
        if (p[0] == ' ') starts = true; /* replaced below */
        bool prepend = !starts && (st->scheme == MS_ALWAYS || (st->scheme == MS_FIRST && at_start));
        const uint8_t *sp = memchr(p, ' ', n);
        const uint8_t *q = p; /* the text as this step leaves it: p itself when nothing changes (SentencePiece
                               * converters' normalizers put the replacement in already: a whole-document copy saved) */
        size_t qn = n;
        if (prepend || sp) {
            if (prepend && (rc = bput(m, st->repl, st->repl_len))) return rc;
            for (size_t i = 0; i < n; i++) {
                const uint8_t *f = memchr(p + i, ' ', n - i);
                size_t j = f ? (size_t)(f - p) : n;
                if ((rc = bput(m, p + i, j - i))) return rc;
                if (j < n && (rc = bput(m, st->repl, st->repl_len))) return rc;
                i = j;
            }
            q = m->data;
            qn = m->len;
        }
        if (!st->split) return run_pre(c, k + 1, q, qn, at_start);
        v->n = 0;
        if ((rc = char_matches(v, q, qn, NULL, st->repl, st->repl_len))) return rc;
        fold(v, B_MERGED_NEXT, false);
        return emit_spans(c, k, q, at_start);
    }
    }
    return TK_ERR_ARG;
}

/* A stretch of text with no added token of the raw stage in it. */
static int encode_segment(hf_ctx *c, const uint8_t *s, size_t n, bool at_start, const active_set *as) {
    const uint8_t *ns;
    size_t nn;
    bool dropped = false; /* only prepend_scheme "first" reads it: tracked only then (a regex pass) */
    int rc = tk_hf_normalize(c->h, s, n, &c->nbuf[0], &c->nbuf[1], &ns, &nn, &c->budget,
                             c->h->first_scheme && at_start ? &dropped : NULL);
    if (rc) return rc;
    at_start &= !dropped;
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
    tk_hf_uni_scratch_free(&c->us);
    tk_bytes_free(&c->nbuf[0]);
    tk_bytes_free(&c->nbuf[1]);
    tk_bytes_free(&c->blmap);
    tk_bytes_free(&c->blraw);
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

int tk_hf_lossless(const tk_tokenizer *t) {
    const tk_hf *h = HF_OF(t);
    if (h->n_nm || h->sp) return 0;         /* SentencePiece-style: unk, dropped characters, decoder chain */
    if (!h->bl_plain) return 0;             /* bytes without a token (unk, dropped, <0xNN>); affixes in the tokens */
    for (size_t k = 0; k < h->n_added; k++) /* an added token that takes whitespace in */
        if (!h->added[k].special && (h->added[k].lstrip || h->added[k].rstrip)) return 0;
    for (size_t k = 0; k < h->n_pt; k++) {
        const pt_step *st = &h->pt[k];
        if ((st->kind == PT_SPLIT || st->kind == PT_PUNCT) && st->beh == B_REMOVED) return 0;
        if (st->kind == PT_WSSPLIT || st->kind == PT_BERT || st->kind == PT_METASPACE ||
            (st->kind == PT_BYTELEVEL && st->prefix_space))
            return 0;
    }
    return 1;
}
