/* gpu_arena.h - the device memory of a GPU run (train/gpu_arena.cu, library
 * tr_cuda; built only with MKS_ENABLE_CUDA; identifiers tr_cuda_*).  Plain C
 * API, no CUDA headers needed to include it.
 *
 * What is here (docs/memory-plan.md, "GPU"):
 *  - one device arena, sized from the planner's device lines (the CUDA
 *    context line excluded: it is outside the arena), cudaMalloc'ed ONCE
 *    before step 1; tensors are carved from it in plan order with 256-byte
 *    alignment; tr_cuda_arena_seal() closes it, after which every take
 *    fails: nothing is allocated after step 1;
 *  - pinned host buffers for the loader (cudaHostAlloc) through
 *    tr_loader_opts.alloc/free;
 *  - an input uploader: its own copy stream, events ordering the copy after
 *    the compute stream is done with the device batch and the compute
 *    stream after the copy; the host buffer is handed back to the loader
 *    only once its copy's event has completed;
 *  - device memory readings (cudaMemGetInfo) for "planned vs measured".
 * The GPU model (train/gpu_model.h) carves its pieces from the arena; the
 * GPU session (train/gpu_session.h) opens the arena, the model and the
 * uploader for the CUDA backend (train/backend_cuda.cu).
 *
 * Return values: TR_OK or a negative tr_err (TR_ERR_NODEVICE when there is
 * no usable GPU, TR_ERR_NOMEM when the arena cannot be allocated or is
 * exhausted - a planner bug, reported with the item's name). */
#ifndef TR_GPU_ARENA_H
#define TR_GPU_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "tr.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *tr_cuda_stream; /* == cudaStream_t */

/* Device 0's name and memory; TR_ERR_NODEVICE without a GPU. */
int tr_cuda_device_info(char *name, size_t name_len, uint64_t *total_bytes, uint64_t *free_bytes);
/* Bytes in use on the device now (total - free from cudaMemGetInfo). */
int tr_cuda_mem_used(uint64_t *used);

/* ---- the arena ---------------------------------------------------------------- */
#define TR_CUDA_ALIGN 256
typedef struct {
    char *base;  /* device pointer */
    size_t size; /* bytes allocated */
    size_t used; /* bytes handed out (with alignment) */
    int sealed;
    int n_takes;
    char last_error[256];
} tr_cuda_arena;

/* Arena bytes for a plan: the sum of its "device" items except the CUDA
 * context, plus TR_CUDA_ALIGN per item of alignment slack. */
size_t tr_cuda_arena_bytes(const tr_plan_out *plan);
/* One cudaMalloc of tr_cuda_arena_bytes(plan). */
int tr_cuda_arena_create(tr_cuda_arena *a, const tr_plan_out *plan);
/* Aligned sub-allocation; NULL when sealed or exhausted (a->last_error says
 * which, naming `what`). */
void *tr_cuda_arena_take(tr_cuda_arena *a, size_t bytes, const char *what);
void tr_cuda_arena_seal(tr_cuda_arena *a);
void tr_cuda_arena_destroy(tr_cuda_arena *a);

/* ---- pinned host buffers (tr_loader_opts.alloc / .free) ------------------------ */
void *tr_cuda_pinned_alloc(size_t bytes, void *user);
void tr_cuda_pinned_free(void *p, void *user);

/* ---- input upload ------------------------------------------------------------------ */
typedef struct {
    uint32_t *inputs; /* [rows*T] device */
    int32_t *targets; /* [rows*T] */
    int32_t *pos;     /* [rows*T] */
    int32_t *seg;     /* [rows*T] document ids (attention mask) */
    int rows, T;
    int slot; /* which of the TR_CUDA_INPUT_SLOTS device batches */
} tr_cuda_batch;

typedef struct tr_cuda_input tr_cuda_input;
/* Device batches used in turn (double buffering): the next batch's copy
 * overlaps the current batch's compute. */
#define TR_CUDA_INPUT_SLOTS 2
/* Arena bytes the uploader takes for micro-batches up to max_rows x T:
 * TR_CUDA_INPUT_SLOTS x (rows*T*16 + four pieces' alignment); the plan's
 * "device input batch" line counts the same 32 bytes per token. */
size_t tr_cuda_input_arena_bytes(int max_rows, int T);
/* The device batches (tr_cuda_input_arena_bytes) are taken from the arena;
 * the copy stream and events are created here (before the arena is sealed;
 * they hold no arena memory). */
int tr_cuda_input_create(tr_cuda_input **out, tr_cuda_arena *a, int max_rows, int T, tr_cuda_stream compute);
/* Enqueue the copy of host batch b (pinned) into the next device batch
 * slot: the copy stream first waits until the compute stream has released
 * what that slot held (tr_cuda_input_consumed, two uploads ago), then
 * copies, then the compute stream is made to wait for the copy.  Returns at
 * once (nothing synchronised). */
int tr_cuda_input_upload(tr_cuda_input *in, const tr_batch *b, tr_cuda_batch *dev);
/* Blocks until the last upload's copy has completed: then its host buffer
 * may go back to the loader (tr_loader_release).  *wait_s: seconds waited.
 * The copy waits only for the compute two uploads back, so this does not
 * wait for the micro-step still running. */
int tr_cuda_input_host_done(tr_cuda_input *in, double *wait_s);
/* Recorded on the compute stream after the last use of the last upload's batch. */
int tr_cuda_input_consumed(tr_cuda_input *in);
void tr_cuda_input_destroy(tr_cuda_input *in);

#ifdef __cplusplus
}
#endif
#endif /* TR_GPU_ARENA_H */
