/* export.h - a trained model as a Hugging Face model folder (internal header
 * of the train module; `llmtrain export`, docs/trainer.md "Export").
 *
 * The folder: model.safetensors (fp32 or bf16), config.json
 * (GPT2LMHeadModel), generation_config.json and, given the run's
 * tokenizer, tokenizer.json + tokenizer_config.json, so that
 * transformers' AutoModelForCausalLM / AutoTokenizer.from_pretrained load it
 * offline with nothing else. The GPT-2 family maps onto GPT2LMHeadModel:
 *   - the vocabulary is exported unpadded: wte's rows >= V (zero, never part
 *     of the softmax) are cut, so config.json's vocab_size is the
 *     tokenizer's and the logits HF computes are ours over [0, V);
 *   - the output projection is tied to wte (tie_word_embeddings, no
 *     lm_head.weight tensor, as save_pretrained writes it);
 *   - HF's GPT-2 linears are Conv1D, weight (in, out): our (out, in) weights
 *     (qkvw, attprojw, fcw, fcprojw) are written transposed;
 *   - GELU tanh = "gelu_new", LayerNorm eps 1e-5, no dropout.
 * Functions return TR_OK or a negative TR_ERR_* with a message in err. */
#ifndef TR_EXPORT_H
#define TR_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "tk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Write the folder out_dir (created if needed) from a model's parameters
 * (model.h layout). tok NULL: no tokenizer files. tok_spec: the spec tok
 * was loaded from (an HF tokenizer.json is copied as it is; the other kinds
 * are written by tk_save_hf_json). bos/eos: the shards' framing (-1 none);
 * a BOS is added to a written tokenizer.json as its post_processor so that
 * the HF tokenizer frames a text as the shards did. */
int tr_export_hf(const char *out_dir, const tr_model_config *c, const float *params, int bf16, const tk_tokenizer *tok,
                 const char *tok_spec, int64_t bos, int64_t eos, char *err, size_t errlen);

/* `llmtrain export`: the checkpoint DIR/ckpt.bin's parameters; the
 * tokenizer is --tokenizer, else the one the shard set (--data) names; it
 * must have the checkpoint's fingerprint (TR_ERR_FINGERPRINT naming both).
 * The framing is the shard set's (else the tokenizer's default). */
typedef struct {
    const char *ckpt_dir, *out_dir, *data_dir, *tokenizer;
    int bf16;
    FILE *out; /* a summary line (NULL: none) */
} tr_export_opts;
int tr_export_run(const tr_export_opts *o, char *err, size_t errlen);

/* The command line of `llmtrain export` (train/tr_cli_export.c): argv[0] is
 * "export". Returns the exit status (0, 2 bad input, 64 usage, 1 failure). */
int tr_cli_export(const char *prog, int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* TR_EXPORT_H */
