/* tk_load_time.c - in-process load time of tokenizers (docs/tokenizer.md,
 * "Loading speed"): best-of-N wall and CPU time of tk_load, then tk_free.
 *
 *   cc -O2 -I tokenizer tools/bench/tk_load_time.c build/tokenizer/libtk.a \
 *      $(pkg-config --libs libutf8proc libpcre2-8 jansson nettle libxxhash) -lpthread -o /tmp/tk_load_time
 *   /tmp/tk_load_time 10 ../shared/vocab/hf/llama3/tokenizer.json ../shared/vocab/hf/qwen2/tokenizer.json
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tk.h"

static double now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s RUNS TOKENIZER...\n", argv[0]);
        return 64;
    }
    int runs = atoi(argv[1]);
    for (int a = 2; a < argc; a++) {
        double best_w = 1e9, best_c = 1e9, sum_w = 0;
        for (int r = 0; r < runs; r++) {
            tk_tokenizer *t = NULL;
            char err[512] = "";
            double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
            int rc = tk_load(argv[a], TK_PAT_NONE, &t, err, sizeof err);
            double w = now(CLOCK_MONOTONIC) - w0, c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
            if (rc != TK_OK) {
                fprintf(stderr, "%s: %s\n", argv[a], err);
                return 2;
            }
            tk_free(t);
            if (w < best_w) best_w = w;
            if (c < best_c) best_c = c;
            sum_w += w;
        }
        printf("%s: tk_load best %.1f ms wall, %.1f ms CPU; mean %.1f ms wall (%d runs)\n", argv[a], best_w * 1e3,
               best_c * 1e3, sum_w / runs * 1e3, runs);
    }
    return 0;
}
