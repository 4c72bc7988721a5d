/* Exact token-id parity with tiktoken on every document of ../shared/corpus/oracle
 * (ids produced by tiktoken itself) for gpt2, cl100k_base and o200k_base.
 * Fails on the first mismatch, printing the document and the first differing
 * position. Also checks decode(encode(doc)) == doc. */
#include "tk.h"
#include "test_corpus.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Load the first `want` documents of each category file. */
typedef struct {
    char cat[32];
    int doc;
    char *text;
    size_t len;
} doc;

static doc *docs;
static size_t n_docs;

static void add_doc(void *cat, int i, const char *text, size_t len) {
    docs = realloc(docs, (n_docs + 1) * sizeof *docs);
    snprintf(docs[n_docs].cat, 32, "%s", (const char *)cat);
    docs[n_docs].doc = i;
    docs[n_docs].len = len;
    docs[n_docs].text = malloc(len + 1);
    memcpy(docs[n_docs].text, text, len);
    n_docs++;
}

static void load_corpus(const char *dir) {
    const char *cats[] = {"en-books", "multi", "code", "web"};
    for (int c = 0; c < 4; c++)
        if (test_corpus_docs(dir, cats[c], 300, add_doc, (void *)cats[c]) < 0) {
            fprintf(stderr, "cannot read %s/corpus/%s.jsonl.zst\n", dir, cats[c]);
            exit(1);
        }
}

static doc *find_doc(const char *cat, int d) {
    for (size_t i = 0; i < n_docs; i++)
        if (docs[i].doc == d && strcmp(docs[i].cat, cat) == 0) return &docs[i];
    return NULL;
}

int main(int argc, char **argv) {
    const char *shared = argc > 1 ? argv[1] : MKS_SHARED_DIR;
    char p[4096];
    snprintf(p, sizeof p, "%s/corpus/oracle/gpt2.oracle.jsonl.zst", shared);
    FILE *probe = fopen(p, "rb");
    if (!probe) {
        fprintf(stderr, "skip: %s not found\n", p);
        return 77;
    }
    fclose(probe);
    load_corpus(shared);
    const char *encs[] = {"gpt2", "cl100k_base", "o200k_base"};
    int failures = 0;
    for (int e = 0; e < 3; e++) {
        char vp[4096], err[512];
        snprintf(vp, sizeof vp, "%s/vocab/%s.tiktoken", shared, encs[e]);
        tk_tokenizer *tok;
        int rc = tk_load(vp, TK_PAT_NONE, &tok, err, sizeof err);
        if (rc) {
            fprintf(stderr, "load %s: %s\n", vp, err);
            return 1;
        }
        snprintf(p, sizeof p, "%s/corpus/oracle/%s.oracle.jsonl.zst", shared, encs[e]);
        size_t len;
        char *all = test_read_zst(p, &len);
        char *line = all;
        size_t checked = 0, tokens = 0;
        tk_ids ids = {0};
        tk_bytes back = {0};
        while (line && *line) {
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            json_error_t je;
            json_t *o = json_loads(line, 0, &je);
            const char *cat = json_string_value(json_object_get(o, "cat"));
            int d = (int)json_integer_value(json_object_get(o, "doc"));
            json_t *want = json_object_get(o, "ids");
            doc *dc = find_doc(cat, d);
            if (!dc) {
                fprintf(stderr, "%s: oracle doc %s/%d not in corpus\n", encs[e], cat, d);
                return 1;
            }
            ids.len = 0;
            if ((rc = tk_encode(tok, (const uint8_t *)dc->text, dc->len, &ids))) {
                fprintf(stderr, "encode failed: %s\n", tk_strerror(rc));
                return 1;
            }
            size_t nw = json_array_size(want), k = 0;
            for (; k < nw && k < ids.len; k++)
                if ((uint32_t)json_integer_value(json_array_get(want, k)) != ids.ids[k]) break;
            if (k < nw || k < ids.len) {
                /* locate the text near the mismatch */
                size_t off = 0;
                for (size_t q = 0; q < k; q++) {
                    const uint8_t *b;
                    size_t bl;
                    tk_token_bytes(tok, ids.ids[q], &b, &bl);
                    off += bl;
                }
                fprintf(stderr,
                        "MISMATCH %s %s/%d at token %zu (byte %zu): ours %u, tiktoken %lld (lens %zu vs %zu)\n"
                        "  text: \"%.60s\"\n",
                        encs[e], cat, d, k, off, k < ids.len ? ids.ids[k] : 0,
                        k < nw ? (long long)json_integer_value(json_array_get(want, k)) : -1LL, ids.len, nw,
                        dc->text + (off > 10 ? off - 10 : 0));
                failures++;
                return 1;
            }
            back.len = 0;
            if (tk_decode(tok, ids.ids, ids.len, &back) || back.len != dc->len ||
                memcmp(back.data, dc->text, dc->len) != 0) {
                fprintf(stderr, "ROUND TRIP FAILED %s %s/%d\n", encs[e], cat, d);
                return 1;
            }
            checked++;
            tokens += ids.len;
            json_decref(o);
            if (!nl) break;
            line = nl + 1;
        }
        printf("%-12s %zu documents, %zu tokens: identical to tiktoken\n", encs[e], checked, tokens);
        if (checked < 900) {
            fprintf(stderr, "expected at least 900 oracle documents, saw %zu\n", checked);
            return 1;
        }
        tk_ids_free(&ids);
        tk_bytes_free(&back);
        free(all);
        tk_free(tok);
    }
    return failures ? 1 : 0;
}
