/* test_tk_pattern.c - a rank file with its own pre-tokenizer regex and
 * normalization (--pattern REGEX, --normalize; tokenizer/rank_pretok.c)
 * against tiktoken.Encoding(pat_str=REGEX, mergeable_ranks=...) on
 * unicodedata.normalize(FORM, text), Qwen (v1)'s construct:
 *  - ids on the first 200 documents of each ../shared/corpus category and on
 *    edge cases, plain and with every special allowed, for four
 *    configurations (Qwen's regex + NFC on cl100k_base's ranks; $, possessive
 *    repeats + NFKC on o200k_base's; a $ that only tiktoken's reading keeps;
 *    text no match covers): tests/data/tk_pattern/refs.jsonl.zst, made by
 *    tests/ref/make_tk_pattern_refs.py;
 *  - the fingerprint covers regex and form (a shard set built with one is
 *    never taken for one built with another); a regex spelled as a built-in
 *    pattern is that pattern;
 *  - names vs regexes (tk_pattern_spec), refused constructs named, the regex
 *    work budget, a tokenizer.json refusing both options.
 * argv[1]: shared dir. The parity part is skipped (exit 77 when nothing
 * else failed) without ../shared. */
#include "test_corpus.h"
#include "test_tk_ids.h"
#include "tk.h"
#include "tk_internal.h"

#include <stdbool.h>
#include <stdint.h>

static const char *CATS[4] = {"en-books", "multi", "code", "web"};
#define PER_CAT 200
/* scan(): blocks where \p{Han} / \p{Latin} differ from tiktoken's (16.0). On PCRE2 10.42's own script
 * tables (Unicode 14.0) they were 4 (U+2B000, 2E000, 31000, 32000: Han assigned in 15.0 / 15.1) and 2
 * (U+A000: A7CB-A7CD, A7DA-A7DC of 16.0; U+1D000: Latin of 15.0 / 16.0); scripts now come from
 * Unicode 16.0's Scripts.txt (tokenizer/ucd_scripts.c, regex_sets.c). */
#define SCAN_HAN_BLOCKS 0
#define SCAN_LATIN_BLOCKS 0
static char *texts[4][PER_CAT];
static size_t lens[4][PER_CAT];
static int fails;

#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, "\n");                                                                                     \
            fails++;                                                                                                   \
        }                                                                                                              \
    } while (0)

static const char QWEN[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                           "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* ids of the refs file, per configuration */
static int parity(const char *shared) {
    size_t rn;
    char *refs = test_read_zst(MKS_TEST_DATA "/tk_pattern/refs.jsonl.zst", &rn);
    if (!refs) {
        fprintf(stderr, "FAIL: no %s\n", MKS_TEST_DATA "/tk_pattern/refs.jsonl.zst");
        fails++;
        return 0;
    }
    int checked = 0;
    char cfg[64] = "";
    tk_tokenizer *tok = NULL;
    for (char *line = refs; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        line = nl ? nl + 1 : line + strlen(line);
        if (!o) continue;
        if (json_object_get(o, "pat")) {
            tk_free(tok);
            tok = NULL;
            snprintf(cfg, sizeof cfg, "%s", json_string_value(json_object_get(o, "cfg")));
            char p[4096], err[512] = "";
            snprintf(p, sizeof p, "%s/vocab/%s", shared, json_string_value(json_object_get(o, "vocab")));
            tk_load_opts lo = {TK_PAT_NONE, json_string_value(json_object_get(o, "pat")), TK_NORM_NONE};
            CHECK(tk_norm_parse(json_string_value(json_object_get(o, "norm")), &lo.norm) == TK_OK, "norm");
            int rc = tk_load_ex(p, &lo, &tok, err, sizeof err);
            CHECK(rc == TK_OK, "%s: load: %s", cfg, err);
            if (rc) tok = NULL;
            else
                CHECK(tk_get_regex(tok) && !strcmp(tk_get_regex(tok), lo.regex) && tk_get_norm(tok) == lo.norm &&
                          tk_get_pattern(tok) == TK_PAT_NONE && !tk_lossless(tok),
                      "%s: accessors", cfg);
            json_decref(o);
            continue;
        }
        if (!tok) {
            json_decref(o);
            continue;
        }
        tk_ids v = {0};
        json_t *ids = json_object_get(o, "ids");
        if (ids) {
            const char *text = json_string_value(json_object_get(o, "text"));
            size_t tl = json_string_length(json_object_get(o, "text"));
            bool special = strcmp(json_string_value(json_object_get(o, "mode")), "special") == 0;
            int rc = special ? tk_encode_special(tok, (const uint8_t *)text, tl, NULL, (size_t)-1, &v)
                             : tk_encode(tok, (const uint8_t *)text, tl, &v);
            size_t n = json_array_size(ids), at = 0;
            while (at < n && at < v.len && (uint32_t)json_integer_value(json_array_get(ids, at)) == v.ids[at]) at++;
            checked++;
            CHECK(rc == TK_OK && at == n && at == v.len,
                  "%s %s \"%.60s\": rc %d, first difference at id %zu of %zu (ours %zu)", cfg,
                  special ? "special" : "plain", text, rc, at, n, v.len);
        } else {
            const char *cat = json_string_value(json_object_get(o, "cat"));
            int doc = (int)json_integer_value(json_object_get(o, "doc")), c = 0;
            while (c < 4 && strcmp(CATS[c], cat) != 0) c++;
            if (c < 4 && doc < PER_CAT && texts[c][doc]) {
                int rc = tk_encode(tok, (const uint8_t *)texts[c][doc], lens[c][doc], &v);
                char sha[17];
                test_ids_sha(&v, sha);
                checked++;
                size_t n = (size_t)json_integer_value(json_object_get(o, "n"));
                CHECK(rc == TK_OK && v.len == n && strcmp(sha, json_string_value(json_object_get(o, "sha"))) == 0,
                      "%s %s doc %d: %zu ids (tiktoken's %zu), rc %d", cfg, cat, doc, v.len, n, rc);
            }
        }
        tk_ids_free(&v);
        json_decref(o);
        if (fails > 20) break;
    }
    tk_free(tok);
    free(refs);
    return checked;
}

static void fp_of(const char *path, tk_pattern pat, const char *regex, tk_norm norm, uint8_t fp[32]) {
    tk_load_opts o = {pat, regex, norm};
    tk_tokenizer *t = NULL;
    char err[512] = "";
    memset(fp, 0, 32);
    if (tk_load_ex(path, &o, &t, err, sizeof err) != TK_OK) {
        CHECK(0, "load %s: %s", path, err);
        return;
    }
    tk_fingerprint(t, fp);
    tk_free(t);
}

/* The fingerprint tells the pipelines apart (manifest, resume, merge). */
static void fingerprints(const char *shared) {
    char p[4096];
    snprintf(p, sizeof p, "%s/vocab/cl100k_base.tiktoken", shared);
    uint8_t d[32], r[32], r2[32], n1[32], n2[32], rn[32], same[32];
    fp_of(p, TK_PAT_NONE, NULL, TK_NORM_NONE, d);
    fp_of(p, TK_PAT_NONE, QWEN, TK_NORM_NONE, r);
    fp_of(p, TK_PAT_NONE, "\\p{L}+|\\p{N}+|\\s+|.", TK_NORM_NONE, r2);
    fp_of(p, TK_PAT_NONE, NULL, TK_NORM_NFC, n1);
    fp_of(p, TK_PAT_NONE, NULL, TK_NORM_NFKC, n2);
    fp_of(p, TK_PAT_NONE, QWEN, TK_NORM_NFC, rn);
    /* tiktoken's own cl100k spelling is the built-in pattern: the same tokenizer */
    fp_of(p, TK_PAT_NONE, tk_pattern_regex(TK_PAT_CL100K), TK_NORM_NONE, same);
    const uint8_t *all[] = {d, r, r2, n1, n2, rn};
    for (int a = 0; a < 6; a++)
        for (int b = a + 1; b < 6; b++) CHECK(memcmp(all[a], all[b], 32) != 0, "fingerprints %d and %d equal", a, b);
    CHECK(memcmp(d, same, 32) == 0, "cl100k's regex spelled out: another fingerprint than the name's");
}

/* What needs no ../shared: a byte-level vocabulary of 256 tokens + "ab". */
static tk_tokenizer *bytes_vocab(void) {
    uint8_t bytes[258][2];
    const uint8_t *tp[258];
    uint32_t ln[258];
    for (int i = 0; i < 256; i++) {
        bytes[i][0] = (uint8_t)i;
        tp[i] = bytes[i];
        ln[i] = 1;
    }
    tp[256] = (const uint8_t *)"ab";
    ln[256] = 2;
    tk_special sp = {"<|endoftext|>", 257};
    tk_tokenizer *t = NULL;
    CHECK(tk_create(tp, ln, 257, TK_PAT_O200K, &sp, 1, &t) == TK_OK, "tk_create");
    return t;
}

static void units(void) {
    tk_pattern pat;
    const char *rx;
    CHECK(tk_pattern_spec("cl100k_base", &pat, &rx) == TK_OK && pat == TK_PAT_CL100K && !rx, "name");
    CHECK(tk_pattern_spec("cl100", &pat, &rx) == TK_ERR_PATTERN, "a mistyped name is refused, not a regex");
    CHECK(tk_pattern_spec(QWEN, &pat, &rx) == TK_OK && pat == TK_PAT_NONE && rx == QWEN, "regex");
    CHECK(tk_pattern_spec(tk_pattern_regex(TK_PAT_O200K), &pat, &rx) == TK_OK && pat == TK_PAT_O200K && !rx,
          "o200k spelled out");
    tk_norm nm;
    CHECK(tk_norm_parse("nfkc", &nm) == TK_OK && nm == TK_NORM_NFKC && tk_norm_parse("NFC", &nm) != TK_OK, "norm");

    char err[512];
    tk_tokenizer *t = bytes_vocab();
    if (!t) return;
    /* unsupported constructs named; the tokenizer stays as it was */
    static const char *const refused[][2] = {
        {"\\bab", "\\b"},
        {"a\\Z", "\\Z"},
        {"(?m)a$", "(?"},
        {"(?i)[\\p{Han}]", "(?i)"},
        {"(?i:\\p{Greek})", "(?i)"},
        {"[\\p{Alphabetic}&&a]", "Alphabetic"},
        {"[a-&&]", "range"},
        {"[\\p{Script=Han}&&a]", "Script=Han"},
        {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[a]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "nested deeper"}};
    for (int k = 0; k < (int)(sizeof refused / sizeof refused[0]); k++) {
        err[0] = 0;
        int rc = tk_set_pretokenizer(t, refused[k][0], TK_NORM_NONE, err, sizeof err);
        CHECK(rc == TK_ERR_UNSUPPORTED && strstr(err, refused[k][1]), "%s: rc %d, \"%s\"", refused[k][0], rc, err);
    }
    char big[TK_MAX_PATTERN_BYTES + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(tk_set_pretokenizer(t, big, TK_NORM_NONE, err, sizeof err) == TK_ERR_LIMIT, "a regex over the limit");
    CHECK(tk_get_regex(t) == NULL && tk_lossless(t), "a refused regex left the tokenizer changed");

    /* $ is the text's end (tiktoken), not a line's: "ab" before "\n" is two
     * letters, "ab" at the end one token; '.' and '\n' nowhere matched are
     * dropped as tiktoken drops them */
    CHECK(tk_set_pretokenizer(t, "\\w+$|\\w", TK_NORM_NONE, err, sizeof err) == TK_OK, "set: %s", err);
    tk_ids v = {0};
    CHECK(tk_encode(t, (const uint8_t *)"ab.\nab", 6, &v) == TK_OK && v.len == 3 && v.ids[0] == 'a' &&
              v.ids[1] == 'b' && v.ids[2] == 256,
          "$ / gaps: %zu ids", v.len);
    v.len = 0;
    CHECK(tk_encode_special(t, (const uint8_t *)"ab<|endoftext|>ab", 17, NULL, (size_t)-1, &v) == TK_OK && v.len == 3 &&
              v.ids[0] == 256 && v.ids[1] == 257 && v.ids[2] == 256,
          "specials: %zu ids", v.len);
    CHECK(tk_set_pretokenizer(t, "a", TK_NORM_NONE, err, sizeof err) == TK_ERR_UNSUPPORTED, "set twice");
    CHECK(tk_save_tiktoken(t, "/nonexistent/x.tiktoken") == TK_ERR_UNSUPPORTED, "save refuses a regex");
    tk_free(t);

    /* the regex work budget: a backtracking pattern on a long run refuses
     * the document (the run goes on), never hangs */
    t = bytes_vocab();
    if (!t) return;
    CHECK(tk_set_pretokenizer(t, "(?:a+a+)+b|.", TK_NORM_NFC, err, sizeof err) == TK_OK, "set: %s", err);
    size_t n = 20000;
    uint8_t *s = malloc(n);
    memset(s, 'a', n);
    v.len = 0;
    int rc = tk_encode(t, s, n, &v);
    CHECK(rc == TK_ERR_DOC_REGEX && v.len == 0, "hostile regex: rc %d, %zu ids", rc, v.len);
    CHECK(tk_encode(t, (const uint8_t *)"e\xcc\x81", 3, &v) == TK_OK && v.len == 2 && v.ids[0] == 0xc3 &&
              v.ids[1] == 0xa9,
          "NFC before the regex: %zu ids", v.len);
    free(s);
    tk_ids_free(&v);
    tk_free(t);

    /* a tokenizer.json carries its own pipeline: both options refused by name */
    tk_load_opts lo = {TK_PAT_NONE, "\\w+", TK_NORM_NONE};
    err[0] = 0;
    rc = tk_load_ex(MKS_TEST_DATA "/tk_hf/bl_added.json", &lo, &t, err, sizeof err);
    CHECK(rc == TK_ERR_UNSUPPORTED && strstr(err, "--pattern REGEX"), "tokenizer.json + regex: rc %d \"%s\"", rc, err);
    lo.regex = NULL;
    lo.norm = TK_NORM_NFC;
    err[0] = 0;
    rc = tk_load_ex(MKS_TEST_DATA "/tk_hf/bl_added.json", &lo, &t, err, sizeof err);
    CHECK(rc == TK_ERR_UNSUPPORTED && strstr(err, "--normalize"), "tokenizer.json + nfc: rc %d \"%s\"", rc, err);
}

/* What a regex matches of text, as tiktoken's find_iter takes it (the bytes
 * of the matches, what no match covers dropped), on the bytes vocabulary. */
static void matched(const char *pat, const char *text, char *out, size_t cap) {
    out[0] = 0;
    tk_tokenizer *t = bytes_vocab();
    char err[512] = "";
    if (!t || tk_set_pretokenizer(t, pat, TK_NORM_NONE, err, sizeof err) != TK_OK) {
        snprintf(out, cap, "ERR %s", err);
        tk_free(t);
        return;
    }
    tk_ids v = {0};
    size_t n = 0;
    if (tk_encode(t, (const uint8_t *)text, strlen(text), &v) == TK_OK)
        for (size_t k = 0; k < v.len && n + 3 < cap; k++) {
            if (v.ids[k] < 256) out[n++] = (char)v.ids[k];
            else out[n++] = 'a', out[n++] = 'b';
        }
    out[n] = 0;
    tk_ids_free(&v);
    tk_free(t);
}

/* Rust regex-syntax's classes (regex_sets.c): set operations, nested and
 * ASCII classes, literal '-' ']' '&' '~', scripts; the expected bytes are
 * tiktoken 0.14's (Encoding(pat_str=P) on the 256 single bytes). */
static void rust_classes(void) {
    static const char *const cases[][3] = {
        {"[a-z&&[^aeiou]]+", "hello world", "hllwrld"},
        {"[&&a]", "a&", ""},
        {"[a&&]", "a&", ""},
        {"[a--b]", "ab-", "a"},
        {"[a-c--b]+", "abc-", "ac"},
        {"[a~~b]", "ab~", "ab"},
        {"[a-c~~b-d]+", "abcde", "ad"},
        {"[a-z&&b-y&&c-x]+", "abcxyz", "cx"},
        {"[a&&&b]", "ab&", ""},
        {"[[:alpha:]]+", "ab1\xc3\xa9", "ab"},
        {"[^[:alpha:]]+", "ab1\xc3\xa9", "1\xc3\xa9"},
        {"[\\S]+", "a b", "ab"},
        {"[\\W]+", "a,b", ","},
        {"[a-]+", "a-b", "a-"},
        {"[-a]+", "a-b", "a-"},
        {"[--a]", "-a", "-a"},
        {"[]a]+", "]a", "]a"},
        {"[^]a]+", "]ab", "b"},
        {"[a&b]+", "a&b", "a&b"},
        {"[a\\&&b]", "a&", "a&"},
        {"[~~a]+", "a~", "a"},
        {"[a~]+", "a~", "a~"},
        {"[\\p{Greek}&&\\p{Lu}]+", "\xce\x91\xce\x92\xce\xb3", "\xce\x91\xce\x92"},
        {"[a-c[x-z]]+", "abxz", "abxz"},
        {"[^[a-c]]+", "abxz", "xz"},
        {"[a[^a]]+", "ab\n", "ab\n"},
        {"[\\d--1]+", "1234", "234"},
        {"[\\x41-\\x43]+", "ABCD", "ABC"},
        {"[\\u{41}]+", "AA", "AA"},
        {"[\\p{L}--\\p{Lu}]+", "aBc", "ac"},
        {"\\P{Han}+",
         "a\xe6\xbc\xa2"
         "b",
         "ab"},
        {"\\p{isHan}", "\xe6\xbc\xa2", "\xe6\xbc\xa2"},
        /* Ext. I (15.1), Ext. H (15.0), U+3005 (Lm, Han); not U+3001 (Han only by Script_Extensions) */
        {"[\\p{Han}]+", "x\xf0\xb1\x8d\x90\xf0\xae\xaf\xb0\xe3\x80\x85\xe3\x80\x81y",
         "\xf0\xb1\x8d\x90\xf0\xae\xaf\xb0\xe3\x80\x85"},
        {"[\\p{Hani}--\\p{Lo}]+", "\xe3\x80\x85\xe3\x80\x87\xe2\xba\x80\xe6\xbc\xa2",
         "\xe3\x80\x85\xe3\x80\x87\xe2\xba\x80"},
        {"[^\\p{Latin}\\p{Common}]+",
         "a\xc3\xa9\xe6\xbc\xa2"
         "1 \xce\xb2",
         "\xe6\xbc\xa2\xce\xb2"},
        /* U+A7CB (16.0), U+1DF25 (15.0): Latin */
        {"\\p{Latin}+", "a\xea\x9f\x8b\xf0\x9d\xbc\xa5", "a\xea\x9f\x8b\xf0\x9d\xbc\xa5"},
        {"[[^\\p{Any}]a]+", "ab", "a"},
        {"[\\p{ASCII}&&\\p{L}]+",
         "a\xc3\xa9"
         "b",
         "ab"},
        {"[\\p{Assigned}--\\p{L}]+", "a1\xf3\xa0\x80\x80!", "1!"},
    };
    char got[256];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        matched(cases[k][0], cases[k][1], got, sizeof got);
        CHECK(strcmp(got, cases[k][2]) == 0, "%s on \"%s\": \"%s\", tiktoken \"%s\"", cases[k][0], cases[k][1], got,
              cases[k][2]);
    }
}

/* UTF-8 of cp appended at p; its length. */
static size_t put_utf8(uint8_t *p, uint32_t cp) {
    if (cp < 0x80) return p[0] = (uint8_t)cp, 1;
    if (cp < 0x800) return p[0] = (uint8_t)(0xC0 | cp >> 6), p[1] = (uint8_t)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000)
        return p[0] = (uint8_t)(0xE0 | cp >> 12), p[1] = (uint8_t)(0x80 | (cp >> 6 & 63)),
               p[2] = (uint8_t)(0x80 | (cp & 63)), 3;
    p[0] = (uint8_t)(0xF0 | cp >> 18), p[1] = (uint8_t)(0x80 | (cp >> 12 & 63));
    p[2] = (uint8_t)(0x80 | (cp >> 6 & 63)), p[3] = (uint8_t)(0x80 | (cp & 63));
    return 4;
}

/* The constructs whose meaning on PCRE2 10.42 is known to differ from
 * tiktoken's somewhere in the range, with the number of 4,096-code-point
 * blocks that differ (docs/tokenizer.md, "A rank file's own pre-tokenizer"):
 * scripts stay on PCRE2's Unicode 14.0 tables, tiktoken's are 16.0. The test
 * fails on any other difference, and when a listed count changes (so the
 * list follows the code). */
static const struct {
    const char *name;
    int blocks;
} SCAN_KNOWN[] = {{"han", SCAN_HAN_BLOCKS}, {"latin", SCAN_LATIN_BLOCKS}};

/* Block b's text as the scan's scripts build it: each probe in turn, written
 * once per code point of the 4,096 (surrogates skipped) with {c} replaced by
 * that code point; its length. text holds SCAN_TEXT_MAX bytes: a
 * construct's probes take up to 36 bytes per code point together. */
#define SCAN_TEXT_MAX (4096 * 6 * 6)
static size_t scan_block_text(json_t *probes, uint32_t b, uint8_t *text) {
    size_t n = 0;
    for (size_t k = 0; k < json_array_size(probes); k++) {
        const char *pr = json_string_value(json_array_get(probes, k));
        for (uint32_t cp = b * 4096; cp < (b + 1) * 4096; cp++) {
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            for (const char *q = pr; *q; q++) {
                if (q[0] == '{' && q[1] == 'c' && q[2] == '}') {
                    n += put_utf8(text + n, cp);
                    q += 2;
                } else {
                    text[n++] = (uint8_t)*q;
                }
            }
        }
    }
    return n;
}

/* Every code point in each construct's probes (tests/data/tk_pattern/scan.json,
 * tests/ref/make_tk_pattern_scan.py): the bytes the regex matches, one
 * digest per block, equal to tiktoken's. */
static void scan(void) {
    size_t jn;
    char *js = test_read_file(MKS_TEST_DATA "/tk_pattern/scan.json", &jn);
    json_error_t je;
    json_t *root = js ? json_loads(js, 0, &je) : NULL;
    free(js);
    CHECK(root != NULL, "no tests/data/tk_pattern/scan.json");
    if (!root) return;
    const char *name;
    json_t *c;
    uint8_t *text = malloc(SCAN_TEXT_MAX);
    json_object_foreach(json_object_get(root, "constructs"), name, c) {
        tk_tokenizer *t = bytes_vocab();
        char err[512] = "";
        const char *pat = json_string_value(json_object_get(c, "pat"));
        if (!t || tk_set_pretokenizer(t, pat, TK_NORM_NONE, err, sizeof err)) {
            CHECK(0, "scan %s: %s", name, err);
            tk_free(t);
            continue;
        }
        json_t *probes = json_object_get(c, "probes"), *dg = json_object_get(c, "digests");
        int differ = 0;
        char first[96] = "";
        tk_ids v = {0};
        for (uint32_t b = 0; b < 0x110000 / 4096; b++) {
            size_t n = scan_block_text(probes, b, text);
            v.len = 0;
            int rc = tk_encode(t, text, n, &v);
            char sha[17];
            test_ids_sha(&v, sha);
            if (rc || strcmp(sha, json_string_value(json_array_get(dg, b))) != 0) {
                if (!differ++) snprintf(first, sizeof first, "U+%04X..U+%04X (rc %d)", b * 4096, b * 4096 + 4095, rc);
            }
        }
        tk_ids_free(&v);
        tk_free(t);
        int known = 0;
        for (size_t k = 0; k < sizeof SCAN_KNOWN / sizeof SCAN_KNOWN[0]; k++)
            if (!strcmp(SCAN_KNOWN[k].name, name)) known = SCAN_KNOWN[k].blocks;
        printf("scan %-12s %-40.40s %d block(s) differ from tiktoken%s%s\n", name, pat, differ,
               differ ? ", first " : "", first);
        CHECK(differ == known, "scan %s: %d blocks differ, %d expected", name, differ, known);
    }
    free(text);
    json_decref(root);
}

typedef struct {
    const uint8_t *text;
    uint32_t *ids;
    size_t n;
} onig_matches;

static int keep_match(void *u, size_t a, size_t b) {
    onig_matches *m = u;
    for (size_t k = a; k < b; k++) m->ids[m->n++] = m->text[k];
    return 0;
}

/* The same scan for a tokenizer.json Split regex (hf_regex.c's Oniguruma
 * dialect) against HF tokenizers' Oniguruma: the bytes each match holds
 * (scan.json "oniguruma", from Split(behavior="removed", invert=True)).
 * Scripts there are Unicode 16.0's Script property: on PCRE2 10.42's tables
 * (Script_Extensions, 14.0) \p{Han} differed in 5 blocks. */
static void scan_onig(void) {
    size_t jn;
    char *js = test_read_file(MKS_TEST_DATA "/tk_pattern/scan.json", &jn);
    json_error_t je;
    json_t *root = js ? json_loads(js, 0, &je) : NULL;
    free(js);
    json_t *onig = root ? json_object_get(root, "oniguruma") : NULL;
    CHECK(onig != NULL, "no \"oniguruma\" in tests/data/tk_pattern/scan.json");
    if (!onig) {
        json_decref(root);
        return;
    }
    const char *name;
    json_t *c;
    uint8_t *text = malloc(SCAN_TEXT_MAX);
    uint32_t *ids = malloc(sizeof *ids * SCAN_TEXT_MAX);
    json_object_foreach(onig, name, c) {
        const char *pat = json_string_value(json_object_get(c, "pat"));
        tk_regex *r = NULL;
        char err[512] = "";
        if (tk_regex_compile(pat, strlen(pat), false, &r, err, sizeof err) != TK_OK) {
            CHECK(0, "oniguruma scan %s: %s", name, err);
            continue;
        }
        json_t *probes = json_object_get(c, "probes"), *dg = json_object_get(c, "digests");
        int differ = 0;
        char first[96] = "";
        for (uint32_t b = 0; b < 0x110000 / 4096; b++) {
            size_t n = scan_block_text(probes, b, text);
            onig_matches m = {text, ids, 0};
            tk_re_budget bud;
            tk_re_budget_init(&bud, n);
            int rc = tk_regex_find_all(r, text, n, &bud, keep_match, &m);
            tk_ids v = {m.ids, m.n, m.n};
            char sha[17];
            test_ids_sha(&v, sha);
            if (rc || strcmp(sha, json_string_value(json_array_get(dg, b))) != 0) {
                if (!differ++) snprintf(first, sizeof first, "U+%04X..U+%04X (rc %d)", b * 4096, b * 4096 + 4095, rc);
            }
        }
        tk_regex_free(r);
        printf("oniguruma scan %-22s %-34.34s %d block(s) differ from HF tokenizers%s%s\n", name, pat, differ,
               differ ? ", first " : "", first);
        CHECK(differ == 0, "oniguruma scan %s: %d blocks differ", name, differ);
    }
    free(text);
    free(ids);
    json_decref(root);
}

int main(int argc, char **argv) {
    const char *shared = argc > 1 ? argv[1] : "../shared";
    units();
    rust_classes();
    scan();
    scan_onig();
    bool have = true;
    for (int c = 0; c < 4 && have; c++)
        have = test_corpus_docs(shared, CATS[c], PER_CAT, test_doc_keep, &(test_doc_slots){texts[c], lens[c]}) >= 0;
    int checked = 0;
    if (have) {
        fingerprints(shared);
        checked = parity(shared);
    }
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < PER_CAT; i++) free(texts[c][i]);
    printf("test_tk_pattern: %d parity checks, %d failures%s\n", checked, fails, have ? "" : " (no ../shared)");
    if (fails) return 1;
    return have ? 0 : 77;
}
