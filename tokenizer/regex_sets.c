/* regex_sets.c - tiktoken's (Rust regex-syntax's) character classes as code
 * point sets, written for PCRE2.
 *
 * Why: PCRE2 has no class set operations (Kimi K2's pattern intersects
 * [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]), its nested classes are not
 * Rust's, and its script tables are its own Unicode version (10.42: 14.0;
 * tiktoken's: 16.0, so \p{Han} missed CJK Extension H / I). So such a class
 * is evaluated here, as regex-syntax 0.8 defines it:
 *   - items: literals (UTF-8, \x.. \u.. \U.. \a \f \t \n \r \v, an escaped
 *     ASCII punctuation), ranges a-z, \d \s \w and their negations, \p{..}
 *     \P{..} (general categories: ucd_categories.c; scripts: ucd_scripts.c,
 *     both Unicode 16.0; Any, ASCII, Assigned), nested [...], ASCII classes
 *     [:alpha:] (a failed one is a nested class, as in regex-syntax);
 *   - leading '-' and a first ']' are literals, '-' before ']' or '-' too;
 *   - && (intersection), -- (difference), ~~ (symmetric difference): one
 *     precedence, left to right, below the union of juxtaposed items;
 *   - [^...] complements the result (in Unicode scalar values).
 * The set is then written as one code-point item that PCRE2 matches exactly,
 * whatever its own tables say: the general categories PCRE2 reads as we do
 * for most of their code points as \p{..} (PCRE2's view of each is known
 * exactly: ours corrected by regex_ucd.c's measured differences), plus the
 * code points they miss as ranges, minus those they hold too many in a
 * negative lookahead: (?:(?![REM])[\p{Lu}...ADD]); or the same for the
 * complement, negated; whichever is shorter. Scripts have no PCRE2 item
 * here: their code points are written as ranges (\p{Han}: 22).
 *
 * Binary properties (\p{Alphabetic}, \p{Emoji}, ...) and \p{name=value}
 * inside such a class are refused by name; so is any such set under (?i),
 * which Rust closes over its case folding (Unicode 16.0) and PCRE2 would
 * fold by its own. */
#include "regex_sets.h"
#include "regex_ucd.h"
#include "strbuf.h"
#include "tk_internal.h"
#include "ucd_categories.h"
#include "ucd_scripts.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CP_MAX 0x10FFFFu
/* nested [...] deeper than this are refused (regex-syntax's own nest limit is 250) */
#define SET_MAX_DEPTH 32

typedef struct {
    uint32_t lo, hi;
} rng;

/* sorted, disjoint, non-adjacent inclusive ranges */
typedef struct {
    rng *r;
    size_t n, cap;
    bool oom;
} cset;

static void cs_free(cset *s) {
    free(s->r);
    *s = (cset){0};
}

/* append [lo, hi], lo not below the last range's start; merges what touches */
static void cs_push(cset *s, uint32_t lo, uint32_t hi) {
    if (s->oom) return;
    if (s->n && lo <= s->r[s->n - 1].hi + 1) {
        if (hi > s->r[s->n - 1].hi) s->r[s->n - 1].hi = hi;
        return;
    }
    if (s->n == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 16;
        rng *q = realloc(s->r, c * sizeof *q);
        if (!q) {
            s->oom = true;
            return;
        }
        s->r = q;
        s->cap = c;
    }
    s->r[s->n++] = (rng){lo, hi};
}

enum { OP_UNION, OP_AND, OP_DIFF, OP_SYM };

/* a OP b, one sweep over both lists' boundaries: into out, or (out NULL)
 * only the number of ranges it has */
static size_t cs_sweep(const cset *a, const cset *b, int op, cset *out) {
    size_t i = 0, j = 0, count = 0;
    bool was_in = false;
    uint64_t x = 0;
    while (x <= CP_MAX && !(out && out->oom)) {
        while (i < a->n && a->r[i].hi < x) i++;
        while (j < b->n && b->r[j].hi < x) j++;
        bool ia = i < a->n && a->r[i].lo <= x, ib = j < b->n && b->r[j].lo <= x;
        uint64_t na = ia ? (uint64_t)a->r[i].hi + 1 : (i < a->n ? a->r[i].lo : CP_MAX + 1);
        uint64_t nb = ib ? (uint64_t)b->r[j].hi + 1 : (j < b->n ? b->r[j].lo : CP_MAX + 1);
        uint64_t nx = na < nb ? na : nb;
        bool in = op == OP_UNION ? (ia || ib) : op == OP_AND ? (ia && ib) : op == OP_DIFF ? (ia && !ib) : (ia != ib);
        if (in && out) cs_push(out, (uint32_t)x, (uint32_t)(nx - 1));
        count += in && !was_in; /* the sweep's segments are contiguous: only an out-in step starts a range */
        was_in = in;
        x = nx;
    }
    return count;
}

/* out = a OP b */
static void cs_combine(const cset *a, const cset *b, int op, cset *out) {
    *out = (cset){0};
    out->oom = a->oom || b->oom;
    cs_sweep(a, b, op, out);
}

/* a = a OP b */
static void cs_apply(cset *a, const cset *b, int op) {
    cset o;
    cs_combine(a, b, op, &o);
    cs_free(a);
    *a = o;
}

static void cs_add(cset *a, uint32_t lo, uint32_t hi) {
    cset b = {0};
    cs_push(&b, lo, hi);
    cs_apply(a, &b, OP_UNION);
    cs_free(&b);
}

static void cs_complement(cset *a) {
    cset all = {0};
    cs_push(&all, 0, CP_MAX);
    cset o;
    cs_combine(&all, a, OP_DIFF, &o);
    cs_free(&all);
    cs_free(a);
    *a = o;
}

/* The code space cut into runs of one general category, by our tables
 * (Unicode 16.0) and by PCRE2's (ours, corrected by the differences
 * regex_ucd.c measured): run k covers [r[k].lo, r[k + 1].lo). Built once per
 * process, on the first class that needs them (~3,300 runs each). */
typedef struct {
    uint32_t lo;
    uint8_t cat;
} prun;
typedef struct {
    prun *r;
    size_t n, cap;
    bool oom;
} part;
static part g_opart, g_ppart;
static int g_cat_state; /* 0 ok, -1 no memory */
/* built once, under the lock; a try that ran out of memory is undone, so a
 * long-running process (the Python package) builds again on its next call
 * instead of refusing every such class from then on */
static pthread_mutex_t g_cat_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_cat_built; /* 1: the parts are final (read with acquire, set with release) */

/* a run from lo on (ascending; one of the same category as the last joins it) */
static void part_push(part *p, uint32_t lo, int cat) {
    if (p->oom || (p->n && p->r[p->n - 1].cat == cat)) return;
    if (p->n == p->cap) {
        size_t c = p->cap ? p->cap * 2 : 1024;
        prun *q = realloc(p->r, c * sizeof *q);
        if (!q) {
            p->oom = true;
            return;
        }
        p->r = q;
        p->cap = c;
    }
    p->r[p->n++] = (prun){lo, (uint8_t)cat};
}

static uint32_t run_end(const part *p, size_t k) { return k + 1 < p->n ? p->r[k + 1].lo - 1 : CP_MAX; }

static void build_cats(void) {
    const tk_ucd_diff *d;
    size_t nd, k = 0;
    if (tk_ucd_pcre2_diff(&d, &nd, NULL)) {
        g_cat_state = -1;
        return;
    }
    for (uint32_t cp = 0; cp <= CP_MAX; cp++) part_push(&g_opart, cp, tk_ucd_category(cp));
    /* PCRE2's: each measured difference (sorted by code point) cuts our run */
    for (size_t r = 0; r < g_opart.n && !g_opart.oom; r++) {
        uint32_t x = g_opart.r[r].lo, hi = run_end(&g_opart, r);
        for (; k < nd && d[k].cp <= hi; k++) {
            if (d[k].cp > x) part_push(&g_ppart, x, g_opart.r[r].cat);
            part_push(&g_ppart, d[k].cp, d[k].pcre_cat);
            x = d[k].cp + 1;
        }
        if (x <= hi) part_push(&g_ppart, x, g_opart.r[r].cat);
    }
    if (g_opart.oom || g_ppart.oom) g_cat_state = -1;
}

/* 0 once the category parts are built (building them now if no try has
 * succeeded yet), -1 out of memory */
static int cats_ready(void) {
    if (__atomic_load_n(&g_cat_built, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&g_cat_lock);
    if (!g_cat_built) {
        g_cat_state = 0;
        build_cats();
        if (g_cat_state) {
            free(g_opart.r);
            free(g_ppart.r);
            g_opart = g_ppart = (part){0};
        } else {
            __atomic_store_n(&g_cat_built, 1, __ATOMIC_RELEASE);
        }
    }
    int rc = g_cat_built ? 0 : -1;
    pthread_mutex_unlock(&g_cat_lock);
    return rc;
}

/* the code points of the categories in mask, by p's runs, into s */
static void part_mask(const part *p, uint32_t mask, cset *s) {
    for (size_t k = 0; k < p->n; k++)
        if (mask >> p->r[k].cat & 1) cs_push(s, p->r[k].lo, run_end(p, k));
}

/* utf8proc's UTF8PROC_CATEGORY_* order, as tk_ucd_category returns them */
static const char *const CAT_NAME[TK_UCD_NCAT] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                                                  "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                                                  "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
enum { CAT_CN = 0, CAT_MN = 6, CAT_CS = 28 };

/* The parser of one class (or one \p outside a class). eval: build the sets
 * (the second pass; the first only checks the syntax and what it holds). */
typedef struct {
    const char *re;
    size_t n, i;
    bool eval;
    bool needs;      /* something hf_regex.c's plain translation gets wrong or refuses */
    size_t other_at; /* a property we do not evaluate (binary, ...): its offset + 1, or 0 */
    int other_len;
    int depth;
    char *err;
    size_t errlen;
} sp;

static int sp_refuse(sp *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sp_refuse(sp *p, size_t at, const char *fmt, ...) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tk_set_err(p->err, p->errlen,
               "regex construct %s (at byte %zu) is not supported in tiktoken's regex dialect (Rust regex-syntax)",
               what, at);
    return TK_ERR_UNSUPPORTED;
}

static int sp_unterminated(sp *p) {
    tk_set_err(p->err, p->errlen, "regex has an unterminated [...]");
    return TK_ERR_FORMAT;
}

/* one UTF-8 code point at re[p->i]; -1 when the bytes are not UTF-8 */
static int64_t utf8_at(const char *re, size_t n, size_t i, size_t *len) {
    const uint8_t *s = (const uint8_t *)re + i;
    size_t left = n - i;
    uint32_t c = s[0];
    size_t l = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!l || l > left) return -1;
    if (l == 1) {
        *len = 1;
        return c;
    }
    c &= 0x7F >> l;
    for (size_t k = 1; k < l; k++) {
        if ((s[k] & 0xC0) != 0x80) return -1;
        c = c << 6 | (s[k] & 0x3F);
    }
    static const uint32_t MIN[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < MIN[l] || c > CP_MAX || (c >= 0xD800 && c <= 0xDFFF)) return -1;
    *len = l;
    return c;
}

static bool hexd(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* \x \u \U at p->i (regex-syntax: \xHH, \uHHHH, \UHHHHHHHH or {H..}, at most 8 digits, a scalar value) */
static int parse_hex(sp *p, uint32_t *cp) {
    const char *re = p->re;
    size_t at = p->i, j = p->i + 2;
    char e = re[p->i + 1];
    size_t want = e == 'x' ? 2 : e == 'u' ? 4 : 8, k = 0;
    uint64_t v = 0;
    if (j < p->n && re[j] == '{') {
        j++;
        while (j < p->n && hexd(re[j]) && k < 9) {
            v = v * 16 + (uint64_t)(re[j] <= '9' ? re[j] - '0' : (re[j] | 32) - 'a' + 10);
            j++;
            k++;
        }
        if (j >= p->n || re[j] != '}' || k == 0 || k > 8) return sp_refuse(p, at, "malformed \\%c{...}", e);
        j++;
    } else {
        while (k < want && j < p->n && hexd(re[j])) {
            v = v * 16 + (uint64_t)(re[j] <= '9' ? re[j] - '0' : (re[j] | 32) - 'a' + 10);
            j++;
            k++;
        }
        if (k != want) return sp_refuse(p, at, "\\%c not followed by %zu hex digits", e, want);
    }
    if (v > CP_MAX || (v >= 0xD800 && v <= 0xDFFF))
        return sp_refuse(p, at, "\\%c of a value that is no scalar value", e);
    *cp = (uint32_t)v;
    p->i = j;
    return TK_OK;
}

static void put_range_set(sp *p, cset *s, uint32_t lo, uint32_t hi) {
    if (p->eval) cs_add(s, lo, hi);
}

/* the union of categories in mask (ours), into s */
static void put_cats(cset *s, uint32_t mask) {
    cset t = {0};
    part_mask(&g_opart, mask, &t);
    cs_apply(s, &t, OP_UNION);
    cs_free(&t);
}

static const uint32_t WS[][2] = {{0x09, 0x0D},     {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},
                                 {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                                 {0x205F, 0x205F}, {0x3000, 0x3000}};
/* \w: UTS #18 word = Alphabetic | M | Nd | Pc | Join_Control, as hf_regex.c's
 * W_CLASS: L, M, Nd, Nl, Pc plus ZWNJ, ZWJ and the circled / squared Latin
 * letters of Other_Alphabetic (the scan's "word" construct: 0 blocks differ) */
static const uint32_t W_REST[][2] = {
    {0x200C, 0x200D}, {0x24B6, 0x24E9}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189}};

/* \d \s \w (and negations: e upper case) into s */
static void put_perl(sp *p, cset *s, char e) {
    if (!p->eval) return;
    cset t = {0};
    char l = (char)(e | 32);
    if (l == 'd') put_cats(&t, 1u << 9);
    else if (l == 's')
        for (size_t k = 0; k < sizeof WS / sizeof WS[0]; k++) cs_push(&t, WS[k][0], WS[k][1]);
    else {
        uint32_t m = 0, x;
        static const char *const W_CATS[] = {"L", "M", "Nd", "Nl", "Pc"};
        for (size_t k = 0; k < 5; k++)
            if (tk_ucd_category_mask(W_CATS[k], strlen(W_CATS[k]), &x) == 0) m |= x;
        put_cats(&t, m);
        for (size_t k = 0; k < sizeof W_REST / sizeof W_REST[0]; k++) cs_add(&t, W_REST[k][0], W_REST[k][1]);
    }
    if (e != l) cs_complement(&t);
    cs_apply(s, &t, OP_UNION);
    cs_free(&t);
}

/* Rust's loose matching of a property name (regex-syntax's
 * symbolic_name_normalize): an "is" prefix dropped, ' ', '_' and '-' dropped,
 * ASCII lower case ("isc" stays "isc"). 0, or -1 if it does not fit. */
static int norm_name(const char *s, size_t n, char *out, size_t cap) {
    size_t start = 0, m = 0;
    bool is = n >= 2 && (s[0] | 32) == 'i' && (s[1] | 32) == 's';
    if (is) start = 2;
    for (size_t k = start; k < n; k++) {
        char c = s[k];
        if (c == ' ' || c == '_' || c == '-') continue;
        if (m + 1 >= cap) return -1;
        out[m++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    out[m] = 0;
    if (is && m == 1 && out[0] == 'c') snprintf(out, cap, "isc");
    return 0;
}

static int key_cmp(const void *k, const void *e) { return strcmp(k, ((const tk_ucd_script_key *)e)->key); }

static int script_of(const char *norm) {
    const tk_ucd_script_key *f =
        bsearch(norm, tk_ucd_script_keys, (size_t)tk_ucd_nscript_keys, sizeof tk_ucd_script_keys[0], key_cmp);
    return f ? f->script : -1;
}

/* whether PCRE2 counts in \p{mask} (or its negation) a code point our tables
 * leave out: hf_regex.c refuses such a property inside [...] */
static bool cat_needs_removal(uint32_t mask, bool negated) {
    const tk_ucd_diff *d;
    size_t nd;
    if (tk_ucd_pcre2_diff(&d, &nd, NULL)) return true;
    for (size_t k = 0; k < nd; k++) {
        bool ours = ((mask >> d[k].our_cat) & 1) != negated, theirs = ((mask >> d[k].pcre_cat) & 1) != negated;
        if (theirs && !ours) return true;
    }
    return false;
}

/* \p{..} / \P{..} at p->i, into s (in_class: inside [...]) */
static int parse_property(sp *p, cset *s, bool in_class) {
    const char *re = p->re;
    size_t at = p->i;
    bool neg = re[at + 1] == 'P';
    if (!(at + 2 < p->n && re[at + 2] == '{')) {
        if (!in_class) return TK_OK; /* hf_regex.c refuses it by name */
        return sp_refuse(p, at, "\\%c without {...}", re[at + 1]);
    }
    size_t j = at + 3;
    while (j < p->n && re[j] != '}') j++;
    if (j >= p->n) return sp_refuse(p, at, "malformed \\p{...}");
    const char *name = re + at + 3;
    size_t len = j - (at + 3);
    for (size_t k = 0; k < len; k++)
        if (name[k] == '=' || name[k] == ':' || name[k] == '!' || name[k] == '^' || (uint8_t)name[k] >= 0x80)
            return sp_refuse(p, at, "\\p{%.*s} (only general categories, scripts, Any, ASCII and Assigned)",
                             (int)(len < 40 ? len : 40), name);
    char k[64];
    p->i = j + 1;
    if (norm_name(name, len, k, sizeof k)) return sp_refuse(p, at, "\\p{...} with a name this long");
    cset t = {0};
    uint32_t mask;
    int sc;
    if (!strcmp(k, "any") || !strcmp(k, "ascii") || !strcmp(k, "assigned")) {
        p->needs = true;
        if (p->eval) {
            if (k[1] == 'n') cs_push(&t, 0, CP_MAX);
            else if (k[1] == 's') cs_push(&t, 0, 0x7F);
            else put_cats(&t, ~1u & ((1u << TK_UCD_NCAT) - 1));
        }
    } else if (tk_ucd_category_mask(name, len, &mask) == 0) {
        /* hf_regex.c writes it (corrected to 16.0), unless inside [...] it needs a removal */
        if (in_class && (neg || cat_needs_removal(mask, false))) p->needs = true;
        if (p->eval) put_cats(&t, mask);
    } else if ((sc = script_of(k)) >= 0) {
        p->needs = true;
        if (p->eval)
            for (uint32_t r = tk_ucd_script_first[sc]; r < tk_ucd_script_first[sc + 1]; r++)
                cs_push(&t, tk_ucd_script_ranges[r][0], tk_ucd_script_ranges[r][1]);
    } else if (!strcmp(k, "unknown") || !strcmp(k, "zzzz") || !strcmp(k, "hrkt") || !strcmp(k, "katakanaorhiragana")) {
        return sp_refuse(p, at, "\\p{%.*s} (regex-syntax has no such script)", (int)(len < 40 ? len : 40), name);
    } else {
        /* a binary property or a name we do not know: left to PCRE2 where
         * the plain translation keeps it, refused beside what we evaluate */
        if (!p->other_at) {
            p->other_at = at + 1;
            p->other_len = (int)(len < 40 ? len : 40);
        }
    }
    if (p->eval) {
        if (neg) cs_complement(&t);
        cs_apply(s, &t, OP_UNION);
    }
    cs_free(&t);
    return TK_OK;
}

/* An item of a class: a literal (*is_lit, *cp) or a set (added to s). */
static int parse_item(sp *p, cset *s, bool *is_lit, uint32_t *cp) {
    const char *re = p->re;
    *is_lit = false;
    if (re[p->i] != '\\') {
        size_t l;
        int64_t c = utf8_at(re, p->n, p->i, &l);
        if (c < 0) return sp_refuse(p, p->i, "bytes that are not UTF-8 in [...]");
        *is_lit = true;
        *cp = (uint32_t)c;
        p->i += l;
        return TK_OK;
    }
    if (p->i + 1 >= p->n) {
        tk_set_err(p->err, p->errlen, "regex ends with a lone backslash");
        return TK_ERR_FORMAT;
    }
    char e = re[p->i + 1];
    static const char CTRL[] = "a\af\ft\tn\nr\rv\v";
    for (const char *c = CTRL; *c; c += 2)
        if (e == c[0]) {
            *is_lit = true;
            *cp = (uint8_t)c[1];
            p->i += 2;
            return TK_OK;
        }
    switch (e) {
    case 'x':
    case 'u':
    case 'U': *is_lit = true; return parse_hex(p, cp);
    case 'd':
    case 's':
    case 'w':
    case 'D':
    case 'S':
    case 'W':
        if (e < 'a') p->needs = true; /* hf_regex.c refuses \D \S \W inside [...] */
        put_perl(p, s, e);
        p->i += 2;
        return TK_OK;
    case 'p':
    case 'P': return parse_property(p, s, true);
    default: break;
    }
    /* regex-syntax: any ASCII character but letters, digits, '<' and '>' may be escaped */
    if ((uint8_t)e < 0x80 && !((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) &&
        e != '<' && e != '>') {
        *is_lit = true;
        *cp = (uint8_t)e;
        p->i += 2;
        return TK_OK;
    }
    if ((uint8_t)e >= 0x80) return sp_refuse(p, p->i, "a backslash before a non-ASCII character in [...]");
    return sp_refuse(p, p->i, "\\%c inside [...]", e);
}

/* a literal, a range or a set item, into s */
static int parse_range(sp *p, cset *s) {
    size_t at = p->i;
    bool lit1, lit2;
    uint32_t c1 = 0, c2 = 0;
    int rc = parse_item(p, s, &lit1, &c1);
    if (rc) return rc;
    if (p->i >= p->n) return sp_unterminated(p);
    const char *re = p->re;
    if (re[p->i] != '-' || (p->i + 1 < p->n && (re[p->i + 1] == ']' || re[p->i + 1] == '-'))) {
        if (lit1) put_range_set(p, s, c1, c1);
        return TK_OK;
    }
    p->i++;
    if (p->i >= p->n) return sp_unterminated(p);
    cset junk = {0};
    rc = parse_item(p, &junk, &lit2, &c2);
    cs_free(&junk);
    if (rc) return rc;
    if (!lit1 || !lit2) return sp_refuse(p, at, "a range in [...] whose end is a class");
    if (c1 > c2) return sp_refuse(p, at, "a range in [...] whose start is above its end");
    put_range_set(p, s, c1, c2);
    return TK_OK;
}

/* [:name:] at p->i (after a '[' inside a class): the ASCII class, or false
 * (then the '[' opens a nested class, as regex-syntax reads it) */
static bool parse_ascii_class(sp *p, cset *s) {
    static const struct {
        const char *name;
        const char *ranges; /* pairs of bytes */
    } ASCII[] = {{"alnum", "09AZaz"},
                 {"alpha", "AZaz"},
                 {"ascii", "\x01\x7f"},
                 {"blank", "\t\t  "},
                 {"cntrl", "\x01\x1f\x7f\x7f"},
                 {"digit", "09"},
                 {"graph", "!~"},
                 {"lower", "az"},
                 {"print", " ~"},
                 {"punct", "!/:@[`{~"},
                 {"space", "\t\r  "},
                 {"upper", "AZ"},
                 {"word", "09AZ__az"},
                 {"xdigit", "09AFaf"}};
    const char *re = p->re;
    size_t j = p->i + 1;
    if (j >= p->n || re[j] != ':') return false;
    j++;
    bool neg = j < p->n && re[j] == '^';
    if (neg) j++;
    size_t st = j;
    while (j < p->n && re[j] >= 'a' && re[j] <= 'z') j++;
    if (j + 1 >= p->n || re[j] != ':' || re[j + 1] != ']') return false;
    for (size_t k = 0; k < sizeof ASCII / sizeof ASCII[0]; k++)
        if (strlen(ASCII[k].name) == j - st && !memcmp(ASCII[k].name, re + st, j - st)) {
            if (p->eval) {
                cset t = {0};
                const char *r = ASCII[k].ranges;
                for (size_t q = 0; r[q]; q += 2) cs_add(&t, (uint8_t)r[q], (uint8_t)r[q + 1]);
                if (!strcmp(ASCII[k].name, "ascii") || !strcmp(ASCII[k].name, "cntrl")) cs_add(&t, 0, 0);
                if (neg) cs_complement(&t);
                cs_apply(s, &t, OP_UNION);
                cs_free(&t);
            }
            p->needs = true; /* hf_regex.c refuses POSIX classes */
            p->i = j + 2;
            return true;
        }
    return false;
}

/* a class at p->i ('['), its set into out */
static int parse_class(sp *p, cset *out) {
    const char *re = p->re;
    size_t at = p->i;
    if (++p->depth > SET_MAX_DEPTH) return sp_refuse(p, at, "[...] nested deeper than %d", SET_MAX_DEPTH);
    p->i++;
    bool neg = p->i < p->n && re[p->i] == '^';
    if (neg) p->i++;
    cset lhs = {0}, uni = {0};
    int op = -1, rc = TK_OK;
    bool lead = false;
    while (p->i < p->n && re[p->i] == '-') {
        put_range_set(p, &uni, '-', '-');
        p->i++;
        lead = true;
    }
    if (!lead && p->i < p->n && re[p->i] == ']') {
        put_range_set(p, &uni, ']', ']');
        p->i++;
    }
    for (;;) {
        if (p->i >= p->n) {
            rc = sp_unterminated(p);
            break;
        }
        char c = re[p->i];
        char c2 = p->i + 1 < p->n ? re[p->i + 1] : 0;
        if (c == '[') {
            if (parse_ascii_class(p, &uni)) continue;
            p->needs = true;
            cset sub = {0};
            rc = parse_class(p, &sub);
            if (rc == TK_OK && p->eval) cs_apply(&uni, &sub, OP_UNION);
            cs_free(&sub);
            if (rc) break;
            continue;
        }
        if (c == ']') {
            p->i++;
            break;
        }
        if ((c == '&' || c == '-' || c == '~') && c2 == c) {
            p->needs = true;
            p->i += 2;
            if (p->eval) {
                if (op < 0) {
                    cs_free(&lhs);
                    lhs = uni;
                } else {
                    cs_apply(&lhs, &uni, op);
                    cs_free(&uni);
                }
                uni = (cset){0};
            }
            op = c == '&' ? OP_AND : c == '-' ? OP_DIFF : OP_SYM;
            continue;
        }
        if ((rc = parse_range(p, &uni))) break;
    }
    if (rc == TK_OK && p->eval) {
        if (op >= 0) {
            cs_apply(&lhs, &uni, op);
            cs_free(&uni);
            uni = lhs;
            lhs = (cset){0};
        }
        if (neg) cs_complement(&uni);
        if (uni.oom) rc = TK_ERR_NOMEM;
    }
    cs_free(&lhs);
    if (rc == TK_OK) *out = uni;
    else cs_free(&uni);
    p->depth--;
    return rc;
}

/* ---- writing a set for PCRE2 ---- */

static void put_ranges(tk_strbuf *b, const cset *s) {
    for (size_t k = 0; k < s->n; k++) tk_sb_cp_range(b, s->r[k].lo, s->r[k].hi);
}

/* How T is written: PCRE2's categories in pos_mask, plus add, minus rem. */
typedef struct {
    uint32_t mask;
    cset add, rem;
    size_t cost;
} plan;

static void plan_free(plan *pl) {
    cs_free(&pl->add);
    cs_free(&pl->rem);
}

/* A category goes in when removing what it holds beyond T takes fewer ranges
 * than listing what it holds of T; exact either way. */
static void make_plan(const cset *t, const cset *surr, plan *pl) {
    *pl = (plan){0};
    /* per PCRE2 category c: the ranges of c ∩ T (in) and of c − T (out), one
     * sweep over PCRE2's runs and T's ranges: a range starts wherever
     * (category, in T) changes */
    size_t in[TK_UCD_NCAT] = {0}, out[TK_UCD_NCAT] = {0}, r = 0, j = 0;
    int prev_c = -1;
    bool prev_in = false;
    uint64_t x = 0;
    while (x <= CP_MAX) {
        while (run_end(&g_ppart, r) < x) r++;
        while (j < t->n && t->r[j].hi < x) j++;
        bool it = j < t->n && t->r[j].lo <= x;
        uint64_t nt = it ? (uint64_t)t->r[j].hi + 1 : (j < t->n ? t->r[j].lo : CP_MAX + 1);
        uint64_t nr = (uint64_t)run_end(&g_ppart, r) + 1;
        int c = g_ppart.r[r].cat;
        if (c != prev_c || it != prev_in) (it ? in : out)[c]++;
        prev_c = c;
        prev_in = it;
        x = nt < nr ? nt : nr;
    }
    for (int c = 0; c < TK_UCD_NCAT; c++)
        if (c != CAT_CS && in[c] && in[c] > out[c]) pl->mask |= 1u << c;
    cset pos = {0};
    part_mask(&g_ppart, pl->mask, &pos);
    cs_combine(t, &pos, OP_DIFF, &pl->add);
    cs_combine(&pos, t, OP_DIFF, &pl->rem);
    /* surrogates never occur in text and PCRE2 refuses them in a UTF pattern */
    cs_apply(&pl->add, surr, OP_DIFF);
    cs_apply(&pl->rem, surr, OP_DIFF);
    size_t ncat = 0;
    for (int c = 0; c < TK_UCD_NCAT; c++) ncat += pl->mask >> c & 1;
    pl->cost = pl->add.n + pl->rem.n + ncat + (pl->rem.n ? 8 : 0);
    if (pos.oom || pl->add.oom || pl->rem.oom) pl->cost = SIZE_MAX;
    cs_free(&pos);
}

static void put_class(tk_strbuf *b, const plan *pl, bool neg) {
    tk_sb_puts(b, neg ? "[^" : "[");
    for (int c = 0; c < TK_UCD_NCAT; c++)
        if (pl->mask >> c & 1) {
            tk_sb_puts(b, "\\p{");
            tk_sb_puts(b, CAT_NAME[c]);
            tk_sb_puts(b, "}");
        }
    put_ranges(b, &pl->add);
    tk_sb_puts(b, "]");
}

/* s as one PCRE2 code-point item */
static int emit(const cset *s, char **out) {
    cset surr = {0}, t = {0}, comp = {0};
    cs_push(&surr, 0xD800, 0xDFFF);
    cs_combine(s, &surr, OP_DIFF, &t);
    cs_combine(&t, &surr, OP_UNION, &comp);
    cs_complement(&comp);
    tk_strbuf b = {0};
    if (!t.n) tk_sb_puts(&b, "[^\\x{0}-\\x{10FFFF}]");
    else if (!comp.n) tk_sb_puts(&b, "[\\x{0}-\\x{10FFFF}]");
    else {
        plan a, c;
        make_plan(&t, &surr, &a);
        make_plan(&comp, &surr, &c);
        if (a.cost == SIZE_MAX || c.cost == SIZE_MAX) b.oom = true;
        else if (a.cost <= c.cost) {
            /* (?:(?![rem])[pos add]) */
            if (a.rem.n) {
                tk_sb_puts(&b, "(?:(?![");
                put_ranges(&b, &a.rem);
                tk_sb_puts(&b, "])");
            }
            put_class(&b, &a, false);
            if (a.rem.n) tk_sb_puts(&b, ")");
        } else {
            /* s is the complement of (pos add) − rem: [^pos add] or rem */
            if (c.rem.n) tk_sb_puts(&b, "(?:");
            put_class(&b, &c, true);
            if (c.rem.n) {
                tk_sb_puts(&b, "|[");
                put_ranges(&b, &c.rem);
                tk_sb_puts(&b, "])");
            }
        }
        plan_free(&a);
        plan_free(&c);
    }
    bool oom = b.oom || t.oom || comp.oom || surr.oom;
    cs_free(&surr);
    cs_free(&t);
    cs_free(&comp);
    if (oom) {
        free(b.s);
        return TK_ERR_NOMEM;
    }
    *out = b.s;
    return TK_OK;
}

int tk_rx_script_class(const char *name, size_t len, bool negated, char **out) {
    *out = NULL;
    char k[64];
    size_t m = 0;
    /* Oniguruma's loose names: case, ' ', '_' and '-' ignored (no "is" prefix) */
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (c == ' ' || c == '_' || c == '-') continue;
        if (m + 1 >= sizeof k) return 1;
        k[m++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    k[m] = 0;
    cset t = {0};
    int sc = script_of(k);
    if (sc >= 0) {
        for (uint32_t r = tk_ucd_script_first[sc]; r < tk_ucd_script_first[sc + 1]; r++)
            cs_push(&t, tk_ucd_script_ranges[r][0], tk_ucd_script_ranges[r][1]);
    } else if (!strcmp(k, "unknown") || !strcmp(k, "zzzz")) {
        /* Oniguruma knows Unknown: the code points no script has */
        for (int s = 0; s < tk_ucd_nscripts; s++)
            for (uint32_t r = tk_ucd_script_first[s]; r < tk_ucd_script_first[s + 1]; r++)
                cs_add(&t, tk_ucd_script_ranges[r][0], tk_ucd_script_ranges[r][1]);
        negated = !negated;
    } else {
        return 1;
    }
    if (negated) cs_complement(&t);
    cset surr = {0};
    cs_push(&surr, 0xD800, 0xDFFF);
    cs_apply(&t, &surr, OP_DIFF);
    cs_free(&surr);
    tk_strbuf b = {0};
    put_ranges(&b, &t);
    bool oom = t.oom || b.oom || !b.s;
    cs_free(&t);
    if (oom) {
        free(b.s);
        return TK_ERR_NOMEM;
    }
    *out = b.s;
    return 0;
}

static int run(sp *p, bool in_class, cset *s) { return in_class ? parse_class(p, s) : parse_property(p, s, false); }

int tk_rx_rust_set(const char *re, size_t n, size_t *pos, bool icase, bool *plain, char **out, char *err,
                   size_t errlen) {
    *plain = false;
    *out = NULL;
    bool in_class = re[*pos] == '[';
    sp p = {.re = re, .n = n, .i = *pos, .err = err, .errlen = errlen};
    cset s = {0};
    int rc = run(&p, in_class, &s); /* the first pass: syntax, and whether it needs sets */
    cs_free(&s);
    if (rc) return rc;
    if (!p.needs) {
        *plain = true;
        return TK_OK;
    }
    if (p.other_at)
        return sp_refuse(&p, p.other_at - 1,
                         "\\p{%.*s} (not a general category or script) beside a script, a "
                         "nested class or && / -- / ~~",
                         p.other_len, re + p.other_at + 2);
    if (icase)
        return sp_refuse(&p, *pos, "%s under (?i) (Rust folds it by its own Unicode 16.0 case tables)",
                         in_class ? "a class with a script, a nested class or && / -- / ~~" : "a script property");
    if (cats_ready()) {
        tk_set_err(err, errlen, "out of memory building the Unicode category sets of a regex class");
        return TK_ERR_NOMEM;
    }
    p = (sp){.re = re, .n = n, .i = *pos, .eval = true, .err = err, .errlen = errlen};
    rc = run(&p, in_class, &s);
    if (rc == TK_OK) rc = emit(&s, out);
    cs_free(&s);
    if (rc == TK_OK) *pos = p.i;
    else if (rc == TK_ERR_NOMEM) tk_set_err(err, errlen, "out of memory translating a regex class");
    return rc;
}
