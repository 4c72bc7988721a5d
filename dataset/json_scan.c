/* json_scan.c - single-pass strict JSON scanner for one JSONL line.
 *
 * Replaces jansson on the hot path of ds_json_extract (jansson built a full
 * DOM for every line: ~138 instructions per input byte). This scanner
 * validates the whole line with jansson's acceptance rules and decodes only
 * the string at the field path, into a reused buffer:
 *   - RFC 8259 grammar; whitespace is space, \t, \n, \r;
 *   - strings: no raw bytes < 0x20, strict UTF-8 (no overlongs, no encoded
 *     surrogates, <= U+10FFFF), escapes \" \\ \/ \b \f \n \r \t \uXXXX;
 *     \u0000 allowed in values (JSON_ALLOW_NUL), rejected in keys;
 *   - unpaired surrogate escapes decode to U+FFFD and set lone_surrogate,
 *     as ds_fix_lone_surrogates + a second json_loadb do;
 *   - integers outside int64 are invalid (jansson: "too big integer");
 *     reals that might overflow a double are UNSURE (left to jansson);
 *   - nesting: a value deeper than 2048 is invalid (JSON_PARSER_MAX_DEPTH);
 *   - a raw NUL byte right after a number or literal (which jansson drops)
 *     is UNSURE.
 * See tests/test_json_scan.c for the differential test against jansson.
 * The grammar pieces it shares with load_tekken.c (tekken.json, Python's
 * rules) and hf_json.c are in dataset/common/mc_json.h; jansson's rules
 * above and the SIMD loops stay here (the rules differ where noted in
 * mc_json.h, and this loop is the JSONL hot path). */
#include "ds_internal.h"
#include "mc_json.h"
#include "mks_common.h"
#include "mks_env.h"

#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define JS_MAX_DEPTH 2048 /* jansson's JSON_PARSER_MAX_DEPTH */

/* byte classes inside a string: 0 plain ASCII, 1 '"', 2 '\\', 3 control, 4 >= 0x80 */
static const uint8_t str_class[256] = {
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 1, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
};

#define STR_ESC 1u /* the string had an escape */
#define STR_NUL 2u /* ... decoding to U+0000 */

static inline int is_ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
static inline int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static inline const uint8_t *skip_ws(const uint8_t *p, const uint8_t *e) {
    while (p < e && is_ws(*p)) p++;
    return p;
}

#if defined(__x86_64__)
#include <tmmintrin.h>
/* A run of non-ASCII text, validated 16 bytes at a time: the table look-up
 * UTF-8 check of Keiser and Lemire ("Validating UTF-8 in less than one
 * instruction per byte", 2021; the rules are jansson's: no overlongs, no
 * encoded surrogates, nothing over U+10FFFF).  Each byte's class comes from
 * three 16-entry tables indexed by the high and low nibble of the byte before
 * it and the high nibble of the byte itself; their AND is non-zero where the
 * pair is wrong, except "a third or fourth byte of a sequence must be a
 * continuation", which the bytes two and three back decide.  Written from the
 * paper's description: scalar validation stops the string's SIMD scan at
 * every non-ASCII byte, so multilingual JSONL lines cost ~1 character per
 * 16-byte step (ds_json_scan was 8.6% of `mkshards encode` on the
 * multilingual corpus). */
#define U8_TOO_SHORT 0x01 /* a lead or ASCII byte where a continuation must be */
#define U8_TOO_LONG 0x02  /* a continuation after ASCII */
#define U8_OVERLONG3 0x04 /* E0 80..9F */
#define U8_TOO_LARGE 0x08 /* F4 90..BF, F5..FF */
#define U8_SURROGATE 0x10 /* ED A0..BF */
#define U8_OVERLONG2 0x20 /* C0, C1 */
#define U8_LARGE1000 0x40 /* F5..FF 80..8F; with F0: F0 80..8F (overlong 4) */
#define U8_TWO_CONTS 0x80 /* a continuation after a continuation: fine only as 3rd/4th byte */
#define U8_CARRY (U8_TOO_SHORT | U8_TOO_LONG | U8_TWO_CONTS)

__attribute__((target("ssse3"))) static inline __m128i u8_errors(__m128i in, __m128i prev) {
    const __m128i b1_high = _mm_setr_epi8(
        U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG,
        (char)U8_TWO_CONTS, (char)U8_TWO_CONTS, (char)U8_TWO_CONTS, (char)U8_TWO_CONTS, U8_TOO_SHORT | U8_OVERLONG2,
        U8_TOO_SHORT, U8_TOO_SHORT | U8_OVERLONG3 | U8_SURROGATE, U8_TOO_SHORT | U8_TOO_LARGE | U8_LARGE1000);
    const __m128i b1_low = _mm_setr_epi8(
        (char)(U8_CARRY | U8_OVERLONG3 | U8_OVERLONG2 | U8_LARGE1000), (char)(U8_CARRY | U8_OVERLONG2), (char)U8_CARRY,
        (char)U8_CARRY, (char)(U8_CARRY | U8_TOO_LARGE), (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000),
        (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000), (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000),
        (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000), (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000),
        (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000), (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000),
        (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000), (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000 | U8_SURROGATE),
        (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000), (char)(U8_CARRY | U8_TOO_LARGE | U8_LARGE1000));
    const __m128i b2_high =
        _mm_setr_epi8(U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT,
                      U8_TOO_SHORT, (char)(U8_TOO_LONG | U8_OVERLONG2 | U8_TWO_CONTS | U8_OVERLONG3 | U8_LARGE1000),
                      (char)(U8_TOO_LONG | U8_OVERLONG2 | U8_TWO_CONTS | U8_OVERLONG3 | U8_TOO_LARGE),
                      (char)(U8_TOO_LONG | U8_OVERLONG2 | U8_TWO_CONTS | U8_SURROGATE | U8_TOO_LARGE),
                      (char)(U8_TOO_LONG | U8_OVERLONG2 | U8_TWO_CONTS | U8_SURROGATE | U8_TOO_LARGE), U8_TOO_SHORT,
                      U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT);
    const __m128i nib = _mm_set1_epi8(0x0F);
    __m128i prev1 = _mm_alignr_epi8(in, prev, 15);
    __m128i sc = _mm_and_si128(_mm_and_si128(_mm_shuffle_epi8(b1_high, _mm_and_si128(_mm_srli_epi16(prev1, 4), nib)),
                                             _mm_shuffle_epi8(b1_low, _mm_and_si128(prev1, nib))),
                               _mm_shuffle_epi8(b2_high, _mm_and_si128(_mm_srli_epi16(in, 4), nib)));
    /* a third byte follows E0..FF two back, a fourth F0..FF three back: those must be continuations */
    __m128i third = _mm_subs_epu8(_mm_alignr_epi8(in, prev, 14), _mm_set1_epi8((char)(0xE0 - 0x80)));
    __m128i fourth = _mm_subs_epu8(_mm_alignr_epi8(in, prev, 13), _mm_set1_epi8((char)(0xF0 - 0x80)));
    __m128i must23 = _mm_and_si128(_mm_or_si128(third, fourth), _mm_set1_epi8((char)0x80));
    return _mm_xor_si128(must23, sc);
}

/* From p (a byte >= 0x80 where a character starts: what precedes it in the
 * string is complete), the bytes that are valid UTF-8 up to the first '"',
 * '\\' or control byte, or up to the last character that ends before the
 * final < 16 bytes: their count; copied to out when out != NULL (room as in
 * scan_string).  *bad = 1 when they are not valid UTF-8. */
__attribute__((target("ssse3"))) static size_t u8_span(const uint8_t *p, const uint8_t *e, uint8_t *out, int *bad) {
    const uint8_t *p0 = p;
    const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), c1f = _mm_set1_epi8(0x1F);
    const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m128i prev = _mm_setzero_si128(), err = _mm_setzero_si128();
    while (e - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        if (out) _mm_storeu_si128((__m128i *)(out + (p - p0)), v);
        __m128i sp = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, bs)),
                                  _mm_cmpeq_epi8(_mm_subs_epu8(v, c1f), _mm_setzero_si128()));
        unsigned mask = (unsigned)_mm_movemask_epi8(sp);
        if (mask) { /* bytes from the special one on count as ASCII: a sequence cut by it is an error */
            unsigned k = (unsigned)__builtin_ctz(mask);
            v = _mm_and_si128(v, _mm_cmpgt_epi8(_mm_set1_epi8((char)k), iota));
            err = _mm_or_si128(err, u8_errors(v, prev));
            *bad = _mm_movemask_epi8(_mm_cmpeq_epi8(err, _mm_setzero_si128())) != 0xFFFF;
            return (size_t)(p - p0) + k;
        }
        err = _mm_or_si128(err, u8_errors(v, prev));
        prev = v;
        p += 16;
    }
    *bad = _mm_movemask_epi8(_mm_cmpeq_epi8(err, _mm_setzero_si128())) != 0xFFFF;
    /* hand a character cut by the 16-byte steps back to the scalar path, which checks it whole */
    for (unsigned i = 1; i <= 3 && p - i >= p0; i++) {
        uint8_t c = p[-(long)i];
        if (c < 0x80) break;
        if (c >= 0xC0) {
            unsigned need = c >= 0xF0 ? 4u : c >= 0xE0 ? 3u : 2u;
            if (need > i) p -= i;
            break;
        }
    }
    return (size_t)(p - p0);
}

static int u8_simd(void) {
    static int have = -1;
    if (have < 0) have = __builtin_cpu_supports("ssse3") && !mks_getenv("MKS_NO_SIMD_UTF8");
    return have;
}
#endif

/* Scan a string body; *pp is just after the opening quote. On success *pp is
 * after the closing quote and 1 is returned; 0: invalid. With decode, the
 * decoded bytes go to out (room for (e - *pp) + 16 bytes) and *olen is set.
 * The decoded form is never longer than the raw form, so that room also
 * covers the 16-byte stores of the fast path. */
static inline __attribute__((always_inline)) int scan_string(const uint8_t **pp, const uint8_t *e, int decode,
                                                             uint8_t *out, size_t *olen, unsigned *fl, int *lone) {
    const uint8_t *p = *pp;
    size_t o = 0;
    for (;;) {
#if defined(__SSE2__)
        {
            const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(0x20);
            while (e - p >= 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)p);
                if (decode) _mm_storeu_si128((__m128i *)(out + o), v);
                /* signed compare: control bytes and bytes >= 0x80 are both < 0x20 */
                __m128i m =
                    _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, bs)), _mm_cmplt_epi8(v, sp));
                unsigned mask = (unsigned)_mm_movemask_epi8(m);
                if (mask) {
                    unsigned k = (unsigned)__builtin_ctz(mask);
                    p += k;
                    o += k;
                    break;
                }
                p += 16;
                o += 16;
            }
        }
#endif
        uint8_t c = 0, cls = 0;
        while (p < e && (cls = str_class[c = *p]) == 0) {
            if (decode) out[o] = c;
            o++;
            p++;
        }
        if (p >= e) return 0;
        if (cls == 1) {
            *pp = p + 1;
            if (decode) {
                out[o] = 0;
                *olen = o;
            }
            return 1;
        }
        if (cls == 3) return 0;
        if (cls == 4) {
#if defined(__x86_64__)
            if (e - p >= 32 && u8_simd()) {
                int bad = 0;
                size_t k = u8_span(p, e, decode ? out + o : NULL, &bad);
                if (bad) return 0;
                if (k) {
                    o += k;
                    p += k;
                    continue;
                }
            }
#endif
            size_t k = mc_utf8_seq(p, (size_t)(e - p));
            if (!k) return 0;
            if (decode) memcpy(out + o, p, k);
            o += k;
            p += k;
            continue;
        }
        /* escape */
        *fl |= STR_ESC;
        if (e - p < 2) return 0;
        uint8_t ch;
        switch (p[1]) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            uint32_t v;
            size_t k = mc_json_u_escape(p, (size_t)(e - p), &v);
            if (!k) return 0;
            p += k;
            if (v >= 0xD800 && v <= 0xDFFF) {
                v = 0xFFFD; /* a lone surrogate: as ds_fix_lone_surrogates */
                *lone = 1;
            } else if (v == 0) {
                *fl |= STR_NUL;
            }
            if (decode) o += mc_utf8_put(out + o, v);
            else o += 1;
            continue;
        }
        default: return 0;
        }
        if (decode) out[o] = ch;
        o++;
        p += 2;
    }
}

/* Number at *pp (first byte '-' or a digit). 1: valid, 0: invalid (as
 * jansson), 2: valid grammar but maybe a double overflow (jansson decides).
 * The grammar is mc_json_number's (mc_json.h); the range rules are jansson's. */
static int scan_number(const uint8_t **pp, const uint8_t *e) {
    mc_jnum nm;
    if (mc_json_number(*pp, e, &nm) != MC_JNUM_OK) return 0;
    const uint8_t *ds = nm.digits;
    size_t nd = nm.n_digits;
    if (ds[0] == '0' && nm.end < e && is_digit(*nm.end)) return 0; /* a leading zero */
    *pp = nm.end;
    if (!nm.real) { /* strtoll range */
        if (nd > 19) return 0;
        if (nd == 19 && memcmp(ds, nm.neg ? "9223372036854775808" : "9223372036854775807", 19) > 0) return 0;
        return 1;
    }
    /* value < 10^(integer digits + exponent); below 10^308 strtod cannot overflow */
    size_t lead = ds[0] == '0' ? 0 : nd;
    if (lead > 100000000u) return 2;
    return (long)lead + nm.exp > 308 ? 2 : 1;
}

static int grow(uint8_t **b, size_t *cap, size_t need) {
    if (*cap >= need) return 1;
    size_t nc = *cap ? *cap : 4096;
    while (nc < need) nc *= 2;
    uint8_t *nb = realloc(*b, nc);
    if (!nb) return 0;
    *b = nb;
    *cap = nc;
    return 1;
}

void ds_jscan_buf_free(ds_jscan_buf *b) {
    if (!b) return;
    free(b->text);
    free(b->key);
    b->text = b->key = NULL;
    b->cap = b->key_cap = 0;
}

/* One pass over the line as a state machine (labels value / after_value /
 * key): a JSON value nests, and the states share the path position, the
 * container stack and the result being built. Kept as one function (170
 * lines) on purpose: split into functions, every state would take and
 * return all of that, and this loop runs once per input byte of every JSONL
 * document. */
ds_jscan_status ds_json_scan(const uint8_t *line, size_t n, char *const *parts, size_t n_parts, ds_jscan_buf *b,
                             ds_jscan_result *r) {
    const uint8_t *p = line, *e = line + n;
    uint8_t stk[JS_MAX_DEPTH]; /* 1: object, 0: array */
    size_t depth = 0;          /* open containers */
    size_t on = 0;             /* the first `on` open containers are objects on the field path */
    long match = 0;            /* path level of the value about to be parsed, -1: off the path */
    ds_jscan_status st = DS_JSCAN_MISSING;
    ds_jscan_type ty = DS_JSCAN_T_NULL, vt = DS_JSCAN_T_NULL;
    size_t tlen = 0;
    int lone = 0, unsure = 0;
    unsigned fl;

    r->text = NULL;
    r->len = 0;
    r->lone_surrogate = 0;
    r->type = DS_JSCAN_T_NULL;
    if (!n_parts) return r->status = DS_JSCAN_UNSURE;

value:
    p = skip_ws(p, e);
    if (p >= e || depth >= JS_MAX_DEPTH) goto invalid;
    switch (*p) {
    case '{':
        p++;
        if (match >= 0) {
            if ((size_t)match == n_parts) {
                st = DS_JSCAN_NOT_STRING;
                ty = DS_JSCAN_T_OBJECT;
            } else {
                st = DS_JSCAN_MISSING;
                on = depth + 1;
            }
        }
        stk[depth++] = 1;
        p = skip_ws(p, e);
        if (p < e && *p == '}') {
            p++;
            goto pop;
        }
        goto key;
    case '[':
        p++;
        if (match >= 0) {
            if ((size_t)match == n_parts) {
                st = DS_JSCAN_NOT_STRING;
                ty = DS_JSCAN_T_ARRAY;
            } else {
                st = match ? DS_JSCAN_PARENT_NOT_OBJECT : DS_JSCAN_NOT_OBJECT;
            }
        }
        stk[depth++] = 0;
        p = skip_ws(p, e);
        if (p < e && *p == ']') {
            p++;
            goto pop;
        }
        match = -1;
        goto value;
    case '"':
        p++;
        fl = 0;
        if (match >= 0 && (size_t)match == n_parts) {
            if (!grow(&b->text, &b->cap, (size_t)(e - p) + 32)) return r->status = DS_JSCAN_NOMEM;
            if (!scan_string(&p, e, 1, b->text, &tlen, &fl, &lone)) goto invalid;
            st = DS_JSCAN_OK;
            ty = DS_JSCAN_T_STRING;
        } else {
            if (!scan_string(&p, e, 0, NULL, NULL, &fl, &lone)) goto invalid;
            if (match >= 0) st = match ? DS_JSCAN_PARENT_NOT_OBJECT : DS_JSCAN_NOT_OBJECT;
        }
        goto after;
    case 't':
    case 'f':
    case 'n': {
        const char *lit = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
        size_t ll = strlen(lit);
        if ((size_t)(e - p) < ll || memcmp(p, lit, ll)) goto invalid;
        p += ll;
        vt = *lit == 'n' ? DS_JSCAN_T_NULL : DS_JSCAN_T_BOOLEAN;
        goto scalar;
    }
    default: {
        if (*p != '-' && !is_digit(*p)) goto invalid;
        int k = scan_number(&p, e);
        if (!k) goto invalid;
        if (k == 2) unsure = 1;
        vt = DS_JSCAN_T_NUMBER;
        goto scalar;
    }
    }

scalar:
    /* jansson quirk: the byte after a number or literal is read ahead and
     * pushed back; a pushed-back NUL byte is lost, so "1\0," parses as "1,".
     * Not RFC JSON: leave such lines to jansson. */
    if (p < e && !*p) return r->status = DS_JSCAN_UNSURE;
    if (match >= 0) {
        if ((size_t)match == n_parts) {
            st = DS_JSCAN_NOT_STRING;
            ty = vt;
        } else st = match ? DS_JSCAN_PARENT_NOT_OBJECT : DS_JSCAN_NOT_OBJECT;
    }
    goto after;

key:
    /* p at the key's opening quote (whitespace skipped) */
    if (p >= e || *p != '"') goto invalid;
    {
        const uint8_t *ks = ++p;
        fl = 0;
        if (!scan_string(&p, e, 0, NULL, NULL, &fl, &lone)) goto invalid;
        if (fl & STR_NUL) goto invalid; /* jansson: NUL byte in object key not supported */
        match = -1;
        if (on == depth && depth - 1 < n_parts) {
            const char *part = parts[depth - 1];
            size_t pl = strlen(part);
            const uint8_t *k = ks;
            size_t kl = (size_t)(p - 1 - ks);
            if (fl & STR_ESC) {
                const uint8_t *q = ks;
                unsigned fl2 = 0;
                int lone2 = 0;
                if (!grow(&b->key, &b->key_cap, kl + 32)) return r->status = DS_JSCAN_NOMEM;
                scan_string(&q, p, 1, b->key, &kl, &fl2, &lone2);
                k = b->key;
            }
            if (kl == pl && memcmp(k, part, pl) == 0) match = (long)depth;
        }
    }
    p = skip_ws(p, e);
    if (p >= e || *p != ':') goto invalid;
    p++;
    goto value;

after:
    p = skip_ws(p, e);
    if (depth == 0) {
        if (p != e) goto invalid;
        goto done;
    }
    if (p >= e) goto invalid;
    if (*p == ',') {
        p = skip_ws(p + 1, e);
        if (stk[depth - 1]) goto key;
        match = -1;
        goto value;
    }
    if (*p != (stk[depth - 1] ? '}' : ']')) goto invalid;
    p++;
pop:
    depth--;
    if (on > depth) on = depth;
    goto after;

done:
    r->lone_surrogate = lone;
    r->type = ty;
    if (unsure) return r->status = DS_JSCAN_UNSURE;
    if (st == DS_JSCAN_OK) {
        r->text = b->text;
        r->len = tlen;
    }
    if (st == DS_JSCAN_MISSING) r->type = DS_JSCAN_T_NULL;
    return r->status = st;

invalid:
    r->lone_surrogate = lone;
    return r->status = DS_JSCAN_INVALID;
}

/* ------------------------------------------------------------ tape (chat records) */

void ds_jtape_free(ds_jtape *t) {
    if (!t) return;
    free(t->n);
    free(t->text);
    memset(t, 0, sizeof *t);
}

static int tape_push(ds_jtape *t, uint8_t type, uint32_t off, uint32_t len) {
    if (t->len == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 256;
        ds_jnode *nn = realloc(t->n, nc * sizeof *nn);
        if (!nn) return 0;
        t->n = nn;
        t->cap = nc;
    }
    t->n[t->len] = (ds_jnode){.type = type, .end = (uint32_t)t->len + 1, .off = off, .len = len};
    t->len++;
    return 1;
}

/* The grammar walk of ds_json_scan, recording every value and key. */
ds_jscan_status ds_json_tape(const uint8_t *line, size_t n, ds_jtape *t, int *lone) {
    const uint8_t *p = line, *e = line + n;
    uint32_t stk[JS_MAX_DEPTH]; /* node index of each open container */
    size_t depth = 0, tl = 0;
    int unsure = 0;
    unsigned fl;
    t->len = 0;
    *lone = 0;
    if (n >= UINT32_MAX - 64) return DS_JSCAN_INVALID;
    if (!grow(&t->text, &t->text_cap, n + 32)) return DS_JSCAN_NOMEM; /* decoded strings are never longer */

value:
    p = skip_ws(p, e);
    if (p >= e || depth >= JS_MAX_DEPTH) return DS_JSCAN_INVALID;
    switch (*p) {
    case '{':
    case '[': {
        int obj = *p == '{';
        p++;
        if (!tape_push(t, obj ? DS_JSCAN_T_OBJECT : DS_JSCAN_T_ARRAY, 0, 0)) return DS_JSCAN_NOMEM;
        stk[depth++] = (uint32_t)(t->len - 1);
        p = skip_ws(p, e);
        if (p < e && *p == (obj ? '}' : ']')) {
            p++;
            goto pop;
        }
        if (obj) goto key;
        goto value;
    }
    case '"': {
        size_t sl = 0;
        p++;
        fl = 0;
        if (!scan_string(&p, e, 1, t->text + tl, &sl, &fl, lone)) return DS_JSCAN_INVALID;
        if (!tape_push(t, DS_JSCAN_T_STRING, (uint32_t)tl, (uint32_t)sl)) return DS_JSCAN_NOMEM;
        tl += sl;
        goto after;
    }
    case 't':
    case 'f':
    case 'n': {
        const char *lit = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
        size_t ll = strlen(lit);
        if ((size_t)(e - p) < ll || memcmp(p, lit, ll)) return DS_JSCAN_INVALID;
        p += ll;
        if (!tape_push(t, *lit == 'n' ? DS_JSCAN_T_NULL : DS_JSCAN_T_BOOLEAN, 0, 0)) return DS_JSCAN_NOMEM;
        goto scalar;
    }
    default: {
        if (*p != '-' && !is_digit(*p)) return DS_JSCAN_INVALID;
        int k = scan_number(&p, e);
        if (!k) return DS_JSCAN_INVALID;
        if (k == 2) unsure = 1;
        if (!tape_push(t, DS_JSCAN_T_NUMBER, 0, 0)) return DS_JSCAN_NOMEM;
        goto scalar;
    }
    }

scalar:
    if (p < e && !*p) return DS_JSCAN_INVALID; /* jansson would drop the NUL: not JSON, refused */
    goto after;

key:
    if (p >= e || *p != '"') return DS_JSCAN_INVALID;
    {
        size_t sl = 0;
        p++;
        fl = 0;
        if (!scan_string(&p, e, 1, t->text + tl, &sl, &fl, lone)) return DS_JSCAN_INVALID;
        if (fl & STR_NUL) return DS_JSCAN_INVALID; /* jansson: NUL byte in object key not supported */
        if (!tape_push(t, DS_JSCAN_T_STRING, (uint32_t)tl, (uint32_t)sl)) return DS_JSCAN_NOMEM;
        tl += sl;
    }
    p = skip_ws(p, e);
    if (p >= e || *p != ':') return DS_JSCAN_INVALID;
    p++;
    goto value;

after:
    p = skip_ws(p, e);
    if (depth == 0) {
        if (p != e) return DS_JSCAN_INVALID;
        return unsure ? DS_JSCAN_UNSURE : DS_JSCAN_OK;
    }
    if (p >= e) return DS_JSCAN_INVALID;
    if (*p == ',') {
        p = skip_ws(p + 1, e);
        if (t->n[stk[depth - 1]].type == DS_JSCAN_T_OBJECT) goto key;
        goto value;
    }
    if (*p != (t->n[stk[depth - 1]].type == DS_JSCAN_T_OBJECT ? '}' : ']')) return DS_JSCAN_INVALID;
    p++;
pop:
    depth--;
    t->n[stk[depth]].end = (uint32_t)t->len;
    goto after;
}

long ds_jtape_get(const ds_jtape *t, size_t obj, const char *key) {
    if (obj >= t->len || t->n[obj].type != DS_JSCAN_T_OBJECT) return -1;
    size_t kl = strlen(key);
    long found = -1;
    for (size_t i = obj + 1; i < t->n[obj].end; i = t->n[i + 1].end) {
        const ds_jnode *k = &t->n[i];
        if (k->len == kl && !memcmp(t->text + k->off, key, kl)) found = (long)i + 1;
    }
    return found;
}
