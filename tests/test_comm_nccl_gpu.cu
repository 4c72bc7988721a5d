/* test_comm_nccl_gpu: the NCCL engine (train/comm_nccl.cu, a device
 * communicator of train/comm.h) on the GPUs of this host. Alone: world 1 (bootstrap without a launcher, every collective
 * is a copy through NCCL); under `mpirun -np N` (N <= GPUs): rank r on GPU
 * local_rank, all-reduce / reduce-scatter / all-gather / broadcast checked
 * against the host (integer-valued floats: exact in any order); what a
 * device communicator does not have is refused. Exits 77 without a GPU or
 * without NCCL in the build. */
#include "comm.h"
#include "tr.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_check.h"

static float v(int r, size_t i) { return (float)((int)(i % 1000) - 500 + 1000 * r); }

/* Elements of h[0..cnt) that are not the sum over the W ranks of v. */
static size_t wrong_sums(const float *h, size_t cnt, int W) {
    size_t bad = 0;
    for (size_t i = 0; i < cnt; i++) {
        float e = 0;
        for (int r = 0; r < W; r++) e += v(r, i);
        bad += h[i] != e;
    }
    return bad;
}

int main(void) {
    int ndev = 0;
    if (!tr_comm_have("nccl")) {
        printf("test_comm_nccl_gpu: no NCCL in this build: skipped\n");
        return 77;
    }
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("test_comm_nccl_gpu: no GPU: skipped\n");
        return 77;
    }
    tr_comm *c;
    char err[512];
    if (tr_comm_open(NULL, &c, err, sizeof err)) {
        printf("test_comm_nccl_gpu: %s\n", err);
        return 1;
    }
    int me = tr_comm_rank(c), W = tr_comm_world(c);
    if (tr_comm_local_size(c) > ndev) {
        printf("test_comm_nccl_gpu: %d ranks on this host, %d GPUs: skipped\n", tr_comm_local_size(c), ndev);
        tr_comm_close(c);
        return 77;
    }
    tr_comm *n;
    if (tr_comm_open_device(c, "nccl", tr_comm_local_rank(c), &n, err, sizeof err)) {
        printf("test_comm_nccl_gpu: %s\n", err);
        tr_comm_abort(c, 1);
        return 1;
    }
    CHECK(tr_comm_on_device(n) && !strcmp(tr_comm_engine_name(n), "nccl") && tr_comm_world(n) == W &&
              tr_comm_rank(n) == me,
          "device communicator");
    {
        double x = 1;
        CHECK(tr_comm_allreduce_f64(n, &x, 1) == TR_ERR_ARG && strstr(tr_comm_error(n), "has no allreduce(f64)"),
              "small folds run on the host communicator: %s", tr_comm_error(n));
    }
    const size_t sizes[] = {1, 7, 1000, 1 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t cnt = sizes[k], pad = tr_comm_padded(cnt, W);
        float *h = (float *)malloc(pad * sizeof(float)), *d = NULL;
        cudaMalloc((void **)&d, pad * sizeof(float));
        for (size_t i = 0; i < pad; i++) h[i] = v(me, i);
        cudaMemcpy(d, h, pad * sizeof(float), cudaMemcpyHostToDevice);
        CHECK(tr_comm_allreduce_f32(n, d, cnt) == 0, "allreduce: %s", tr_comm_error(n));
        cudaMemcpy(h, d, cnt * sizeof(float), cudaMemcpyDeviceToHost);
        size_t bad = wrong_sums(h, cnt, W);
        CHECK(bad == 0, "allreduce %zu: %zu wrong", cnt, bad);
        /* asynchronous buckets (the overlapped gradient all-reduce): the data
         * arrives on another stream, two buckets ordered after it, one wait */
        {
            cudaStream_t cs;
            cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
            for (size_t i = 0; i < pad; i++) h[i] = v(me, i);
            cudaMemsetAsync(d, 0, pad * sizeof(float), cs);
            cudaMemcpyAsync(d, h, pad * sizeof(float), cudaMemcpyHostToDevice, cs);
            size_t half = cnt / 2;
            CHECK(tr_comm_allreduce_range_async_f32(n, d, 0, half, (void *)cs) == 0, "allreduce_async: %s",
                  tr_comm_error(n));
            CHECK(tr_comm_allreduce_range_async_f32(n, d, half, cnt, (void *)cs) == 0, "allreduce_async: %s",
                  tr_comm_error(n));
            CHECK(tr_comm_wait(n) == 0, "wait: %s", tr_comm_error(n));
            cudaMemcpy(h, d, cnt * sizeof(float), cudaMemcpyDeviceToHost);
            bad = wrong_sums(h, cnt, W);
            CHECK(bad == 0, "allreduce buckets %zu: %zu wrong", cnt, bad);
            cudaStreamDestroy(cs);
        }
        for (size_t i = 0; i < pad; i++) h[i] = v(me, i);
        cudaMemcpy(d, h, pad * sizeof(float), cudaMemcpyHostToDevice);
        CHECK(tr_comm_reduce_scatter_f32(n, d, cnt) == 0, "reduce_scatter: %s", tr_comm_error(n));
        CHECK(tr_comm_allgather_f32(n, d, cnt) == 0, "allgather: %s", tr_comm_error(n));
        cudaMemcpy(h, d, cnt * sizeof(float), cudaMemcpyDeviceToHost);
        bad = wrong_sums(h, cnt, W);
        CHECK(bad == 0, "reduce_scatter + allgather %zu: %zu wrong", cnt, bad);
        cudaMemset(d, me == 0 ? 0x3f : 0, cnt * sizeof(float));
        CHECK(tr_comm_bcast(n, d, cnt * sizeof(float), 0) == 0, "bcast: %s", tr_comm_error(n));
        cudaMemcpy(h, d, cnt * sizeof(float), cudaMemcpyDeviceToHost);
        bad = 0;
        for (size_t i = 0; i < cnt; i++) {
            uint32_t u;
            memcpy(&u, &h[i], 4);
            bad += u != 0x3f3f3f3fu;
        }
        CHECK(bad == 0, "bcast %zu: %zu wrong", cnt, bad);
        cudaFree(d);
        free(h);
    }
    tr_comm_close(n);
    printf("test_comm_nccl_gpu: world %d, rank %d on GPU %d: %s\n", W, me, tr_comm_local_rank(c),
           failures ? "FAILED" : "ok");
    tr_comm_close(c);
    return failures ? 1 : 0;
}
