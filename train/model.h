/* model.h - GPT-2 model of the CPU reference trainer (internal header of the
 * train module; the public API is tr.h).
 *
 * Architecture (docs/model.md): learned position embedding, pre-LayerNorm
 * blocks, GELU (tanh) MLP of width 4C, biases everywhere, tied input/output
 * embedding (logits = lnf(x) @ wte^T, no bias), vocabulary padded to a
 * multiple of 128 (padding logits are excluded from the softmax).
 *
 * All functions return TR_MODEL_OK (0) or a negative TR_MODEL_E* code and
 * never exit.  A tr_model is not thread-safe (the kernels thread inside).
 */
#ifndef TR_MODEL_H
#define TR_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "llama_model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TR_MODEL_OK 0
#define TR_MODEL_EINVAL (-1) /* bad argument / config / ids out of range */
#define TR_MODEL_ENOMEM (-2) /* allocation failed */
#define TR_MODEL_ESTATE (-3) /* e.g. AdamW step before tr_model_adamw_init */

typedef struct {
    int n_layer;      /* L */
    int n_head;       /* NH (d_model % n_head == 0) */
    int d_model;      /* C */
    int max_seq;      /* maxT: rows of the position embedding */
    int vocab;        /* V: real vocabulary size */
    int vocab_padded; /* Vp: V rounded up to a multiple of 128 */
    /* The model family (train/family.h). 0 = GPT-2, everything above is
     * its shape. TR_FAMILY_LLAMA: `llama` is the shape (arch: llama_arch);
     * n_layer, n_head, d_model, max_seq, vocab mirror it and vocab_padded
     * = vocab (the family pads nothing). */
    int family;
    int llama_arch; /* tr_llama_arch */
    tr_llama_config llama;
} tr_model_config;
enum { TR_FAMILY_GPT2 = 0, TR_FAMILY_LLAMA = 1 };

/* Presets: "tiny" (2L, 2H, C=64), "d12" (12L,12H,768, 124M), "d24"
 * (24L,16H,1024), "d36" (36L,20H,1280), "d48" (48L,25H,1600).
 * vocab > 0 and max_seq > 0 are taken from the arguments; vocab_padded is
 * computed.  Unknown name -> TR_MODEL_EINVAL. */
int tr_model_config_preset(const char *name, int vocab, int max_seq, tr_model_config *out);
/* Explicit shape; fills vocab_padded.  Validates like tr_model_config_check. */
int tr_model_config_make(int n_layer, int n_head, int d_model, int max_seq, int vocab, tr_model_config *out);
/* Any family (family.c asks the configuration's family); GPT-2: positive
 * sizes, d_model % n_head == 0, vocab_padded == pad128(vocab). */
int tr_model_config_check(const tr_model_config *c);

/* GPT-2's own entries of the family table (model_config.c; family_gpt2.c
 * names them): tr_model_config_check, tr_model_param_count,
 * tr_model_grad_groups, tr_model_param_layers, tr_model_grad_group_of and
 * tr_model_memory below for a GPT-2 configuration only (family 0: any other
 * is TR_MODEL_EINVAL / 0). Callers use the tr_model_* ones. */
int tr_gpt2_config_check(const tr_model_config *c);
size_t tr_gpt2_param_count(const tr_model_config *c);
int tr_gpt2_grad_groups(const tr_model_config *c);
int tr_gpt2_param_layers(const tr_model_config *c, int i);
int tr_gpt2_grad_group_of(const tr_model_config *c, int i, int l);

/* ---- parameter layout ---------------------------------------------------
 * One contiguous fp32 buffer, tensors in this order (llm.c ParameterTensors
 * order), each immediately after the previous one (no alignment padding):
 *   0 wte      (Vp, C)      token embedding, also the output projection;
 *                           rows >= V are padding (initialised to 0)
 *   1 wpe      (maxT, C)
 *   2 ln1w     (L, C)        3 ln1b     (L, C)
 *   4 qkvw     (L, 3C, C)    5 qkvb     (L, 3C)
 *   6 attprojw (L, C, C)     7 attprojb (L, C)
 *   8 ln2w     (L, C)        9 ln2b     (L, C)
 *  10 fcw      (L, 4C, C)   11 fcb      (L, 4C)
 *  12 fcprojw  (L, C, 4C)   13 fcprojb  (L, C)
 *  14 lnfw     (C)          15 lnfb     (C)
 * Linear weights are (out, in): y = x @ W^T + b.  The gradient buffer and
 * the optimizer's state tensors (AdamW: m and v) use the same layout. */
#define TR_NUM_PARAM_TENSORS 16
enum {
    TR_P_WTE,
    TR_P_WPE,
    TR_P_LN1W,
    TR_P_LN1B,
    TR_P_QKVW,
    TR_P_QKVB,
    TR_P_ATTPROJW,
    TR_P_ATTPROJB,
    TR_P_LN2W,
    TR_P_LN2B,
    TR_P_FCW,
    TR_P_FCB,
    TR_P_FCPROJW,
    TR_P_FCPROJB,
    TR_P_LNFW,
    TR_P_LNFB
};
/* Element counts of the 16 tensors (not bytes). */
void tr_model_param_sizes(const tr_model_config *c, size_t sizes[TR_NUM_PARAM_TENSORS]);
/* Name of tensor i ("wte", ...), NULL if out of range. */
const char *tr_model_param_name(int i);
/* 1 if tensor i gets weight decay (2-D: wte, wpe, qkvw, attprojw, fcw,
 * fcprojw), 0 otherwise (biases, LayerNorm). */
int tr_model_param_decay(int i);
/* Total element count (includes the padded wte rows); any family. */
size_t tr_model_param_count(const tr_model_config *c);
/* The tensor table of any family (train/family.h): the number of tensors
 * (GPT-2: the 16 above), tensor i's element count and weight decay, laid
 * out one after the other in the params buffer. */
int tr_model_n_tensors(const tr_model_config *c);
size_t tr_model_tensor_size(const tr_model_config *c, int i);
int tr_model_tensor_decay(const tr_model_config *c, int i);

/* ---- exact memory of a model for micro-batch (B, T) ---------------------
 * All in bytes, exactly what tr_model_* allocates for that group (fp32):
 *   params     = 4 * param_count
 *   grads      = 4 * param_count
 *   adam       = 8 * param_count        (AdamW m and v; only after adamw_init;
 *                                        another optimizer: train/optim.h) 
 *   acts       forward activations
 *              = 4 * ( B*T*(C*(16L+3) + 4L + 3 + Vp) + L*B*NH*T*T )
 *              (per layer: ln1, qkv 3C, atty, residual2, ln2, fch 4C,
 *              fch_gelu 4C, residual3 = 16C, ln mean/rstd 4; plus encoded,
 *              lnf, one projection scratch, lnf mean/rstd, losses, logits,
 *              and the L attention probability matrices)
 *   grad_acts  backward scratch = 4 * B*T*6C (dresidual, dln, d 4C)
 *   total      = sum of the above
 * tr_model_reserve(m, B, T) allocates acts + grad_acts as one block of
 * exactly that size (unless a larger block is already held).
 *   kernel_ws  per kernel thread, not in total: the transient workspace the
 *              CPU kernels malloc per call and free on return (the matmul's
 *              panels plus the attention's buffer, kernels/kn_cpu_size.h);
 *              the planner counts it once per thread */
typedef struct {
    size_t params, grads, adam, acts, grad_acts, total;
    size_t kernel_ws;
} tr_model_mem;
int tr_model_memory(const tr_model_config *c, int B, int T, tr_model_mem *out);
int tr_gpt2_memory(const tr_model_config *c, int B, int T, tr_model_mem *out);

/* The GPU model's kernel scratch for micro-batches up to (B, T) (one arena
 * piece, reused by every op; train/gpu_model.cu carves it, train/plan.c
 * prints it): the largest of the scratch its backward kernels ask for at
 * these shapes, by the kernels' own size functions (kernels/kn_cuda_size.h):
 * the encoder backward over B*T tokens, LayerNorm backward (B*T, C), the
 * bias gradients of the matmuls (OC up to 4C; the tied lm head has no bias,
 * so no Vp-wide partials), attention backward (B, T, n_head) and the
 * gradient norm over every parameter.  0 for a bad config. */
size_t tr_model_gpu_scratch_bytes(const tr_model_config *c, size_t B, size_t T);

typedef struct tr_model tr_model;

/* Allocate params + grads (grads zeroed) and initialise GPT-2 style:
 * weights normal(0, 0.02), attprojw and fcprojw normal(0, 0.02/sqrt(2L)),
 * biases 0, LayerNorm weights 1, padded wte rows 0.  Deterministic in seed
 * (splitmix64 + Box-Muller).  Activations are allocated on first use or by
 * tr_model_reserve. */
int tr_model_create(const tr_model_config *c, uint64_t seed, tr_model **out);
void tr_model_free(tr_model *m);
const tr_model_config *tr_model_get_config(const tr_model *m);

/* Allocate activation buffers for (B, T) now (they grow on demand otherwise;
 * a smaller (B, T) reuses them). */
int tr_model_reserve(tr_model *m, int B, int T);

float *tr_model_params(tr_model *m); /* param_count floats, layout above */
float *tr_model_grads(tr_model *m);  /* same layout */
/* Pointer to tensor i inside params. */
float *tr_model_param_tensor(tr_model *m, int i);
void tr_model_zero_grad(tr_model *m);

/* ---- one micro-batch ----------------------------------------------------
 * inputs  (B,T) token ids < V
 * targets (B,T) next-token ids < V, or < 0 = no loss at this position
 * pos     (B,T) position ids in [0, max_seq) or NULL (= 0..T-1 in each row);
 *         with document masking, positions restart at 0 at each document
 * doc     (B,T) document id per position or NULL (no document mask); attention
 *         never crosses a document boundary (t attends t2 <= t with the same
 *         doc id)
 * T <= max_seq.
 * tr_model_fwd_bwd: forward + backward; gradients are ACCUMULATED (+=) into
 *   grads as d(grad_scale * sum of per-token losses)/d(params).  For an
 *   optimiser step made of several micro-batches pass grad_scale =
 *   1 / (number of target tokens in the whole step), so the step gradient is
 *   that of the token-mean loss of the step.
 * *loss_sum = sum of the losses of the target tokens (not scaled),
 * *n_targets = number of positions with target >= 0 (both may be NULL).
 * After fwd_bwd the logits buffer holds dlogits (use tr_model_forward for
 * logits). */
int tr_model_fwd_bwd(tr_model *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                     const int32_t *doc, float grad_scale, double *loss_sum, uint64_t *n_targets);
/* Gradient readiness (data-parallel overlap, issue 16). The backward pass
 * finishes the gradient in tr_model_grad_groups() = L + 2 groups, in order:
 *   group 0        lnfw, lnfb (after the final LayerNorm's backward)
 *   group 1 + k    every per-layer tensor's slice of layer L-1-k (ln1w ..
 *                  fcprojb of that layer), k = 0 .. L-1
 *   group L + 1    wte, wpe (the encoder's backward comes last; wte also
 *                  gets the logits' contribution first)
 * With a hook set, tr_model_fwd_bwd calls fn(ctx, g) right after group g is
 * final for this call (the values it adds to the gradient), in that order.
 * tr_model_grad_group_of: the group of tensor i's slice of layer l (l is
 * ignored for tensors that are not per layer: tr_model_param_layers(i) is 1
 * for them, n_layer for the per-layer ones). NULL fn: no hook (default). */
typedef void (*tr_model_grad_hook)(void *ctx, int group);
void tr_model_set_grad_hook(tr_model *m, tr_model_grad_hook fn, void *ctx);
int tr_model_grad_groups(const tr_model_config *c);
int tr_model_param_layers(const tr_model_config *c, int i);
int tr_model_grad_group_of(const tr_model_config *c, int i, int l);

/* Forward only (eval).  targets may be NULL (then loss_sum = 0, n = 0).
 * Afterwards tr_model_logits returns the (B,T,Vp) logits; padding columns
 * (>= V) hold raw lnf(x) @ wte^T values (0 while the padded wte rows are 0)
 * and are never part of the softmax - ignore them. */
int tr_model_forward(tr_model *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                     const int32_t *doc, double *loss_sum, uint64_t *n_targets);
/* Logits (B,T,Vp) of the last tr_model_forward; NULL before any. */
const float *tr_model_logits(const tr_model *m);

/* ---- optimiser ----------------------------------------------------------- */
/* The optimizer's hyper-parameters (the trainer's --lr, --beta1, --beta2,
 * --eps, --weight-decay; train/optim.h: what an optimizer reads of them). */
typedef struct tr_optim_hparams {
    float lr, beta1, beta2, eps, weight_decay;
} tr_optim_hparams;
typedef tr_optim_hparams tr_adamw_hparams;

/* Optimizer state on the host model (train/optim.h): n tensors in the
 * parameter layout, elem_bytes bytes per element, allocated zeroed (calloc:
 * a page is resident once written).  Idempotent for the same n and
 * elem_bytes; another shape once allocated: TR_MODEL_EINVAL. */
#define TR_MODEL_MAX_STATE 4
int tr_model_state_init(tr_model *m, int n, size_t elem_bytes);
/* State tensor k (param_count elements), NULL before tr_model_state_init
 * or when k is out of range. */
void *tr_model_state(tr_model *m, int k);

/* The reference model's own AdamW (tests; the trainer steps through
 * train/optim.h, whose AdamW computes the same bits). Its state: tensors 0
 * (m) and 1 (v), fp32. */
/* Allocate (zeroed) AdamW m and v: tr_model_state_init(m, 2, 4). */
int tr_model_adamw_init(tr_model *m);
/* One AdamW step at step t (1-based) over every tensor; weight decay only
 * where tr_model_param_decay(i) (or decay_mask[i] when decay_mask != NULL).
 * Does not zero the gradients. */
int tr_model_adamw_step(tr_model *m, const tr_adamw_hparams *h, int t, const int *decay_mask);
float *tr_model_adam_m(tr_model *m); /* NULL before adamw_init */
float *tr_model_adam_v(tr_model *m);
/* Global L2 norm of the gradients (pre-clip) into *norm_out; when
 * max_norm > 0 and norm > max_norm scale them by max_norm/(norm + 1e-6). */
int tr_model_clip_grad_norm(tr_model *m, float max_norm, float *norm_out);

#ifdef __cplusplus
}
#endif
#endif /* TR_MODEL_H */
