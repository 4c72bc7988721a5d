/* comm_nccl.cu - the NCCL engine (comm_nccl.h). With MKS_HAVE_NCCL (CMake
 * found nccl.h and libnccl) the real engine, otherwise stubs that say NCCL
 * is not built. */
#include "comm_nccl.h"

#include "tr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" size_t tr_nccl_padded(size_t n, int world)
{
    if (world < 1)
        world = 1;
    size_t w = (size_t)world, per = n / w + (n % w != 0);
    return per * w;
}

#ifdef MKS_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#include <time.h>

struct tr_nccl {
    tr_comm *host;
    int rank, world, device;
    cudaStream_t stream;
    cudaEvent_t ev; /* orders the asynchronous calls after another stream */
    ncclComm_t comm;
    int aborted;
    char err[1024];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

extern "C" int tr_nccl_built(void) { return 1; }

extern "C" int tr_nccl_open(tr_comm *host, int device, tr_nccl **out, char *err, size_t errlen)
{
    *out = NULL;
    tr_nccl *n = (tr_nccl *)calloc(1, sizeof *n);
    if (!n) {
        snprintf(err, errlen, "out of memory");
        return TR_ERR_NOMEM;
    }
    n->host = host;
    n->rank = tr_comm_rank(host);
    n->world = tr_comm_world(host);
    n->device = device;
    cudaError_t ce = cudaSetDevice(device);
    if (ce == cudaSuccess)
        ce = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        ce = cudaEventCreateWithFlags(&n->ev, cudaEventDisableTiming);
    if (ce != cudaSuccess) {
        snprintf(err, errlen, "rank %d: GPU %d: %s", n->rank, device, cudaGetErrorString(ce));
        if (n->ev)
            cudaEventDestroy(n->ev);
        if (n->stream)
            cudaStreamDestroy(n->stream);
        free(n);
        return TR_ERR_NODEVICE;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = ncclSuccess;
    if (n->rank == 0)
        r = ncclGetUniqueId(&id);
    /* a failure on rank 0 must not leave the others waiting in the bcast:
     * they receive an all-zero id plus the status */
    int st[2] = {(int)r, 0};
    int rc = tr_comm_bcast(host, st, sizeof st, 0);
    if (!rc)
        rc = tr_comm_bcast(host, &id, sizeof id, 0);
    if (rc) {
        snprintf(err, errlen, "NCCL bootstrap: %s", tr_comm_error(host));
        cudaEventDestroy(n->ev);
        cudaStreamDestroy(n->stream);
        free(n);
        return rc;
    }
    if (st[0] != ncclSuccess) {
        snprintf(err, errlen, "rank 0: ncclGetUniqueId: %s", ncclGetErrorString((ncclResult_t)st[0]));
        cudaEventDestroy(n->ev);
        cudaStreamDestroy(n->stream);
        free(n);
        return TR_ERR_IO;
    }
    r = ncclCommInitRank(&n->comm, n->world, id, n->rank);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "rank %d: ncclCommInitRank (world %d, GPU %d): %s", n->rank, n->world, device,
                 ncclGetErrorString(r));
        cudaEventDestroy(n->ev);
        cudaStreamDestroy(n->stream);
        free(n);
        return TR_ERR_IO;
    }
    *out = n;
    return TR_OK;
}

extern "C" void tr_nccl_close(tr_nccl *n)
{
    if (!n)
        return;
    if (n->comm && !n->aborted) /* ncclCommAbort frees it */
        ncclCommDestroy(n->comm);
    if (n->ev)
        cudaEventDestroy(n->ev);
    if (n->stream)
        cudaStreamDestroy(n->stream);
    free(n);
}

extern "C" void *tr_nccl_stream(tr_nccl *n) { return (void *)n->stream; }
extern "C" const char *tr_nccl_error(const tr_nccl *n) { return n->err; }

/* Wait for the stream against the deadline; abort the communicator when a
 * peer fails or the deadline passes. */
static int finish(tr_nccl *n, ncclResult_t r, const char *what)
{
    if (r != ncclSuccess) {
        snprintf(n->err, sizeof n->err, "rank %d: %s: %s", n->rank, what, ncclGetErrorString(r));
        return TR_ERR_IO;
    }
    double t0 = now_s(), dl = tr_comm_timeout(n->host);
    for (long spins = 0;; spins++) {
        cudaError_t ce = cudaStreamQuery(n->stream);
        if (ce == cudaSuccess)
            return TR_OK;
        if (ce != cudaErrorNotReady) {
            snprintf(n->err, sizeof n->err, "rank %d: %s: GPU %d fault: %s", n->rank, what, n->device,
                     cudaGetErrorString(ce));
            ncclCommAbort(n->comm);
            n->aborted = 1;
            return TR_ERR_IO;
        }
        ncclResult_t ar = ncclSuccess;
        ncclCommGetAsyncError(n->comm, &ar);
        if (ar != ncclSuccess && ar != ncclInProgress) {
            snprintf(n->err, sizeof n->err, "rank %d: %s: NCCL reports %s (a peer rank or its GPU failed)",
                     n->rank, what, ncclGetErrorString(ar));
            ncclCommAbort(n->comm);
            n->aborted = 1;
            return TR_ERR_IO;
        }
        double el = now_s() - t0;
        if (el > dl) {
            snprintf(n->err, sizeof n->err,
                     "rank %d: %s did not complete within %.1f s (the deadline): a peer rank died, hangs or its GPU "
                     "faulted",
                     n->rank, what, el);
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

static int usable(tr_nccl *n, const char *what)
{
    if (n->aborted) {
        snprintf(n->err, sizeof n->err, "rank %d: %s after the NCCL communicator was aborted", n->rank, what);
        return TR_ERR_IO;
    }
    n->err[0] = 0;
    return TR_OK;
}

extern "C" int tr_nccl_allreduce_f32(tr_nccl *n, float *dbuf, size_t count)
{
    int rc = usable(n, "all-reduce");
    if (rc || count == 0)
        return rc;
    return finish(n, ncclAllReduce(dbuf, dbuf, count, ncclFloat32, ncclSum, n->comm, n->stream), "all-reduce");
}

extern "C" int tr_nccl_allreduce_f32_after(tr_nccl *n, float *dbuf, size_t count, void *after)
{
    if (n->aborted) {
        snprintf(n->err, sizeof n->err, "rank %d: all-reduce after the NCCL communicator was aborted", n->rank);
        return TR_ERR_IO;
    }
    if (count == 0)
        return TR_OK;
    if (after) {
        cudaError_t ce = cudaEventRecord(n->ev, (cudaStream_t)after);
        if (ce == cudaSuccess)
            ce = cudaStreamWaitEvent(n->stream, n->ev, 0);
        if (ce != cudaSuccess) {
            snprintf(n->err, sizeof n->err, "rank %d: all-reduce bucket: ordering after the compute stream: %s",
                     n->rank, cudaGetErrorString(ce));
            return TR_ERR_IO;
        }
    }
    ncclResult_t r = ncclAllReduce(dbuf, dbuf, count, ncclFloat32, ncclSum, n->comm, n->stream);
    if (r != ncclSuccess) {
        snprintf(n->err, sizeof n->err, "rank %d: all-reduce bucket: %s", n->rank, ncclGetErrorString(r));
        return TR_ERR_IO;
    }
    return TR_OK;
}

extern "C" int tr_nccl_wait(tr_nccl *n)
{
    if (n->aborted) {
        snprintf(n->err, sizeof n->err, "rank %d: wait after the NCCL communicator was aborted", n->rank);
        return TR_ERR_IO;
    }
    return finish(n, ncclSuccess, "all-reduce (gradient buckets)");
}

extern "C" int tr_nccl_reduce_scatter_f32(tr_nccl *n, float *dbuf, size_t count)
{
    int rc = usable(n, "reduce-scatter");
    if (rc || count == 0)
        return rc;
    size_t per = tr_nccl_padded(count, n->world) / (size_t)n->world;
    return finish(n,
                  ncclReduceScatter(dbuf, dbuf + per * (size_t)n->rank, per, ncclFloat32, ncclSum, n->comm,
                                    n->stream),
                  "reduce-scatter");
}

extern "C" int tr_nccl_allgather_f32(tr_nccl *n, float *dbuf, size_t count)
{
    int rc = usable(n, "all-gather");
    if (rc || count == 0)
        return rc;
    size_t per = tr_nccl_padded(count, n->world) / (size_t)n->world;
    return finish(n, ncclAllGather(dbuf + per * (size_t)n->rank, dbuf, per, ncclFloat32, n->comm, n->stream),
                  "all-gather");
}

extern "C" int tr_nccl_bcast(tr_nccl *n, void *dbuf, size_t bytes, int root)
{
    int rc = usable(n, "broadcast");
    if (rc || bytes == 0)
        return rc;
    if (root < 0 || root >= n->world)
        return TR_ERR_ARG;
    return finish(n, ncclBroadcast(dbuf, dbuf, bytes, ncclUint8, root, n->comm, n->stream), "broadcast");
}

#else /* no NCCL in this build */

struct tr_nccl {
    int unused;
};

static const char no_nccl[] = "this build has no NCCL (configure with -DMKS_NCCL_ROOT=DIR holding include/nccl.h "
                              "and lib/libnccl.so*, e.g. the nvidia-nccl-cu13 wheel's nvidia/nccl folder)";

extern "C" int tr_nccl_built(void) { return 0; }
extern "C" int tr_nccl_open(tr_comm *host, int device, tr_nccl **out, char *err, size_t errlen)
{
    (void)host;
    (void)device;
    *out = NULL;
    snprintf(err, errlen, "%s", no_nccl);
    return TR_ERR_NODEVICE;
}
extern "C" void tr_nccl_close(tr_nccl *n) { (void)n; }
extern "C" void *tr_nccl_stream(tr_nccl *n)
{
    (void)n;
    return NULL;
}
extern "C" const char *tr_nccl_error(const tr_nccl *n)
{
    (void)n;
    return no_nccl;
}
extern "C" int tr_nccl_allreduce_f32(tr_nccl *n, float *dbuf, size_t count)
{
    (void)n;
    (void)dbuf;
    (void)count;
    return TR_ERR_NODEVICE;
}
extern "C" int tr_nccl_allreduce_f32_after(tr_nccl *n, float *dbuf, size_t count, void *after)
{
    (void)n;
    (void)dbuf;
    (void)count;
    (void)after;
    return TR_ERR_NODEVICE;
}
extern "C" int tr_nccl_wait(tr_nccl *n)
{
    (void)n;
    return TR_ERR_NODEVICE;
}
extern "C" int tr_nccl_reduce_scatter_f32(tr_nccl *n, float *dbuf, size_t count)
{
    (void)n;
    (void)dbuf;
    (void)count;
    return TR_ERR_NODEVICE;
}
extern "C" int tr_nccl_allgather_f32(tr_nccl *n, float *dbuf, size_t count)
{
    (void)n;
    (void)dbuf;
    (void)count;
    return TR_ERR_NODEVICE;
}
extern "C" int tr_nccl_bcast(tr_nccl *n, void *dbuf, size_t bytes, int root)
{
    (void)n;
    (void)dbuf;
    (void)bytes;
    (void)root;
    return TR_ERR_NODEVICE;
}
#endif
