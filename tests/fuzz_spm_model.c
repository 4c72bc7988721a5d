/* fuzz_spm_model.c - libFuzzer target for the SentencePiece .model reader
 * (spm.c). Layout: fuzz_tk_common.h; the first file is the .model, the
 * second is a text that a loaded model encodes, decodes and counts (plus the
 * common exercise). Every refusal must name the file. Seeds:
 * tests/data/fuzz/make_spm_seeds.py; replayed in every build
 * (test_replay_spm_model). */
#include "fuzz_tk_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_tk_input in;
    if (fuzz_tk_split(data, size, &in)) return 0;
    char path[200];
    snprintf(path, sizeof path, "%s/tokenizer.model", fuzz_tk_folder());
    fuzz_tk_write(path, in.a, in.alen);
    tk_tokenizer *t = NULL;
    char err[512] = "";
    int rc = tk_load_spm(path, &t, err, sizeof err);
    if (rc == TK_OK) {
        fuzz_tk_exercise(t);
        tk_ids ids = {0};
        tk_bytes out = {0};
        size_t count = 0;
        /* a normalizer rule may expand a text past its bound: that document is refused */
        int erc = tk_encode(t, in.b, in.blen, &ids);
        if (erc != TK_OK && (!tk_err_is_document(erc) || ids.len)) abort();
        if (tk_count(t, in.b, in.blen, &count) != erc || count != ids.len) abort();
        erc = tk_decode(t, ids.ids, ids.len, &out);
        if (erc != TK_OK && !tk_err_is_document(erc)) abort();
        for (size_t k = 0; k < ids.len; k++)
            if (ids.ids[k] >= tk_vocab_size(t)) abort();
        /* any id sequence decodes: the text's bytes taken as ids */
        tk_bytes_free(&out);
        uint32_t raw[64];
        size_t nr = 0;
        for (size_t k = 0; k + 1 < in.blen && nr < 64; k += 2)
            raw[nr++] = ((uint32_t)in.b[k] | (uint32_t)in.b[k + 1] << 8) % tk_vocab_size(t);
        erc = tk_decode(t, raw, nr, &out);
        if (erc != TK_OK && !tk_err_is_document(erc)) abort(); /* the denormalizer's bound */
        tk_ids_free(&ids);
        tk_bytes_free(&out);
        tk_free(t);
    } else if (!err[0] || !strstr(err, fuzz_tk_folder())) {
        abort(); /* every refusal names the file */
    }
    return 0;
}
