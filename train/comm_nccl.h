/* comm_nccl.h - the GPU engine of data-parallel training: NCCL collectives
 * on device buffers, bootstrapped over the host communicator (comm.h):
 * rank 0 makes the ncclUniqueId and broadcasts it (tr_comm_bcast, i.e. MPI
 * under a launcher; world 1 needs no launcher). Built in tr_cuda
 * (train/comm_nccl.cu) when CMake finds NCCL (MKS_HAVE_NCCL); otherwise
 * every call returns TR_ERR_NODEVICE with a message saying so. Plain C: no
 * CUDA or NCCL header is needed to include it.
 *
 * Every call enqueues on the engine's CUDA stream and then waits for it,
 * polling the stream and ncclCommGetAsyncError against the host
 * communicator's deadline: a peer that died, hangs or whose GPU faulted
 * ends the call with TR_ERR_IO and a message (the communicator is aborted
 * with ncclCommAbort; the caller then ends the job with tr_comm_abort).
 * Sums are NCCL's (not the CPU engine's rank-order fold: GPU runs are
 * reproducible per world size, not bit-identical across world sizes).
 * Shards: the layout of comm.h on a buffer of tr_nccl_padded(n) floats. */
#ifndef TR_COMM_NCCL_H
#define TR_COMM_NCCL_H

#include <stddef.h>

#include "comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_nccl tr_nccl;

/* 1 when this build has NCCL. */
int tr_nccl_built(void);
/* Elements a ZeRO buffer needs for n: world * ceil(n / world). */
size_t tr_nccl_padded(size_t n, int world);
/* Select GPU `device` (usually tr_comm_local_rank), create the stream and
 * the NCCL communicator of the host communicator's world and ranks. A
 * collective call: every rank calls it. */
int tr_nccl_open(tr_comm *host, int device, tr_nccl **out, char *err, size_t errlen);
void tr_nccl_close(tr_nccl *n);
/* The engine's cudaStream_t (as void *), for kernels that must order with it. */
void *tr_nccl_stream(tr_nccl *n);
const char *tr_nccl_error(const tr_nccl *n);
/* Collectives on device floats; in place like comm.h. buf of the scatter
 * and gather holds tr_nccl_padded(n, world) floats. */
int tr_nccl_allreduce_f32(tr_nccl *n, float *dbuf, size_t count);
int tr_nccl_reduce_scatter_f32(tr_nccl *n, float *dbuf, size_t count);
int tr_nccl_allgather_f32(tr_nccl *n, float *dbuf, size_t count);
int tr_nccl_bcast(tr_nccl *n, void *dbuf, size_t bytes, int root);
/* Asynchronous all-reduce (gradient buckets while backward runs): enqueued
 * on the engine's stream after the work enqueued so far on `after` (a
 * cudaStream_t as void *, NULL: none; ordered with an event), without
 * waiting. tr_nccl_wait then waits for everything enqueued, against the
 * deadline like the blocking calls. */
int tr_nccl_allreduce_f32_after(tr_nccl *n, float *dbuf, size_t count, void *after);
int tr_nccl_wait(tr_nccl *n);

#ifdef __cplusplus
}
#endif
#endif
