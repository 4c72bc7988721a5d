/* regex_ucd.c - where the system PCRE2's Unicode general categories differ
 * from those of the references (ucd_categories.c, Unicode 16.0), so that
 * hf_regex.c can correct each \p{..} it hands to PCRE2.
 *
 * Why: HF tokenizers 0.23 runs a tokenizer.json Split regex with Oniguruma,
 * which classifies by Unicode 16.0; Debian 12's PCRE2 10.42 by Unicode 14.0.
 * With PCRE2's own tables, \p{L} misses the ~9,300 letters assigned in 15.0
 * to 16.0 (CJK Extension I, Garay, Todhri, ...) and those documents split
 * differently from HF (issue 27's full-range scan: 17 blocks differed). PCRE2
 * has no API for its tables, so the differences are found by asking PCRE2
 * itself, once per process and only when its Unicode version is not ours:
 * the code points of each of our categories X are laid out as one UTF-8
 * string and \P{X} is searched in it (a JIT scan, a few ms for the whole
 * range); each match is a code point PCRE2 puts elsewhere, and an anchored
 * (\p{Cn})|(\p{Lu})|... match says where. Measured: 9,501 code points, one
 * of them not a new assignment (U+1171E: Mn in 14.0, Mc in 16.0).
 *
 * Surrogates (Cs) cannot be written in UTF-8 and are never matched; private
 * use (Co) is the same in every version but is scanned like the rest. */
#include "regex_ucd.h"
#include "mks_common.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "ucd_categories.h"

/* utf8proc's UTF8PROC_CATEGORY_* order, as tk_ucd_category returns them */
static const char *const CAT_NAME[TK_UCD_NCAT] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                                                  "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                                                  "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
enum { CAT_CS = 28 };

static tk_ucd_diff *g_diff;
static size_t g_ndiff;
static int g_state; /* 0: versions equal, 1: differences found, -1: could not be measured */
static char g_pcre_version[32];
/* measured once, under the lock; a try that ran out of memory is not kept,
 * so a long-running process (the Python package) measures again on its
 * next call instead of refusing every script class from then on */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_done; /* 1: g_state final (read with acquire, set with release) */

static uint32_t get_utf8(const uint8_t *p) {
    if (p[0] < 0x80) return p[0];
    if (p[0] < 0xE0) return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    if (p[0] < 0xF0) return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) | ((uint32_t)(p[2] & 0x3F) << 6) |
           (p[3] & 0x3F);
}

static pcre2_code *compile(const char *pat) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (c) pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); /* the interpreter when JIT is unavailable */
    return c;
}

static int add_diff(size_t *cap, uint32_t cp, uint8_t pcre_cat, uint8_t our_cat) {
    if (g_ndiff == *cap) {
        size_t c = *cap ? *cap * 2 : 1024;
        tk_ucd_diff *d = realloc(g_diff, c * sizeof *d);
        if (!d) return -1;
        g_diff = d;
        *cap = c;
    }
    g_diff[g_ndiff++] = (tk_ucd_diff){cp, pcre_cat, our_cat};
    return 0;
}

static int cmp_diff(const void *a, const void *b) {
    uint32_t x = ((const tk_ucd_diff *)a)->cp, y = ((const tk_ucd_diff *)b)->cp;
    return (x > y) - (x < y);
}

/* Scan every category; 0, or -1 (no memory, a pattern PCRE2 refused). */
static int measure(void) {
    /* every category's code points in one buffer, each category one slice:
     * two passes over the code points (one to size the slices, one to fill
     * them), not one pass per category (30x the lookups: ~1 s under ASan) */
    size_t start[TK_UCD_NCAT + 1] = {0}, fill[TK_UCD_NCAT];
    uint8_t tmp[4];
    for (uint32_t cp = 0; cp < 0x110000; cp++)
        if (cp < 0xD800 || cp > 0xDFFF) start[tk_ucd_category(cp) + 1] += mc_utf8_put(tmp, cp);
    for (int k = 0; k < TK_UCD_NCAT; k++) start[k + 1] += start[k];
    uint8_t *all = malloc(start[TK_UCD_NCAT]);
    if (all) {
        memcpy(fill, start, sizeof fill);
        for (uint32_t cp = 0; cp < 0x110000; cp++)
            if (cp < 0xD800 || cp > 0xDFFF) {
                int c = tk_ucd_category(cp);
                fill[c] += mc_utf8_put(all + fill[c], cp);
            }
    }
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    pcre2_match_data *wmd = pcre2_match_data_create(TK_UCD_NCAT + 1, NULL);
    char which_pat[TK_UCD_NCAT * 10 + 1] = "";
    for (int k = 0; k < TK_UCD_NCAT; k++) {
        strcat(which_pat, k ? "|(\\p{" : "(\\p{");
        strcat(which_pat, CAT_NAME[k]);
        strcat(which_pat, "})");
    }
    pcre2_code *which = compile(which_pat);
    size_t cap = 0;
    int rc = (all && md && wmd && which) ? 0 : -1;
    for (int cat = 0; cat < TK_UCD_NCAT && rc == 0; cat++) {
        if (cat == CAT_CS) continue;
        const uint8_t *s = all + start[cat];
        size_t len = start[cat + 1] - start[cat];
        char pat[16] = "\\P{";
        strcat(pat, CAT_NAME[cat]);
        strcat(pat, "}");
        pcre2_code *other = compile(pat);
        if (!other) {
            rc = -1;
            break;
        }
        PCRE2_SIZE at = 0;
        while (at < len) {
            int m = pcre2_match(other, s, len, at, PCRE2_NO_UTF_CHECK, md, NULL);
            if (m < 0) break; /* no further match (or an error: what was found stands) */
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            uint32_t cp = get_utf8(s + ov[0]);
            int w = pcre2_match(which, s + ov[0], ov[1] - ov[0], 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, wmd, NULL);
            PCRE2_SIZE *wov = pcre2_get_ovector_pointer(wmd);
            uint8_t pc = 0; /* Cn when no category group matched */
            if (w > 1)
                for (int g = 1; g < w; g++)
                    if (wov[2 * g] != PCRE2_UNSET) pc = (uint8_t)(g - 1);
            if (add_diff(&cap, cp, pc, (uint8_t)cat)) {
                rc = -1;
                break;
            }
            at = ov[1]; /* \P{X} matches one code point */
        }
        pcre2_code_free(other);
    }
    pcre2_code_free(which);
    pcre2_match_data_free(md);
    pcre2_match_data_free(wmd);
    free(all);
    if (rc == 0) qsort(g_diff, g_ndiff, sizeof *g_diff, cmp_diff);
    return rc;
}

static void init_locked(void) {
    if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, g_pcre_version) < 0) g_pcre_version[0] = 0;
    g_state = 0;
    if (strcmp(g_pcre_version, tk_ucd_version) == 0) return;
    if (measure()) {
        free(g_diff);
        g_diff = NULL;
        g_ndiff = 0;
        g_state = -1;
        return;
    }
    g_state = 1;
}

int tk_ucd_pcre2_diff(const tk_ucd_diff **diff, size_t *n, const char **pcre_version) {
    if (!__atomic_load_n(&g_done, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&g_lock);
        if (!g_done) {
            init_locked();
            if (g_state >= 0) __atomic_store_n(&g_done, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&g_lock);
    }
    *diff = g_diff;
    *n = g_ndiff;
    if (pcre_version) *pcre_version = g_pcre_version;
    return g_state < 0 ? -1 : 0;
}

int tk_ucd_category_mask(const char *name, size_t len, uint32_t *mask) {
    /* Oniguruma and PCRE2 both read property names loosely: case, '_', ' ' and '-' ignored */
    char k[8];
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (c == '_' || c == ' ' || c == '-') continue;
        if (m + 1 >= sizeof k) return -1;
        k[m++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    k[m] = 0;
    static const struct {
        const char *name;
        uint32_t mask;
    } MAJOR[] = {
        {"l", 0x3Eu},       /* Lu Ll Lt Lm Lo */
        {"lc", 0x0Eu},      /* Lu Ll Lt: cased letters */
        {"l&", 0x0Eu},      /* PCRE2's spelling of LC */
        {"m", 0x1C0u},      /* Mn Mc Me */
        {"n", 0xE00u},      /* Nd Nl No */
        {"p", 0x7F000u},    /* Pc Pd Ps Pe Pi Pf Po */
        {"s", 0x780000u},   /* Sm Sc Sk So */
        {"z", 0x3800000u},  /* Zs Zl Zp */
        {"c", 0x3C000001u}, /* Cc Cf Cs Co Cn */
    };
    for (size_t i = 0; i < sizeof MAJOR / sizeof MAJOR[0]; i++)
        if (strcmp(k, MAJOR[i].name) == 0) {
            *mask = MAJOR[i].mask;
            return 0;
        }
    for (int c = 0; c < TK_UCD_NCAT; c++)
        if (k[0] == CAT_NAME[c][0] + 32 && k[1] == CAT_NAME[c][1] && k[2] == 0) {
            *mask = 1u << c;
            return 0;
        }
    return -1;
}
