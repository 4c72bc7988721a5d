/* tk_encode_time.c - in-process encode speed of a tokenizer: tk_encode on
 * every "text" of a JSONL file, one thread, best of RUNS, CPU time (load
 * and reading excluded), as tools/bench/bench_spm.py's in-process
 * sentencepiece figure is taken.
 *
 *   cc -O2 -I tokenizer tools/bench/tk_encode_time.c build/tokenizer/libtk.a \
 *      build/dataset/common/libmks_common.a \
 *      $(pkg-config --libs libutf8proc libpcre2-8 jansson nettle libxxhash) -lpthread -lm -o /tmp/tk_encode_time
 *   /tmp/tk_encode_time 3 tests/data/tk_unigram/uni_nmt.model docs.jsonl
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tk.h"

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s RUNS TOKENIZER DOCS.jsonl\n", argv[0]);
        return 64;
    }
    int runs = atoi(argv[1]);
    FILE *f = fopen(argv[3], "r");
    if (!f) {
        perror(argv[3]);
        return 2;
    }
    size_t nd = 0, cap = 0, bytes = 0;
    char **doc = NULL;
    size_t *len = NULL;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        const char *t = json_string_value(json_object_get(j, "text"));
        if (t) {
            if (nd == cap) {
                cap = cap ? cap * 2 : 256;
                doc = realloc(doc, cap * sizeof *doc);
                len = realloc(len, cap * sizeof *len);
            }
            len[nd] = json_string_length(json_object_get(j, "text"));
            doc[nd] = malloc(len[nd] + 1);
            memcpy(doc[nd], t, len[nd]);
            bytes += len[nd++];
        }
        json_decref(j);
    }
    free(line);
    fclose(f);
    tk_tokenizer *t = NULL;
    char err[512] = "";
    double c0 = cpu();
    if (tk_load(argv[2], TK_PAT_NONE, &t, err, sizeof err) != TK_OK) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    double load = cpu() - c0, best = 1e9;
    size_t ntok = 0;
    tk_ids v = {0};
    for (int r = 0; r < runs; r++) {
        ntok = 0;
        c0 = cpu();
        for (size_t i = 0; i < nd; i++) {
            v.len = 0;
            if (tk_encode(t, (const uint8_t *)doc[i], len[i], &v) != TK_OK) return 2;
            ntok += v.len;
        }
        double c = cpu() - c0;
        if (c < best) best = c;
    }
    printf("%s: %zu documents, %.2f MB, %zu tokens: load %.1f ms CPU, encode %.3f s CPU = %.2f MB/s\n", argv[2], nd,
           (double)bytes / 1e6, ntok, load * 1e3, best, (double)bytes / 1e6 / best);
    tk_ids_free(&v);
    tk_free(t);
    for (size_t i = 0; i < nd; i++) free(doc[i]);
    free(doc);
    free(len);
    return 0;
}
