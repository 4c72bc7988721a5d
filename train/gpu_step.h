/* gpu_step.h - the host-side decisions of the GPU step (issue 31 item 3:
 * one multi-tensor AdamW, no host wait per micro-step, a CUDA graph per
 * micro-step), in plain C so they are tested without a GPU
 * (tests/test_gpu_step.c).  Internal to the train module; used by
 * train/gpu_common.cuh and train/gpu_session.cu.
 *
 * Switches (read when a GPU model or session is created):
 *   MKS_ADAMW_MULTI=1       the optimizer's one-launch step over every
 *                           tensor (tr_optim_ops.step_cuda_multi) instead of
 *                           one launch per tensor; bit-identical by
 *                           construction, opt-in until a lent GPU has run it
 *   MKS_ADAMW_PER_TENSOR=1  one launch per tensor whatever else is set
 *   MKS_GPU_STEP_SYNC=1     the switch back for the micro-step's waits: each
 *                           micro-batch's loss read back at once, one device
 *                           input batch (the default: the step's loss summed
 *                           on the device and read once per optimizer step,
 *                           two device batches; the logged values are the
 *                           same bits either way)
 *   MKS_CUDA_GRAPH=1        each micro-step's forward + backward captured
 *                           once per (rows, T, doc mask, input buffer, dloss
 *                           factor) and replayed; never with MKS_SYNC_DEBUG=1
 *                           or a data-parallel gradient hook (host callbacks
 *                           mid-backward); a failed capture runs eagerly
 *                           with one warning. */
#ifndef TR_GPU_STEP_H
#define TR_GPU_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "kn_cuda_size.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The small pieces at the end of every GPU model's carve
 * (train/gpu_common.cuh, tr_gpu_params_carve_tail): the loss sums (4
 * doubles: the last forward's and the step's), the gradient sum of squares
 * (double), the clip factor and the norm (floats), the optimizer's tensor
 * table for nt tensors. Bytes without the arena's alignment; the planners
 * add TR_GPU_TAIL_SMALL_PIECES x TR_CUDA_ALIGN for it. */
#define TR_GPU_TAIL_SMALL_PIECES 5
static inline uint64_t tr_gpu_tail_small_bytes(size_t nt) {
    return 4 * 8 + 8 + 4 + 4 + (uint64_t)kn_adamw_multi_table_bytes(nt);
}

/* 1 when the value of environment variable `name` is set, not empty and not "0". */
int tr_gpu_env_on(const char *name);
/* The multi-tensor optimizer step: MKS_ADAMW_MULTI=1 and not MKS_ADAMW_PER_TENSOR=1. */
int tr_gpu_adamw_multi_wanted(void);
/* MKS_GPU_STEP_SYNC=1: the micro-step as before issue 31 item 3 (the switch
 * back): each micro-batch's loss read at once (a wait per micro-step) and
 * one device input batch (each copy waits for the previous compute). */
int tr_gpu_step_sync_wanted(void);
/* CUDA graphs for the micro-step: MKS_CUDA_GRAPH=1, and neither sync_debug
 * (MKS_SYNC_DEBUG: a wait after every launch, illegal while capturing) nor
 * a gradient hook (has_hook: host callbacks in the middle of backward). */
int tr_gpu_graph_wanted(int sync_debug, int has_hook);

/* Targets that carry loss (targets[i] >= 0: what the device's loss sum
 * counts), counted on the host from the batch before it goes back to the
 * loader, so the step's count needs no read from the device. */
uint64_t tr_gpu_count_targets(const int32_t *targets, size_t n);

/* What a captured micro-step depends on: a graph replays exactly the
 * kernels, shapes and pointers it was captured with, and the dloss factor
 * (fp16: scale / (B x T)) is a kernel argument inside it. */
typedef struct {
    int rows, T, doc;     /* doc: the document mask is on */
    const void *inputs;   /* the device input buffer (double-buffered: one of two) */
    uint32_t factor_bits; /* the dloss factor's float bits */
} tr_gpu_graph_key;

/* Graphs a session keeps (2 device batches x with / without the document
 * mask x a short last micro-batch fit; more shapes replace entries in turn). */
#define TR_GPU_GRAPHS 8

/* The cache entry for k among keys[0..n): its index with *exact = 1 when
 * everything matches; else the index of an entry with the same shape and
 * buffer (only the factor differs: update that graph in place,
 * cudaGraphExecUpdate) with *exact = 0; -1 when none. */
int tr_gpu_graph_find(const tr_gpu_graph_key *keys, int n, const tr_gpu_graph_key *k, int *exact);

#ifdef __cplusplus
}
#endif
#endif /* TR_GPU_STEP_H */
