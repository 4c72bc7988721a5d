/* fuzz_tekken.c - libFuzzer target for Mistral's tekken.json reader
 * (tokenizer/load_tekken.c: its streaming JSON scanner, the vocab cut,
 * specials, base64, the pattern). Layout: fuzz_tk_common.h's, first file =
 * the tekken.json (found by its name through tk_load), the second unused;
 * the flags' pattern is passed as --pattern would be (refused: a Tekken file
 * carries its own). A file that loads is exercised (encode / decode round
 * trip, specials, every id's bytes); a refusal must name the file. Replayed
 * over tests/data/fuzz/tekken in every build (test_replay_tekken); seeds by
 * tests/data/fuzz/make_tekken_seeds.py. */
#include "fuzz_tk_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_tk_input in;
    if (fuzz_tk_split(data, size, &in)) return 0;
    char path[200];
    snprintf(path, sizeof path, "%s/tekken.json", fuzz_tk_folder());
    fuzz_tk_write(path, in.a, in.alen);
    tk_tokenizer *t = NULL;
    char err[512] = "";
    int rc = tk_load(path, in.pat, &t, err, sizeof err);
    if (rc == TK_OK) {
        if (in.pat != TK_PAT_NONE) abort(); /* --pattern never applies to a Tekken file */
        fuzz_tk_exercise(t);
        tk_framing f;
        if (tk_default_framing(t, &f, err, sizeof err) == TK_OK &&
            (f.eos >= (int64_t)tk_vocab_size(t) || f.bos >= (int64_t)tk_vocab_size(t)))
            abort();
        tk_free(t);
    } else if (!err[0] || !strstr(err, fuzz_tk_folder())) {
        abort(); /* every refusal names the file */
    }
    return 0;
}
