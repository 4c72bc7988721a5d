/* test_tk_meta.c - Meta's own Llama 3 / Llama 4 tokenizer.model (tiktoken
 * rank files named .model) against Meta's tokenizer code: recognised by
 * sha256 through tk_load (name, pattern, the 2048 / 256 special tokens of
 * its tokenizer.py with their ids, framing <|begin_of_text|> ...
 * <|end_of_text|>), ids on the first 300 documents of each ../shared/corpus
 * category and on edge cases (special-token text as text, and with every
 * special allowed), decode(encode(x)) == x.
 *
 * References: tests/data/tk_meta/refs.jsonl.zst, made by
 * tests/ref/make_tk_meta_refs.py (llama-models 0.3.0 + tiktoken).
 * argv[1]: shared dir; argv[2]: the folder holding llama3/tokenizer.model
 * and llama4/tokenizer.model (llama-models' package folder, fetched by
 * tests/tk_meta.sh). Exit 77 (skipped) when the files are absent. */
#include "test_corpus.h"
#include "test_tk_ids.h"
#include "tk.h"

#include <stdbool.h>
#include <stdint.h>

static const char *CATS[4] = {"en-books", "multi", "code", "web"};
#define PER_CAT 300
static char *texts[4][PER_CAT];
static size_t lens[4][PER_CAT];

/* The tokenizer as a user gets it: tk_load on the path, no --pattern. */
static int header(tk_tokenizer *tok, const char *name, json_t *o) {
    int fails = 0;
    if (strcmp(tk_name(tok), name) != 0 || tk_known_pattern(tok) != tk_get_pattern(tok) ||
        tk_get_pattern(tok) != (strcmp(name, "llama3") == 0 ? TK_PAT_CL100K : TK_PAT_O200K)) {
        fprintf(stderr, "FAIL %s: recognised as \"%s\", pattern %s\n", name, tk_name(tok),
                tk_pattern_name(tk_get_pattern(tok)));
        fails++;
    }
    json_t *sp = json_object_get(o, "specials");
    if (tk_n_specials(tok) != json_object_size(sp)) {
        fprintf(stderr, "FAIL %s: %zu special tokens, Meta's tokenizer.py %zu\n", name, tk_n_specials(tok),
                json_object_size(sp));
        fails++;
    }
    const char *k;
    json_t *v;
    json_object_foreach(sp, k, v) {
        uint32_t id;
        if (tk_special_id(tok, k, &id) != TK_OK || id != (uint32_t)json_integer_value(v)) {
            fprintf(stderr, "FAIL %s: special %s: ours %d, Meta's %lld\n", name, k,
                    tk_special_id(tok, k, &id) == TK_OK ? (int)id : -1, (long long)json_integer_value(v));
            if (++fails > 5) break;
        }
    }
    if (tk_vocab_size(tok) != tk_n_ranks(tok) + json_object_size(sp)) {
        fprintf(stderr, "FAIL %s: vocab size %u\n", name, tk_vocab_size(tok));
        fails++;
    }
    tk_framing f;
    char err[512] = "";
    if (tk_default_framing(tok, &f, err, sizeof err) || f.bos != json_integer_value(json_object_get(o, "bos")) ||
        f.eos != json_integer_value(json_object_get(o, "eos"))) {
        fprintf(stderr, "FAIL %s: framing BOS %lld EOS %lld (%s%s), Meta's %lld %lld\n", name, (long long)f.bos,
                (long long)f.eos, f.source, err, (long long)json_integer_value(json_object_get(o, "bos")),
                (long long)json_integer_value(json_object_get(o, "eos")));
        fails++;
    }
    return fails;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_tk_meta SHARED_DIR LLAMA_MODELS_DIR\n");
        return 64;
    }
    const char *shared = argv[1], *pkg = argv[2];
    size_t rn;
    char *refs = test_read_zst(MKS_TEST_DATA "/tk_meta/refs.jsonl.zst", &rn);
    if (!refs) {
        fprintf(stderr, "no %s\n", MKS_TEST_DATA "/tk_meta/refs.jsonl.zst");
        return 1;
    }
    for (int c = 0; c < 4; c++)
        if (test_corpus_docs(shared, CATS[c], PER_CAT, test_doc_keep, &(test_doc_slots){texts[c], lens[c]}) < 0) {
            fprintf(stderr, "FAIL: no corpus under %s\n", shared);
            return 1;
        }
    int fails = 0, checked = 0, loaded = 0;
    char cur[32] = "";
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
            char p[4096], err[512] = "";
            snprintf(p, sizeof p, "%s/%s/tokenizer.model", pkg, name);
            FILE *f = fopen(p, "rb");
            if (!f) {
                fprintf(stderr, "skip %s: %s not found\n", name, p);
            } else {
                fclose(f);
                if (tk_load(p, TK_PAT_NONE, &tok, err, sizeof err)) {
                    fprintf(stderr, "FAIL %s: load: %s\n", name, err);
                    fails++;
                    tok = NULL;
                } else {
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
            bool special = strcmp(json_string_value(json_object_get(o, "mode")), "special") == 0;
            int rc = special ? tk_encode_special(tok, (const uint8_t *)text, tl, NULL, (size_t)-1, &v)
                             : tk_encode(tok, (const uint8_t *)text, tl, &v);
            size_t n = json_array_size(ids), at = 0;
            while (at < n && at < v.len && (uint32_t)json_integer_value(json_array_get(ids, at)) == v.ids[at]) at++;
            checked++;
            tk_bytes b = {0};
            if (rc || at != n || at != v.len) {
                fprintf(stderr, "FAIL %s %s \"%.60s\": rc %d, first difference at id %zu of %zu (ours %zu)\n", name,
                        special ? "special" : "plain", text, rc, at, n, v.len);
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
                    fprintf(stderr, "FAIL %s %s doc %d: %zu ids (Meta's %zu), rc %d\n", name, cat, doc, v.len, n, rc);
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
    printf("test_tk_meta: %d tokenizers, %d checks, %d failures\n", loaded, checked, fails);
    if (!fails && !loaded) return 77;
    return fails ? 1 : 0;
}
