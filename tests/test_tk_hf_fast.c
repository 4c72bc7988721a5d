/* The HF engine's fast paths against what they stand for, on crafted
 * tokenizer.json files written at test time (no reference library needed):
 *
 *   - the Whitespace pre-tokenizer's ASCII scan (hf_encode.c ws_split)
 *     against the same regex as a Split PCRE2 runs, on random texts of
 *     ASCII and non-ASCII words, symbols, controls and spaces, under a
 *     model where a pair is cheaper than its characters (a cut shows);
 *   - cl100k's older spelling (Llama 3's tokenizer.json) and Qwen's (one
 *     digit a piece) taken by the cl100k scanner with Oniguruma's
 *     whitespace branches (pretok.c), against the same regexes wrapped in
 *     (?:...), which PCRE2 runs, on the same texts and model;
 *   - Replace patterns matched without the regex engine (hf_normalize.c:
 *     a String, "C{n,}" / "C+", "\A +| +\z"), each against the same
 *     Replace written as a regex the engine runs ("[ ]{2,}", ...), on
 *     random texts of spaces, runs and the replacement's own bytes; the
 *     model (one piece per character) makes the ids the normalized text;
 *   - the Unigram lattice (hf_unigram.c: scores kept for a ring of
 *     positions only, nodes of the last word left behind) against a plain
 *     full-array Viterbi written here from HF's rules (model.rs): pieces up
 *     to 20 bytes (a ring of 32, wrapped many times over), scores from a
 *     small set (ties: the first proposal wins), characters of 1-3 bytes,
 *     one without a piece (fused unk runs looked up as strings), long texts
 *     one after another.
 * Each fails when its fast path's condition is broken (a ring no larger
 * than the longest piece, a trim that keeps an all-space text, ...). */
#include "tk.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_check.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static tk_tokenizer *load_json(const char *json) {
    char path[] = "/tmp/tk_hf_fast_XXXXXX.json";
    int fd = mkstemps(path, 5);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "w");
    if (!f) return NULL;
    fputs(json, f);
    fclose(f);
    tk_tokenizer *t = NULL;
    char err[512] = "";
    int rc = tk_load_hf_json(path, TK_PAT_NONE, &t, err, sizeof err);
    unlink(path);
    CHECK(rc == TK_OK, "load: %s", err);
    return rc == TK_OK ? t : NULL;
}

/* ---- Replace: fast forms against the regex engine ------------------------ */

/* One piece per character the texts and replacements can hold. */
static const char *const CHARS[] = {"a", "b", "x", " ", "\xE2\x96\x81", "_", "X", "Y", "Z", "W", "c", "d", "e"};
#define N_CHARS (sizeof CHARS / sizeof CHARS[0])

static char *replace_json(const char *pattern, const char *content) {
    static char buf[4096];
    size_t o = (size_t)snprintf(buf, sizeof buf,
                                "{\"added_tokens\":[],\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
                                "{\"type\":\"Replace\",\"pattern\":%s,\"content\":\"%s\"}]},\"pre_tokenizer\":null,"
                                "\"decoder\":null,\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"byte_fallback\":false,"
                                "\"vocab\":[[\"<unk>\",0]",
                                pattern, content);
    for (size_t k = 0; k < N_CHARS; k++) o += (size_t)snprintf(buf + o, sizeof buf - o, ",[\"%s\",-1]", CHARS[k]);
    snprintf(buf + o, sizeof buf - o, "]}}");
    return buf;
}

static int same_ids(const tk_ids *a, const tk_ids *b) {
    return a->len == b->len && (a->len == 0 || memcmp(a->ids, b->ids, a->len * sizeof *a->ids) == 0);
}

static void replace_pairs(void) {
    static const struct {
        const char *fast, *regex;
    } pat[] = {
        {"{\"String\":\" \"}", "{\"Regex\":\"[ ]\"}"},
        {"{\"String\":\"ab\"}", "{\"Regex\":\"ab\"}"},
        {"{\"String\":\"\xE2\x96\x81\"}", "{\"Regex\":\"[\xE2\x96\x81]\"}"},
        {"{\"Regex\":\" {2,}\"}", "{\"Regex\":\"[ ]{2,}\"}"},
        {"{\"Regex\":\" +\"}", "{\"Regex\":\"[ ]+\"}"},
        {"{\"Regex\":\"a+\"}", "{\"Regex\":\"[a]+\"}"},
        {"{\"Regex\":\"x{3,}\"}", "{\"Regex\":\"[x]{3,}\"}"},
        {"{\"Regex\":\"\\\\A +| +\\\\z\"}", "{\"Regex\":\"\\\\A[ ]+|[ ]+\\\\z\"}"},
    };
    static const char *const content[] = {"", "_", " ", "\xE2\x96\x81", "XYZW", "abcde"};
    /* the texts: fixed edges, then random strings of these pieces */
    static const char *const edge[] = {"",
                                       " ",
                                       "  ",
                                       "   ",
                                       "a",
                                       " a",
                                       "a ",
                                       " a ",
                                       "  a  b  ",
                                       "aaa",
                                       "xx",
                                       "xxx",
                                       "xxxx x xx",
                                       "ababab",
                                       "aab",
                                       "ba",
                                       "\xE2\x96\x81 \xE2\x96\x81",
                                       "a b  c   d"};
    static const char *const part[] = {"a", "b", "x", " ", "  ", "\xE2\x96\x81", "ab", "xxx"};
    char text[256];
    for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++)
        for (size_t c = 0; c < sizeof content / sizeof content[0]; c++) {
            tk_tokenizer *fast = load_json(replace_json(pat[p].fast, content[c]));
            tk_tokenizer *slow = load_json(replace_json(pat[p].regex, content[c]));
            if (!fast || !slow) {
                tk_free(fast);
                tk_free(slow);
                continue;
            }
            int bad = 0;
            for (int k = 0; k < 600 && bad < 3; k++) {
                size_t n = 0;
                if (k < (int)(sizeof edge / sizeof edge[0])) n = (size_t)snprintf(text, sizeof text, "%s", edge[k]);
                else
                    for (uint32_t m = rnd(16); m-- > 0;) {
                        const char *q = part[rnd(sizeof part / sizeof part[0])];
                        memcpy(text + n, q, strlen(q));
                        n += strlen(q);
                    }
                tk_ids a = {0}, b = {0};
                int ra = tk_encode(fast, (const uint8_t *)text, n, &a),
                    rb = tk_encode(slow, (const uint8_t *)text, n, &b);
                if (ra != rb || !same_ids(&a, &b)) {
                    CHECK(0, "Replace %s -> \"%s\" on \"%.*s\": rc %d, %zu ids; as a regex %s: rc %d, %zu ids",
                          pat[p].fast, content[c], (int)n, text, ra, a.len, pat[p].regex, rb, b.len);
                    bad++;
                }
                tk_ids_free(&a);
                tk_ids_free(&b);
            }
            tk_free(fast);
            tk_free(slow);
        }
}

/* ---- Whitespace: the ASCII scan against the regex -------------------------- */

/* Characters of each kind around the ASCII cut: ASCII words, punctuation,
 * controls (not \s: 0x1C), \s; non-ASCII letters, symbols, spaces. */
static const char *const WS_CH[] = {"a", "B",   "_",   ".",       ",",       "-",       "7",       "\\u001c",
                                    " ", "\\t", "\\n", "\\u00e9", "\\u20ac", "\\u00a0", "\\u3000", "\\u0301"};
static const char *const WS_RAW[] = {"a",
                                     "B",
                                     "_",
                                     ".",
                                     ",",
                                     "-",
                                     "7",
                                     "\x1c",
                                     " ",
                                     "\t",
                                     "\n",
                                     "\xC3\xA9",
                                     "\xE2\x82\xAC",
                                     "\xC2\xA0",
                                     "\xE3\x80\x80",
                                     "\xCC\x81"};
#define N_WS (sizeof WS_CH / sizeof WS_CH[0])

/* A Unigram model where a pair is cheaper than its two characters: where a
 * word is cut changes the ids. */
static char *ws_json(const char *pre) {
    static char buf[65536];
    size_t o = (size_t)snprintf(buf, sizeof buf,
                                "{\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":%s,\"decoder\":null,"
                                "\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"byte_fallback\":false,"
                                "\"vocab\":[[\"<unk>\",-20]",
                                pre);
    for (size_t a = 0; a < N_WS; a++) {
        o += (size_t)snprintf(buf + o, sizeof buf - o, ",[\"%s\",-10]", WS_CH[a]);
        for (size_t b = 0; b < N_WS; b++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, ",[\"%s%s\",-1]", WS_CH[a], WS_CH[b]);
    }
    snprintf(buf + o, sizeof buf - o, "]}}");
    return buf;
}

/* fast against slow on 20000 random texts of 1..max_parts WS_RAW parts:
 * the same return code and ids (at most 3 differences reported). */
static void agree_on_random(tk_tokenizer *fast, tk_tokenizer *slow, uint32_t max_parts, const char *what) {
    int bad = 0;
    char text[256];
    for (int k = 0; fast && slow && k < 20000 && bad < 3; k++) {
        size_t n = 0;
        for (uint32_t m = 1 + rnd(max_parts); m-- > 0;) {
            const char *q = WS_RAW[rnd(N_WS)];
            memcpy(text + n, q, strlen(q));
            n += strlen(q);
        }
        tk_ids a = {0}, b = {0};
        int ra = tk_encode(fast, (const uint8_t *)text, n, &a), rb = tk_encode(slow, (const uint8_t *)text, n, &b);
        if (ra != rb || !same_ids(&a, &b)) {
            CHECK(0, "%s on \"%.*s\": rc %d, %zu ids; the plain path: rc %d, %zu ids", what, (int)n, text, ra, a.len,
                  rb, b.len);
            bad++;
        }
        tk_ids_free(&a);
        tk_ids_free(&b);
    }
}

static void whitespace_scan(void) {
    tk_tokenizer *fast = load_json(ws_json("{\"type\":\"Whitespace\"}"));
    tk_tokenizer *slow = load_json(ws_json("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+|[^\\\\w\\\\s]+\"},"
                                           "\"behavior\":\"Removed\",\"invert\":true}"));
    agree_on_random(fast, slow, 20, "Whitespace");
    tk_free(fast);
    tk_free(slow);
}

/* ---- cl100k's older spelling and Qwen's: the scanner against the regex ---- */

/* Each regex as a Split (the cl100k scanner with Oniguruma's whitespace
 * branches: a final whitespace run is cut after its last newline) and the
 * same regex wrapped in (?:...), which no scanner claims (PCRE2), under the
 * pair model: a different cut gives other ids. */
static void cl100k_forms(void) {
    static const char *const RE[] = {
        /* Llama 3's tokenizer.json */
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
        "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+",
        /* Qwen2's */
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
        "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"};
    for (size_t r = 0; r < 2; r++) {
        char pre[1024];
        snprintf(pre, sizeof pre, "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"%s\"},\"behavior\":\"Isolated\"}",
                 RE[r]);
        tk_tokenizer *fast = load_json(ws_json(pre));
        snprintf(pre, sizeof pre, "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?:%s)\"},\"behavior\":\"Isolated\"}",
                 RE[r]);
        tk_tokenizer *slow = load_json(ws_json(pre));
        char desc[512] = "";
        if (fast) tk_describe(fast, desc, sizeof desc);
        CHECK(fast && strstr(desc, r ? "Split(qwen" : "Split(cl100k"), "regex %zu not taken by the scanner: %s", r,
              desc);
        agree_on_random(fast, slow, 12, r ? "Qwen's regex" : "cl100k's older spelling");
        tk_free(fast);
        tk_free(slow);
    }
}

/* ---- Unigram: the lattice against a plain Viterbi ------------------------- */

#define V_MAX 96
typedef struct {
    char s[32];
    size_t len;
    double score;
} piece;

static piece voc[V_MAX]; /* voc[0]: <unk> */
static size_t nv;

/* HF's Viterbi (model.rs encode_optimized), full arrays: for each character
 * start, its pieces shortest first propose best + score to their end; the
 * first proposal, then a strictly greater one, wins; a character without a
 * piece of its own proposes unk (min score - 10); unk pieces are fused and
 * the run's string looked up. Ids into out; -1 for an allocation failure. */
static int ref_encode(const uint8_t *t, size_t n, tk_ids *out) {
    double *sc = calloc(n + 1, sizeof *sc), min = 0;
    size_t *st = calloc(n + 1, sizeof *st);
    uint32_t *id = calloc(n + 1, sizeof *id);
    bool *seen = calloc(n + 1, sizeof *seen);
    size_t *ends = malloc((n + 1) * sizeof *ends);
    if (!sc || !st || !id || !seen || !ends) return -1;
    for (size_t v = 0; v < nv; v++) min = v == 0 || voc[v].score < min ? voc[v].score : min;
    for (size_t s = 0; s < n;) {
        size_t mb = t[s] < 0x80 ? 1 : t[s] < 0xE0 ? 2 : t[s] < 0xF0 ? 3 : 4;
        bool single = false;
        int at_len[32]; /* the piece of each length that starts here (two would be the same string) */
        for (size_t l = 0; l < 32; l++) at_len[l] = -1;
        for (size_t v = 0; v < nv; v++)
            if (s + voc[v].len <= n && memcmp(voc[v].s, t + s, voc[v].len) == 0) at_len[voc[v].len] = (int)v;
        for (size_t l = 1; l < 32; l++)
            if (at_len[l] >= 0) {
                size_t v = (size_t)at_len[l];
                double cand = sc[s] + voc[v].score;
                if (!seen[s + l] || cand > sc[s + l]) {
                    seen[s + l] = true;
                    sc[s + l] = cand;
                    st[s + l] = s;
                    id[s + l] = (uint32_t)v;
                }
                single |= l == mb;
            }
        if (!single) {
            double cand = sc[s] + min - 10.0;
            if (!seen[s + mb] || cand > sc[s + mb]) {
                seen[s + mb] = true;
                sc[s + mb] = cand;
                st[s + mb] = s;
                id[s + mb] = 0;
            }
        }
        s += mb;
    }
    size_t ne = 0;
    for (size_t e = n; e > 0; e = st[e]) ends[ne++] = e;
    size_t run = SIZE_MAX;
    for (size_t k = ne; k-- > 0;) {
        size_t e = ends[k], s = st[e];
        if (id[e] == 0) {
            if (run == SIZE_MAX) run = s;
            if (k > 0 && id[ends[k - 1]] == 0) continue;
            uint32_t f = 0; /* the run's string as a piece, else unk */
            for (size_t v = 1; v < nv; v++)
                if (voc[v].len == e - run && memcmp(voc[v].s, t + run, e - run) == 0) f = (uint32_t)v;
            out->ids[out->len++] = f;
            run = SIZE_MAX;
        } else out->ids[out->len++] = id[e];
    }
    free(sc);
    free(st);
    free(id);
    free(seen);
    free(ends);
    return 0;
}

static void unigram_lattice(void) {
    /* characters of 1, 2 and 3 bytes; "c" has no piece of its own */
    static const char *const ch[] = {"a", "b", "c", "\xC3\xA9", "\xE2\x96\x81"};
    static const double scores[] = {-1.0, -2.0, -3.0, -1.5, -0.1, -0.2, -0.3};
    for (int round = 0; round < 7; round++) {
        nv = 0;
        voc[nv++] = (piece){"<unk>", 5, -4.0};
        if (round == 6) {
            /* a cheap piece as long as the longest at every start of long
             * texts of "a": a proposal from every start to the farthest
             * node (the last text's nodes are still there, reached) */
            voc[nv++] = (piece){"a", 1, -1.0};
            voc[nv++] = (piece){"b", 1, -1.0};
            voc[nv++] = (piece){"aaaaaaaaa", 9, -5.0};
        }
        for (int k = 0; k < 5 && round < 6; k++)
            if (k != 2) {
                voc[nv] = (piece){"", strlen(ch[k]), scores[rnd(7)]};
                memcpy(voc[nv].s, ch[k], voc[nv].len);
                nv++;
            }
        size_t longest = round % 2 ? 20 : 9;
        while (nv < V_MAX && round < 6) { /* distinct pieces of up to `longest` bytes */
            piece p = {"", 0, scores[rnd(7)]};
            while (p.len < longest) {
                const char *c = ch[rnd(5)];
                if (p.len + strlen(c) > longest) break;
                memcpy(p.s + p.len, c, strlen(c));
                p.len += strlen(c);
                if (rnd(3) == 0) break;
            }
            if (round < 2 && p.len < longest / 2) continue; /* long ones: far proposals */
            bool dup = false;
            for (size_t v = 0; v < nv && !dup; v++) dup = voc[v].len == p.len && !memcmp(voc[v].s, p.s, p.len);
            if (!dup) voc[nv++] = p;
        }
        static char json[16384];
        size_t o = (size_t)snprintf(json, sizeof json,
                                    "{\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":null,\"decoder\":null,"
                                    "\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"byte_fallback\":false,\"vocab\":[");
        for (size_t v = 0; v < nv; v++)
            o += (size_t)snprintf(json + o, sizeof json - o, "%s[\"%.*s\",%g]", v ? "," : "", (int)voc[v].len, voc[v].s,
                                  voc[v].score);
        snprintf(json + o, sizeof json - o, "]}}");
        tk_tokenizer *t = load_json(json);
        if (!t) continue;
        int bad = 0;
        for (int k = 0; k < 300 && bad < 3; k++) {
            size_t want = k < 4 || (round == 6 && k < 20) ? 9000 + (size_t)rnd(3000) : 1 + rnd(200), n = 0;
            uint8_t *text = malloc(want + 4);
            while (n < want) {
                const char *c = round == 6 ? (rnd(50) ? "a" : "b") : ch[rnd(8) < 6 ? rnd(2) : rnd(5)];
                memcpy(text + n, c, strlen(c));
                n += strlen(c);
            }
            tk_ids a = {0}, r = {0};
            r.ids = malloc((n + 1) * sizeof *r.ids);
            int ra = tk_encode(t, text, n, &a);
            if (!r.ids || ref_encode(text, n, &r)) {
                CHECK(0, "out of memory");
                bad = 3;
            } else if (ra != TK_OK || !same_ids(&a, &r)) {
                size_t d = 0;
                while (d < a.len && d < r.len && a.ids[d] == r.ids[d]) d++;
                CHECK(
                    0,
                    "Unigram round %d, text %d (%zu bytes): rc %d, %zu ids, the plain Viterbi %zu; first difference at %zu",
                    round, k, n, ra, a.len, r.len, d);
                bad++;
            }
            tk_ids_free(&a);
            free(r.ids);
            free(text);
        }
        tk_free(t);
    }
}

int main(void) {
    replace_pairs();
    whitespace_scan();
    cl100k_forms();
    unigram_lattice();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("HF fast paths: Replace forms, the Whitespace scan, the cl100k / Qwen scanner and the Unigram lattice agree "
           "with their plain counterparts\n");
    return 0;
}
