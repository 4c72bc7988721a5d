/* hf_normalize.c - the HF normalizers at encode time (NFC/NFD/NFKC/NFKD,
 * Lowercase, Strip, StripAccents, Replace, Prepend, Precompiled) run in
 * order. */
#include "hf_internal.h"

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

/* StripAccents (ALBERT, XLNet, RemBERT after NFKD): HF drops every
 * character of general category M (Mn, Mc, Me: unicode-normalization's
 * is_combining_mark); invalid bytes stay. */
static int nm_strip_accents(const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    size_t i = 0, kept = 0; /* s[kept, i) is copied as one run */
    int rc;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        size_t l = u8_len(s, n, i, &cp);
        int c = cp < 0 ? 0 : utf8proc_category(cp);
        if (c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME) {
            if ((rc = tk_bytes_put_capped(out, s + kept, i - kept, cap))) return rc;
            kept = i + l;
        }
        i += l;
    }
    return tk_bytes_put_capped(out, s + kept, n - kept, cap);
}

/* ---- Precompiled: SentencePiece's charsmap walked as HF does --------------
 * (tokenizers' precompiled.rs over the spm_precompiled crate): the text cut
 * into extended grapheme clusters; a cluster under 6 bytes is replaced whole
 * by the string of the first (shortest) key that prefixes it, if any; else
 * each character by that of its own first key, or kept. The charsmap is
 * decoded once at load (nm_step.cmap), and runs of ASCII bytes that map to
 * themselves are copied as they are: between two ASCII characters (but CR
 * LF) there is always a cluster break, so such a run is clusters of one
 * byte each (the walk once decoded the charsmap's 100k+ units for every
 * document). */

static int put_key(const tk_cmap *m, const uint8_t *s, size_t n, tk_bytes *out, size_t cap, bool *done) {
    uint32_t v = 0;
    *done = tk_cmap_shortest(m, s, n, &v) > 0;
    if (!*done) return TK_OK;
    size_t l;
    const uint8_t *p = tk_cmap_string(m, v, &l);
    return tk_bytes_put_capped(out, p, l, cap);
}

/* The clusters of s[0, n) (a stretch that starts and ends at breaks). */
static int precompiled_slow(const tk_cmap *m, const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    utf8proc_int32_t state = 0, prev = -1;
    size_t g = 0; /* start of the current cluster */
    int rc = TK_OK;
    for (size_t i = 0; i <= n && !rc;) {
        utf8proc_int32_t cp = -1;
        utf8proc_ssize_t l = 0;
        if (i < n) {
            l = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
            if (l <= 0) { /* not UTF-8 (HF's strings always are): the byte alone */
                l = 1;
                cp = -1;
            }
        }
        bool brk = i == n || prev < 0 || cp < 0 || utf8proc_grapheme_break_stateful(prev, cp, &state);
        if (brk && i > g) {
            bool done = false;
            if (i - g < 6 && (rc = put_key(m, s + g, i - g, out, cap, &done))) break;
            for (size_t k = g; !done && k < i && !rc;) {
                size_t cl = tk_spm_valid_char(s + k, i - k);
                if (!cl) cl = 1;
                bool d2;
                if (!(rc = put_key(m, s + k, cl, out, cap, &d2)) && !d2) rc = tk_bytes_put_capped(out, s + k, cl, cap);
                k += cl;
            }
            g = i;
        }
        if (i == n) break;
        if (cp < 0) state = 0;
        prev = cp;
        i += (size_t)l;
    }
    return rc;
}

void tk_hf_precompiled_plain(nm_step *st) {
    for (int c = 0; c < 128; c++) {
        uint8_t b = (uint8_t)c;
        uint32_t v = 0;
        size_t l = 0;
        const uint8_t *p = tk_cmap_shortest(&st->cmap, &b, 1, &v) ? tk_cmap_string(&st->cmap, v, &l) : NULL;
        st->plain[c] = !p || (l == 1 && p[0] == b);
    }
}

/* A break lies between s[i - 1] and s[i] when both are ASCII, but CR LF. */
static inline bool ascii_break(const uint8_t *s, size_t i) {
    return s[i - 1] < 0x80 && s[i] < 0x80 && !(s[i - 1] == '\r' && s[i] == '\n');
}

static int nm_precompiled(const nm_step *st, const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    if (!st->cmap.n_units) return tk_bytes_put_capped(out, s, n, cap);
    size_t i = 0;
    int rc;
    while (i < n) {
        /* s[i] starts a cluster here: plain ASCII bytes each followed by a break */
        size_t a = i;
        while (i < n && s[i] < 0x80 && st->plain[s[i]] && (i + 1 == n || ascii_break(s, i + 1))) i++;
        if (i > a && (rc = tk_bytes_put_capped(out, s + a, i - a, cap))) return rc;
        if (i == n) break;
        size_t j = i + 1; /* to the next break between two ASCII characters */
        while (j < n && !ascii_break(s, j)) j++;
        if ((rc = precompiled_slow(&st->cmap, s + i, j - i, out, cap))) return rc;
        i = j;
    }
    return TK_OK;
}

int tk_hf_repl_cb(void *u, size_t a, size_t b) {
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
    case NM_STRIP_ACCENTS: return nm_strip_accents(s, n, out, cap);
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
        int rc = tk_regex_find_all(st->re, s, n, budget, tk_hf_repl_cb, &c);
        if (rc) return rc;
        return tk_bytes_put_capped(out, s + c.pos, n - c.pos, cap);
    }
    case NM_PRECOMPILED: return nm_precompiled(st, s, n, out, cap);
    case NM_PREPEND: {
        if (!n) return TK_OK;
        int rc = tk_bytes_put_capped(out, st->a, st->alen, cap);
        return rc ? rc : tk_bytes_put_capped(out, s, n, cap);
    }
    }
    return TK_ERR_ARG;
}

#define FIRST_MATCH 1 /* first_match_cb's stop: not a TK_ERR_* */
static int first_match_cb(void *u, size_t a, size_t b) {
    size_t *m = u;
    m[0] = a;
    m[1] = b;
    return FIRST_MATCH;
}

/* Does step st remove the first character of s[0..n) (its output's first
 * character then comes from further on)? Strip at the left, a Replace by ""
 * matching at 0, StripAccents on a mark, a charsmap mapping it to nothing;
 * the other steps keep or replace it. */
static int drops_lead(const nm_step *st, const uint8_t *s, size_t n, tk_re_budget *budget, bool *drop) {
    int32_t cp;
    size_t l = u8_len(s, n, 0, &cp);
    *drop = false;
    switch (st->kind) {
    case NM_STRIP: *drop = st->left && is_ws(cp); return TK_OK;
    case NM_STRIP_ACCENTS: {
        int c = cp < 0 ? 0 : utf8proc_category(cp);
        *drop = c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
        return TK_OK;
    }
    case NM_REPLACE: {
        if (st->blen) return TK_OK;
        size_t m[2] = {1, 0};
        int rc = tk_regex_find_all(st->re, s, n, budget, first_match_cb, m);
        *drop = m[0] == 0 && m[1] > 0; /* the first match starts at 0 and takes something */
        return rc == FIRST_MATCH ? TK_OK : rc;
    }
    case NM_PRECOMPILED: {
        tk_bytes o = {0};
        int rc = precompiled_slow(&st->cmap, s, l, &o, 64);
        *drop = !rc && o.len == 0;
        tk_bytes_free(&o);
        return rc == TK_ERR_NOMEM ? rc : TK_OK;
    }
    default: return TK_OK;
    }
}

/* Normalize s into *res (points into buf a or b, or at s when no steps).
 * Every step writes at most tk_expand_cap(its input, n) bytes: a chain of 32
 * steps cannot multiply the text 16^32 times. Regex steps pay from budget.
 * lead_dropped (may be NULL): a step removed the text's first character, so
 * the result no longer starts at the text's offset 0 (HF's
 * offsets_original, which Metaspace's prepend_scheme "first" reads). */
int tk_hf_normalize(const tk_hf *h, const uint8_t *s, size_t n, tk_bytes *a, tk_bytes *b, const uint8_t **res,
                    size_t *rn, tk_re_budget *budget, bool *lead_dropped) {
    const uint8_t *cur = s;
    size_t cn = n;
    tk_bytes *bufs[2] = {a, b};
    bool dropped = false;
    for (size_t k = 0; k < h->n_nm; k++) {
        tk_bytes *o = bufs[k & 1];
        o->len = 0;
        int rc;
        if (lead_dropped && !dropped && cn) {
            bool d;
            if ((rc = drops_lead(&h->nm[k], cur, cn, budget, &d))) return rc;
            dropped = d;
        }
        rc = nm_apply(&h->nm[k], cur, cn, o, tk_expand_cap(cn, n), budget);
        if (rc) return rc;
        cur = o->data ? o->data : (const uint8_t *)"";
        cn = o->len;
    }
    if (lead_dropped) *lead_dropped = dropped;
    *res = cur;
    *rn = cn;
    return TK_OK;
}
