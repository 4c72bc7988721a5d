/* fuzz_tiktoken.c - libFuzzer target for the .tiktoken rank-file loader and
 * its "<file>.meta.json" sidecar (layout: fuzz_tk_common.h; first file = rank
 * file, second = sidecar). Replayed over tests/data/fuzz/tiktoken in every
 * build (test_replay_tiktoken). */
#include "fuzz_tk_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_tk_input in;
    if (fuzz_tk_split(data, size, &in)) return 0;
    char rank[200], meta[220];
    snprintf(rank, sizeof rank, "%s/v.tiktoken", fuzz_tk_folder());
    snprintf(meta, sizeof meta, "%s.meta.json", rank);
    fuzz_tk_write(rank, in.a, in.alen);
    unlink(meta);
    if (in.second) fuzz_tk_write(meta, in.b, in.blen);
    tk_tokenizer *t = NULL;
    char err[512] = "";
    int rc = tk_load_tiktoken(rank, in.pat, &t, err, sizeof err);
    if (rc == TK_OK) {
        fuzz_tk_exercise(t);
        tk_free(t);
    } else if (!err[0] || !strstr(err, fuzz_tk_folder())) {
        abort(); /* every refusal names the file */
    }
    return 0;
}
