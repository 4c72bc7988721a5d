/* normalize.c - normalizer pieces shared by the HF and SentencePiece engines
 * (normalize.h): the precompiled charsmap's reader and HF's way of running
 * it, and the Unicode normalization forms. */
#include "normalize.h"

#include <stdlib.h>
#include <utf8proc.h>

/* ---- the charsmap: a Darts-clone double array --------------------------------
 * Unit u: label = u & (1 << 31 | 0xff) (a leaf's label has bit 31 set, so it
 * never equals a byte), has_leaf = bit 8, value = u & 0x7fffffff (on the leaf
 * unit), offset = (u >> 10) << (bit 9 ? 8 : 0). From node id, byte c leads to
 * id ^ offset(unit[id]) ^ c; a key ends at a node whose has_leaf is set, and
 * its value sits at that node's id ^ offset. Every index is checked against
 * the array (a crafted trie cannot read outside it). */

int tk_cmap_init(tk_cmap *m, const uint8_t *blob, size_t n) {
    memset(m, 0, sizeof *m);
    if (n == 0) return TK_OK;
    if (n <= 4) return TK_ERR_FORMAT;
    uint32_t tsize = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24;
    if (tsize > n - 4) return TK_ERR_FORMAT;
    m->n_units = tsize / 4;
    m->units = malloc((m->n_units ? m->n_units : 1) * sizeof *m->units);
    if (!m->units) return TK_ERR_NOMEM;
    for (size_t i = 0; i < m->n_units; i++) {
        const uint8_t *q = blob + 4 + 4 * i;
        m->units[i] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    }
    m->pool = blob + 4 + tsize;
    m->pool_len = n - 4 - tsize;
    return TK_OK;
}

/* ---- HF tokenizer.json "Precompiled" --------------------------------------
 * HF runs the same charsmap its own way (tokenizers' precompiled.rs over the
 * spm_precompiled crate): the text is cut into extended grapheme clusters; a
 * cluster under 6 bytes is replaced whole by the string of the FIRST
 * (shortest) key that is a prefix of it, if any; otherwise each character
 * is replaced by the string of the first key that is a prefix of that
 * character alone, or kept. */

int tk_spm_charsmap_check(const uint8_t *blob, size_t n) {
    tk_cmap m;
    int rc = tk_cmap_init(&m, blob, n);
    free(m.units);
    return rc;
}

/* precompiled_charsmap of a tokenizer.json: standard base64 (padding
 * optional) -> a checked charsmap blob in *out (malloc'd). */
int tk_spm_charsmap_b64(const char *s, size_t n, uint8_t **out, size_t *on) {
    *out = NULL;
    *on = 0;
    if (!s || !n) return TK_ERR_FORMAT;
    while (n && s[n - 1] == '=') n--;
    uint8_t *b = malloc(n / 4 * 3 + 3);
    if (!b) return TK_ERR_NOMEM;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '+'             ? 62
                : c == '/'             ? 63
                                       : -1;
        if (v < 0) {
            free(b);
            return TK_ERR_BASE64;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b[o++] = (uint8_t)(acc >> bits);
        }
    }
    int rc = tk_spm_charsmap_check(b, o);
    if (rc) {
        free(b);
        return rc;
    }
    *out = b;
    *on = o;
    return TK_OK;
}

/* ---- NFC / NFD / NFKC / NFKD ------------------------------------------------ */

/* The code point at s[i] (n = end) and its length; -1 and 1 when invalid. */
static inline size_t tk_nm_u8_len(const uint8_t *s, size_t n, size_t i, int32_t *cp) {
    utf8proc_int32_t c;
    utf8proc_ssize_t l = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i > 4 ? 4 : n - i), &c);
    if (l <= 0) {
        *cp = -1;
        return 1;
    }
    *cp = c;
    return (size_t)l;
}

/* Unicode normalization of s into out (at most cap bytes). Invalid UTF-8
 * bytes pass through and cut the text into runs normalized on their own.
 * Runs of ASCII are copied: ASCII never decomposes and is never the second
 * character of a composition, so a non-ASCII run is normalized together with
 * the one ASCII character before it (a starter it may compose with: e +
 * U+0301). utf8proc_map's steps, with the decomposed length checked before
 * its buffer (4 bytes a code point) is allocated: more code points than the
 * step may write bytes refuses the text (real text: at most 6 per byte, the
 * 18 of U+FDFA's compatibility decomposition). */
int tk_nm_unicode(int kind, const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    int flags = UTF8PROC_STABLE;
    switch (kind) {
    case TK_NF_C: flags |= UTF8PROC_COMPOSE; break;
    case TK_NF_D: flags |= UTF8PROC_DECOMPOSE; break;
    case TK_NF_KC: flags |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default: flags |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] < 0x80) j++;
        if (j == n) return tk_bytes_put_capped(out, s + i, n - i, cap);
        size_t start = j > i ? j - 1 : j;
        int rc;
        if ((rc = tk_bytes_put_capped(out, s + i, start - i, cap))) return rc;
        size_t e = j;
        while (e < n && s[e] >= 0x80) {
            int32_t cp;
            size_t l = tk_nm_u8_len(s, n, e, &cp);
            if (cp < 0) break;
            e += l;
        }
        if (e == j) { /* an invalid byte: as is */
            if ((rc = tk_bytes_put_capped(out, s + start, j + 1 - start, cap))) return rc;
            i = j + 1;
            continue;
        }
        const utf8proc_uint8_t *src = s + start;
        utf8proc_ssize_t sl = (utf8proc_ssize_t)(e - start);
        utf8proc_ssize_t cps = utf8proc_decompose(src, sl, NULL, 0, (utf8proc_option_t)flags);
        if (cps < 0) return cps == UTF8PROC_ERROR_NOMEM ? TK_ERR_NOMEM : TK_ERR_FORMAT;
        if ((size_t)cps > cap - out->len) return TK_ERR_DOC_EXPAND;
        utf8proc_int32_t *buf = malloc(((size_t)cps + 1) * sizeof *buf);
        if (!buf) return TK_ERR_NOMEM;
        utf8proc_ssize_t dl = utf8proc_decompose(src, sl, buf, cps, (utf8proc_option_t)flags);
        if (dl >= 0) dl = utf8proc_reencode(buf, dl, (utf8proc_option_t)flags);
        if (dl < 0) {
            free(buf);
            return dl == UTF8PROC_ERROR_NOMEM ? TK_ERR_NOMEM : TK_ERR_FORMAT;
        }
        rc = tk_bytes_put_capped(out, buf, (size_t)dl, cap);
        free(buf);
        if (rc) return rc;
        i = e;
    }
    return TK_OK;
}
