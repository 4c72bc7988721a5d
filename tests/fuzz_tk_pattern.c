/* fuzz_tk_pattern.c - libFuzzer target for a rank file's own pre-tokenizer
 * regex and normalization (--pattern REGEX, --normalize, Python's
 * Encoding(pat_str=...); tokenizer/rank_pretok.c over hf_regex.c's
 * translation in tiktoken's dialect): a pattern from a model's reference code
 * is not ours to trust.
 *
 * Layout: byte 0 = flags (bits 0-1: normalization 0 none, 1 nfc, 2 nfkc, 3
 * none), bytes 1-2 = the regex's length (little-endian, clipped), the regex,
 * then the text. The vocabulary is the 256 single bytes plus "ab" and one
 * special, so ids are the bytes matched.
 *
 * The regex is taken or refused with a message (never a crash, a hang or a
 * leak); a taken one encodes the text or refuses that document (TK_ERR_DOC_*,
 * the regex work budget, the normalizer's bound) and then leaves no ids; every
 * id is in the vocabulary; without normalization the ids decode to at most
 * the text's bytes (text no match covers is dropped, never invented) and the
 * special path agrees with the plain one on a text without the special.
 * Seeds: tests/data/fuzz/make_tk_pattern_seeds.py; replayed in every build
 * (test_replay_tk_pattern). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tk_tokenizer *vocab(void) {
    static uint8_t bytes[256];
    const uint8_t *tp[257];
    uint32_t ln[257];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        tp[i] = &bytes[i];
        ln[i] = 1;
    }
    tp[256] = (const uint8_t *)"ab";
    ln[256] = 2;
    tk_special sp = {"<|endoftext|>", 257};
    tk_tokenizer *t = NULL;
    if (tk_create(tp, ln, 257, TK_PAT_O200K, &sp, 1, &t) != TK_OK) abort();
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    tk_norm norm = (data[0] & 3) == 3 ? TK_NORM_NONE : (tk_norm)(data[0] & 3);
    size_t rl = (size_t)data[1] | (size_t)data[2] << 8;
    if (rl > size - 3) rl = size - 3;
    char *re = malloc(rl + 1);
    if (!re) abort();
    memcpy(re, data + 3, rl);
    re[rl] = 0;
    const uint8_t *text = data + 3 + rl;
    size_t tn = size - 3 - rl;
    tk_tokenizer *t = vocab();
    char err[512] = "";
    /* a regex with a NUL byte is shorter as a C string: what tk_set_pretokenizer sees */
    int rc = tk_set_pretokenizer(t, re, norm, err, sizeof err);
    if (rc != TK_OK) {
        if (!err[0] && rc != TK_ERR_NOMEM) abort(); /* a refusal names why */
        free(re);
        tk_free(t);
        return 0;
    }
    tk_ids v = {0};
    rc = tk_encode(t, text, tn, &v);
    if (rc != TK_OK && (!tk_err_is_document(rc) || v.len)) abort();
    for (size_t i = 0; i < v.len; i++)
        if (v.ids[i] >= tk_vocab_size(t)) abort();
    if (rc == TK_OK && norm == TK_NORM_NONE) {
        tk_bytes b = {0};
        if (tk_decode(t, v.ids, v.len, &b) != TK_OK || b.len > tn) abort();
        tk_bytes_free(&b);
    }
    /* (with a normalization the specials are looked for in the normalized
     * text: NFKC makes U+FF1C |endoftext| U+FF1E the special's text) */
    if (rc == TK_OK && norm == TK_NORM_NONE && !memmem(text, tn, "<|endoftext|>", 13)) {
        tk_ids s = {0};
        int rs = tk_encode_special(t, text, tn, NULL, (size_t)-1, &s);
        if (rs != TK_OK || s.len != v.len || (v.len && memcmp(s.ids, v.ids, v.len * sizeof *v.ids))) abort();
        tk_ids_free(&s);
    }
    tk_ids_free(&v);
    tk_free(t);
    free(re);
    return 0;
}
