/* hf_regex.c - the regexes of HF tokenizer.json Split pre-tokenizers, run by
 * PCRE2 (JIT) with Oniguruma's meaning, general categories of Unicode 16.0
 * whatever the system PCRE2 knows (regex_ucd.c).
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
 *   \d  \p{Nd} (with the Unicode 16 correction, as every \p{category})
 *   \p{Script} Oniguruma: the Script property of Unicode 16.0 (PCRE2 10.42:
 *       Script_Extensions of 14.0) -> the script's ranges (regex_sets.c)
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
 * tiktoken's dialect (tk_regex_compile_tiktoken: a rank file's --pattern
 * REGEX, tiktoken.Encoding's pat_str, run by Rust fancy-regex / regex) reads
 * the same syntax with these differences, rewritten or refused likewise:
 *   $   the end of the text (no multi-line mode) -> \z
 *   ^   the start of the text -> \A
 *   X{n,m}+ possessive, as in PCRE2 (tiktoken's own cl100k \p{N}{1,3}+)
 *   \Z  refused (not proven equal)
 *   \p{Script} and a [...] holding a script, a nested class, && -- ~~, \S \W
 *       \D or Any / ASCII / Assigned: evaluated as Rust's sets by Unicode
 *       16.0 and written as one item (regex_sets.c)
 *   \u{H..} \UHHHHHHHH -> \x{...}
 * and the classes above (\s White_Space, \w UTS #18 word, \d \p{Nd}, \h hex
 * digit) are the regex crate's too.
 *
 * Matching follows the Rust onig crate's find_iter: leftmost-first matches,
 * an empty match right where the previous match ended is skipped and the
 * search moves on by one character. Text that is not valid UTF-8 is matched
 * with PCRE2_MATCH_INVALID_UTF: invalid bytes match nothing, so they end up
 * between matches (every byte still lands in exactly one piece).
 *
 * Work budget. A pattern from a tokenizer file is untrusted: (?:x+x+)+y|.
 * stays under PCRE2's per-start-position match limit yet is retried at every
 * position, and x+y|. rescans the rest of the text from every position (the
 * match limit does not count character scans at all). So the translation
 * puts callouts (?C) where the engine's work can pile up: after every
 * quantifier, at the end of every branch of a group (lookarounds included),
 * before the next atom of a stretch of XLAT_RUN atoms, at the start of a
 * branch once the branches that failed before it could hold XLAT_FAIL atom
 * tests, and as a last branch (?C)(*FAIL) of a group that could fail after
 * more. Each callout costs 1 + the distance the match position moved since
 * the previous one, and every start position a search passes costs 1. Between
 * two callouts the engine makes at most ~2 x XLAT_FAIL + XLAT_RUN atom tests
 * plus the distance counted (a repeat's minimum count, refused above
 * TK_REGEX_MAX_MIN_REPEAT, bounds what a failing fixed-count scan adds), so
 * the units bound the work. A document's budget (tk_re_budget:
 * TK_REGEX_WORK_BASE + TK_REGEX_WORK_PER_BYTE x its bytes, shared by every
 * regex step the document goes through) pays for them; when it is spent the
 * callout stops the match and the document is refused with TK_ERR_DOC_REGEX
 * (the run goes on). The callouts never change what matches: a callout is an
 * empty item returning 0 and (*FAIL) a branch that never matches.
 */
#include "tk_internal.h"
#include "rank_pretok.h"

#include "regex_sets.h"
#include "regex_ucd.h"
#include "strbuf.h"
#include "ucd_categories.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define WS_CLASS                                                                                                       \
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
/* Oniguruma's Unicode \w is UTS #18's word class: Alphabetic (letters, Nl and
 * Other_Alphabetic: marks and the circled / squared Latin letters), M, Nd, Pc
 * and Join_Control (ZWNJ, ZWJ) */
#define W_CLASS_CATEGORIES "L", "M", "Nd", "Nl", "Pc"
#define W_CLASS_REST                                                                                                   \
    "\\x{200C}\\x{200D}\\x{24B6}-\\x{24E9}\\x{1F130}-\\x{1F149}\\x{1F150}-\\x{1F169}\\x{1F170}-\\x{1F189}"

struct tk_regex {
    pcre2_code *code;
    bool jit;
    uint8_t *lit; /* a String pattern: matched with memmem (linear; PCRE2 only checks it is UTF-8) */
    size_t lit_len;
};

/* The longest translation: each general category carries its Unicode
 * correction (up to ~1.2 KB for \p{C} on PCRE2 10.42), so a pattern made of
 * thousands of them would cost ~170x its size; real patterns translate to a
 * few KB (PCRE2's own compiled-size limit is near 64 KB anyway). */
#define XLAT_MAX_OUT ((size_t)1 << 20)

static int refuse(char *err, size_t errlen, const char *what, size_t at) {
    tk_set_err(err, errlen,
               "regex construct %s (at byte %zu) is not supported: its Oniguruma meaning is not proven "
               "equal to PCRE2's",
               what, at);
    return TK_ERR_UNSUPPORTED;
}

static bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* Translation state: the input, the position, the output and whether we are
 * inside a [...] class. */
/* Groups nested deeper than this are refused (PCRE2's own default limit is 250). */
#define XLAT_MAX_DEPTH 250
/* The work-budget callouts (see the top of this file) bound the atom tests
 * the engine makes between two callouts it runs: a stretch of a branch has
 * at most XLAT_RUN atoms before a callout, and where the branches of a group
 * tried and failed since the last callout could hold XLAT_FAIL atoms, the
 * next branch starts with a callout and a group that could fail after more
 * ends with a failing branch that runs one, (?C)(*FAIL). So one unit pays for
 * at most ~2 x XLAT_FAIL + XLAT_RUN atom tests plus the distance it counts. */
#define XLAT_RUN 8
#define XLAT_FAIL 24

/* Per open group (and [0]: the pattern): the cost a failing walk can reach
 * without running a callout. */
typedef struct {
    uint32_t cur; /* the current stretch of the current branch (atoms, failed nested groups) */
    uint32_t mx;  /* the largest stretch of the current branch */
    uint32_t sum; /* the branches before this one since the last callout at a branch start */
    bool behind;  /* inside a lookbehind: no (*FAIL) branch, it would make the length vary */
    bool icase;   /* (?i) in force (tiktoken's dialect refuses the sets regex_sets.c computes under it) */
} xframe;

typedef struct {
    const char *re;
    size_t n, i;
    tk_strbuf b;
    bool in_class;
    size_t class_start; /* index just after '[' or '[^' */
    char *err;
    size_t errlen;
    bool callouts; /* insert the work-budget callouts (tk_regex_compile; tk_regex_translate does not) */
    bool rust;     /* tiktoken's dialect (Rust fancy-regex), not Oniguruma's: see the top of this file */
    int depth;     /* open groups */
    xframe fr[XLAT_MAX_DEPTH + 1];
} xlat;

/* A callout that ends the current stretch (one is enough where one was just written). */
static void put_callout(xlat *t) {
    if (!t->callouts) return;
    if (!(t->b.len >= 4 && !t->b.oom && memcmp(t->b.s + t->b.len - 4, "(?C)", 4) == 0)) tk_sb_puts(&t->b, "(?C)");
    xframe *f = &t->fr[t->depth];
    if (f->cur > f->mx) f->mx = f->cur;
    f->cur = 0;
}

/* Before an atom (a character, escape, class, '.', an anchor) or a group
 * opening: a callout when the stretch is full. Never between an atom and its
 * quantifier: this runs before the atom is written. */
static void before_item(xlat *t, bool atom) {
    if (!t->callouts) return;
    if (t->fr[t->depth].cur >= XLAT_RUN) put_callout(t);
    if (atom) t->fr[t->depth].cur++;
}
static void before_atom(xlat *t) { before_item(t, true); }

static int open_group(xlat *t, bool lookbehind) {
    if (t->depth >= XLAT_MAX_DEPTH) return refuse(t->err, t->errlen, "groups nested deeper than 250", t->i);
    bool behind = lookbehind || t->fr[t->depth].behind;
    t->fr[t->depth + 1] = (xframe){0, 0, 0, behind, t->fr[t->depth].icase};
    t->depth++;
    return TK_OK;
}

/* '|' at the current depth: the branch ends (a callout on its success path
 * inside a group), its failure cost joins the sum, and the next branch starts
 * with a callout when the sum is full. */
static void branch_sep(xlat *t) {
    xframe *f = &t->fr[t->depth];
    uint32_t fail = f->cur > f->mx ? f->cur : f->mx;
    if (t->depth > 0) put_callout(t);
    tk_sb_put(&t->b, "|", 1);
    f->sum += fail;
    f->cur = f->mx = 0;
    if (t->callouts && f->sum >= XLAT_FAIL) {
        tk_sb_puts(&t->b, "(?C)");
        f->sum = 0;
    }
}

/* ')' closing a group: a callout at the end of its last branch, and a last
 * branch (?C)(*FAIL) when the group may fail after more than XLAT_FAIL atom
 * tests; what is left flows into the enclosing stretch. */
static void close_group(xlat *t) {
    xframe *f = &t->fr[t->depth];
    uint32_t fail = f->sum + (f->cur > f->mx ? f->cur : f->mx);
    put_callout(t);
    if (t->callouts && fail > XLAT_FAIL && !f->behind) {
        /* (a lookbehind's branches have fixed lengths: what it tests is bounded by them) */
        tk_sb_puts(&t->b, "|(?C)(*FAIL)");
        fail = 0;
    }
    tk_sb_put(&t->b, ")", 1);
    t->depth--;
    if (t->callouts) t->fr[t->depth].cur += fail;
}

static int xrefuse(xlat *t, const char *what) { return refuse(t->err, t->errlen, what, t->i); }

/* A general-category property (\p{X}: mask = X's categories; \P{X}: negated)
 * with the references' Unicode (16.0) on a PCRE2 that knows another: the
 * property as written (orig) plus the code points PCRE2 leaves out of it,
 * minus those it counts in (regex_ucd.c; on 14.0: ~9,500 letters, digits,
 * marks and symbols assigned since, none to take out but for \p{C}, \p{Cn}
 * and \p{Mn}). Taking out needs a lookahead, which a [...] cannot hold:
 * there it is refused rather than matched differently from the reference. */
static int put_category(xlat *t, const char *orig, size_t olen, uint32_t mask, bool negated) {
    const tk_ucd_diff *d;
    size_t nd;
    const char *pv;
    if (tk_ucd_pcre2_diff(&d, &nd, &pv)) {
        tk_set_err(t->err, t->errlen, "out of memory measuring PCRE2's Unicode tables against the reference's");
        return TK_ERR_NOMEM;
    }
    tk_strbuf add = {.max = XLAT_MAX_OUT}, rem = {.max = XLAT_MAX_OUT};
    tk_strbuf *out[2] = {&add, &rem};
    uint32_t lo[2] = {0, 0}, hi[2] = {0, 0};
    bool open[2] = {false, false};
    for (size_t k = 0; k < nd; k++) {
        bool ours = ((mask >> d[k].our_cat) & 1) != negated, theirs = ((mask >> d[k].pcre_cat) & 1) != negated;
        if (ours == theirs) continue;
        int w = ours ? 0 : 1; /* 0: PCRE2 leaves it out (add it), 1: PCRE2 counts it in (take it out) */
        if (open[w] && d[k].cp == hi[w] + 1) {
            hi[w] = d[k].cp;
            continue;
        }
        if (open[w]) tk_sb_cp_range(out[w], lo[w], hi[w]);
        lo[w] = hi[w] = d[k].cp;
        open[w] = true;
    }
    for (int w = 0; w < 2; w++)
        if (open[w]) tk_sb_cp_range(out[w], lo[w], hi[w]);
    int rc = TK_OK;
    if (add.oom || rem.oom) rc = TK_ERR_NOMEM;
    else if (rem.len && t->in_class) {
        char what[96];
        snprintf(what, sizeof what, "%.*s inside [...] (PCRE2's Unicode %s counts in it code points that %s does not)",
                 (int)(olen < 24 ? olen : 24), orig, pv, tk_ucd_version);
        rc = xrefuse(t, what);
    } else if (!add.len && !rem.len) {
        tk_sb_put(&t->b, orig, olen);
    } else if (t->in_class) {
        tk_sb_put(&t->b, orig, olen);
        tk_sb_put(&t->b, add.s, add.len);
    } else {
        if (rem.len) {
            tk_sb_puts(&t->b, "(?:(?![");
            tk_sb_put(&t->b, rem.s, rem.len);
            tk_sb_puts(&t->b, "])");
        }
        tk_sb_puts(&t->b, "[");
        tk_sb_put(&t->b, orig, olen);
        tk_sb_put(&t->b, add.s, add.len);
        tk_sb_puts(&t->b, "]");
        if (rem.len) tk_sb_puts(&t->b, ")");
    }
    free(add.s);
    free(rem.s);
    return rc;
}

/* Oniguruma's \w (or \W: negated) as a PCRE2 class */
static int put_word_class(xlat *t, bool negated) {
    static const char *const cats[] = {W_CLASS_CATEGORIES};
    bool was_in = t->in_class;
    if (!was_in) tk_sb_puts(&t->b, negated ? "[^" : "[");
    t->in_class = true;
    int rc = TK_OK;
    for (size_t k = 0; k < sizeof cats / sizeof cats[0] && rc == TK_OK; k++) {
        char orig[16];
        uint32_t mask = 0;
        int n = snprintf(orig, sizeof orig, "\\p{%s}", cats[k]);
        tk_ucd_category_mask(cats[k], strlen(cats[k]), &mask);
        rc = put_category(t, orig, (size_t)n, mask, false);
    }
    t->in_class = was_in;
    if (rc) return rc;
    tk_sb_puts(&t->b, W_CLASS_REST);
    if (!was_in) tk_sb_puts(&t->b, "]");
    t->i += 2;
    return TK_OK;
}

/* \s \S \w \W \d \D \h \H: Oniguruma's classes spelled out for PCRE2 */
static int tr_shorthand(xlat *t, char e) {
    const char *put;
    switch (e) {
    case 's': put = t->in_class ? WS_CLASS : "[" WS_CLASS "]"; break;
    case 'S':
        if (t->in_class) return xrefuse(t, "\\S inside [...]");
        put = "[^" WS_CLASS "]";
        break;
    case 'w': return put_word_class(t, false);
    case 'W':
        if (t->in_class) return xrefuse(t, "\\W inside [...]");
        return put_word_class(t, true);
    case 'd':
    case 'D': {
        if (e == 'D' && t->in_class) return xrefuse(t, "\\D inside [...]");
        uint32_t nd_mask = 0;
        tk_ucd_category_mask("Nd", 2, &nd_mask);
        int rc = put_category(t, e == 'd' ? "\\p{Nd}" : "\\P{Nd}", 6, nd_mask, e == 'D');
        if (rc == TK_OK) t->i += 2;
        return rc;
    }
    case 'h': put = t->in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]"; break;
    default: /* 'H' */
        if (t->in_class) return xrefuse(t, "\\H inside [...]");
        put = "[^0-9A-Fa-f]";
        break;
    }
    tk_sb_puts(&t->b, put);
    t->i += 2;
    return TK_OK;
}

/* \uHHHH, \x{H..}, \xH, \xHH -> \x{...} */
static int tr_hex_escape(xlat *t, char e) {
    const char *re = t->re;
    size_t n = t->n, i = t->i;
    char tmp[16];
    if ((e == 'u' || e == 'U') && t->rust && i + 2 < n && re[i + 2] == '{') {
        /* Rust's \u{H..} / \U{H..}: \x{H..} (at most 8 digits; PCRE2 refuses values beyond U+10FFFF) */
        size_t j = i + 3;
        while (j < n && is_hex(re[j])) j++;
        if (j >= n || re[j] != '}' || j == i + 3 || j - (i + 3) > 8) return xrefuse(t, "malformed \\u{...}");
        tk_sb_puts(&t->b, "\\x{");
        tk_sb_put(&t->b, re + i + 3, j + 1 - (i + 3));
        t->i = j + 1;
        return TK_OK;
    }
    if (e == 'U' && t->rust) {
        /* Rust's \UHHHHHHHH */
        for (size_t k = 2; k < 10; k++)
            if (i + k >= n || !is_hex(re[i + k])) return xrefuse(t, "\\U not followed by 8 hex digits");
        snprintf(tmp, sizeof tmp, "\\x{%.8s}", re + i + 2);
        tk_sb_puts(&t->b, tmp);
        t->i = i + 10;
        return TK_OK;
    }
    if (e == 'u') {
        if (i + 6 > n || !is_hex(re[i + 2]) || !is_hex(re[i + 3]) || !is_hex(re[i + 4]) || !is_hex(re[i + 5]))
            return xrefuse(t, "\\u not followed by 4 hex digits");
        snprintf(tmp, sizeof tmp, "\\x{%.4s}", re + i + 2);
        tk_sb_puts(&t->b, tmp);
        t->i = i + 6;
        return TK_OK;
    }
    if (i + 2 < n && re[i + 2] == '{') {
        size_t j = i + 3;
        while (j < n && is_hex(re[j])) j++;
        if (j >= n || re[j] != '}' || j == i + 3) return xrefuse(t, "malformed \\x{...}");
        tk_sb_put(&t->b, re + i, j + 1 - i);
        t->i = j + 1;
        return TK_OK;
    }
    if (i + 3 < n + 1 && i + 2 < n && is_hex(re[i + 2])) {
        size_t j = i + 2;
        while (j < n && j < i + 4 && is_hex(re[j])) j++;
        snprintf(tmp, sizeof tmp, "\\x{%.*s}", (int)(j - i - 2), re + i + 2);
        tk_sb_puts(&t->b, tmp);
        t->i = j;
        return TK_OK;
    }
    return xrefuse(t, "\\x without hex digits");
}

/* tiktoken's dialect: a class or \p{..} at t->i that regex_sets.c evaluates
 * (scripts, nested classes, && -- ~~: Unicode 16.0, Rust's set semantics)
 * written as one item; 1 when it is left to the plain translation. */
static int rust_set(xlat *t) {
    bool plain;
    char *item;
    size_t at = t->i;
    int rc = tk_rx_rust_set(t->re, t->n, &at, t->fr[t->depth].icase, &plain, &item, t->err, t->errlen);
    if (rc) return rc;
    if (plain) return 1;
    tk_sb_puts(&t->b, item);
    free(item);
    t->i = at;
    return TK_OK;
}

/* Whether PCRE2 knows name[0..n) as a script (\p{sc:NAME} compiles). */
static bool is_script(const char *name, size_t n) {
    char pat[80];
    if (n == 0 || n > 60) return false;
    snprintf(pat, sizeof pat, "\\p{sc:%.*s}", (int)n, name);
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    pcre2_code_free(c);
    return c != NULL;
}

/* \p{Name} / \P{Name} (names of letters, '_' and '&'): a general category
 * with the references' Unicode (put_category); any other property (scripts,
 * binary properties) as is, by PCRE2's tables. */
static int tr_property(xlat *t) {
    const char *re = t->re;
    size_t n = t->n, i = t->i;
    if (!(i + 2 < n && re[i + 2] == '{')) return xrefuse(t, "\\p without {...}");
    size_t j = i + 3;
    if (j < n && re[j] == '^') return xrefuse(t, "\\p{^...}");
    while (j < n && re[j] != '}') {
        char k = re[j];
        if (!((k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z') || k == '_' || k == '&')) break;
        j++;
    }
    if (j >= n || re[j] != '}') return xrefuse(t, "malformed \\p{...}");
    uint32_t mask;
    if (tk_ucd_category_mask(re + i + 3, j - (i + 3), &mask) == 0) {
        int rc = put_category(t, re + i, j + 1 - i, mask, re[i + 1] == 'P');
        if (rc == TK_OK) t->i = j + 1;
        return rc;
    }
    if (!t->rust) {
        /* Oniguruma (HF tokenizers 0.23) reads \p{Han} as the Script
         * property of Unicode 16.0; PCRE2 10.42 as Script_Extensions of 14.0
         * (U+3001 in it, CJK Ext. H / I not): the script's code points as
         * ranges instead */
        char *body;
        int rc = tk_rx_script_class(re + i + 3, j - (i + 3), re[i + 1] == 'P', &body);
        if (rc == TK_ERR_NOMEM) return rc;
        if (rc == 0) {
            if (!t->in_class) tk_sb_puts(&t->b, "[");
            tk_sb_puts(&t->b, body);
            if (!t->in_class) tk_sb_puts(&t->b, "]");
            free(body);
            t->i = j + 1;
            return TK_OK;
        }
    }
    if (t->rust && is_script(re + i + 3, j - (i + 3))) {
        /* Rust's \p{Han} is the Script property; PCRE2's (10.40 on) is
         * Script_Extensions (U+3001 is Han there): \p{sc:Han} is the former */
        tk_sb_put(&t->b, re + i, 3);
        tk_sb_puts(&t->b, "sc:");
        tk_sb_put(&t->b, re + i + 3, j + 1 - (i + 3));
        t->i = j + 1;
        return TK_OK;
    }
    tk_sb_put(&t->b, re + i, j + 1 - i);
    t->i = j + 1;
    return TK_OK;
}

/* a backslash escape at t->i */
static int tr_escape(xlat *t) {
    if (t->i + 1 >= t->n) {
        tk_set_err(t->err, t->errlen, "regex ends with a lone backslash");
        return TK_ERR_FORMAT;
    }
    char e = t->re[t->i + 1];
    if (!t->in_class) before_atom(t);
    switch (e) {
    case 's':
    case 'S':
    case 'w':
    case 'W':
    case 'd':
    case 'D':
    case 'h':
    case 'H': return tr_shorthand(t, e);
    case 'v':
        tk_sb_puts(&t->b, "\\x{0B}");
        t->i += 2;
        return TK_OK;
    case 'u':
    case 'x': return tr_hex_escape(t, e);
    case 'U':
        if (t->rust) return tr_hex_escape(t, e);
        return xrefuse(t, "\\U");
    case 'p':
    case 'P':
        if (t->rust && !t->in_class) {
            int rc = rust_set(t);
            if (rc != 1) return rc;
        }
        return tr_property(t);
    case 'n':
    case 'r':
    case 't':
    case 'f':
    case 'e':
    case 'a':
    case 'A':
    case 'z':
    case 'Z':
        if (e == 'Z' && t->rust) return xrefuse(t, "\\Z");
        if (t->in_class && (e == 'A' || e == 'z' || e == 'Z')) return xrefuse(t, "anchor inside [...]");
        break;
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            char what[8];
            snprintf(what, sizeof what, "\\%c", e);
            return xrefuse(t, what);
        }
        /* an escaped punctuation or non-ASCII byte: literal in both */
        break;
    }
    tk_sb_put(&t->b, t->re + t->i, 2);
    t->i += 2;
    return TK_OK;
}

/* a non-escape byte inside [...] */
static int tr_class_char(xlat *t, char c) {
    if (c == ']' && t->i > t->class_start) {
        t->in_class = false;
        tk_sb_put(&t->b, "]", 1);
        t->i++;
        return TK_OK;
    }
    if (c == '[') return xrefuse(t, "'[' inside [...] (nested class or POSIX class)");
    if (c == '&' && t->i + 1 < t->n && t->re[t->i + 1] == '&') return xrefuse(t, "&& inside [...]");
    tk_sb_put(&t->b, &c, 1);
    t->i++;
    return TK_OK;
}

/* "(?" at t->i: the group kinds and inline options with the same meaning */
static int tr_group(xlat *t) {
    const char *re = t->re;
    size_t n = t->n, i = t->i, j = i + 2;
    if (j < n && (re[j] == ':' || re[j] == '=' || re[j] == '!' || re[j] == '>')) {
        tk_sb_put(&t->b, re + i, 3);
        t->i = i + 3;
        return open_group(t, false);
    }
    if (j < n && re[j] == '<' && j + 1 < n && (re[j + 1] == '=' || re[j + 1] == '!')) {
        tk_sb_put(&t->b, re + i, 4);
        t->i = i + 4;
        return open_group(t, true);
    }
    if (j < n && re[j] == '#') {
        while (j < n && re[j] != ')') j++;
        t->i = j + 1;
        return TK_OK;
    }
    /* inline options: only i and -i */
    size_t k = j;
    bool on = false, off = false, dash = false;
    while (k < n && (re[k] == 'i' || re[k] == '-')) {
        if (re[k] == '-') dash = true;
        else if (dash) off = true;
        else on = true;
        k++;
    }
    if (k > j && k < n && (re[k] == ':' || re[k] == ')')) {
        tk_sb_put(&t->b, re + i, k + 1 - i);
        t->i = k + 1;
        /* (?i: opens a group, (?i) sets the option up to the end of the enclosing one */
        int rc = re[k] == ':' ? open_group(t, false) : TK_OK;
        if (rc == TK_OK) t->fr[t->depth].icase = (t->fr[t->depth].icase || on) && !off;
        return rc;
    }
    return xrefuse(t, "group (?...) other than (?: (?= (?! (?<= (?<! (?> (?i");
}

/* a non-escape byte outside [...] */
/* {n} {n,} {n,m} at re[i] (PCRE2 10.42's quantifier forms; anything else is
 * a literal brace): its length, the minimum in *min; 0 if not a quantifier. */
static size_t brace_quantifier(const char *re, size_t n, size_t i, unsigned long *min) {
    size_t j = i + 1;
    unsigned long v = 0;
    if (j >= n || re[j] < '0' || re[j] > '9') return 0;
    while (j < n && re[j] >= '0' && re[j] <= '9') {
        if (v < 1000000) v = v * 10 + (unsigned long)(re[j] - '0');
        j++;
    }
    if (j < n && re[j] == ',') {
        j++;
        while (j < n && re[j] >= '0' && re[j] <= '9') j++;
    }
    if (j >= n || re[j] != '}') return 0;
    *min = v;
    return j + 1 - i;
}

/* A quantifier of q bytes at t->i: copied with its lazy '?' or possessive
 * '+', then a callout (each attempt of what follows the repeat is counted). */
static int tr_quantifier(xlat *t, size_t q) {
    const char *re = t->re;
    size_t n = t->n, i = t->i + q;
    if (i < n && (re[i] == '?' || re[i] == '+')) {
        /* Ruby: a repeat of a repeat; Rust and PCRE2: possessive */
        if (re[i] == '+' && re[t->i] == '{' && !t->rust) return xrefuse(t, "{n,m}+");
        i++;
    }
    tk_sb_put(&t->b, re + t->i, i - t->i);
    t->i = i;
    put_callout(t);
    return TK_OK;
}

/* a non-escape byte outside [...] */
static int tr_plain(xlat *t, char c) {
    const char *re = t->re;
    size_t n = t->n, i = t->i;
    switch (c) {
    case '[':
        before_atom(t);
        if (t->rust) {
            int rc = rust_set(t);
            if (rc != 1) return rc;
        }
        t->in_class = true;
        tk_sb_put(&t->b, "[", 1);
        i++;
        if (i < n && re[i] == '^') {
            tk_sb_put(&t->b, "^", 1);
            i++;
        }
        t->i = i;
        t->class_start = i;
        /* a ']' first in the class: Oniguruma warns and takes it literally, as PCRE2 does */
        return TK_OK;
    case '$':
        before_atom(t);
        tk_sb_puts(&t->b, t->rust ? "\\z" : "(?![^\\n])");
        t->i++;
        return TK_OK;
    case '^':
        before_atom(t);
        tk_sb_puts(&t->b, t->rust ? "\\A" : "(?<![^\\n])");
        t->i++;
        return TK_OK;
    case '*':
    case '+':
    case '?': return tr_quantifier(t, 1);
    case '{': {
        unsigned long min = 0;
        size_t q = brace_quantifier(re, n, i, &min);
        if (!q) break; /* a literal brace */
        if (min > TK_REGEX_MAX_MIN_REPEAT) {
            /* a fixed-count scan that fails is not paid from the work budget: keep it short */
            tk_set_err(t->err, t->errlen,
                       "regex repeat {%lu,...} (at byte %zu) is refused: a minimum count over %u is "
                       "beyond the regex work limits (docs/tokenizer.md, Hostile files)",
                       min, i, TK_REGEX_MAX_MIN_REPEAT);
            return TK_ERR_UNSUPPORTED;
        }
        return tr_quantifier(t, q);
    }
    case '}':
        if (i + 1 < n && re[i + 1] == '+' && !t->rust) {
            /* X{n,m}+ : Ruby reads a repeat of a repeat, PCRE2 a possessive */
            size_t j = i;
            while (j > 0 && re[j - 1] != '{') j--;
            if (j > 0) return xrefuse(t, "{n,m}+");
        }
        break;
    case '(':
        before_item(t, false);
        if (i + 1 < n && re[i + 1] == '?') return tr_group(t);
        tk_sb_put(&t->b, "(", 1);
        t->i++;
        return open_group(t, false);
    case ')':
        if (t->depth > 0) close_group(t);
        else tk_sb_put(&t->b, ")", 1); /* unbalanced: PCRE2 refuses it */
        t->i++;
        return TK_OK;
    case '|':
        branch_sep(t);
        t->i++;
        return TK_OK;
    default: break;
    }
    before_atom(t);
    tk_sb_put(&t->b, &c, 1);
    t->i++;
    return TK_OK;
}

/* Oniguruma (Ruby syntax) pattern -> PCRE2 pattern with the same matches;
 * callouts: with the work-budget callouts (see the top of this file). */
static int translate(const char *re, size_t n, bool callouts, bool rust, char **out, char *err, size_t errlen) {
    xlat t = {
        .re = re, .n = n, .b = {.max = XLAT_MAX_OUT}, .err = err, .errlen = errlen, .callouts = callouts, .rust = rust};
    int rc = TK_OK;
    while (t.i < n && rc == TK_OK) {
        char c = re[t.i];
        if (c == 0) {
            rc = xrefuse(&t, "NUL byte");
            break;
        }
        if (c == '\\') rc = tr_escape(&t);
        else if (t.in_class) rc = tr_class_char(&t, c);
        else rc = tr_plain(&t, c);
    }
    if (rc == TK_OK && t.in_class) {
        tk_set_err(err, errlen, "regex has an unterminated [...]");
        rc = TK_ERR_FORMAT;
    }
    if (rc == TK_OK && t.b.too_large) {
        tk_set_err(err, errlen, "regex is refused: its PCRE2 translation is over %zu bytes", XLAT_MAX_OUT);
        rc = TK_ERR_UNSUPPORTED;
    }
    if (rc == TK_OK && t.b.oom) rc = TK_ERR_NOMEM;
    if (rc) {
        free(t.b.s);
        return rc;
    }
    tk_sb_put(&t.b, "", 1);
    if (t.b.oom) {
        free(t.b.s);
        return TK_ERR_NOMEM;
    }
    *out = t.b.s;
    return TK_OK;
}

int tk_regex_translate(const char *re, size_t n, char **out, char *err, size_t errlen) {
    return translate(re, n, false, false, out, err, errlen);
}

static int compile(const char *re, size_t n, bool literal, bool rust, tk_regex **out, char *err, size_t errlen) {
    *out = NULL;
    char *pat = NULL;
    int rc;
    if (literal) {
        pat = malloc(n + 1);
        if (!pat) return TK_ERR_NOMEM;
        memcpy(pat, re, n);
        pat[n] = 0;
    } else if ((rc = translate(re, n, true, rust, &pat, err, errlen))) {
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
    r->code =
        pcre2_compile((PCRE2_SPTR)pat, literal ? n : PCRE2_ZERO_TERMINATED, opt & ~PCRE2_NO_UTF_CHECK, &ec, &eo, cc);
    pcre2_compile_context_free(cc);
    if (!r->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        tk_set_err(err, errlen, "regex does not compile (PCRE2: %s at offset %zu)", (const char *)msg, (size_t)eo);
        free(pat);
        free(r);
        return TK_ERR_UNSUPPORTED;
    }
    if (literal && n) { /* keep the bytes: matched by memmem */
        r->lit = (uint8_t *)pat;
        r->lit_len = n;
        pat = NULL;
    }
    free(pat);
    r->jit = !r->lit && pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE) == 0;
    *out = r;
    return TK_OK;
}

int tk_regex_compile(const char *re, size_t n, bool literal, tk_regex **out, char *err, size_t errlen) {
    return compile(re, n, literal, false, out, err, errlen);
}

int tk_regex_compile_tiktoken(const char *re, size_t n, tk_regex **out, char *err, size_t errlen) {
    return compile(re, n, false, true, out, err, errlen);
}

void tk_regex_free(tk_regex *r) {
    if (!r) return;
    pcre2_code_free(r->code);
    free(r->lit);
    free(r);
}

void tk_re_budget_init(tk_re_budget *b, size_t bytes) {
    uint64_t per = (uint64_t)TK_REGEX_WORK_PER_BYTE;
    b->left = bytes > (UINT64_MAX - TK_REGEX_WORK_BASE) / per ? UINT64_MAX : TK_REGEX_WORK_BASE + per * bytes;
}

/* Per-thread match data (one per thread, grown for the largest pattern) and
 * match context (the callout), freed when the thread ends (a pthread key's
 * destructor). */
typedef struct {
    pcre2_match_data *md;
    uint32_t pairs;
    pcre2_match_context *mc;
} thread_match;
static _Thread_local thread_match g_tm;
static pthread_key_t g_md_key;
static pthread_once_t g_md_once = PTHREAD_ONCE_INIT;

static void md_destroy(void *p) {
    thread_match *tm = p;
    pcre2_match_data_free(tm->md);
    pcre2_match_context_free(tm->mc);
    tm->md = NULL;
    tm->mc = NULL;
}
static void md_key_init(void) { pthread_key_create(&g_md_key, md_destroy); }

/* The work-budget callout's state for one find_all. */
typedef struct {
    tk_re_budget *budget;
    size_t last; /* match position at the previous callout */
} co_state;

static int co_charge(pcre2_callout_block *cb, void *u) {
    co_state *st = u;
    size_t p = cb->current_position;
    uint64_t cost = 1 + (uint64_t)(p > st->last ? p - st->last : st->last - p);
    st->last = p;
    if (cost > st->budget->left) {
        st->budget->left = 0;
        return PCRE2_ERROR_CALLOUT; /* abandons the match */
    }
    st->budget->left -= cost;
    return 0;
}

static thread_match *match_state(const tk_regex *r) {
    uint32_t need;
    pcre2_pattern_info(r->code, PCRE2_INFO_CAPTURECOUNT, &need);
    need++;
    thread_match *tm = &g_tm;
    if (!tm->md || tm->pairs < need) {
        pthread_once(&g_md_once, md_key_init);
        pcre2_match_data_free(tm->md);
        tm->md = pcre2_match_data_create(need < 16 ? 16 : need, NULL);
        tm->pairs = tm->md ? (need < 16 ? 16 : need) : 0;
        pthread_setspecific(g_md_key, tm);
    }
    if (!tm->mc) tm->mc = pcre2_match_context_create(NULL);
    return tm->md && tm->mc ? tm : NULL;
}

static size_t char_len_at(const uint8_t *s, size_t n, size_t i) {
    size_t l;
    tk_char_class(s, n, i, &l);
    return l;
}

/* Spend cost units of the budget; false when it does not hold them. */
static bool spend(tk_re_budget *b, uint64_t cost) {
    if (cost > b->left) {
        b->left = 0;
        return false;
    }
    b->left -= cost;
    return true;
}

/* A String pattern: its occurrences left to right, without overlap (a
 * valid UTF-8 needle never starts inside a character, so these are the
 * matches PCRE2 would report). Linear: each scanned byte costs a unit. */
static int find_literal(const tk_regex *r, const uint8_t *s, size_t n, tk_re_budget *budget,
                        int (*fn)(void *, size_t, size_t), void *user) {
    size_t i = 0;
    while (i < n) {
        const uint8_t *f = memmem(s + i, n - i, r->lit, r->lit_len);
        size_t ms = f ? (size_t)(f - s) : n;
        if (!spend(budget, (f ? ms + r->lit_len : n) - i + 1)) return TK_ERR_DOC_REGEX;
        if (!f) break;
        int rc = fn(user, ms, ms + r->lit_len);
        if (rc) return rc;
        i = ms + r->lit_len;
    }
    return TK_OK;
}

/* find_iter over s[0..n): calls fn(user, start, end) for each match. */
int tk_regex_find_all(const tk_regex *r, const uint8_t *s, size_t n, tk_re_budget *budget,
                      int (*fn)(void *, size_t, size_t), void *user) {
    if (r->lit) return find_literal(r, s, n, budget, fn, user);
    thread_match *tm = match_state(r);
    if (!tm) return TK_ERR_NOMEM;
    pcre2_match_data *md = tm->md;
    co_state st = {budget, 0};
    pcre2_set_callout(tm->mc, co_charge, &st);
    size_t last_end = 0;
    bool have_last = false;
    size_t last_match_end = 0;
    while (last_end <= n) {
        st.last = last_end;
        int m = r->jit ? pcre2_jit_match(r->code, s, n, last_end, 0, md, tm->mc)
                       : pcre2_match(r->code, s, n, last_end, 0, md, tm->mc);
        if (m == PCRE2_ERROR_NOMATCH) {
            if (!spend(budget, n - last_end + 1)) return TK_ERR_DOC_REGEX; /* the start positions passed */
            break;
        }
        /* the budget spent (a callout stopped it), PCRE2's match, depth or
         * heap limit, the JIT stack: this document is refused, never split
         * by a guess */
        if (m == PCRE2_ERROR_NOMEMORY) return TK_ERR_NOMEM;
        if (m < 0) return TK_ERR_DOC_REGEX;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me < ms) return TK_ERR_UNSUPPORTED; /* \K-like results: refused at compile, defensive */
        if (!spend(budget, ms - last_end + 1)) return TK_ERR_DOC_REGEX;
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
