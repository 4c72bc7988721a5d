/* gpu_family.h - a model family's GPU model behind one ops table (library
 * tr_cuda; issue 30 item 3 with issue 26's seam): the GPU session
 * (train/gpu_session.cu), and so the CUDA backend, drives whichever model a
 * configuration's family names in tr_family_ops.gpu (train/family.h) and
 * never branches on a family.  GPT-2's table is tr_gpu_model_gpt2
 * (train/gpu_model.cu, over gpu_model.h), the Llama family's
 * tr_gpu_model_llama (train/gpu_llama.cu, over gpu_llama.h).  Plain C.
 *
 * Every model holds P parameters in its own device order; the host side of
 * every call below is the family's host layout (tr_model_params: the tensor
 * table of train/family.h), so checkpoints and the host model never see the
 * device order.  The gradient buffer (grads) is in the device order: the
 * data-parallel all-reduce sums it element by element, which any order
 * allows. Return values: TR_OK or a negative tr_err. */
#ifndef TR_GPU_FAMILY_H
#define TR_GPU_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include "gpu_arena.h"
#include "kn_cuda.h"
#include "model.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_gpu_model_ops {
    const char *name;  /* the family's name */
    int recompute_max; /* the highest activation recompute level it implements */
    /* Exact arena bytes create takes for micro-batches up to (B, T); 0: a
     * configuration or shape it cannot run. */
    size_t (*arena_bytes)(const tr_model_config *c, int B, int T, kn_dtype dt, int recompute, const tr_optim_ops *opt);
    /* Carves from a (not sealed), kernels on stream s; parameters
     * uninitialised until set_state. TR_ERR_ARG with kn_cuda_last_error()
     * saying why for a configuration it cannot run. */
    int (*create)(void **out, const tr_model_config *c, int B, int T, kn_dtype dt, tr_cuda_arena *a, tr_cuda_stream s,
                  int recompute, const tr_optim_ops *opt);
    void (*destroy)(void *m);
    /* host params (+ the optimizer's state tensors; state NULL or state[k]
     * NULL: zeroed) -> device; refreshes the compute copy, zeroes grads. */
    int (*set_state)(void *m, const float *params, void *const state[]);
    /* device -> host (any may be NULL); synchronises. */
    int (*get)(void *m, float *params, float *grads, void *const state[]);
    int (*zero_grad)(void *m);
    /* the device gradient (device order, *n floats); no synchronisation */
    float *(*grads)(void *m, size_t *n);
    /* NULL: the model has no readiness hook (the data-parallel reduce then
     * waits for the whole backward) */
    void (*set_grad_hook)(void *m, tr_model_grad_hook fn, void *ctx);
    /* as tr_cuda_model_fwd_bwd: DEVICE batch arrays, summed loss times grad_scale;
     * grad_scale 0: forward only (tr_gpu_eval), gradients untouched */
    int (*fwd_bwd)(void *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                   const int32_t *doc, float grad_scale, double *loss_sum, uint64_t *n_targets);
    /* as tr_cuda_model_step_scaled */
    int (*step_scaled)(void *m, const tr_optim_hparams *h, int t, float max_norm, float loss_scale, float *norm_out,
                       int *skipped);
    /* The loss sum and target count of every fwd_bwd since zero_grad
     * (waits for the device): the session reads the step's logged loss once
     * per optimizer step instead of once per micro-batch. NULL: the session
     * reads each micro-batch's (fwd_bwd's loss_sum). */
    int (*step_loss)(void *m, double *loss_sum, uint64_t *n_targets);
} tr_gpu_model_ops;

extern const tr_gpu_model_ops tr_gpu_model_gpt2, tr_gpu_model_llama;

#ifdef __cplusplus
}
#endif
#endif /* TR_GPU_FAMILY_H */
