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
 * nn.Linear. Configurations (presets, config.json: llama_config.c) and
 * Hugging Face folders in and out (llama_hf.c) are here too. Not yet wired
 * into the trainer (no --model, plan rows, checkpoints, data parallel or
 * CUDA): tests/test_llama_model.c checks logits, loss and every gradient
 * against transformers, tests/test_llama_import.c import and export. */
#ifndef TR_LLAMA_MODEL_H
#define TR_LLAMA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kn_llama.h"
#include "tr.h"

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

/* ---- configurations (llama_config.c) --------------------------------------- */
typedef enum { TR_LLAMA_LLAMA = 0, TR_LLAMA_QWEN2 = 1, TR_LLAMA_MISTRAL = 2 } tr_llama_arch;

/* TR_OK, or TR_ERR_ARG for a config llama_model.c cannot run (sizes out of
 * range, heads not dividing, bad rope_scaling). */
int tr_llama_config_check(const tr_llama_config *c);
/* Number of parameters (tied: one embedding matrix); 0 for a bad config. */
size_t tr_llama_param_count(const tr_llama_config *c);
/* The shapes of published models by name (smollm-135m, smollm-360m,
 * llama-1b = Llama-3.2-1B, qwen2.5-0.5b) with the run's vocab and context;
 * TR_ERR_ARG for an unknown name. tr_llama_preset_name(i): NULL past the end. */
int tr_llama_config_preset(const char *name, int vocab, int max_seq, tr_llama_config *out);
const char *tr_llama_preset_name(int i);
/* "LlamaForCausalLM"... and "llama"/"qwen2"/"mistral"; NULL if out of range. */
const char *tr_llama_arch_name(tr_llama_arch a);
const char *tr_llama_model_type(tr_llama_arch a);
/* A Hugging Face config.json (len bytes, untrusted) of model_type llama,
 * qwen2 or mistral. TR_OK; TR_ERR_CORRUPT for malformed JSON or a field out
 * of range; TR_ERR_DATA for a valid config of a model we do not compute
 * (another model_type, o_proj/MLP biases, hidden_act not silu, rope_scaling
 * not llama3, ...). err names the field. *sliding_window: the attention
 * window (0: none) - full attention equals it only on rows that fit it. */
int tr_llama_config_from_json(const char *text, size_t len, tr_llama_config *out, tr_llama_arch *arch,
                              int *sliding_window, char *err, size_t errlen);

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

/* ---- a Hugging Face folder (llama_hf.c) ----------------------------------- */
/* The model of DIR (config.json + model.safetensors or a sharded set) for
 * rows of up to max_seq tokens, its weights read as fp32 (F32/BF16/F16
 * files); its max_seq is config.json's max_position_embeddings.
 * TR_ERR_CORRUPT: a tensor missing, of another shape, left over, or a tied
 * config with a different lm_head; TR_ERR_DATA: a model we do not compute;
 * TR_ERR_ARG: max_seq over max_position_embeddings; TR_ERR_IO: unreadable. */
int tr_llama_import_hf(const char *dir, int max_seq, tr_llama **out, tr_llama_arch *arch, char *err, size_t errlen);

/* Write DIR/config.json (arch's architecture and model_type, transformers
 * 4.x rope spelling, which 5.x reads too) and DIR/model.safetensors (fp32,
 * or bf16 rounded to nearest even) that transformers' from_pretrained loads
 * as this model. DIR is created if absent; files replaced atomically.
 * TR_ERR_ARG: q/k/v biases with an arch other than Qwen2 or the reverse. */
int tr_llama_export_hf(const char *out_dir, tr_llama *m, tr_llama_arch arch, int bf16, char *err, size_t errlen);
/* The same from a configuration and its parameters (tr_llama's order),
 * streamed: no model instance, no copy of the weights (bf16 converted while
 * writing, a bounded chunk at a time). */
int tr_llama_export_hf_params(const char *out_dir, const tr_llama_config *c, const float *params, tr_llama_arch arch,
                              int bf16, char *err, size_t errlen);
/* The model's configuration. */
const tr_llama_config *tr_llama_get_config(const tr_llama *m);

/* Forward + backward of one batch: inputs (B,T) < vocab, targets (B,T)
 * (< 0: no loss), pos (B,T) position ids or NULL (0..T-1), doc (B,T)
 * document ids or NULL (--doc-mask: attention never crosses a document;
 * with positions restarting per document this is each document run as its
 * own sequence). *loss = the mean
 * over the targets; gradients of that mean are ACCUMULATED into the
 * gradient buffer; logits (B,T,vocab) copied out when not NULL. */
int tr_llama_fwd_bwd(tr_llama *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                     const int32_t *doc, float *logits, double *loss);

/* The trainer's form (train/family_llama.c): forward + backward ACCUMULATING
 * the gradient of grad_scale * (the summed loss of the targets), like
 * tr_model_fwd_bwd; grad_scale 0: forward only, gradients untouched (eval,
 * sampling). *loss_sum: the summed loss, *n_targets: the target count (may
 * be NULL). */
int tr_llama_fwd_bwd_sum(tr_llama *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                         const int32_t *doc, float grad_scale, float *logits, double *loss_sum, uint64_t *n_targets);
/* Parameters and gradients are each ONE contiguous buffer holding the
 * tensors in tensor order (tr_llama_tensor_name), each right after the
 * previous one: tensor i has tr_llama_tensor_size(m, i) elements. */
/* ---- exact memory of a model for micro-batch (B, T) ---------------------
 * In bytes, what llama_model.c allocates (fp32). With N = B*T, C = d_model,
 * hd = C / n_head, KVd = n_kv_head * hd, Q = C + 2 KVd (one packed q/k/v
 * row), F = d_ff, V = vocab, L = n_layer, NA = B * n_head * T * T:
 *   params  = grads = 4 * tr_llama_param_count(c)
 *   acts    forward activations kept for the backward
 *           = 4 * ( L * (5NC + NQ + 3NF + NA + 2N)  per layer: input,
 *                     RMSNorm 1 out, packed q/k/v (after RoPE), attention
 *                     out, mid residual, RMSNorm 2 out, gate|up (2F),
 *                     SwiGLU out, attention probabilities, the two rstd
 *             + 2NC + N + NV + N + N + N hd )  final residual and norm,
 *                     its rstd, logits (softmax and dlogits in place),
 *                     losses, positions, RoPE cos/sin rows
 *   scratch backward (and the Qwen2 biased q/k/v forward's) scratch
 *           = 4 * ( 2NC + NQ + 2NF + max(NF, NC) + (qkv_bias ? NQ : 0) )
 *   total   = params + grads + acts + scratch (no optimizer state)
 * tr_llama_reserve(m, B, T) allocates acts + scratch as ONE block of
 * exactly that size (unless a block at least that large is held); fwd_bwd
 * reserves on demand and, once reserved, allocates nothing itself. Not
 * included: the model's tensor table (n_tensors x ~112 bytes), RoPE
 * inv_freq (hd/2 floats) and the kernels' transient per-thread workspace,
 * malloc'd per call and freed on return (kn matmul packing: (64*256 +
 * 256*256) floats = 320 KiB per thread; attention backward: T floats per
 * thread). A static inline so the planner (tr_plan, without the model's
 * compute) can use it. TR_OK, or TR_ERR_ARG for a bad config, B or T <= 0,
 * T > max_seq, or a size that overflows size_t. */
typedef struct {
    size_t params, grads, acts, scratch, total;
} tr_llama_mem;

static inline int tr_llama_mem_mul_(size_t *acc, size_t x) {
    if (x && *acc > SIZE_MAX / x) return 1;
    *acc *= x;
    return 0;
}
static inline int tr_llama_mem_add_(size_t *acc, size_t x) {
    if (*acc > SIZE_MAX - x) return 1;
    *acc += x;
    return 0;
}
static inline int tr_llama_memory(const tr_llama_config *c, int B, int T, tr_llama_mem *out) {
    if (!c || !out || B <= 0 || T <= 0 || T > c->max_seq || tr_llama_config_check(c)) return TR_ERR_ARG;
    size_t P = tr_llama_param_count(c), L = (size_t)c->n_layer, C = (size_t)c->d_model, hd = C / (size_t)c->n_head,
           KVd = (size_t)c->n_kv_head * hd, Q = C + 2 * KVd, F = (size_t)c->d_ff, V = (size_t)c->vocab;
    size_t N = (size_t)B, NC, NQ, NF, NV, NA = (size_t)B, Nhd, per, acts, scr, big;
    int bad = tr_llama_mem_mul_(&N, (size_t)T);
    NC = N, NQ = N, NF = N, NV = N, Nhd = N;
    bad |= tr_llama_mem_mul_(&NC, C) | tr_llama_mem_mul_(&NQ, Q) | tr_llama_mem_mul_(&NF, F) |
           tr_llama_mem_mul_(&NV, V) | tr_llama_mem_mul_(&Nhd, hd) | tr_llama_mem_mul_(&NA, (size_t)c->n_head) |
           tr_llama_mem_mul_(&NA, (size_t)T) | tr_llama_mem_mul_(&NA, (size_t)T);
    if (bad || NC > SIZE_MAX / 8 || NQ > SIZE_MAX / 8 || NF > SIZE_MAX / 8 || N > SIZE_MAX / 8) return TR_ERR_ARG;
    per = 5 * NC;
    bad |= tr_llama_mem_add_(&per, NQ) | tr_llama_mem_add_(&per, 3 * NF) | tr_llama_mem_add_(&per, NA) |
           tr_llama_mem_add_(&per, 2 * N);
    acts = per;
    bad |= tr_llama_mem_mul_(&acts, L) | tr_llama_mem_add_(&acts, 2 * NC) | tr_llama_mem_add_(&acts, 3 * N) |
           tr_llama_mem_add_(&acts, NV) | tr_llama_mem_add_(&acts, Nhd);
    big = NF > NC ? NF : NC;
    scr = 2 * NC;
    bad |= tr_llama_mem_add_(&scr, NQ) | tr_llama_mem_add_(&scr, 2 * NF) | tr_llama_mem_add_(&scr, big) |
           tr_llama_mem_add_(&scr, c->qkv_bias ? NQ : 0);
    bad |= tr_llama_mem_mul_(&acts, 4) | tr_llama_mem_mul_(&scr, 4) | (P > SIZE_MAX / 16);
    if (bad || acts > SIZE_MAX - scr - 8 * P) return TR_ERR_ARG;
    out->params = out->grads = 4 * P;
    out->acts = acts;
    out->scratch = scr;
    out->total = 8 * P + acts + scr;
    return TR_OK;
}

/* Allocate acts + scratch for micro-batch (B, T) now, as one block
 * (tr_llama_memory); a smaller (B, T) reuses it. 0, or -1 for bad sizes or
 * no memory. */
int tr_llama_reserve(tr_llama *m, int B, int T);

float *tr_llama_params(tr_llama *m);
float *tr_llama_grads(tr_llama *m);
size_t tr_llama_tensor_size(const tr_llama *m, int i);

#ifdef __cplusplus
}
#endif
#endif /* TR_LLAMA_MODEL_H */
