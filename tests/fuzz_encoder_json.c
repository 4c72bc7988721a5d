/* fuzz_encoder_json.c - libFuzzer target for the GPT-2 loader (layout:
 * fuzz_tk_common.h; first file = encoder.json, second = vocab.bpe). Replayed
 * over tests/data/fuzz/encoder_json in every build (test_replay_encoder_json). */
#include "fuzz_tk_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_tk_input in;
    if (fuzz_tk_split(data, size, &in)) return 0;
    char enc[200], bpe[200];
    snprintf(enc, sizeof enc, "%s/encoder.json", fuzz_tk_folder());
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", fuzz_tk_folder());
    fuzz_tk_write(enc, in.a, in.alen);
    fuzz_tk_write(bpe, in.b, in.blen);
    tk_tokenizer *t = NULL;
    char err[512] = "";
    int rc = tk_load_gpt2(enc, bpe, in.pat, &t, err, sizeof err);
    if (rc == TK_OK) {
        fuzz_tk_exercise(t);
        tk_free(t);
    } else if (!err[0] || !strstr(err, fuzz_tk_folder())) {
        abort(); /* every refusal names the file */
    }
    return 0;
}
