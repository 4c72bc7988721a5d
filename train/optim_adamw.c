/* optim_adamw.c - AdamW (PyTorch semantics, decoupled weight decay; the
 * kernels kn_adamw_step_ref, kernels/kn.h, and kn_adamw_step_cuda,
 * kernels/kn_cuda.h) behind train/optim.h.
 *
 * State: m and v, fp32, in the checkpoint sections "adam_m" and "adam_v"
 * (the checkpoint layout since format TRCKPT01). Compiled into tr_plan
 * (layout only) and tr (steps), see optim.h. */
#include "kn.h"
#include "kn_cuda.h"
#include "optim.h"

static inline int adamw_cpu(const tr_optim_hparams *h, int t, int decay, float *params, const float *grads,
                            void *const state[], size_t n) {
    return kn_adamw_step_ref(params, grads, (float *)state[0], (float *)state[1], n, h->lr, h->beta1, h->beta2, h->eps,
                             h->weight_decay, decay, t);
}

static inline int adamw_cuda(const tr_optim_hparams *h, int t, int decay, float *params, void *params_lp, int lp_dtype,
                             const float *grads, void *const state[], size_t n, const float *grad_scale, void *stream) {
    return kn_adamw_step_cuda(params, params_lp, (kn_dtype)lp_dtype, grads, (float *)state[0], (float *)state[1], n,
                              h->lr, h->beta1, h->beta2, h->eps, h->weight_decay, decay, t, grad_scale,
                              (kn_stream)stream);
}

/* One launch over the table (kn_cuda_size.h layout: entries, then the block starts). */
static inline int adamw_cuda_multi(const tr_optim_hparams *h, int t, const void *table, int nt, unsigned blocks,
                                   float *params, void *params_lp, int lp_dtype, const float *grads,
                                   void *const state[], const float *grad_scale, void *stream) {
    const kn_adamw_tensor *tab = (const kn_adamw_tensor *)table;
    const uint32_t *bstart = (const uint32_t *)(const void *)(tab + nt);
    return kn_adamw_multi_cuda(tab, bstart, nt, blocks, params, params_lp, (kn_dtype)lp_dtype, grads, (float *)state[0],
                               (float *)state[1], h->lr, h->beta1, h->beta2, h->eps, h->weight_decay, t, grad_scale,
                               (kn_stream)stream);
}

TR_OPTIM(adamw) = {
    .name = "adamw",
    .n_state = 2,
    .state_bytes = 4,
    .section = {"adam_m", "adam_v"},
    .plan_row = "AdamW m+v (fp32)",
    .plan_row_shard = "AdamW m+v (fp32, 1/N shard: ZeRO-1)",
    .step_cpu = TR_OPTIM_CPU(adamw_cpu),
    .step_cuda = TR_OPTIM_CUDA(adamw_cuda),
    .step_cuda_multi = TR_OPTIM_CUDA(adamw_cuda_multi),
};
