/* framing.c - how documents are framed for training (BOS / EOS), from a
 * tokenizer.json's post_processor (parsed by post_process.c) and the model
 * families' token names (docs/tokenizer.md, "Framing"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk_engine.h"

/* The model families' end-of-text and begin-of-text tokens, in the order
 * they are tried (a vocabulary rarely holds two of them). */
static const char *const k_eos[] = {"<|end_of_text|>",
                                    "<|endoftext|>",
                                    "</s>",
                                    "<eos>",
                                    "<\xef\xbd\x9c"
                                    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                    "<|end\xe2\x96\x81of\xe2\x96\x81sentence|>",
                                    NULL};
static const char *const k_bos[] = {"<|begin_of_text|>",
                                    "<s>",
                                    "<bos>",
                                    "<\xef\xbd\x9c"
                                    "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
                                    "<|begin\xe2\x96\x81of\xe2\x96\x81sentence|>",
                                    NULL};

static int by_name(const tk_tokenizer *t, const char *const *names, uint32_t *id, const char **which) {
    for (size_t k = 0; names[k]; k++)
        if (tk_special_id(t, names[k], id) == TK_OK) {
            *which = names[k];
            return 1;
        }
    return 0;
}

int tk_default_framing(const tk_tokenizer *t, tk_framing *f, char *err, size_t errlen) {
    if (!t || !f) return TK_ERR_ARG;
    f->bos = f->eos = -1;
    f->source[0] = 0;
    uint8_t pp = t->pp;
    if (pp == TK_PP_NONE) pp = tk_engine_of(t)->default_pp; /* a SentencePiece .model: <s> ... </s> by name */
    if (pp == TK_PP_NONE) {                                 /* rank files, encoder.json: tiktoken's convention */
        if (t->eot == TK_NO_RANK) {
            tk_set_err(err, errlen, "tokenizer %s has no <|endoftext|> token (needed to separate documents)", t->name);
            return TK_ERR_NOT_FOUND;
        }
        f->eos = t->eot;
        snprintf(f->source, sizeof f->source, "no BOS, EOS <|endoftext|> (tiktoken's convention)");
        return TK_OK;
    }
    if (pp == TK_PP_UNUSABLE) {
        tk_set_err(err, errlen,
                   "tokenizer %s: post_processor: %s; give the framing with --bos TOKEN|none and "
                   "--eos TOKEN|none",
                   t->name, t->pp_why);
        return TK_ERR_UNSUPPORTED;
    }
    uint32_t id;
    const char *which = NULL;
    const char *bsrc = "none (the post_processor adds none)";
    if (pp == TK_PP_TEMPLATE && t->pp_bos != TK_NO_RANK) {
        f->bos = t->pp_bos;
        bsrc = "from the tokenizer file (post_processor, or a .model's bos_id)";
    } else if (pp == TK_PP_ABSENT) {
        bsrc = "none (no post_processor, no known BOS token)";
        if (by_name(t, k_bos, &id, &which)) {
            f->bos = id;
            bsrc = "by name (no post_processor)";
        }
    }
    const char *esrc;
    if (pp == TK_PP_TEMPLATE && t->pp_eos != TK_NO_RANK) {
        f->eos = t->pp_eos;
        esrc = "from the tokenizer file";
    } else if (by_name(t, k_eos, &id, &which)) {
        f->eos = id;
        esrc = "by name";
    } else {
        tk_set_err(err, errlen,
                   "tokenizer %s has no end-of-text token (none in its post_processor, none of "
                   "<|end_of_text|>, <|endoftext|>, </s>, <eos>); give one with --eos TOKEN (or --eos none)",
                   t->name);
        return TK_ERR_NOT_FOUND;
    }
    snprintf(f->source, sizeof f->source, "BOS %s, EOS %s", bsrc, esrc);
    return TK_OK;
}
