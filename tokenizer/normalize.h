/* normalize.h - normalizer pieces both the HF and the SentencePiece engines
 * use (normalize.c): SentencePiece's precompiled charsmap (a Darts-clone
 * double array, walked as sentencepiece does by spm.c and as HF's
 * "Precompiled" normalizer does in hf_normalize.c), sentencepiece's
 * UTF-8 validity rule, and Unicode NFC/NFD/NFKC/NFKD (utf8proc). The walkers
 * are inline: they run once per character of every normalized document. */
#ifndef TK_NORMALIZE_H
#define TK_NORMALIZE_H

#include "tk_internal.h"

#include <string.h>

/* ---- UTF-8 as sentencepiece sees it ---------------------------------------- */

/* IsValidDecodeUTF8: length of a well-formed character at s (no overlong
 * forms, no surrogates, at most U+10FFFF), 0 if malformed. */
static inline size_t tk_spm_valid_char(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    if (b < 0x80) return 1;
    uint32_t cp;
    if (n >= 2 && (b & 0xe0) == 0xc0) {
        if ((s[1] & 0xc0) != 0x80) return 0;
        cp = (uint32_t)(b & 0x1f) << 6 | (s[1] & 0x3f);
        return cp >= 0x80 ? 2 : 0;
    }
    if (n >= 3 && (b & 0xf0) == 0xe0) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) return 0;
        cp = (uint32_t)(b & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
        return cp >= 0x800 && (cp < 0xd800 || cp >= 0xe000) ? 3 : 0;
    }
    if (n >= 4 && (b & 0xf8) == 0xf0) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) return 0;
        cp = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 | (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
        return cp >= 0x10000 && cp <= 0x10ffff ? 4 : 0;
    }
    return 0;
}

/* A decoded precompiled_charsmap: <u32 trie size><trie units><string pool>. */
typedef struct {
    uint32_t *units;
    size_t n_units;
    const uint8_t *pool;
    size_t pool_len;
} tk_cmap;

/* A blob's trie and pool (no copy of the pool: it points into blob). */
int tk_cmap_init(tk_cmap *m, const uint8_t *blob, size_t n);

static inline uint32_t tk_du_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

/* Common prefix search over s[0..n): the longest of the first max_results
 * keys that are prefixes of s (0: none); *value receives its value. The C++
 * search (explicit length) walks on through a NUL byte when it lands on an
 * empty unit (label 0); the Rust port HF uses stops there (stop_nul). */
static inline size_t tk_cmap_longest(const tk_cmap *m, const uint8_t *s, size_t n, size_t max_results, bool stop_nul,
                                     uint32_t *value) {
    if (!m->n_units) return 0;
    size_t best = 0, found = 0;
    uint32_t id = tk_du_offset(m->units[0]);
    for (size_t i = 0; i < n; i++) {
        if (!s[i] && stop_nul) break;
        id ^= s[i];
        if (id >= m->n_units) break;
        uint32_t u = m->units[id];
        if ((u & (0x80000000u | 0xffu)) != s[i]) break;
        id ^= tk_du_offset(u);
        if ((u >> 8) & 1) {
            if (id >= m->n_units) break;
            best = i + 1;
            *value = m->units[id] & 0x7fffffffu;
            if (++found == max_results) break;
        }
    }
    return best;
}

/* The pool string at value v: up to its NUL (or the pool's end). */
static inline const uint8_t *tk_cmap_string(const tk_cmap *m, uint32_t v, size_t *len) {
    if (v >= m->pool_len) {
        *len = 0;
        return m->pool;
    }
    const uint8_t *p = m->pool + v, *z = memchr(p, 0, m->pool_len - v);
    *len = z ? (size_t)(z - p) : m->pool_len - v;
    return p;
}

/* First-only common prefix search (the Rust port's transform: results[0]). */
static inline size_t tk_cmap_shortest(const tk_cmap *m, const uint8_t *s, size_t n, uint32_t *value) {
    return tk_cmap_longest(m, s, n, 1, true, value);
}

/* ---- Unicode normalization forms ------------------------------------------- */

enum { TK_NF_C, TK_NF_D, TK_NF_KC, TK_NF_KD };
/* s[0..n) in form kind (TK_NF_*) appended to out, at most cap bytes
 * (TK_ERR_DOC_EXPAND past it). */
int tk_nm_unicode(int kind, const uint8_t *s, size_t n, tk_bytes *out, size_t cap);

#endif
