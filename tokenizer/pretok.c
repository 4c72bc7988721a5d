/* pretok.c - the gpt2, cl100k_base and o200k_base pre-tokenizers, written as
 * hand scanners over Unicode character classes (utf8proc), not a regex engine.
 *
 * Each scanner returns the end of the piece that starts at i, reproducing the
 * leftmost-first, backtracking semantics of the tiktoken patterns exactly
 * (see docs/tokenizer.md for the derivation of every branch). The work per
 * byte is constant: no branch ever rescans input, so pathological inputs
 * (megabyte runs of one class) cost the same per byte as normal text.
 */
#include "tk_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <utf8proc.h>
#include "ucd_categories.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define TABLE_CPS 0x110000u
#define BLOCK_BITS 12
#define N_BLOCKS (TABLE_CPS >> BLOCK_BITS)
/* Classes of code points, in blocks of 4096 built on first use: a process
 * that reads English text builds none, multilingual text a handful (each
 * ~4096 category look-ups, tens of microseconds), where a whole table cost
 * milliseconds of every start-up. */
static uint8_t *g_blk[N_BLOCKS];
static uint8_t g_ascii[128];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static bool is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

static uint8_t classify(uint32_t cp) {
    uint8_t c = 0;
    if (is_white_space(cp)) c |= TKC_S;
    /* Unicode 16.0 categories (ucd_categories.h: what tiktoken's and HF's
     * regex engines know), named by utf8proc's constants */
    switch (tk_ucd_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LT: c |= TKC_L | TKC_UP; break;
    case UTF8PROC_CATEGORY_LL: c |= TKC_L | TKC_LO; break;
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: c |= TKC_L | TKC_UP | TKC_LO; break;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: c |= TKC_M | TKC_UP | TKC_LO; break;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: c |= TKC_N; break;
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: c |= TKC_P; break;
    case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC:
    case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO: c |= TKC_SY; break;
    default: break;
    }
    return c;
}

static void init_classes(void) {
    for (uint32_t cp = 0; cp < 128; cp++) g_ascii[cp] = classify(cp);
}

void tk_classes_init(void) { pthread_once(&g_once, init_classes); }

/* The block of cp's class table, built by the first thread that needs it
 * (racing builders compute the same bytes; one copy is kept). NULL only if
 * out of memory (callers then classify per call). */
static __attribute__((noinline)) const uint8_t *build_block(uint32_t b) {
    uint8_t *t = malloc(1u << BLOCK_BITS);
    if (!t) return NULL;
    for (uint32_t k = 0; k < (1u << BLOCK_BITS); k++) t[k] = classify((b << BLOCK_BITS) | k);
    uint8_t *expect = NULL;
    if (!__atomic_compare_exchange_n(&g_blk[b], &expect, t, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        free(t);
        return expect;
    }
    return t;
}

static inline uint8_t class_of_cp(uint32_t cp) {
    const uint8_t *blk = __atomic_load_n(&g_blk[cp >> BLOCK_BITS], __ATOMIC_ACQUIRE);
    if (__builtin_expect(!blk, 0) && !(blk = build_block(cp >> BLOCK_BITS))) return classify(cp);
    return blk[cp & ((1u << BLOCK_BITS) - 1)];
}

/* Decode one UTF-8 character; returns its length, or 0 if the bytes at s[i]
 * do not start a valid (shortest-form, non-surrogate) sequence. */
static inline size_t utf8_decode(const uint8_t *s, size_t n, size_t i, uint32_t *cp) {
    uint8_t b = s[i];
    if (b < 0xC2) return 0;
    if (b < 0xE0) {
        if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F);
        return 2;
    }
    if (b < 0xF0) {
        if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
        uint32_t c = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
        if (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF)) return 0;
        *cp = c;
        return 3;
    }
    if (b < 0xF5) {
        if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) return 0;
        uint32_t c = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
                     ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        if (c < 0x10000 || c > 0x10FFFF) return 0;
        *cp = c;
        return 4;
    }
    return 0;
}

uint8_t tk_char_class(const uint8_t *s, size_t n, size_t i, size_t *len) {
    uint8_t b = s[i];
    if (b < 0x80) {
        *len = 1;
        return g_ascii[b];
    }
    uint32_t cp;
    size_t l = utf8_decode(s, n, i, &cp);
    if (!l) {
        *len = 1;
        return 0;
    }
    *len = l;
    return class_of_cp(cp); /* utf8_decode yields cp <= 0x10FFFF */
}

/* Hot-path inline variant. */
static inline uint8_t cls_at(const uint8_t *s, size_t n, size_t i, size_t *len) {
    uint8_t b = s[i];
    if (b < 0x80) {
        *len = 1;
        return g_ascii[b];
    }
    return tk_char_class(s, n, i, len);
}

#define OTHER(c) (((c) & (TKC_L | TKC_N | TKC_S)) == 0)

/* Past the ASCII digits (want == TKC_N) or ASCII letters (TKC_L) from i,
 * 16 bytes at a time; stops early near the end or at any other byte (the
 * caller's loop goes on from there, non-ASCII letters and digits included).
 * In ASCII, \p{N} is exactly 0-9 and \p{L} exactly A-Z and a-z. */
static inline size_t ascii_run(const uint8_t *s, size_t n, size_t i, uint8_t want) {
#if defined(__SSE2__)
    /* x = byte + (0x80 - first), as signed: in range iff x < -128 + count */
    const int letters = want == TKC_L;
    const __m128i fold = _mm_set1_epi8(letters ? 0x20 : 0);
    const __m128i bias = _mm_set1_epi8((char)(0x80 - (letters ? 'a' : '0')));
    const __m128i limit = _mm_set1_epi8((char)(-128 + (letters ? 26 : 10)));
    while (i + 16 <= n) {
        __m128i v = _mm_or_si128(_mm_loadu_si128((const __m128i *)(s + i)), fold);
        unsigned in = (unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(_mm_add_epi8(v, bias), limit));
        if (in != 0xFFFF) return i + (size_t)__builtin_ctz(~in);
        i += 16;
    }
#else
    (void)s, (void)n, (void)want;
#endif
    return i;
}

/* End of the maximal run of characters whose class has any bit of `want`. */
static inline size_t run_any(const uint8_t *s, size_t n, size_t i, uint8_t want) {
    if (want == TKC_L || want == TKC_N) i = ascii_run(s, n, i, want);
    while (i < n) {
        size_t l;
        uint8_t c = cls_at(s, n, i, &l);
        if (!(c & want)) break;
        i += l;
    }
    return i;
}

/* End of the maximal run of "other" characters ([^\s\p{L}\p{N}]). */
static inline size_t run_other(const uint8_t *s, size_t n, size_t i) {
    while (i < n) {
        size_t l;
        uint8_t c = cls_at(s, n, i, &l);
        if (!OTHER(c)) break;
        i += l;
    }
    return i;
}

static inline bool is_nl(uint8_t b) { return b == '\r' || b == '\n'; }

/* Contractions 's 't 're 've 'm 'll 'd at s[i] == '\''. Case-insensitive
 * variant also matches upper case and U+017F (long s, which folds to s).
 * Returns the end, or 0 if none. */
static inline size_t contraction(const uint8_t *s, size_t n, size_t i, bool ci) {
    if (i + 1 >= n || s[i] != '\'') return 0;
    uint8_t a = s[i + 1];
    if (ci && a >= 'A' && a <= 'Z') a = (uint8_t)(a + 32);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (ci && a == 0xC5 && i + 2 < n && s[i + 2] == 0xBF) return i + 3; /* U+017F */
    if (i + 2 < n) {
        uint8_t b = s[i + 2];
        if (ci && b >= 'A' && b <= 'Z') b = (uint8_t)(b + 32);
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    return 0;
}

/* Whitespace run starting at i: its end, the start of its last character,
 * and the position just after its last \r or \n (0 if none). */
static inline size_t ws_run(const uint8_t *s, size_t n, size_t i, size_t *last_start, size_t *after_nl) {
    size_t ls = i, an = 0;
    while (i < n) {
        uint8_t b = s[i];
        size_t l;
        if (b < 0x80) {
            if (!(g_ascii[b] & TKC_S)) break;
            if (is_nl(b)) an = i + 1;
            l = 1;
        } else if (!(tk_char_class(s, n, i, &l) & TKC_S)) {
            break;
        }
        ls = i;
        i += l;
    }
    *last_start = ls;
    *after_nl = an;
    return i;
}

/* \p{N}{1,3} after the first digit (which ends at e). */
static inline size_t digits3(const uint8_t *s, size_t n, size_t e) {
    size_t l;
    for (int k = 1; k < 3 && e < n; k++) {
        if (!(cls_at(s, n, e, &l) & TKC_N)) break;
        e += l;
    }
    return e;
}

/* ` ?[^\s\p{L}\p{N}]+[\r\n]*` (cl100k) or `...[\r\n/]*` (o200k) at i, whose
 * class is c; 0 if it does not match. */
static inline size_t punct_run(const uint8_t *s, size_t n, size_t i, uint8_t c, bool slash) {
    size_t j, l;
    if (OTHER(c)) j = i;
    else if (s[i] == ' ' && i + 1 < n && OTHER(cls_at(s, n, i + 1, &l))) j = i + 1;
    else return 0;
    size_t e = run_other(s, n, j);
    while (e < n && (is_nl(s[e]) || (slash && s[e] == '/'))) e++;
    return e;
}

/* ---- gpt2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t scan_gpt2(const uint8_t *s, size_t n, size_t i) {
    size_t e, l;
    if (s[i] == '\'' && (e = contraction(s, n, i, false))) return e;
    size_t j = i;
    if (s[i] == ' ' && i + 1 < n) j = i + 1;
    uint8_t c = cls_at(s, n, j, &l);
    if (c & TKC_L) return run_any(s, n, j + l, TKC_L);
    if (c & TKC_N) return run_any(s, n, j + l, TKC_N);
    if (OTHER(c)) return run_other(s, n, j + l);
    /* whitespace at i (s[i] == ' ' followed by whitespace lands here too) */
    size_t last, an;
    e = ws_run(s, n, i, &last, &an);
    if (e == n || last == i) return e;
    return last;
}

/* ---- cl100k_base (current Python tiktoken form):
 * '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
 * and, with hf_tail, its older spelling (tiktoken before 0.7, Llama 3's
 * tokenizer.json and tokenizer.model) whose whitespace branches are
 * \s*[\r\n]+|\s+(?!\S)|\s+: it differs in one place, a whitespace run
 * that ends the text and holds a newline, which \s++$ takes whole and the
 * older form cuts after its last newline (" \n " -> " \n", " "). With
 * digits1 too, \p{N} for \p{N}{1,3}: Qwen's pattern (Qwen2 / Qwen2.5 /
 * Qwen3 tokenizer.json; tk_regex_cl100k_hf). */
static inline size_t scan_cl100k_like(const uint8_t *s, size_t n, size_t i, bool digits1, bool hf_tail) {
    size_t e, l, l2;
    if (s[i] == '\'' && (e = contraction(s, n, i, true))) return e;
    uint8_t c = cls_at(s, n, i, &l);
    if (c & TKC_L) return run_any(s, n, i + l, TKC_L);
    if (!(c & (TKC_L | TKC_N)) && !is_nl(s[i]) && i + l < n) {
        uint8_t c2 = cls_at(s, n, i + l, &l2);
        if (c2 & TKC_L) return run_any(s, n, i + l + l2, TKC_L);
    }
    if (c & TKC_N) return digits1 ? i + l : digits3(s, n, i + l);
    if ((e = punct_run(s, n, i, c, false))) return e;
    size_t last, an;
    e = ws_run(s, n, i, &last, &an);
    if (hf_tail && an) return an; /* \s*[\r\n]+ first */
    if (e == n) return e;         /* \s++$ */
    if (an) return an;            /* \s*[\r\n] */
    if (last > i) return last;
    return e;
}

static size_t scan_cl100k(const uint8_t *s, size_t n, size_t i) { return scan_cl100k_like(s, n, i, false, false); }

size_t tk_pretok_cl100k_hf_next(const uint8_t *s, size_t n, size_t i, bool digits1) {
    return digits1 ? scan_cl100k_like(s, n, i, true, true) : scan_cl100k_like(s, n, i, false, true);
}

/* o200k letter branches. alt1: U*W+ with backtracking; alt2: U+W*.
 * Both followed by an optional case-insensitive contraction when ctr
 * (o200k; Mistral's Tekken pattern has the same branches without it). */
static inline size_t o200k_alt1(const uint8_t *s, size_t n, size_t p, bool ctr) {
    size_t i = p, last_w_end = 0, l;
    uint8_t c = 0;
    while (i < n) {
        c = cls_at(s, n, i, &l);
        if (!(c & TKC_UP)) break;
        if (c & TKC_LO) last_w_end = i + l;
        i += l;
    }
    size_t e;
    if (i < n && (c & TKC_LO) && !(c & TKC_UP)) {
        e = i + l;
        while (e < n && (cls_at(s, n, e, &l) & TKC_LO)) e += l;
    } else if (last_w_end) {
        e = last_w_end;
    } else {
        return 0;
    }
    size_t k = ctr ? contraction(s, n, e, true) : 0;
    return k ? k : e;
}

static inline size_t o200k_alt2(const uint8_t *s, size_t n, size_t p, bool ctr) {
    size_t e = run_any(s, n, p, TKC_UP);
    if (e == p) return 0;
    size_t l;
    while (e < n && (cls_at(s, n, e, &l) & TKC_LO)) e += l;
    size_t k = ctr ? contraction(s, n, e, true) : 0;
    return k ? k : e;
}

/* Both letter branches on an ASCII word at j (s[j] an ASCII letter):
 * [A-Z]*[a-z]+ (alt1), else [A-Z]+ (alt2: no lower case follows the upper
 * run), then the optional contraction; in ASCII, Lu is A-Z, Ll is a-z and
 * neither has Lt, Lm, Lo or M, so both come to the end of the lower-case
 * run (or of the upper-case run when none follows). 0 when the word runs
 * into a non-ASCII byte: the general scanners decide then. */
static inline size_t o200k_ascii_word(const uint8_t *s, size_t n, size_t j, bool ctr) {
    size_t k = j;
    while (k < n && (uint8_t)(s[k] - 'A') < 26) k++;
    while (k < n && (uint8_t)(s[k] - 'a') < 26) k++;
    if (k < n && s[k] >= 0x80) return 0;
    size_t c = ctr ? contraction(s, n, k, true) : 0;
    return c ? c : k;
}

static inline bool ascii_letter(uint8_t b) { return (uint8_t)((b | 0x20) - 'a') < 26; }

/* The o200k_base scanner and, with ctr false and digits1 true, Mistral's
 * Tekken pattern (tekken.json's config.pattern, load_tekken.c):
 *   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|
 *   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|
 *   \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * which is o200k's without the contractions after the letter branches and
 * with one digit per piece instead of \p{N}{1,3}. */
static inline size_t scan_o200k_like(const uint8_t *s, size_t n, size_t i, bool ctr, bool digits1) {
    size_t e, l;
    uint8_t b = s[i];
    if (b < 0x80) {
        /* ASCII words, with or without one ASCII prefix character that is
         * no letter, digit, \r or \n (the [^\r\n\p{L}\p{N}]? of both branches) */
        if (ascii_letter(b)) {
            if ((e = o200k_ascii_word(s, n, i, ctr))) return e;
        } else if (i + 1 < n && ascii_letter(s[i + 1]) && !is_nl(b) && (uint8_t)(b - '0') >= 10) {
            if ((e = o200k_ascii_word(s, n, i + 1, ctr))) return e;
        }
    }
    uint8_t c = cls_at(s, n, i, &l);
    if (c & TKC_L) {
        if ((e = o200k_alt1(s, n, i, ctr))) return e;
        return o200k_alt2(s, n, i, ctr);
    }
    if (!(c & TKC_N) && !is_nl(s[i])) {
        /* [^\r\n\p{L}\p{N}]? prefix taken first, then without it (only a
         * mark can start the letter part itself). */
        size_t j = i + l;
        bool mark = (c & TKC_M) != 0;
        if (j < n && (e = o200k_alt1(s, n, j, ctr))) return e;
        if (mark && (e = o200k_alt1(s, n, i, ctr))) return e;
        if (j < n && (e = o200k_alt2(s, n, j, ctr))) return e;
        if (mark && (e = o200k_alt2(s, n, i, ctr))) return e;
    }
    if (c & TKC_N) return digits1 ? i + l : digits3(s, n, i + l);
    if ((e = punct_run(s, n, i, c, true))) return e;
    size_t last, an;
    e = ws_run(s, n, i, &last, &an);
    if (an) return an;    /* \s*[\r\n]+ */
    if (e == n) return e; /* \s+(?!\S) at the end */
    if (last > i) return last;
    return e;
}

/* ---- o200k_base: see tk_pattern_regex(TK_PAT_O200K). */
static size_t scan_o200k(const uint8_t *s, size_t n, size_t i) { return scan_o200k_like(s, n, i, true, false); }

size_t tk_pretok_tekken_next(const uint8_t *s, size_t n, size_t i) { return scan_o200k_like(s, n, i, false, true); }

typedef size_t (*scan_fn)(const uint8_t *, size_t, size_t);

static scan_fn scanner(tk_pattern pat) {
    switch (pat) {
    case TK_PAT_GPT2: return scan_gpt2;
    case TK_PAT_CL100K: return scan_cl100k;
    case TK_PAT_O200K: return scan_o200k;
    default: return NULL;
    }
}

int tk_pretokenize(tk_pattern pat, const uint8_t *text, size_t len, tk_piece_fn fn, void *user) {
    scan_fn scan = scanner(pat);
    if (!scan || (!text && len) || !fn) return scan ? TK_ERR_ARG : TK_ERR_PATTERN;
    tk_classes_init();
    size_t i = 0;
    while (i < len) {
        size_t e = scan(text, len, i);
        int rc = fn(user, text + i, e - i);
        if (rc) return rc;
        i = e;
    }
    return TK_OK;
}

/* Internal fast path used by the encoder: no callback indirection. */
size_t tk_pretok_next(tk_pattern pat, const uint8_t *s, size_t n, size_t i);
size_t tk_pretok_next(tk_pattern pat, const uint8_t *s, size_t n, size_t i) {
    switch (pat) {
    case TK_PAT_GPT2: return scan_gpt2(s, n, i);
    case TK_PAT_CL100K: return scan_cl100k(s, n, i);
    default: return scan_o200k(s, n, i);
    }
}

int tk_pattern_parse(const char *name, tk_pattern *out) {
    static const struct {
        const char *name;
        tk_pattern pat;
    } names[] = {{"gpt2", TK_PAT_GPT2},      {"r50k", TK_PAT_GPT2},       {"r50k_base", TK_PAT_GPT2},
                 {"p50k_base", TK_PAT_GPT2}, {"cl100k", TK_PAT_CL100K},   {"cl100k_base", TK_PAT_CL100K},
                 {"o200k", TK_PAT_O200K},    {"o200k_base", TK_PAT_O200K}};
    if (!name || !out) return TK_ERR_ARG;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (strcmp(name, names[k].name) == 0) {
            *out = names[k].pat;
            return TK_OK;
        }
    return TK_ERR_PATTERN;
}

const char *tk_pattern_name(tk_pattern pat) {
    switch (pat) {
    case TK_PAT_GPT2: return "gpt2";
    case TK_PAT_CL100K: return "cl100k";
    case TK_PAT_O200K: return "o200k";
    default: return "none";
    }
}

const char *tk_pattern_regex(tk_pattern pat) {
    switch (pat) {
    case TK_PAT_GPT2: return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
    case TK_PAT_CL100K:
        /* Python tiktoken's pattern without possessive quantifiers (same
         * matches here) and with \\z for its \\s++$, so that Oniguruma (HF
         * tokenizers) reads it the same way: there `{1,3}+` is not
         * possessive and `$` also matches before a newline. */
        return "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
               "\\s+\\z|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";
    case TK_PAT_O200K:
        return "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|"
               "'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
               "*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    default: return NULL;
    }
}

/* ---- DeepSeek V3's third Split (tokenizer.json, Isolated) ------------------
 *   [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+          (A)
 *   |[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+                     (B)
 *   | ?[\p{P}\p{S}]+[\r\n]*                                    (C)
 *   |\s*[\r\n]+  |\s+(?!\S)  |\s+                              (D, E, F)
 * as Oniguruma (HF) reads it: the first alternative that matches at i wins;
 * a character where none does is text between matches, and Isolated makes
 * each such stretch a piece. PCRE2 running it was 28% of DeepSeek V3's
 * encode (perf), about all of its gap to Qwen2. Backtracking, worked out:
 * B: an optional prefix then a run of L|M; a prefix that is itself M
 * gives the same end either way. D: \s* takes the whole run, backs off to
 * the run's last \r or \n, which [\r\n]+ takes (the characters after it
 * are whitespace but neither), so D ends just past the run's last \r|\n.
 * E: the run to the end of the piece, else the run less its last character
 * (which precedes a non-space), if that leaves one. */
static inline bool ds_ascii_punct(uint8_t b) {
    return (b >= 0x21 && b <= 0x2F) || (b >= 0x3A && b <= 0x40) || (b >= 0x5B && b <= 0x60) || (b >= 0x7B && b <= 0x7E);
}
static inline bool ds_ascii_letter(uint8_t b) { return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z'); }

/* The end of the match at i, or 0 when no alternative matches there (a
 * match is never empty, so 0 < i + 1 is never a real end). */
static size_t ds_match(const uint8_t *s, size_t n, size_t i) {
    size_t l0;
    uint8_t c0 = cls_at(s, n, i, &l0);
    if (ds_ascii_punct(s[i]) && i + 1 < n && ds_ascii_letter(s[i + 1])) { /* A */
        size_t e = i + 1;
        while (e < n && ds_ascii_letter(s[e])) e++;
        return e;
    }
    /* B */
    bool nl0 = is_nl(s[i]);
    size_t j = i;
    if (!nl0 && !(c0 & (TKC_L | TKC_P | TKC_SY))) { /* the optional prefix, if letters follow */
        size_t l1;
        if (i + l0 < n && (cls_at(s, n, i + l0, &l1) & (TKC_L | TKC_M))) j = i + l0;
    }
    if (j > i || (c0 & (TKC_L | TKC_M))) /* ASCII letters 16 at a time first */
        return run_any(s, n, ascii_run(s, n, j, TKC_L), TKC_L | TKC_M);
    /* C: the optional space, then a run of P|S (at i itself, c0 says) */
    j = i;
    if (s[i] == ' ' && i + 1 < n) {
        size_t l1;
        if (cls_at(s, n, i + 1, &l1) & (TKC_P | TKC_SY)) j = i + 1;
    }
    if (j > i || (c0 & (TKC_P | TKC_SY))) {
        size_t e = run_any(s, n, j, TKC_P | TKC_SY);
        while (e < n && is_nl(s[e])) e++;
        return e;
    }
    if (!(c0 & TKC_S)) return 0;
    /* D, E, F: the whitespace run [i, e) and its last \r or \n */
    size_t e = i, last_nl = 0, prev = i;
    bool any_nl = false;
    while (e < n) {
        size_t le;
        if (!(cls_at(s, n, e, &le) & TKC_S)) break;
        if (is_nl(s[e])) any_nl = true, last_nl = e;
        prev = e;
        e += le;
    }
    if (any_nl) return last_nl + 1; /* D */
    if (e == n) return e;           /* E: the run ends the piece */
    if (prev > i) return prev;      /* E: all but its last character */
    return e;                       /* F */
}

size_t tk_pretok_deepseek_next(const uint8_t *s, size_t n, size_t i) {
    size_t e = ds_match(s, n, i);
    if (e) return e;
    /* text no alternative takes: up to where one does */
    size_t l;
    cls_at(s, n, i, &l);
    for (i += l; i < n; i += l) {
        if (ds_match(s, n, i)) return i;
        cls_at(s, n, i, &l);
    }
    return n;
}
