/* hf_regex.c - the regexes of HF tokenizer.json Split pre-tokenizers, run by
 * PCRE2 (JIT) with Oniguruma's meaning.
 *
 * HF tokenizers compiles these patterns with Oniguruma (Ruby syntax, UTF-8).
 * PCRE2 reads most of that syntax the same way; the constructs where the two
 * differ are rewritten here, and the constructs whose meaning we have not
 * proven equal are refused (TK_ERR_UNSUPPORTED, with the construct named),
 * never compiled to something that could split differently:
 *
 *   \s  Oniguruma: White_Space (incl. U+0085); PCRE2's UCP \s omits U+0085
 *       -> an explicit class of the 25 White_Space code points
 *   \S  -> its negation (refused inside [...], where it cannot be inlined)
 *   \w  Oniguruma: UTS #18 word = Alphabetic|Mark|Decimal_Number|
 *       Connector_Punctuation|Join_Control -> [\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}
 *       U+200C U+200D and the So letters of Other_Alphabetic] (PCRE2 10.42's
 *       \w lacks \p{M}, \p{Pc}, Nl, Join_Control);
 *       \W -> negation (refused inside [...])
 *   \d  \p{Nd} in both (kept, PCRE2_UCP)
 *   \h  Oniguruma: hex digit (PCRE2: horizontal space) -> [0-9A-Fa-f]
 *   \v  Oniguruma: U+000B (PCRE2: vertical space class) -> \x{0B}
 *   \uHHHH -> \x{HHHH}
 *   $   Oniguruma (Ruby): end of line -> (?![^\n])
 *   ^   Oniguruma (Ruby): start of line -> (?<![^\n])
 *   X{n,m}+ Oniguruma: a repeat of a repeat (not possessive): refused
 *   refused: \b \B \G \K \R \X \N \k \g \Q \c \o \p{^..} back-references \1..,
 *   nested classes and && inside [...], POSIX [:..:], inline options other
 *   than i (Ruby's (?m) is PCRE2's (?s)), \x without braces beyond 2 digits.
 *
 * Matching follows the Rust onig crate's find_iter: leftmost-first matches,
 * an empty match right where the previous match ended is skipped and the
 * search moves on by one character. Text that is not valid UTF-8 is matched
 * with PCRE2_MATCH_INVALID_UTF: invalid bytes match nothing, so they end up
 * between matches (every byte still lands in exactly one piece).
 */
#include "tk_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define WS_CLASS "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
/* Oniguruma's Unicode \w is UTS #18's word class: Alphabetic (letters, Nl and
 * Other_Alphabetic: marks and the circled / squared Latin letters), M, Nd, Pc
 * and Join_Control (ZWNJ, ZWJ) */
#define W_CLASS "\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{200C}\\x{200D}\\x{24B6}-\\x{24E9}\\x{1F130}-\\x{1F149}" \
                "\\x{1F150}-\\x{1F169}\\x{1F170}-\\x{1F189}"

struct tk_regex {
    pcre2_code *code;
    bool jit;
};

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *p, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->len) {
        size_t c = b->cap ? b->cap * 2 : 256;
        while (c - b->len < n + 1) c *= 2;
        char *q = realloc(b->s, c);
        if (!q) {
            b->oom = true;
            return;
        }
        b->s = q;
        b->cap = c;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
}
static void sb_puts(sbuf *b, const char *p) { sb_put(b, p, strlen(p)); }

static int refuse(char *err, size_t errlen, const char *what, size_t at) {
    tk_set_err(err, errlen, "regex construct %s (at byte %zu) is not supported: its Oniguruma meaning is not proven "
               "equal to PCRE2's", what, at);
    return TK_ERR_UNSUPPORTED;
}

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* Oniguruma (Ruby syntax) pattern -> PCRE2 pattern with the same matches. */
int tk_regex_translate(const char *re, size_t n, char **out, char *err, size_t errlen) {
    sbuf b = {0};
    bool in_class = false;
    size_t class_start = 0; /* index just after '[' or '[^' */
    int rc = TK_OK;
    for (size_t i = 0; i < n && rc == TK_OK;) {
        char c = re[i];
        if (c == 0) {
            rc = refuse(err, errlen, "NUL byte", i);
            break;
        }
        if (c == '\\') {
            if (i + 1 >= n) {
                tk_set_err(err, errlen, "regex ends with a lone backslash");
                rc = TK_ERR_FORMAT;
                break;
            }
            char e = re[i + 1];
            switch (e) {
            case 's': sb_puts(&b, in_class ? WS_CLASS : "[" WS_CLASS "]"); i += 2; continue;
            case 'S':
                if (in_class) { rc = refuse(err, errlen, "\\S inside [...]", i); continue; }
                sb_puts(&b, "[^" WS_CLASS "]");
                i += 2;
                continue;
            case 'w': sb_puts(&b, in_class ? W_CLASS : "[" W_CLASS "]"); i += 2; continue;
            case 'W':
                if (in_class) { rc = refuse(err, errlen, "\\W inside [...]", i); continue; }
                sb_puts(&b, "[^" W_CLASS "]");
                i += 2;
                continue;
            case 'd': sb_puts(&b, "\\p{Nd}"); i += 2; continue;
            case 'D':
                if (in_class) { rc = refuse(err, errlen, "\\D inside [...]", i); continue; }
                sb_puts(&b, "\\P{Nd}");
                i += 2;
                continue;
            case 'h': sb_puts(&b, in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]"); i += 2; continue;
            case 'H':
                if (in_class) { rc = refuse(err, errlen, "\\H inside [...]", i); continue; }
                sb_puts(&b, "[^0-9A-Fa-f]");
                i += 2;
                continue;
            case 'v': sb_puts(&b, "\\x{0B}"); i += 2; continue;
            case 'u': {
                if (i + 6 > n || !is_hex(re[i + 2]) || !is_hex(re[i + 3]) || !is_hex(re[i + 4]) || !is_hex(re[i + 5])) {
                    rc = refuse(err, errlen, "\\u not followed by 4 hex digits", i);
                    continue;
                }
                char tmp[16];
                snprintf(tmp, sizeof tmp, "\\x{%.4s}", re + i + 2);
                sb_puts(&b, tmp);
                i += 6;
                continue;
            }
            case 'x':
                if (i + 2 < n && re[i + 2] == '{') {
                    size_t j = i + 3;
                    while (j < n && is_hex(re[j])) j++;
                    if (j >= n || re[j] != '}' || j == i + 3) { rc = refuse(err, errlen, "malformed \\x{...}", i); continue; }
                    sb_put(&b, re + i, j + 1 - i);
                    i = j + 1;
                    continue;
                }
                if (i + 3 < n + 1 && i + 2 < n && is_hex(re[i + 2])) {
                    size_t j = i + 2;
                    while (j < n && j < i + 4 && is_hex(re[j])) j++;
                    char tmp[16];
                    snprintf(tmp, sizeof tmp, "\\x{%.*s}", (int)(j - i - 2), re + i + 2);
                    sb_puts(&b, tmp);
                    i = j;
                    continue;
                }
                rc = refuse(err, errlen, "\\x without hex digits", i);
                continue;
            case 'p':
            case 'P':
                if (i + 2 < n && re[i + 2] == '{') {
                    size_t j = i + 3;
                    if (j < n && re[j] == '^') { rc = refuse(err, errlen, "\\p{^...}", i); continue; }
                    while (j < n && re[j] != '}') {
                        char k = re[j];
                        if (!((k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z') || k == '_' || k == '&')) break;
                        j++;
                    }
                    if (j >= n || re[j] != '}') { rc = refuse(err, errlen, "malformed \\p{...}", i); continue; }
                    sb_put(&b, re + i, j + 1 - i);
                    i = j + 1;
                    continue;
                }
                rc = refuse(err, errlen, "\\p without {...}", i);
                continue;
            case 'n': case 'r': case 't': case 'f': case 'e': case 'a':
            case 'A': case 'z': case 'Z':
                if (in_class && (e == 'A' || e == 'z' || e == 'Z')) { rc = refuse(err, errlen, "anchor inside [...]", i); continue; }
                sb_put(&b, re + i, 2);
                i += 2;
                continue;
            default:
                if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
                    char what[8];
                    snprintf(what, sizeof what, "\\%c", e);
                    rc = refuse(err, errlen, what, i);
                    continue;
                }
                /* an escaped punctuation or non-ASCII byte: literal in both */
                sb_put(&b, re + i, 2);
                i += 2;
                continue;
            }
        }
        if (in_class) {
            if (c == ']' && i > class_start) {
                in_class = false;
                sb_put(&b, "]", 1);
                i++;
                continue;
            }
            if (c == '[') { rc = refuse(err, errlen, "'[' inside [...] (nested class or POSIX class)", i); continue; }
            if (c == '&' && i + 1 < n && re[i + 1] == '&') { rc = refuse(err, errlen, "&& inside [...]", i); continue; }
            sb_put(&b, &c, 1);
            i++;
            continue;
        }
        switch (c) {
        case '[':
            in_class = true;
            sb_put(&b, "[", 1);
            i++;
            if (i < n && re[i] == '^') {
                sb_put(&b, "^", 1);
                i++;
            }
            class_start = i;
            /* a ']' first in the class: Oniguruma warns and takes it literally, as PCRE2 does */
            continue;
        case '$': sb_puts(&b, "(?![^\\n])"); i++; continue;
        case '^': sb_puts(&b, "(?<![^\\n])"); i++; continue;
        case '}':
            if (i + 1 < n && re[i + 1] == '+') {
                /* X{n,m}+ : Ruby reads a repeat of a repeat, PCRE2 a possessive */
                size_t j = i;
                while (j > 0 && re[j - 1] != '{') j--;
                if (j > 0) { rc = refuse(err, errlen, "{n,m}+", i); continue; }
            }
            sb_put(&b, &c, 1);
            i++;
            continue;
        case '(':
            if (i + 1 < n && re[i + 1] == '?') {
                size_t j = i + 2;
                if (j < n && (re[j] == ':' || re[j] == '=' || re[j] == '!' || re[j] == '>')) {
                    sb_put(&b, re + i, 3);
                    i += 3;
                    continue;
                }
                if (j < n && re[j] == '<' && j + 1 < n && (re[j + 1] == '=' || re[j + 1] == '!')) {
                    sb_put(&b, re + i, 4);
                    i += 4;
                    continue;
                }
                if (j < n && re[j] == '#') {
                    while (j < n && re[j] != ')') j++;
                    i = j + 1;
                    continue;
                }
                /* inline options: only i and -i */
                size_t k = j;
                while (k < n && (re[k] == 'i' || re[k] == '-')) k++;
                if (k > j && k < n && (re[k] == ':' || re[k] == ')')) {
                    sb_put(&b, re + i, k + 1 - i);
                    i = k + 1;
                    continue;
                }
                rc = refuse(err, errlen, "group (?...) other than (?: (?= (?! (?<= (?<! (?> (?i", i);
                continue;
            }
            sb_put(&b, &c, 1);
            i++;
            continue;
        default:
            sb_put(&b, &c, 1);
            i++;
            continue;
        }
    }
    if (rc == TK_OK && in_class) {
        tk_set_err(err, errlen, "regex has an unterminated [...]");
        rc = TK_ERR_FORMAT;
    }
    if (rc == TK_OK && b.oom) rc = TK_ERR_NOMEM;
    if (rc) {
        free(b.s);
        return rc;
    }
    sb_put(&b, "", 1);
    if (b.oom) {
        free(b.s);
        return TK_ERR_NOMEM;
    }
    *out = b.s;
    return TK_OK;
}

int tk_regex_compile(const char *re, size_t n, bool literal, tk_regex **out, char *err, size_t errlen) {
    *out = NULL;
    char *pat = NULL;
    int rc;
    if (literal) {
        pat = malloc(n + 1);
        if (!pat) return TK_ERR_NOMEM;
        memcpy(pat, re, n);
        pat[n] = 0;
    } else if ((rc = tk_regex_translate(re, n, &pat, err, errlen))) {
        return rc;
    }
    tk_regex *r = calloc(1, sizeof *r);
    if (!r) {
        free(pat);
        return TK_ERR_NOMEM;
    }
    int ec;
    PCRE2_SIZE eo;
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (cc) pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    uint32_t opt = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_NO_UTF_CHECK;
    if (literal) opt = PCRE2_UTF | PCRE2_LITERAL | PCRE2_MATCH_INVALID_UTF;
    r->code = pcre2_compile((PCRE2_SPTR)pat, literal ? n : PCRE2_ZERO_TERMINATED, opt & ~PCRE2_NO_UTF_CHECK, &ec, &eo, cc);
    pcre2_compile_context_free(cc);
    if (!r->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        tk_set_err(err, errlen, "regex does not compile (PCRE2: %s at offset %zu)", (const char *)msg, (size_t)eo);
        free(pat);
        free(r);
        return TK_ERR_UNSUPPORTED;
    }
    free(pat);
    r->jit = pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE) == 0;
    *out = r;
    return TK_OK;
}

void tk_regex_free(tk_regex *r) {
    if (!r) return;
    pcre2_code_free(r->code);
    free(r);
}

/* Per-thread match data (one per thread, grown for the largest pattern),
 * freed when the thread ends (a pthread key's destructor). */
static _Thread_local pcre2_match_data *g_md;
static _Thread_local uint32_t g_md_pairs;
static pthread_key_t g_md_key;
static pthread_once_t g_md_once = PTHREAD_ONCE_INIT;

static void md_destroy(void *p) { pcre2_match_data_free(p); }
static void md_key_init(void) { pthread_key_create(&g_md_key, md_destroy); }

static pcre2_match_data *match_data(const tk_regex *r) {
    uint32_t need;
    pcre2_pattern_info(r->code, PCRE2_INFO_CAPTURECOUNT, &need);
    need++;
    if (!g_md || g_md_pairs < need) {
        pthread_once(&g_md_once, md_key_init);
        pcre2_match_data_free(g_md);
        g_md = pcre2_match_data_create(need < 16 ? 16 : need, NULL);
        g_md_pairs = g_md ? (need < 16 ? 16 : need) : 0;
        pthread_setspecific(g_md_key, g_md);
    }
    return g_md;
}

static size_t char_len_at(const uint8_t *s, size_t n, size_t i) {
    size_t l;
    tk_char_class(s, n, i, &l);
    return l;
}

/* find_iter over s[0..n): calls fn(user, start, end) for each match. */
int tk_regex_find_all(const tk_regex *r, const uint8_t *s, size_t n, int (*fn)(void *, size_t, size_t),
                      void *user) {
    pcre2_match_data *md = match_data(r);
    if (!md) return TK_ERR_NOMEM;
    size_t last_end = 0;
    bool have_last = false;
    size_t last_match_end = 0;
    while (last_end <= n) {
        int m = r->jit ? pcre2_jit_match(r->code, s, n, last_end, 0, md, NULL)
                       : pcre2_match(r->code, s, n, last_end, 0, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) return TK_ERR_LIMIT; /* match/depth/JIT stack limit: never guess a split */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me < ms) return TK_ERR_UNSUPPORTED; /* \K-like results: refused at compile, defensive */
        if (ms == me && have_last && last_match_end == me) {
            if (last_end >= n) break;
            last_end += char_len_at(s, n, last_end);
            continue;
        }
        last_end = me;
        last_match_end = me;
        have_last = true;
        int rc = fn(user, ms, me);
        if (rc) return rc;
        if (ms == me) {
            /* the next search from me finds this empty match again and skips it */
        }
    }
    return TK_OK;
}
