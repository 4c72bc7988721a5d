/* comm_nccl.cu - the NCCL engine of the communicator (comm.h "Device
 * engines", comm_engine.h): collectives on device buffers, bootstrapped
 * over a host communicator: rank 0 makes the ncclUniqueId and broadcasts it
 * (tr_comm_bcast, i.e. MPI under a launcher; world 1 needs no launcher).
 * Compiled and registered only where CMake finds nccl.h and libnccl
 * (train/CMakeLists.txt).
 *
 * Every call enqueues on the engine's CUDA stream; the blocking ones then
 * wait for it, polling the stream and ncclCommGetAsyncError against the
 * communicator's deadline: a peer that died, hangs or whose GPU faulted
 * ends the call with TR_ERR_IO and a message (the NCCL communicator is
 * aborted with ncclCommAbort; the caller then ends the job with
 * tr_comm_abort on the host communicator). Sums are NCCL's (not the host
 * engines' rank-order fold). Shards: the layout of comm.h on a buffer of
 * tr_comm_padded(n, world) floats. What NCCL has no call for here (small
 * folds, bytes, point-to-point, barrier) runs on the host communicator. */
extern "C" {
#include "mks_common.h"
#include "comm.h"
#include "comm_engine.h"
#include "tr.h"
}

#include <cuda_runtime.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int device;
    cudaStream_t stream;
    cudaEvent_t ev; /* orders the asynchronous calls after another stream */
    ncclComm_t comm;
    int aborted;
} nccl_state;

static void release(nccl_state *n) {
    if (n->ev) cudaEventDestroy(n->ev);
    if (n->stream) cudaStreamDestroy(n->stream);
    free(n);
}

static int nccl_open(tr_comm *c, tr_comm *host, int device, char *err, size_t errlen) {
    nccl_state *n = (nccl_state *)calloc(1, sizeof *n);
    if (!n) {
        snprintf(err, errlen, "out of memory");
        return TR_ERR_NOMEM;
    }
    c->rank = tr_comm_rank(host);
    c->world = tr_comm_world(host);
    c->local_rank = tr_comm_local_rank(host);
    c->local_size = tr_comm_local_size(host);
    n->device = device;
    cudaError_t ce = cudaSetDevice(device);
    if (ce == cudaSuccess) ce = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&n->ev, cudaEventDisableTiming);
    if (ce != cudaSuccess) {
        snprintf(err, errlen, "rank %d: GPU %d: %s", c->rank, device, cudaGetErrorString(ce));
        release(n);
        return TR_ERR_NODEVICE;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = ncclSuccess;
    if (c->rank == 0) r = ncclGetUniqueId(&id);
    /* a failure on rank 0 must not leave the others waiting in the bcast:
     * they receive an all-zero id plus the status */
    int st[2] = {(int)r, 0};
    int rc = tr_comm_bcast(host, st, sizeof st, 0);
    if (!rc) rc = tr_comm_bcast(host, &id, sizeof id, 0);
    if (rc) {
        snprintf(err, errlen, "NCCL bootstrap: %s", tr_comm_error(host));
        release(n);
        return rc;
    }
    if (st[0] != ncclSuccess) {
        snprintf(err, errlen, "rank 0: ncclGetUniqueId: %s", ncclGetErrorString((ncclResult_t)st[0]));
        release(n);
        return TR_ERR_IO;
    }
    r = ncclCommInitRank(&n->comm, c->world, id, c->rank);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "rank %d: ncclCommInitRank (world %d, GPU %d): %s", c->rank, c->world, device,
                 ncclGetErrorString(r));
        release(n);
        return TR_ERR_IO;
    }
    c->impl = n;
    return TR_OK;
}

static void nccl_close(tr_comm *c) {
    nccl_state *n = (nccl_state *)c->impl;
    if (!n) return;
    if (n->comm && !n->aborted) /* ncclCommAbort frees it */
        ncclCommDestroy(n->comm);
    release(n);
    c->impl = NULL;
}

/* Wait for the stream against the deadline; abort the communicator when a
 * peer fails or the deadline passes. */
static int finish(tr_comm *c, ncclResult_t r, const char *what) {
    nccl_state *n = (nccl_state *)c->impl;
    if (r != ncclSuccess) {
        snprintf(c->err, sizeof c->err, "rank %d: %s: %s", c->rank, what, ncclGetErrorString(r));
        return TR_ERR_IO;
    }
    double t0 = mc_now_s(), dl = c->timeout;
    for (long spins = 0;; spins++) {
        cudaError_t ce = cudaStreamQuery(n->stream);
        if (ce == cudaSuccess) return TR_OK;
        if (ce != cudaErrorNotReady) {
            snprintf(c->err, sizeof c->err, "rank %d: %s: GPU %d fault: %s", c->rank, what, n->device,
                     cudaGetErrorString(ce));
            ncclCommAbort(n->comm);
            n->aborted = 1;
            return TR_ERR_IO;
        }
        ncclResult_t ar = ncclSuccess;
        ncclCommGetAsyncError(n->comm, &ar);
        if (ar != ncclSuccess && ar != ncclInProgress) {
            snprintf(c->err, sizeof c->err, "rank %d: %s: NCCL reports %s (a peer rank or its GPU failed)", c->rank,
                     what, ncclGetErrorString(ar));
            ncclCommAbort(n->comm);
            n->aborted = 1;
            return TR_ERR_IO;
        }
        double el = mc_now_s() - t0;
        if (el > dl) {
            snprintf(c->err, sizeof c->err,
                     "rank %d: %s did not complete within %.1f s (the deadline): a peer rank died, hangs or its GPU "
                     "faulted",
                     c->rank, what, el);
            ncclCommAbort(n->comm);
            n->aborted = 1;
            return TR_ERR_IO;
        }
        if (spins > 1000) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Nothing more after an abort (the communicator is gone). */
static int usable(tr_comm *c, const char *what) {
    if (((nccl_state *)c->impl)->aborted) {
        snprintf(c->err, sizeof c->err, "rank %d: %s after the NCCL communicator was aborted", c->rank, what);
        return TR_ERR_IO;
    }
    return TR_OK;
}

/* all-reduce of [a, b); reduce-scatter of the whole padded buffer (the
 * units layouts of the host engines are not NCCL's) */
static int nccl_reduce_range(tr_comm *c, float *buf, size_t n, size_t unit, size_t a, size_t b, int gather) {
    nccl_state *s = (nccl_state *)c->impl;
    const char *what = gather ? "all-reduce" : "reduce-scatter";
    int rc = usable(c, what);
    if (rc) return rc;
    if (unit != 0 || (!gather && (a != 0 || b != n))) {
        snprintf(c->err, sizeof c->err, "nccl %s: whole buffer, plain shards only (unit %zu, range [%zu, %zu) of %zu)",
                 what, unit, a, b, n);
        return TR_ERR_ARG;
    }
    if (gather)
        return finish(c, ncclAllReduce(buf + a, buf + a, b - a, ncclFloat32, ncclSum, s->comm, s->stream), what);
    size_t per = tr_comm_padded(n, c->world) / (size_t)c->world;
    return finish(c, ncclReduceScatter(buf, buf + per * (size_t)c->rank, per, ncclFloat32, ncclSum, s->comm, s->stream),
                  what);
}

static int nccl_allgather(tr_comm *c, float *buf, size_t n, size_t unit) {
    nccl_state *s = (nccl_state *)c->impl;
    int rc = usable(c, "all-gather");
    if (rc) return rc;
    if (unit != 0) {
        snprintf(c->err, sizeof c->err, "nccl all-gather: plain shards only (unit %zu)", unit);
        return TR_ERR_ARG;
    }
    size_t per = tr_comm_padded(n, c->world) / (size_t)c->world;
    return finish(c, ncclAllGather(buf + per * (size_t)c->rank, buf, per, ncclFloat32, s->comm, s->stream),
                  "all-gather");
}

static int nccl_bcast(tr_comm *c, void *buf, size_t bytes, int root) {
    nccl_state *s = (nccl_state *)c->impl;
    int rc = usable(c, "broadcast");
    if (rc) return rc;
    return finish(c, ncclBroadcast(buf, buf, bytes, ncclUint8, root, s->comm, s->stream), "broadcast");
}

static int nccl_reduce_async(tr_comm *c, float *buf, size_t a, size_t b, void *after) {
    nccl_state *s = (nccl_state *)c->impl;
    int rc = usable(c, "all-reduce");
    if (rc) return rc;
    if (after) {
        cudaError_t ce = cudaEventRecord(s->ev, (cudaStream_t)after);
        if (ce == cudaSuccess) ce = cudaStreamWaitEvent(s->stream, s->ev, 0);
        if (ce != cudaSuccess) {
            snprintf(c->err, sizeof c->err, "rank %d: all-reduce bucket: ordering after the compute stream: %s",
                     c->rank, cudaGetErrorString(ce));
            return TR_ERR_IO;
        }
    }
    ncclResult_t r = ncclAllReduce(buf + a, buf + a, b - a, ncclFloat32, ncclSum, s->comm, s->stream);
    if (r != ncclSuccess) {
        snprintf(c->err, sizeof c->err, "rank %d: all-reduce bucket: %s", c->rank, ncclGetErrorString(r));
        return TR_ERR_IO;
    }
    return TR_OK;
}

static int nccl_wait(tr_comm *c) {
    int rc = usable(c, "wait");
    return rc ? rc : finish(c, ncclSuccess, "all-reduce (gradient buckets)");
}

static tr_comm_engine make_engine(void) {
    tr_comm_engine e;
    memset(&e, 0, sizeof e);
    e.name = "nccl";
    e.device = 1;
    e.open = nccl_open;
    e.close = nccl_close;
    e.reduce_range = nccl_reduce_range;
    e.allgather = nccl_allgather;
    e.bcast = nccl_bcast;
    e.reduce_async = nccl_reduce_async;
    e.wait = nccl_wait;
    return e;
}

extern "C" const tr_comm_engine tr_comm_engine_nccl = make_engine();
