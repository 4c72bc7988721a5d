/* mc_json.h - the pieces of JSON's grammar that the project's three JSON
 * scanners share (header only, static inline: each scanner's hot loop
 * inlines them, so sharing them costs no call):
 *   dataset/json_scan.c    JSONL records, jansson's acceptance rules
 *   tokenizer/load_tekken.c  tekken.json, Python json's acceptance rules
 *   tokenizer/hf_json.c    tokenizer.json's vocabulary and merges (fast path)
 *
 * What is shared is what the rules agree on: four hex digits, a \u escape
 * with its surrogate pair joined into one character, and the RFC 8259 number
 * grammar; strict UTF-8 is mc_utf8_seq (mks_common.h). What they do not
 * agree on stays in each scanner, as its own policy on these results: a lone
 * surrogate escape (Python keeps it, jansson makes it U+FFFD, the
 * tokenizer.json path refuses it), \u0000, NaN / Infinity (Python only),
 * integer range (jansson: int64; Python: any), leading zeros ("01" is two
 * tokens to every scanner; each refuses it its own way), nesting depth, and
 * the scanning loops themselves (json_scan.c's SSE2 string scan and SIMD
 * UTF-8 check, load_tekken.c's streaming decode of chosen entries, hf_json's
 * in-place decode), which differ in what they decode and where they keep it,
 * not in what they accept. */
#ifndef MC_JSON_H
#define MC_JSON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* p[0..4) as four hex digits (either case) into *v: 1, or 0 when they are
 * not (nothing written). */
static inline int mc_json_hex4(const uint8_t *p, uint32_t *v) {
    uint32_t x = 0;
    for (int k = 0; k < 4; k++) {
        uint32_t c = p[k], d;
        if (c - '0' < 10) d = c - '0';
        else if ((c | 0x20) - 'a' < 6) d = (c | 0x20) - 'a' + 10;
        else return 0;
        x = x << 4 | d;
    }
    *v = x;
    return 1;
}

/* A \u escape at p[0..n) (the caller has seen p[0] == '\\', p[1] == 'u'):
 * returns how many bytes it takes (6; 12 when a high surrogate escape is
 * followed by an escaped low surrogate: the pair is one character) and the
 * code point in *cp, or 0 when p does not hold "\u" and four hex digits. A
 * surrogate escape that is not such a pair comes back as it is, *cp in
 * 0xD800..0xDFFF, for the caller's rule. */
static inline size_t mc_json_u_escape(const uint8_t *p, size_t n, uint32_t *cp) {
    uint32_t v, w;
    if (n < 6 || !mc_json_hex4(p + 2, &v)) return 0;
    if (v >= 0xD800 && v <= 0xDBFF && n >= 12 && p[6] == '\\' && p[7] == 'u' && mc_json_hex4(p + 8, &w) &&
        w >= 0xDC00 && w <= 0xDFFF) {
        *cp = 0x10000 + ((v - 0xD800) << 10) + (w - 0xDC00);
        return 12;
    }
    *cp = v;
    return 6;
}

/* A number's parts, as mc_json_number found them. */
typedef struct {
    const uint8_t *end;    /* MC_JNUM_OK: just after the number; else the byte at fault */
    const uint8_t *digits; /* the integer part's digits (after the '-') */
    size_t n_digits;
    int neg;  /* a leading '-' */
    int real; /* a fraction or an exponent */
    long exp; /* the exponent's value, its magnitude capped near 10^8 (0: none) */
} mc_jnum;

enum { MC_JNUM_NONE = 0, MC_JNUM_OK = 1, MC_JNUM_BAD = -1 };

/* RFC 8259's number at p[0..e): -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]?
 * [0-9]+)?, the longest such prefix. MC_JNUM_OK: *out describes it (a '0'
 * followed by more digits ends after the '0': the caller refuses what
 * follows). MC_JNUM_NONE: no digit where the integer part must start.
 * MC_JNUM_BAD: no digit after the '.' or the exponent's e / sign; out->end is
 * that byte. */
static inline int mc_json_number(const uint8_t *p, const uint8_t *e, mc_jnum *out) {
    out->neg = p < e && *p == '-';
    if (out->neg) p++;
    out->digits = p;
    out->real = 0;
    out->exp = 0;
    if (p >= e || *p - (unsigned)'0' > 9) {
        out->end = p;
        out->n_digits = 0;
        return MC_JNUM_NONE;
    }
    if (*p == '0') p++;
    else
        while (p < e && *p - (unsigned)'0' <= 9) p++;
    out->n_digits = (size_t)(p - out->digits);
    if (p < e && *p == '.') {
        p++;
        out->real = 1;
        if (p >= e || *p - (unsigned)'0' > 9) {
            out->end = p;
            return MC_JNUM_BAD;
        }
        while (p < e && *p - (unsigned)'0' <= 9) p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        out->real = 1;
        int eneg = 0;
        if (p < e && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p >= e || *p - (unsigned)'0' > 9) {
            out->end = p;
            return MC_JNUM_BAD;
        }
        long x = 0;
        for (; p < e && *p - (unsigned)'0' <= 9; p++)
            if (x < 100000000L) x = x * 10 + (*p - '0');
        out->exp = eneg ? -x : x;
    }
    out->end = p;
    return MC_JNUM_OK;
}

#ifdef __cplusplus
}
#endif
#endif
