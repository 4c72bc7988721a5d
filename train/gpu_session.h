/* gpu_session.h - a GPU training session: what one tr_train run holds on
 * its GPU (train/gpu_session.cu, library tr_cuda; only in MKS_ENABLE_CUDA
 * builds, driven by the CUDA backend train/backend_cuda.cu; identifiers
 * tr_gpu_*).  Plain C: no CUDA header is needed to include it.
 *
 * It wraps train/gpu_arena.h (arena, pinned loader buffers, copy stream) and
 * the configuration's family's GPU model (train/family.h gpu: a
 * train/gpu_family.h table - GPT-2's train/gpu_model.h, the Llama family's
 * train/gpu_llama.h: forward/backward and the optimizer step on the device)
 * in the few calls the trainer loop makes (docs/gpu-notes.md, "Wiring"):
 *   tr_gpu_device        -> TR_ERR_NODEVICE without a usable GPU
 *   tr_gpu_open          -> one arena (from the plan), model, input uploader,
 *                           arena sealed; parameters from the host
 *   tr_gpu_loader_hooks  -> pinned loader buffers (cudaHostAlloc)
 *   per step: tr_gpu_zero_grad; per micro-batch tr_gpu_micro (upload, hand
 *   the host buffer back to the loader, fwd_bwd); data-parallel runs then
 *   all-reduce tr_gpu_grads over NCCL (train/backend_cuda.cu); tr_gpu_step
 *   (1/targets folded into the optimizer's step, clip, fp16 loss scaling).
 * Return values: TR_OK or a negative tr_err; err gets a message. */
#ifndef TR_GPU_SESSION_H
#define TR_GPU_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "optim.h"
#include "tr.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_gpu tr_gpu;

/* Device 0's name and memory (total / free bytes); TR_ERR_NODEVICE with
 * the reason in why when there is no usable GPU. */
int tr_gpu_device(char *name, size_t name_len, uint64_t *total, uint64_t *free_bytes, char *why, size_t why_len);
/* CUDA devices visible to this process (0 when none). */
int tr_gpu_count(void);
/* Make GPU `device` the calling thread's current device (before any other
 * call here: a data-parallel rank uses its local rank's GPU); TR_ERR_NODEVICE
 * with the reason in why when it cannot. */
int tr_gpu_select(int device, char *why, size_t why_len);
/* Bytes in use on the device now (cudaMemGetInfo). */
int tr_gpu_mem_used(uint64_t *used);
/* Can the GPU train c's family at recompute level `recompute`? TR_ERR_ARG
 * with a message naming what to use instead when not (no GPU model in this
 * build, a level over the model's). No device needed. */
int tr_gpu_model_check(const tr_model_config *c, int recompute, char *err, size_t errlen);
/* Exact device arena bytes the run needs (model carve + input batch) at
 * activation recompute level `recompute` (0 .. TR_GPU_RECOMPUTE_MAX), with
 * optimizer opt's state (train/optim.h); 0 when the family's GPU model
 * cannot run it. */
uint64_t tr_gpu_arena_need(const tr_model_config *c, int B, int T, tr_precision p, int recompute,
                           const tr_optim_ops *opt);

/* Arena sized from plan (its device lines; the exact carve when that is
 * larger: *arena_bytes says what was allocated), model for micro-batches up
 * to (B, T) stepping with optimizer opt, params from host (fp32, model.h
 * layout). */
int tr_gpu_open(tr_gpu **out, const tr_model_config *c, int B, int T, tr_precision p, const tr_plan_out *plan,
                const float *host_params, uint64_t *arena_bytes, char *err, size_t errlen, int recompute,
                const tr_optim_ops *opt);
void tr_gpu_close(tr_gpu *g);
void tr_gpu_loader_hooks(tr_loader_opts *lo);

int tr_gpu_zero_grad(tr_gpu *g);
/* One micro-batch: upload b into the next device batch, wait for the copy
 * (*wait_s += that; the copy does not wait for the micro-step still
 * running), release b to the loader (ld NULL: the caller keeps b), forward +
 * backward (summed loss; fp16: times scale / (B x T), the scale on the
 * per-token mean loss, so no dlogit can overflow - train/gpu_model.h).
 * loss_sum non-NULL: *loss_sum / *n_targets as tr_model_fwd_bwd (waits for
 * the device). loss_sum NULL: nothing waits; the loss stays on the device,
 * summed over the step (tr_gpu_step_loss), *n_targets (may be NULL) is the
 * batch's target count from the host arrays, and with MKS_CUDA_GRAPH=1 the
 * forward + backward runs as a CUDA graph (train/gpu_step.h). On failure
 * err holds the first CUDA error: call, file:line, name, text
 * (kernels/kn_cuda_err.h). */
int tr_gpu_micro(tr_gpu *g, tr_loader *ld, const tr_batch *b, int doc_mask, double *loss_sum, uint64_t *n_targets,
                 double *wait_s, char *err, size_t errlen);
/* The loss sum and target count of the micro-batches since
 * tr_gpu_zero_grad (the deferred ones: loss_sum NULL above); waits for the
 * device once. The same double additions in the same order as summing each
 * micro-batch's on the host, so the logged loss is bit for bit the same. */
int tr_gpu_step_loss(tr_gpu *g, double *loss_sum, uint64_t *n_targets);
/* MKS_CUDA_GRAPH: 1 while graphs are in use (0: off, or a capture failed);
 * out: captures, replays, in-place updates (cudaGraphExecUpdate) so far. */
int tr_gpu_graph_active(const tr_gpu *g);
void tr_gpu_graph_counts(const tr_gpu *g, uint64_t out[3]);
/* Forward (loss only) of a host batch (validation; not pinned); leaves
 * zero-weighted gradients that the next tr_gpu_zero_grad clears. */
int tr_gpu_eval(tr_gpu *g, const tr_batch *b, int doc_mask, double *loss_sum, uint64_t *n_targets, char *err,
                size_t errlen);
/* Scale by 1/n_targets, clip to grad_clip, the optimizer's step at the
 * run's optimiser step (fp16: not advanced on a skipped, non-finite step;
 * *skipped = 1).
 * *gnorm: pre-clip norm of the token-mean gradient (NaN on a skipped
 * step); *scale: the loss scale used (on the mean loss; 1 outside fp16). */
int tr_gpu_step(tr_gpu *g, const tr_optim_hparams *h, float grad_clip, uint64_t n_targets, float *gnorm, int *skipped,
                float *scale, char *err, size_t errlen);

/* The device fp32 gradient of the step (tr_model_params layout, *n floats),
 * after every queued backward has finished (waits for the compute stream):
 * the data-parallel all-reduce runs on it in place before tr_gpu_step. */
int tr_gpu_grads(tr_gpu *g, float **dgrads, size_t *n);
/* Without waiting: the device gradient, the compute stream (cudaStream_t as
 * void *), and the readiness hook of the next tr_gpu_micro calls
 * (tr_cuda_model_set_grad_hook: called when group g's kernels are enqueued
 * on that stream). For the overlapped all-reduce. */
float *tr_gpu_grads_nowait(tr_gpu *g, size_t *n);
void *tr_gpu_stream(tr_gpu *g);
void tr_gpu_set_grad_hook(tr_gpu *g, tr_model_grad_hook fn, void *ctx);
/* 1 when the model calls the readiness hook (else set_grad_hook is a no-op
 * and gradients are ready when the backward ends). */
int tr_gpu_has_grad_hook(const tr_gpu *g);

/* Checkpoint state: fp32 params and the optimizer's state tensors (host
 * buffers of the model's param count; state NULL or state[k] NULL: not
 * copied) and the optimiser counters (fp16 loss scaler, optimiser step t)
 * as TR_GPU_EXTRA u64 words. */
enum { TR_GPU_EXTRA = 4 };
int tr_gpu_get_state(tr_gpu *g, float *params, void *const state[], uint64_t extra[TR_GPU_EXTRA]);
/* extra may be NULL: optimiser step = opt_step, a fresh loss scaler. */
int tr_gpu_set_state(tr_gpu *g, const float *params, void *const state[], const uint64_t extra[TR_GPU_EXTRA],
                     uint64_t opt_step);
const char *tr_gpu_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* TR_GPU_SESSION_H */
