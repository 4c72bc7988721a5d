/* test_tk_tekken.c - Mistral's tekken.json (tokenizer/load_tekken.c) against
 * mistral_common's Tekkenizer: through tk_load, the special tokens with
 * their ids (listed, mistral_common's 20 deprecated ones, <SPECIAL_i>
 * fillers), the vocabulary size after the cut, framing <s> ... </s>, ids on
 * the first 150 documents of each ../shared/corpus category and on edge
 * cases (special-token text is ordinary text, as Tekkenizer.encode has it),
 * decode(encode(x)) == x; --allow-special all maps the specials' text.
 *
 * References: tests/data/tk_tekken/refs.jsonl.zst, made with the two
 * crafted fixtures beside it by tests/ref/make_tk_tekken_refs.py
 * (mistral_common 1.13.1). argv[1]: shared dir; argv[2] (optional): a folder
 * holding the real tekken_240718.json / tekken_240911.json (mistral_common's
 * package data, fetched by tests/tk_tekken_real.sh): without it only the
 * fixtures are checked; with it only the real files. Exit 77 (skipped) when
 * no file of the refs could be checked. */
#include "test_corpus.h"
#include "tk.h"

#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

static const char *CATS[4] = {"en-books", "multi", "code", "web"};
#define PER_CAT 150
static char *texts[4][PER_CAT];
static size_t lens[4][PER_CAT];

static void keep(void *user, int i, const char *text, size_t len) {
    int c = *(int *)user;
    texts[c][i] = malloc(len + 1);
    memcpy(texts[c][i], text, len);
    texts[c][i][len] = 0;
    lens[c][i] = len;
}

static void ids_sha(const tk_ids *v, char out[17]) {
    struct sha256_ctx c;
    sha256_init(&c);
    for (size_t i = 0; i < v->len; i++) {
        uint8_t b[4] = {(uint8_t)v->ids[i], (uint8_t)(v->ids[i] >> 8), (uint8_t)(v->ids[i] >> 16),
                        (uint8_t)(v->ids[i] >> 24)};
        sha256_update(&c, 4, b);
    }
    uint8_t d[32];
    sha256_digest(&c, 32, d);
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

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
        if (test_corpus_docs(shared, CATS[c], PER_CAT, keep, &c) < 0) {
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
        if (ids) {
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
                ids_sha(&v, sha);
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
