/* hf_import.h - `llmtrain --init-from MODEL_DIR`: a run starting from a
 * Hugging Face model folder (internal header of the train module;
 * docs/trainer.md "Import").
 *
 * Supported: the GPT-2 family (config.json model_type "gpt2",
 * GPT2LMHeadModel) with what our model computes: GELU tanh ("gelu_new" or
 * "gelu_pytorch_tanh"), LayerNorm eps 1e-5, n_inner 4 x n_embd, scaled
 * attention without the per-layer scaling, tied embeddings. Weights from
 * model.safetensors or a sharded folder (model.safetensors.index.json), F32,
 * BF16 or F16, with or without the "transformer." prefix; an lm_head.weight
 * must equal wte (tied). The position embedding's first T rows are taken
 * (the run's model has max_seq = --seq-len, as every llmtrain model).
 * config.json is untrusted (regular file, at most 1 MiB, duplicate keys
 * refused, every number range-checked); the safetensors files are read by
 * train/safetensors.c. Functions return TR_OK or TR_ERR_* with a message. */
#ifndef TR_HF_IMPORT_H
#define TR_HF_IMPORT_H

#include "model.h"
#include "tr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The model's shape from dir/config.json, checked against the run: the
 * vocabulary must be the shard set's and n_positions >= T; the folder's
 * tokenizer (tokenizer.json) must have the shards' fingerprint, or be the
 * unchanged tokenizer.json of an `llmtrain export` of a tokenizer with
 * that fingerprint (tokenizer_config.json's "llmtrain" record: the source's
 * fingerprint and that of the tokenizer.json written) - else
 * TR_ERR_FINGERPRINT naming both. */
int tr_hf_import_shape(const char *dir, const tr_rows *rows, int T, int *n_layer, int *n_head, int *n_embd, char *err,
                       size_t errlen);
/* The folder's tokenizer against the shards' (any model family): the check
 * tr_hf_import_shape makes, TR_OK or TR_ERR_FINGERPRINT naming both. */
int tr_hf_import_check_tokenizer(const char *dir, const tr_rows *rows, char *err, size_t errlen);
/* The folder's weights into m (whose config tr_hf_import_shape gave): every
 * tensor present with its shape, nothing unknown (the attention-mask buffers
 * attn.bias / attn.masked_bias of old checkpoints are skipped); padded
 * vocabulary rows zero. */
int tr_hf_import_weights(const char *dir, tr_model *m, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* TR_HF_IMPORT_H */
