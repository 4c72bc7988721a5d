/* hf_normalize.c - the HF normalizers at encode time (NFC/NFD/NFKC/NFKD,
 * Lowercase, Strip, StripAccents, Replace, Prepend, Precompiled) run in
 * order. */
#include "hf_internal.h"
#include "hf_ucd.h"

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
            utf8proc_ssize_t bl = utf8proc_encode_char(tk_hf_tolower(cp), buf); /* Rust's tables (hf_ucd.h) */
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
static bool is_mark(int32_t cp) {
    int c = cp < 0 ? 0 : tk_hf_nf_category(cp); /* Unicode 9.0 marks: hf_ucd.h */
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

static int nm_strip_accents(const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    return tk_hf_drop_chars(s, n, is_mark, out, cap);
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
            if (!done && i - g < 6 && tk_spm_valid_char(s + g, i - g) == i - g) {
                /* a one-character cluster (most are): its character's lookup is the one just made */
                rc = tk_bytes_put_capped(out, s + g, i - g, cap);
                done = true;
            }
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
    for (int c = 0; c < 256; c++) {
        uint8_t b = (uint8_t)c;
        uint32_t v = 0;
        size_t l = 0;
        const uint8_t *p = c < 128 && tk_cmap_shortest(&st->cmap, &b, 1, &v) ? tk_cmap_string(&st->cmap, v, &l) : NULL;
        /* CR is left to the cluster walk (CR LF is one cluster), so a plain
         * byte followed by an ASCII one always ends its cluster */
        st->plain[c] = c < 128 && c != '\r' && (!p || (l == 1 && p[0] == b));
    }
}

/* The high bit of each zero byte of w (exact: no borrow from byte to byte). */
static inline uint64_t zero_bytes(uint64_t w) {
    const uint64_t lo = 0x7F7F7F7F7F7F7F7Full;
    return ~(((w & lo) + lo) | w | lo);
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
        while (i + 1 < n && st->plain[s[i]] && s[i + 1] < 0x80) i++;
        if (i + 1 == n && st->plain[s[i]]) i++;
        if (i > a && (rc = tk_bytes_put_capped(out, s + a, i - a, cap))) return rc;
        if (i == n) break;
        size_t j = i + 1; /* to the next break between two ASCII characters */
        while (j < n && !ascii_break(s, j)) j++;
        if ((rc = precompiled_slow(&st->cmap, s + i, j - i, out, cap))) return rc;
        i = j;
    }
    return TK_OK;
}

/* ---- Replace without the regex engine ------------------------------------
 * transformers' SentencePiece converters write the same few Replace
 * patterns into every tokenizer.json: a String (" " -> "\u2581", "``" ->
 * "\""), a run of one character (" {2,}" -> " "), the text's leading and
 * trailing spaces ("\A +| +\z" -> ""). Through PCRE2 the run and the
 * trim cost a match attempt (and a budget callout) per position: a fifth
 * of spm_nmt_first.json's whole encode (perf), as much as half its Unigram
 * lattice. Recognised at load by their exact pattern text, they are
 * scanned here 8 bytes at a time (or by memchr / memmem), with the output
 * written as the input is read, and give the matches Rust's find_iter gives
 * (leftmost, non-overlapping, greedy); the rest keep the regex engine. These
 * scans are linear and take no regex budget (the budget bounds PCRE2's
 * backtracking, which they do not do). */

int tk_hf_replace_fast(nm_step *st, const char *pat, size_t len, bool literal) {
    st->rep = REP_REGEX;
    if (!pat || !len) return TK_OK;
    if (literal) {
        if (!(st->a = malloc(len))) return TK_ERR_NOMEM;
        memcpy(st->a, pat, len);
        st->alen = len;
        st->rep = REP_LITERAL;
        return TK_OK;
    }
    if (len == 9 && !memcmp(pat, "\\A +| +\\z", 9)) {
        st->rep = REP_TRIM;
        return TK_OK;
    }
    /* C{n,} or C+, C a space, letter or digit (no regex meaning, one byte) */
    uint8_t c = (uint8_t)pat[0];
    if (c != ' ' && !(c >= '0' && c <= '9') && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z')) return TK_OK;
    uint32_t m = 0;
    if (len == 2 && pat[1] == '+') m = 1;
    else if (len >= 5 && len <= 10 && pat[1] == '{' && pat[len - 2] == ',' && pat[len - 1] == '}') {
        for (size_t k = 2; k < len - 2; k++) {
            if (pat[k] < '0' || pat[k] > '9') return TK_OK;
            m = m * 10 + (uint32_t)(pat[k] - '0');
        }
    }
    if (m) { /* m == 0 ("C{0,}"): empty matches, left to PCRE2 */
        st->rep = REP_RUN;
        st->run_byte = c;
        st->run_min = m;
    }
    return TK_OK;
}

/* Append within cap; the common case (room left) without a call. */
static inline int put(tk_bytes *out, const uint8_t *p, size_t n, size_t cap) {
    if (!n) return TK_OK; /* memcpy with a NULL buffer (nothing written yet) is undefined even for 0 bytes */
    if (n <= out->cap - out->len && n <= cap && out->len <= cap - n) {
        memcpy(out->data + out->len, p, n);
        out->len += n;
        return TK_OK;
    }
    return tk_bytes_put_capped(out, p, n, cap);
}

/* The first i >= from with s[i] == s[i + 1] == c, n if none; 8 pairs a
 * step (a zero byte of (w ^ c) | (w' ^ c), w' the word a byte on: both
 * bytes are c; the exact per-byte test, no carries between bytes). */
static size_t find_pair(const uint8_t *s, size_t n, size_t i, uint8_t c) {
    const uint64_t cc = 0x0101010101010101ull * c;
    for (; i + 9 <= n; i += 8) {
        uint64_t w, w1;
        memcpy(&w, s + i, 8);
        memcpy(&w1, s + i + 1, 8);
        uint64_t m = zero_bytes((w ^ cc) | (w1 ^ cc));
        if (m) return i + ((size_t)__builtin_ctzll(m) >> 3); /* little-endian: the lowest byte is s[i] */
    }
    for (; i + 1 < n; i++)
        if (s[i] == c && s[i + 1] == c) return i;
    return n;
}

/* A one-byte String replaced by at most 4 bytes (" " -> "\u2581"): its
 * count sizes the output once, then every byte is written as 4 bytes (the
 * replacement, or itself) and the end moves by 1 or blen - a select, where
 * a branch on each space mispredicted about once a word. */
static int replace_byte(const nm_step *st, const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    const uint8_t c = st->a[0];
    const uint64_t cc = 0x0101010101010101ull * c;
    size_t hits = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        hits += (size_t)(((zero_bytes(w ^ cc) >> 7) * 0x0101010101010101ull) >> 56); /* its flags summed */
    }
    for (; i < n; i++) hits += s[i] == c;
    size_t keep = n - hits;
    if (keep > cap || (hits && st->blen > (cap - keep) / hits)) return TK_ERR_DOC_EXPAND; /* as put's refusal */
    size_t need = keep + hits * st->blen;
    if (out->len > cap - need) return TK_ERR_DOC_EXPAND;
    /* room for the 8-byte stores: 7 bytes of slack past the end */
    if (tk_bytes_append(out, NULL, need + 7)) return TK_ERR_NOMEM;
    out->len -= need + 7;
    uint8_t rb[4] = {0};
    if (st->blen) memcpy(rb, st->b, st->blen);
    uint32_t rep;
    memcpy(&rep, rb, 4);
    uint8_t *o = out->data + out->len;
    for (i = 0; i + 8 <= n;) { /* 8 bytes copied, then the first hit in them (if any) expanded */
        uint64_t w;
        memcpy(&w, s + i, 8);
        uint64_t m = zero_bytes(w ^ cc);
        if (!m) {
            memcpy(o, &w, 8);
            o += 8;
            i += 8;
            continue;
        }
        size_t k = (size_t)__builtin_ctzll(m) >> 3; /* little-endian: the lowest byte is s[i] */
        memcpy(o, &w, 8);
        memcpy(o + k, &rep, 4);
        o += k + st->blen;
        i += k + 1;
    }
    for (; i < n; i++) {
        uint32_t v = s[i]; /* little-endian: s[i] is the first byte stored */
        bool hit = s[i] == c;
        v = hit ? rep : v;
        memcpy(o, &v, 4);
        o += hit ? st->blen : 1;
    }
    out->len += need;
    return TK_OK;
}

static int nm_replace_fast(const nm_step *st, const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    size_t pos = 0; /* s[pos, ...) not yet written */
    int rc;
    switch (st->rep) {
    case REP_LITERAL:
        if (st->alen == 1 && st->blen <= 4) return replace_byte(st, s, n, out, cap);
        for (size_t i = 0; i + st->alen <= n;) {
            const uint8_t *f = st->alen == 1 ? memchr(s + i, st->a[0], n - i) : memmem(s + i, n - i, st->a, st->alen);
            if (!f) break;
            size_t at = (size_t)(f - s);
            if ((rc = put(out, s + pos, at - pos, cap)) || (rc = put(out, st->b, st->blen, cap))) return rc;
            pos = i = at + st->alen;
        }
        break;
    case REP_RUN:
        for (size_t i = 0; i < n;) {
            /* a run of 2 or more starts at the first pair (a single byte is
             * no match then): most texts have single spaces only */
            size_t a = st->run_min > 1 ? find_pair(s, n, i, st->run_byte) : i;
            const uint8_t *f = a < n ? memchr(s + a, st->run_byte, n - a) : NULL;
            if (!f) break;
            a = (size_t)(f - s);
            size_t e = a + 1;
            while (e < n && s[e] == st->run_byte) e++;
            if (e - a >= st->run_min) { /* the leftmost place the pattern matches: a maximal run, taken whole */
                if ((rc = put(out, s + pos, a - pos, cap)) || (rc = put(out, st->b, st->blen, cap))) return rc;
                pos = e;
            }
            i = e;
        }
        break;
    case REP_TRIM: {
        size_t a = 0, e = n;
        while (a < n && s[a] == ' ') a++;
        while (e > a && s[e - 1] == ' ') e--;
        /* matches: [0, a) when a > 0 (the whole text when it is all spaces), [e, n) when e < n */
        if (a && (rc = put(out, st->b, st->blen, cap))) return rc;
        if ((rc = put(out, s + a, e - a, cap))) return rc;
        if (e < n && (rc = put(out, st->b, st->blen, cap))) return rc;
        return TK_OK;
    }
    }
    return put(out, s + pos, n - pos, cap);
}

/* Does the Replace step's first match start at 0 and take something? */
static bool replace_fast_at0(const nm_step *st, const uint8_t *s, size_t n) {
    switch (st->rep) {
    case REP_LITERAL: return n >= st->alen && memcmp(s, st->a, st->alen) == 0;
    case REP_RUN: {
        size_t e = 0;
        while (e < n && e < st->run_min && s[e] == st->run_byte) e++;
        return e >= st->run_min;
    }
    default: return n && s[0] == ' '; /* REP_TRIM */
    }
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
    case NM_NFKD: return tk_hf_nm_unicode(TK_NF_C + (st->kind - NM_NFC), s, n, out, cap); /* Unicode 9.0: hf_ucd.h */
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
        if (st->rep != REP_REGEX) return nm_replace_fast(st, s, n, out, cap);
        repl_ctx c = {s, out, 0, st->b, st->blen, cap};
        int rc = tk_regex_find_all(st->re, s, n, budget, tk_hf_repl_cb, &c);
        if (rc) return rc;
        return tk_bytes_put_capped(out, s + c.pos, n - c.pos, cap);
    }
    case NM_PRECOMPILED: return nm_precompiled(st, s, n, out, cap);
    case NM_BERT_CLEAN: return tk_hf_nm_bert_clean(s, n, out, cap);
    case NM_BERT_CJK: return tk_hf_nm_bert_cjk(s, n, out, cap);
    case NM_BERT_MN: return tk_hf_nm_bert_mn(s, n, out, cap);
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
    case NM_BERT_CLEAN:
    case NM_BERT_MN: *drop = tk_hf_bert_drops(st->kind, cp); return TK_OK;
    case NM_STRIP_ACCENTS: {
        int c = cp < 0 ? 0 : tk_hf_nf_category(cp); /* Unicode 9.0 marks: hf_ucd.h */
        *drop = c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
        return TK_OK;
    }
    case NM_REPLACE: {
        if (st->blen) return TK_OK;
        if (st->rep != REP_REGEX) {
            *drop = replace_fast_at0(st, s, n);
            return TK_OK;
        }
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
