/* fuzz_tokenizer_json.c - libFuzzer target for the HF tokenizer.json loader
 * (layout: fuzz_tk_common.h; the first file is the tokenizer.json, the second
 * is ignored). Replayed over tests/data/fuzz/tokenizer_json in every build
 * (test_replay_tokenizer_json). */
#include "fuzz_tk_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_tk_input in;
    if (fuzz_tk_split(data, size, &in)) return 0;
    char path[200];
    snprintf(path, sizeof path, "%s/tokenizer.json", fuzz_tk_folder());
    fuzz_tk_write(path, in.a, in.alen + in.blen); /* the whole rest */
    tk_tokenizer *t = NULL;
    char err[512] = "";
    int rc = tk_load_hf_json(path, in.pat, &t, err, sizeof err);
    if (rc == TK_OK) {
        fuzz_tk_exercise(t);
        tk_free(t);
    } else if (!err[0] || !strstr(err, fuzz_tk_folder())) {
        abort(); /* every refusal names the file */
    }
    return 0;
}
