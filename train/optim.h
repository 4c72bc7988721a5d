/* optim.h - the optimizer seam of the trainer (internal header of the train
 * module; docs/architecture.md, "Where to add an optimizer").
 *
 * An optimizer is one const tr_optim_ops, defined in train/optim_<name>.c
 * and registered by adding <name> to TR_OPTIMIZERS in train/CMakeLists.txt
 * (which generates the table from optims.c.in; the first entry is the one a
 * run uses).  The table says everything the rest of the trainer needs:
 *   - its state layout: n_state tensors per parameter, each in the
 *     parameters' layout (train/model.h: P elements) of state_bytes bytes;
 *   - the checkpoint sections holding them (after "params", in order);
 *   - the memory-plan rows they take (train/plan.c, host and device);
 *   - its step: on the CPU over a slice of one parameter tensor (a kn.h
 *     kernel), and on the GPU (a kn_cuda.h kernel; CUDA builds).
 * What is generic over the table: the host model's state buffers
 * (tr_model_state), the CPU backend's step and ZeRO-1's sharded step
 * (train/dist.c), the device arena's state pieces and the GPU step
 * (train/gpu_model.cu), checkpoint writing and resuming (train/trainer.c),
 * and the plan rows.
 *
 * One source, two libraries: an optimizer file is compiled into tr_plan with
 * TR_OPTIM_LAYOUT_ONLY (what the planner and `mkshards plan` read: no
 * kernels, so the planner stays free of OpenMP and CUDA; its table is then
 * named tr_optim_layout_<name>, its step entries NULL) and into tr (the
 * steps too; the GPU step only where TR_HAVE_CUDA, i.e. MKS_ENABLE_CUDA).
 * TR_OPTIM(name) and TR_OPTIM_CPU / TR_OPTIM_CUDA below do that, so an
 * optimizer file has no #if of its own: write its step functions
 * `static inline` (one not referenced is not compiled into the object). */
#ifndef TR_OPTIM_H
#define TR_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "tr.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TR_OPTIM_MAX_STATE TR_MODEL_MAX_STATE

typedef struct tr_optim_ops {
    const char *name;                        /* "adamw" */
    int n_state;                             /* state tensors, 1 .. TR_OPTIM_MAX_STATE */
    int state_bytes;                         /* bytes per element of each (4: fp32) */
    const char *section[TR_OPTIM_MAX_STATE]; /* checkpoint section of state tensor k (< 32 bytes) */
    const char *plan_row;                    /* memory-plan row of the whole state */
    const char *plan_row_shard;              /* the same with ZeRO-1 (a rank's shard) */
    /* One step at optimiser step t (1-based) over n elements of one parameter
     * tensor (or a slice of it): params, grads, and state[k] pointing at the
     * same elements of state tensor k. decay: tr_model_param_decay of the
     * tensor. The gradient is already divided by the step's target count and
     * clipped. Elementwise: a slice's result does not depend on how the
     * tensor is cut (ZeRO-1 shards, train/dist.c). Returns 0 or a kn error. */
    int (*step_cpu)(const tr_optim_hparams *h, int t, int decay, float *params, const float *grads, void *const state[],
                    size_t n);
    /* The same on the GPU, enqueued on stream (a cudaStream_t): device
     * pointers; params the fp32 master weights, params_lp (NULL in fp32
     * runs) receives their copy in lp_dtype (a kn_dtype of kn_cuda.h);
     * grad_scale a device float multiplying the gradient (1/targets, clip and
     * the loss scale folded together) or NULL. NULL outside CUDA builds. */
    int (*step_cuda)(const tr_optim_hparams *h, int t, int decay, float *params, void *params_lp, int lp_dtype,
                     const float *grads, void *const state[], size_t n, const float *grad_scale, void *stream);
    /* Optional (NULL: the GPU step calls step_cuda once per tensor): the
     * same step over every tensor of the parameter block in one launch.
     * table: the DEVICE copy of kn_adamw_multi_layout's table for the nt
     * tensors (kn_cuda_size.h: entries, then nt + 1 uint32 block starts; a
     * tensor's offset, count and decay), blocks its grid; params, params_lp,
     * grads and state[k] the bases of the whole block. Must give exactly
     * what step_cuda gives tensor by tensor (bit for bit). Used only with
     * MKS_ADAMW_MULTI=1 (train/gpu_step.h). */
    int (*step_cuda_multi)(const tr_optim_hparams *h, int t, const void *table, int nt, unsigned blocks, float *params,
                           void *params_lp, int lp_dtype, const float *grads, void *const state[],
                           const float *grad_scale, void *stream);
} tr_optim_ops;

#ifdef TR_OPTIM_LAYOUT_ONLY
#define TR_OPTIM_REF(name) tr_optim_layout_##name
#define TR_OPTIM(name) const tr_optim_ops tr_optim_layout_##name
#define TR_OPTIM_CPU(fn) NULL
#define TR_OPTIM_CUDA(fn) NULL
#else
#define TR_OPTIM_REF(name) tr_optim_##name
#define TR_OPTIM(name) const tr_optim_ops tr_optim_##name
#define TR_OPTIM_CPU(fn) fn
#ifdef TR_HAVE_CUDA
#define TR_OPTIM_CUDA(fn) fn
#else
#define TR_OPTIM_CUDA(fn) NULL
#endif
#endif

/* ---- the registered optimizers (generated from optims.c.in) ---------------------- */
/* The table of this build, NULL-terminated; the first is the default. */
extern const tr_optim_ops *const tr_optim_table[];
/* The optimizer a run uses (tr_optim_table[0]). */
const tr_optim_ops *tr_optim_default(void);
/* By name; NULL when this build has none of that name. */
const tr_optim_ops *tr_optim_find(const char *name);
/* The same tables' layouts in tr_plan (the planner): step entries NULL. */
extern const tr_optim_ops *const tr_optim_layout_table[];
const tr_optim_ops *tr_optim_layout_default(void);
const tr_optim_ops *tr_optim_layout_find(const char *name);

/* Bytes of the whole state for n parameters: n_state * state_bytes * n. */
static inline uint64_t tr_optim_state_bytes(const tr_optim_ops *o, uint64_t n) {
    return (uint64_t)o->n_state * (uint64_t)o->state_bytes * n;
}

/* ---- generic over the table (train/optim.c, library tr) -------------------------- */
/* The host model's state buffers for o (zeroed; tr_model_state_init). */
int tr_optim_host_init(const tr_optim_ops *o, tr_model *m);
/* One step of the whole host model (the CPU backend): every parameter
 * tensor through o->step_cpu with its decay, in tensor order. */
int tr_optim_host_step(const tr_optim_ops *o, tr_model *m, const tr_optim_hparams *h, int t);

/* The checkpoint's sections: "params", the optimizer's state sections, and
 * with with_extra the backend's optimiser words (TR_BACKEND_EXTRA u64,
 * section "gpu_opt"). Data from the host model m (m NULL: sizes only, data
 * NULL: a section streamed in pieces, train/dist.c); P parameters. Returns
 * the number of sections (2 + n_state with the words, else 1 + n_state). */
#define TR_OPTIM_MAX_SECTIONS (2 + TR_OPTIM_MAX_STATE)
#define TR_OPTIM_EXTRA_SECTION "gpu_opt"
int tr_optim_ckpt_sections(const tr_optim_ops *o, tr_model *m, size_t P, uint64_t *extra, size_t extra_bytes,
                           int with_extra, tr_ckpt_section sec[TR_OPTIM_MAX_SECTIONS]);

#ifdef __cplusplus
}
#endif
#endif /* TR_OPTIM_H */
