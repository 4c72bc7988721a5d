/* gpu_model.h - the GPU model: GPT-2 forward + backward + the optimizer step
 * on the device, the CUDA twin of tr_model_fwd_bwd / tr_model_clip_grad_norm
 * (train/model.h) and tr_optim_host_step (train/optim.h), built from
 * kernels/kn_cuda.h, every byte carved from the trainer's one arena
 * (train/gpu_arena.h).  Library tr_cuda; identifiers tr_cuda_model_*.
 *
 * Same parameter layout as train/model.h (16 tensors, one contiguous
 * buffer).  Compute dtype fp32, bf16 or fp16 (fp16: scale the per-token
 * mean loss with a tr_loss_scaler (below): pass tr_loss_scaler_dloss() to
 * fwd_bwd, step with tr_cuda_model_step_scaled(tr_loss_scaler_unscale())).
 * Device state: fp32 master parameters, fp32 gradients, the optimizer's
 * state tensors (train/optim.h; AdamW: fp32 m and v), and - for bf16/fp16 -
 * a 16-bit compute copy of the parameters; the
 * activations are in the compute dtype (fp32 or bf16), LayerNorm statistics,
 * attention log-sum-exp and losses in fp32.  The residual-stream gradient is
 * kept in the compute dtype (bf16 in bf16 runs).  MKS_CUDA_ATTENTION=tc in
 * the environment selects the tensor-core attention (bf16, head size 64)
 * instead of the SIMT one; read once at create.
 *
 * tr_train() (llmtrain --device cuda) drives it through the GPU session
 * (train/gpu_session.h), which the CUDA backend (train/backend_cuda.cu)
 * adapts to train/backend.h.  tests/test_tr_cuda_model_gpu.cu (label gpu)
 * compares it with the CPU model: loss, every gradient, the norm and the
 * parameters after a step, in fp32, bf16 and fp16; tests/bench_train_gpu.cu
 * times it. */
#ifndef TR_GPU_MODEL_H
#define TR_GPU_MODEL_H

#include "gpu_arena.h"
#include "kn_cuda.h"
#include "model.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_cuda_model tr_cuda_model;

/* Exact arena bytes tr_cuda_model_create takes for micro-batches up to
 * (B, T) (TR_CUDA_ALIGN slack per piece included), at activation recompute
 * level `recompute` (0 store everything backward needs; 1 the GELU output
 * is recomputed in backward, one layer's buffer; see docs/memory-plan.md),
 * with optimizer opt's state (NULL: tr_optim_default()). */
size_t tr_cuda_model_arena_bytes(const tr_model_config *c, int B, int T, kn_dtype dt, int recompute,
                                 const tr_optim_ops *opt);
/* Carves everything from a (not sealed), creates the cuBLASLt context on
 * stream s.  Parameters are uninitialised until tr_cuda_model_set_params.
 * opt: the optimizer (NULL: tr_optim_default()); one without a GPU step
 * (step_cuda NULL) is refused (TR_ERR_ARG). */
int tr_cuda_model_create(tr_cuda_model **out, const tr_model_config *c, int B, int T, kn_dtype dt, tr_cuda_arena *a,
                         tr_cuda_stream s, int recompute, const tr_optim_ops *opt);
void tr_cuda_model_destroy(tr_cuda_model *m);
/* Host fp32 params (tr_model_params layout) -> master (+ compute copy);
 * zeroes the gradients and the optimizer state. */
int tr_cuda_model_set_params(tr_cuda_model *m, const float *host_params);
/* Device-side init for throughput / memory runs (no host model needed):
 * weights uniform with std 0.02, LayerNorm weights 1, biases 0; zeroes
 * the gradients and the optimizer state.  Deterministic in seed; not GPT-2's
 * exact init. */
int tr_cuda_model_init_random(tr_cuda_model *m, uint64_t seed);
/* Resume: host params (master fp32) and the optimizer's state tensors
 * (state NULL, or state[k] NULL: zeroed; host buffers of the parameter
 * layout) -> device; refreshes the compute copy; zeroes grads. */
int tr_cuda_model_set_state(tr_cuda_model *m, const float *params, void *const state[]);
/* Device -> host copies (any may be NULL; state[k] NULL: not copied);
 * synchronises the stream. */
int tr_cuda_model_get(tr_cuda_model *m, float *params, float *grads, void *const state[]);
int tr_cuda_model_zero_grad(tr_cuda_model *m);
/* The device fp32 gradient buffer (tr_model_params layout, *n floats), for
 * the data-parallel all-reduce (train/backend_cuda.cu); no synchronisation. */
float *tr_cuda_model_grads(tr_cuda_model *m, size_t *n);
/* Gradient readiness (data-parallel overlap): with fn set, fwd_bwd calls
 * fn(ctx, g) on the host for the groups of tr_model_grad_groups() in order,
 * each right after it has ENQUEUED on the model's stream the last kernel
 * that writes group g (not after it ran: fn orders its own work after the
 * stream's with an event). NULL fn: none (default). */
void tr_cuda_model_set_grad_hook(tr_cuda_model *m, tr_model_grad_hook fn, void *ctx);
/* As tr_model_fwd_bwd; the batch arrays are DEVICE pointers (tr_cuda_batch);
 * pos/doc may be NULL.  *loss_sum / *n_targets (host, may be NULL) make
 * this call wait for the step; pass NULL to stay asynchronous.  grad_scale
 * 0: forward only (evaluation, as tr_llama_fwd_bwd): no backward kernel, the
 * gradients untouched, no hook call; the loss is the one a training call
 * on the same batch computes (the same kernels up to the loss).  The lm
 * head runs whole or in row chunks (MKS_LMHEAD_CHUNK, read at create:
 * train/gpu_lmhead.h). */
int tr_cuda_model_fwd_bwd(tr_cuda_model *m, int B, int T, const uint32_t *inputs, const int32_t *targets,
                          const int32_t *pos, const int32_t *doc, float grad_scale, double *loss_sum,
                          uint64_t *n_targets);
/* Clip (max_norm > 0) then the optimizer's GPU step at step t (1-based)
 * over every tensor, decay where tr_model_param_decay(i); refreshes the
 * compute copy.  *norm_out (host, may be NULL; waits) = the pre-clip
 * gradient norm. */
int tr_cuda_model_step(tr_cuda_model *m, const tr_optim_hparams *h, int t, float max_norm, float *norm_out);
/* The same for gradients computed with the loss multiplied by loss_scale
 * (fp16): the norm is unscaled, clipping and 1/loss_scale are folded into the
 * optimizer's update, and a non-finite gradient skips the update (*skipped = 1;
 * this call then waits for the device to decide). */
int tr_cuda_model_step_scaled(tr_cuda_model *m, const tr_optim_hparams *h, int t, float max_norm, float loss_scale,
                              float *norm_out, int *skipped);

/* ---- fp16 loss scaling (issue 14) ---------------------------------------------------
 * The backward pass starts with dlogits = g * (softmax - onehot(target)),
 * written in the compute dtype over the logits; |softmax - onehot| <= 1, so
 * |dlogit| <= g for ANY logits.  g is therefore what decides whether the
 * first fp16 tensor of the backward can overflow (fp16 max 65504).
 *
 * Before: g = scale = 65536 on the SUMMED loss, so the target column held
 * 65536 * (p - 1), beyond 65504 as long as p < 0.0006: step 1 (and every step
 * after the scale had grown back to 65536) was skipped as non-finite.
 *
 * Now: g = scale / D with D the micro-batch's token capacity (rows x T): the
 * scale multiplies the per-token MEAN loss (PyTorch GradScaler's convention,
 * initial scale 65536), so |dlogit| <= g = 65536 / D, i.e. <= 64 for any
 * micro-batch of 1024 tokens or more.  Two bounds make step 1 safe for every
 * D by construction: the initial g is at most TR_FP16_DLOGIT_INIT = 2^7, and
 * growth stops at TR_FP16_DLOGIT_MAX = 2^14 (a quarter of fp16's range) - the
 * first backward tensor can never overflow.  The layers below amplify: in the
 * CPU emulation of this model's fp16 backward (tests/test_fp16_scale.c, 100
 * steps of a small model) the residual-stream gradient reached ~50x the
 * dlogit bound, so at the initial g <= 128 every fp16 tensor of step 1 stays
 * far below 65504 (the test prints the headroom of each), while a scale grown
 * towards the cap can overflow the lower layers: that is the dynamic scaler's
 * job (below), as before.  The optimiser undoes g * n_targets (the step's
 * target count): exactly the CPU trainer's "sum, then divide by targets".
 *
 * Dynamic: on a skipped (non-finite) step halve the scale (not below 1);
 * after 2000 clean steps in a row double it (not above the cap). */
#define TR_FP16_DLOGIT_INIT 128.0f
#define TR_FP16_DLOGIT_MAX 16384.0f
#define TR_LOSS_SCALE_INIT 65536.0f
typedef struct {
    float scale; /* multiplies the per-token mean loss */
    int clean_steps;
    uint64_t skipped_total;
    float max_scale; /* TR_FP16_DLOGIT_MAX * micro_tokens */
} tr_loss_scaler;

/* micro_tokens: D, the micro-batch capacity (rows x T) the dlogits are
 * divided by. */
static inline void tr_loss_scaler_init(tr_loss_scaler *s, int micro_tokens) {
    if (!s) return;
    double mx = (double)TR_FP16_DLOGIT_MAX * (double)(micro_tokens > 0 ? micro_tokens : 1);
    if (mx > 1e30) mx = 1e30;
    s->max_scale = (float)mx;
    double init = (double)TR_FP16_DLOGIT_INIT * (double)(micro_tokens > 0 ? micro_tokens : 1);
    s->scale = (double)TR_LOSS_SCALE_INIT < init ? TR_LOSS_SCALE_INIT : (float)init;
    s->clean_steps = 0;
    s->skipped_total = 0;
}
/* Call after each optimiser step with its `skipped` result. */
static inline void tr_loss_scaler_update(tr_loss_scaler *s, int skipped) {
    if (!s) return;
    if (skipped) {
        s->scale = s->scale > 2.0f ? s->scale * 0.5f : 1.0f;
        s->clean_steps = 0;
        s->skipped_total++;
    } else if (++s->clean_steps >= 2000) {
        float up = s->scale * 2.0f;
        s->scale = up <= s->max_scale ? up : s->max_scale;
        s->clean_steps = 0;
    }
}
/* Keep a restored scale inside [1, max_scale]. */
static inline void tr_loss_scaler_clamp(tr_loss_scaler *s) {
    if (!(s->scale >= 1.0f)) s->scale = 1.0f;
    if (s->scale > s->max_scale) s->scale = s->max_scale;
}
/* g: the dloss factor for tr_cuda_model_fwd_bwd (every micro-batch of the
 * step uses the same g, so the accumulated gradient is g * d(summed loss)). */
static inline float tr_loss_scaler_dloss(const tr_loss_scaler *s, int micro_tokens) {
    return (float)((double)s->scale / (double)(micro_tokens > 0 ? micro_tokens : 1));
}
/* The loss_scale for tr_cuda_model_step_scaled: g * n_targets, so the update
 * uses the token-mean gradient of the step. */
static inline float tr_loss_scaler_unscale(const tr_loss_scaler *s, int micro_tokens, uint64_t n_targets) {
    double g = (double)s->scale / (double)(micro_tokens > 0 ? micro_tokens : 1);
    return (float)(g * (double)(n_targets ? n_targets : 1));
}

#ifdef __cplusplus
}
#endif
#endif /* TR_GPU_MODEL_H */
