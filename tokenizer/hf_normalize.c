/* hf_normalize.c - the HF normalizers at encode time (NFC/NFD/NFKC/NFKD,
 * Lowercase, Strip, Replace, Prepend, Precompiled) run in order. */
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
int tk_hf_normalize(const tk_hf *h, const uint8_t *s, size_t n, tk_bytes *a, tk_bytes *b, const uint8_t **res,
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
