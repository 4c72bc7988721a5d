/* load_spm.c - the loader of SentencePiece `.model` files and the table of
 * the `spm` engine (tk_engine.h).
 *
 * spm.c reads the ModelProto (tk_spm_read) and runs BPE models; unigram.c
 * runs UNIGRAM ones on the same parsed model. This file sits above both and
 * hands each model to its engine, so neither engine names the other's file:
 * unigram.c uses spm.c's normalizer and decode, spm.c knows nothing of
 * Unigram (no call circle in tokenizer/, tests/tk_layering.py). */
#include "spm_internal.h"
#include "tk_engine.h"

#include <string.h>

int tk_load_spm(const char *path, tk_tokenizer **out, char *err, size_t errlen) {
    if (!path || !out) return TK_ERR_ARG;
    *out = NULL;
    tk_tokenizer *t = NULL;
    tk_spm *m = NULL;
    int rc = tk_spm_read(path, &t, &m, err, errlen);
    if (rc) return rc;
    if (m->model_type == MT_UNIGRAM) {
        if ((rc = tk_unigram_build(m, err, errlen, path))) {
            tk_spm_free(m);
            tk_free(t);
            return rc;
        }
        tk_engine_attach(t, &tk_engine_unigram, m);
    } else {
        tk_engine_attach(t, &tk_engine_spm, m);
    }
    *out = t;
    return TK_OK;
}

/* A .model name, or a ModelProto by its first bytes. */
static bool spm_sniff_file(const char *path, const uint8_t *head, size_t n) {
    size_t a = strlen(path);
    return (a >= 6 && strcmp(path + a - 6, ".model") == 0) || (n > 0 && tk_spm_sniff(head, n));
}

static int spm_load_op(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    if (pat != TK_PAT_NONE) {
        tk_set_err(err, errlen, "%s: --pattern does not apply to a SentencePiece model: leave it out", path);
        return TK_ERR_PATTERN;
    }
    return tk_load_spm(path, out, err, errlen);
}

static void spm_free_state(void *state) { tk_spm_free(state); }

const tk_engine tk_engine_spm = {
    .name = "spm",
    .sniff = spm_sniff_file, /* UNIGRAM models too: tk_load_spm hands them to tk_engine_unigram */
    .load = spm_load_op,
    .encode = tk_spm_encode,
    .encode_special = NULL, /* encode.c splits at the specials */
    .decode = tk_spm_decode_op,
    .describe = tk_spm_describe,
    .lossless = tk_spm_lossless_op,
    .savable = tk_spm_savable_op,
    .image = false,
    .default_pp = TK_PP_ABSENT, /* <s> ... </s> by name */
    .free = spm_free_state,
};
