/* test_tk_tekken.c - Mistral's tekken.json (tokenizer/load_tekken.c) against
 * mistral_common's Tekkenizer: through tk_load, the special tokens with
 * their ids (listed, mistral_common's 20 deprecated ones, <SPECIAL_i>
 * fillers), the vocabulary size after the cut, framing <s> ... </s>, ids on
 * the first 150 documents of each ../shared/corpus category and on edge
 * cases (special-token text is ordinary text, as Tekkenizer.encode has it),
 * decode(encode(x)) == x; --allow-special all maps the specials' text; on
 * the fixtures and tekken_240911 a full-range Unicode scan (every code point
 * in the probe of tests/unicode/make_unicode_scan.py, one digest per 4,096
 * code points: the classes of Mistral's pattern are tiktoken's, Unicode 16).
 *
 * References: tests/data/tk_tekken/refs.jsonl.zst, made with the two
 * crafted fixtures beside it by tests/ref/make_tk_tekken_refs.py
 * (mistral_common 1.13.1). argv[1]: shared dir; argv[2] (optional): a folder
 * holding the real tekken_240718.json / tekken_240911.json (mistral_common's
 * package data, fetched by tests/tk_tekken_real.sh): without it only the
 * fixtures are checked; with it only the real files. Exit 77 (skipped) when
 * no file of the refs could be checked. */
#include "test_corpus.h"
#include "test_tk_ids.h"
#include "tk.h"

#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

static const char *CATS[4] = {"en-books", "multi", "code", "web"};
#define PER_CAT 150
static char *texts[4][PER_CAT];
static size_t lens[4][PER_CAT];

static bool file_sha_is(const char *path, const char *want) {
    size_t n;
    char *data = test_read_file(path, &n);
    if (!data) return false;
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, n, (const uint8_t *)data);
    uint8_t d[32];
    sha256_digest(&c, 32, d);
    free(data);
    char hex[65];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return strcmp(hex, want) == 0;
}

/* The tokenizer as a user gets it: tk_load on the path, no --pattern. */
static int header(tk_tokenizer *tok, const char *name, json_t *o) {
    int fails = 0;
    char desc[256];
    tk_describe(tok, desc, sizeof desc);
    if (strcmp(tk_name(tok), name) != 0 || !strstr(desc, "tekken.json")) {
        fprintf(stderr, "FAIL %s: named \"%s\", described \"%s\"\n", name, tk_name(tok), desc);
        fails++;
    }
    json_t *sp = json_object_get(o, "specials");
    if (tk_n_specials(tok) != json_object_size(sp)) {
        fprintf(stderr, "FAIL %s: %zu special tokens, mistral_common %zu\n", name, tk_n_specials(tok),
                json_object_size(sp));
        fails++;
    }
    const char *k;
    json_t *v;
    json_object_foreach(sp, k, v) {
        uint32_t id;
        if (tk_special_id(tok, k, &id) != TK_OK || id != (uint32_t)json_integer_value(v)) {
            fprintf(stderr, "FAIL %s: special %s: ours %d, mistral_common's %lld\n", name, k,
                    tk_special_id(tok, k, &id) == TK_OK ? (int)id : -1, (long long)json_integer_value(v));
            if (++fails > 5) break;
        }
    }
    if (tk_vocab_size(tok) != (uint32_t)json_integer_value(json_object_get(o, "n_words")) ||
        tk_vocab_size(tok) != tk_n_ranks(tok) + json_object_size(sp)) {
        fprintf(stderr, "FAIL %s: vocab size %u (%u ranks), mistral_common's n_words %lld\n", name, tk_vocab_size(tok),
                tk_n_ranks(tok), (long long)json_integer_value(json_object_get(o, "n_words")));
        fails++;
    }
    tk_framing f;
    char err[512] = "";
    if (tk_default_framing(tok, &f, err, sizeof err) || f.bos != json_integer_value(json_object_get(o, "bos")) ||
        f.eos != json_integer_value(json_object_get(o, "eos"))) {
        fprintf(stderr, "FAIL %s: framing BOS %lld EOS %lld (%s%s), mistral_common's %lld %lld\n", name,
                (long long)f.bos, (long long)f.eos, f.source, err,
                (long long)json_integer_value(json_object_get(o, "bos")),
                (long long)json_integer_value(json_object_get(o, "eos")));
        fails++;
    }
    /* our extension: --allow-special all maps the specials' text to their ids */
    static const char text[] = "<s>[INST] x</s>";
    tk_ids ids = {0};
    uint32_t s, e;
    if (tk_special_id(tok, "<s>", &s) == TK_OK && tk_special_id(tok, "</s>", &e) == TK_OK &&
        (tk_encode_special(tok, (const uint8_t *)text, sizeof text - 1, NULL, (size_t)-1, &ids) || ids.len < 3 ||
         ids.ids[0] != s || ids.ids[ids.len - 1] != e)) {
        fprintf(stderr, "FAIL %s: --allow-special all on \"%s\": %zu ids\n", name, text, ids.len);
        fails++;
    }
    tk_ids_free(&ids);
    return fails;
}

static size_t put_utf8(char *o, uint32_t c) {
    if (c < 0x80) return o[0] = (char)c, 1;
    if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 63)), 2;
    if (c < 0x10000)
        return o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | (c >> 6 & 63)), o[2] = (char)(0x80 | (c & 63)), 3;
    o[0] = (char)(0xF0 | c >> 18), o[1] = (char)(0x80 | (c >> 12 & 63)), o[2] = (char)(0x80 | (c >> 6 & 63));
    o[3] = (char)(0x80 | (c & 63));
    return 4;
}

/* make_unicode_scan.py's digests: per 4,096 code points, sha256 over the
 * probes' id counts then their ids (little-endian uint32), 16 hex digits;
 * the number of blocks that differ from the reference's. */
static int unicode_scan(const tk_tokenizer *tok, const char *name, json_t *want) {
    int bad = 0;
    uint32_t *lens = malloc(4096 * sizeof *lens);
    uint32_t *flat = NULL;
    size_t nflat = 0, cap = 0;
    tk_ids v = {0};
    for (uint32_t b = 0; b < 0x110000 / 4096; b++) {
        size_t np = 0;
        nflat = 0;
        for (uint32_t c = b * 4096; c < (b + 1) * 4096; c++) {
            if (c >= 0xD800 && c <= 0xDFFF) continue;
            char ch[4], p[64];
            size_t cl = put_utf8(ch, c), n = 0;
            /* "x{c}{c}'s {c}1 A{c}a {c}A" */
#define PUT(s, l) (memcpy(p + n, s, l), n += l)
            PUT("x", 1), PUT(ch, cl), PUT(ch, cl), PUT("'s ", 3), PUT(ch, cl), PUT("1 A", 3), PUT(ch, cl);
            PUT("a ", 2), PUT(ch, cl), PUT("A", 1);
#undef PUT
            v.len = 0;
            if (tk_encode(tok, (const uint8_t *)p, n, &v)) {
                bad++;
                break;
            }
            if (nflat + v.len > cap) {
                cap = (nflat + v.len) * 2;
                flat = realloc(flat, cap * sizeof *flat);
                if (!flat) abort();
            }
            lens[np++] = (uint32_t)v.len;
            memcpy(flat + nflat, v.ids, v.len * sizeof *v.ids);
            nflat += v.len;
        }
        struct sha256_ctx ctx;
        sha256_init(&ctx);
        for (size_t k = 0; k < np; k++) {
            uint8_t q[4] = {(uint8_t)lens[k], (uint8_t)(lens[k] >> 8), (uint8_t)(lens[k] >> 16),
                            (uint8_t)(lens[k] >> 24)};
            sha256_update(&ctx, 4, q);
        }
        for (size_t k = 0; k < nflat; k++) {
            uint32_t x = flat[k];
            uint8_t q[4] = {(uint8_t)x, (uint8_t)(x >> 8), (uint8_t)(x >> 16), (uint8_t)(x >> 24)};
            sha256_update(&ctx, 4, q);
        }
        uint8_t d[32];
        char hex[17];
        sha256_digest(&ctx, 32, d);
        for (int i = 0; i < 8; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
        const char *w = json_string_value(json_array_get(want, b));
        if (!w || strcmp(w, hex) != 0) {
            if (bad < 5)
                fprintf(stderr, "FAIL %s: Unicode scan differs in U+%04X..U+%04X\n", name, b * 4096, b * 4096 + 4095);
            bad++;
        }
    }
    free(flat);
    tk_ids_free(&v);
    free(lens);
    if (!bad) printf("%s: full-range Unicode scan: 0 blocks differ\n", name);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_tk_tekken SHARED_DIR [REAL_FILES_DIR]\n");
        return 64;
    }
    const char *shared = argv[1], *real = argc > 2 ? argv[2] : NULL;
    size_t rn;
    char *refs = test_read_zst(MKS_TEST_DATA "/tk_tekken/refs.jsonl.zst", &rn);
    if (!refs) {
        fprintf(stderr, "no %s\n", MKS_TEST_DATA "/tk_tekken/refs.jsonl.zst");
        return 1;
    }
    for (int c = 0; c < 4; c++)
        if (test_corpus_docs(shared, CATS[c], PER_CAT, test_doc_keep, &(test_doc_slots){texts[c], lens[c]}) < 0) {
            fprintf(stderr, "FAIL: no corpus under %s\n", shared);
            return 1;
        }
    int fails = 0, checked = 0, loaded = 0;
    char cur[64] = "";
    tk_tokenizer *tok = NULL;
    for (char *line = refs; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        line = nl ? nl + 1 : line + strlen(line);
        if (!o) continue;
        const char *name = json_string_value(json_object_get(o, "tok"));
        if (strcmp(name, cur) != 0) {
            tk_free(tok);
            tok = NULL;
            snprintf(cur, sizeof cur, "%s", name);
            bool fixture = strncmp(name, "tekken_small", 12) == 0;
            char p[4096], err[512] = "";
            if (fixture) snprintf(p, sizeof p, "%s/tk_tekken/%s.json", MKS_TEST_DATA, name);
            else snprintf(p, sizeof p, "%s/%s.json", real ? real : "", name);
            const char *sha = json_string_value(json_object_get(o, "sha256"));
            if ((real != NULL) == fixture) {
                /* the other run's files */
            } else if (!file_sha_is(p, sha)) {
                fprintf(stderr, "%s %s: %s absent or not the file the refs were made from\n", fixture ? "FAIL" : "skip",
                        name, p);
                fails += fixture;
            } else {
                struct timespec t0, t1;
                clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
                int rc = tk_load(p, TK_PAT_NONE, &tok, err, sizeof err);
                clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
                if (rc) {
                    fprintf(stderr, "FAIL %s: load: %s\n", name, err);
                    fails++;
                    tok = NULL;
                } else {
                    printf("%s: loaded in %.1f ms CPU\n", name,
                           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
                    loaded++;
                    fails += header(tok, name, o);
                }
            }
        }
        if (!tok || json_object_get(o, "specials")) {
            json_decref(o);
            continue;
        }
        tk_ids v = {0};
        json_t *ids = json_object_get(o, "ids");
        if (json_object_get(o, "scan")) {
            checked++;
            fails += unicode_scan(tok, name, json_object_get(o, "scan"));
        } else if (ids) {
            const char *text = json_string_value(json_object_get(o, "text"));
            size_t tl = json_string_length(json_object_get(o, "text"));
            int rc = tk_encode(tok, (const uint8_t *)text, tl, &v);
            size_t n = json_array_size(ids), at = 0;
            while (at < n && at < v.len && (uint32_t)json_integer_value(json_array_get(ids, at)) == v.ids[at]) at++;
            checked++;
            tk_bytes b = {0};
            if (rc || at != n || at != v.len) {
                fprintf(stderr, "FAIL %s \"%.60s\": rc %d, first difference at id %zu of %zu (ours %zu)\n", name, text,
                        rc, at, n, v.len);
                fails++;
            } else if (tk_decode(tok, v.ids, v.len, &b) || b.len != tl || (tl && memcmp(b.data, text, tl) != 0)) {
                fprintf(stderr, "FAIL %s decode(encode(\"%.60s\")) differs\n", name, text);
                fails++;
            }
            tk_bytes_free(&b);
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
                if (rc || v.len != n || strcmp(sha, json_string_value(json_object_get(o, "sha"))) != 0) {
                    fprintf(stderr, "FAIL %s %s doc %d: %zu ids (mistral_common's %zu), rc %d\n", name, cat, doc, v.len,
                            n, rc);
                    fails++;
                }
            }
        }
        tk_ids_free(&v);
        json_decref(o);
        if (fails > 20) break;
    }
    tk_free(tok);
    free(refs);
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < PER_CAT; i++) free(texts[c][i]);
    printf("test_tk_tekken: %d tokenizers, %d checks, %d failures\n", loaded, checked, fails);
    if (!fails && !loaded) return 77;
    return fails ? 1 : 0;
}
