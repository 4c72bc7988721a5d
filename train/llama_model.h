/* llama_model.h - the Llama-family model on the CPU reference kernels
 * (internal header of the train module; issue 30 step 4, first piece).
 *
 * Architecture (transformers' LlamaForCausalLM / Qwen2ForCausalLM in fp32):
 * token embedding; per layer x += o_proj(attn(rope(q), rope(k), v)) over
 * RMSNorm(x), then x += down(silu(gate(h)) * up(h)) over RMSNorm(x);
 * final RMSNorm; logits = x @ W^T with W the embedding (tied) or lm_head.
 * Grouped-query attention (n_kv_head divides n_head; query head h uses KV
 * head h / (n_head / n_kv_head)), head_dim = d_model / n_head, scale
 * 1/sqrt(head_dim), rotary embeddings (kernels/kn_llama.h: theta, Llama 3
 * rope_scaling), no biases except Qwen2's q/k/v biases (qkv_bias).
 *
 * Parameters are addressed by their transformers names
 * ("model.layers.0.self_attn.q_proj.weight", ...), each (out, in) like
 * nn.Linear. Not yet wired into the trainer (no --model preset, plan rows,
 * checkpoints, data parallel or CUDA): tests/test_llama_model.c checks
 * logits, loss and every gradient against transformers. */
#ifndef TR_LLAMA_MODEL_H
#define TR_LLAMA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kn_llama.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int n_layer, n_head, n_kv_head, d_model, d_ff, vocab, max_seq;
    float rope_theta, norm_eps;
    kn_rope_scaling rope_scaling; /* factor 0: none */
    int tied;                     /* 1: logits use the embedding */
    int qkv_bias;                 /* 1: q/k/v projections have biases (Qwen2) */
} tr_llama_config;

typedef struct tr_llama tr_llama;

/* 0, or -1 for a bad config / no memory. Parameters and gradients zeroed. */
int tr_llama_create(const tr_llama_config *c, tr_llama **out);
void tr_llama_free(tr_llama *m);
/* The parameter (or its gradient) with transformers' name; NULL if none.
 * *n: its element count. */
float *tr_llama_param(tr_llama *m, const char *name, size_t *n);
float *tr_llama_grad(tr_llama *m, const char *name, size_t *n);
/* Number of parameter tensors and the name of tensor i. */
int tr_llama_n_tensors(const tr_llama *m);
const char *tr_llama_tensor_name(const tr_llama *m, int i);

/* Forward + backward of one batch: inputs (B,T) < vocab, targets (B,T)
 * (< 0: no loss), pos (B,T) position ids or NULL (0..T-1), doc (B,T)
 * document ids or NULL (--doc-mask: attention never crosses a document;
 * with positions restarting per document this is each document run as its
 * own sequence). *loss = the mean
 * over the targets; gradients of that mean are ACCUMULATED into the
 * gradient buffer; logits (B,T,vocab) copied out when not NULL. */
int tr_llama_fwd_bwd(tr_llama *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                     const int32_t *doc, float *logits, double *loss);

#ifdef __cplusplus
}
#endif
#endif /* TR_LLAMA_MODEL_H */
