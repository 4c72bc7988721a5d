/* gpu_lmhead.cuh - the lm head and the softmax cross-entropy of a GPU model,
 * whole or in row chunks (gpu_lmhead.h says when which): the one sequence
 * both families run (train/gpu_model.cu, train/gpu_llama.cu) and
 * tests/bench_kernels_gpu.cu times.  Header-only, kn_cuda ops only; returns
 * KN_OK or the failing op's kn error (the op records what failed). */
#ifndef TR_GPU_LMHEAD_CUH
#define TR_GPU_LMHEAD_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "gpu_lmhead.h"
#include "kn_cuda.h"
}

/* One micro-batch's head: N rows of x through the (Vp, C) weight w. */
typedef struct {
    kn_cuda_ctx *ctx;
    cudaStream_t s;
    kn_dtype dt;
    const void *x;          /* (N, C) the final norm's output, dt */
    const void *w;          /* (Vp, C) the head weight (the token embedding when tied), dt */
    float *dw;              /* (Vp, C) fp32, += (TR_LMHEAD_FUSED) */
    void *dx;               /* (N, C) dt, = dlogits w, overwritten (TR_LMHEAD_FUSED) */
    void *logits;           /* (rows, Vp) dt: the carved logits / dlogits buffer */
    size_t rows;            /* its rows (tr_lmhead_chunk_rows), >= 1 */
    float *losses;          /* (N) fp32 */
    const int32_t *targets; /* (N); < 0: no loss, no gradient */
    float dloss;            /* every row's dloss factor (0: the dlogits written are zeros) */
    int N, C, V, Vp;        /* V: the real vocabulary, Vp >= V its padded width (columns V.. get 0) */
    void *scratch;          /* the model's backward scratch (unused: the head has no bias) */
    size_t scratch_bytes;
} tr_lmhead;

/* TR_LMHEAD_FORWARD: per chunk, logits = x[r0:r1] w^T and the fused
 * softmax-xent (losses[r0:r1], dlogits in place).  With rows >= N that is
 * one chunk, the models' whole path: the dlogits stay in the buffer for the
 * backward pass's kn_matmul_backward_cuda; with fewer rows only the losses
 * outlive the pass (forward-only evaluation).
 * TR_LMHEAD_FUSED: as FORWARD, then at once, while the chunk's dlogits are
 * in the buffer, dw += dlogits^T x[r0:r1] (fp32, beta 1) and
 * dx[r0:r1] = dlogits w: after the pass dx holds the gradient at the final
 * norm's output and dw has every row's contribution. */
enum { TR_LMHEAD_FORWARD = 0, TR_LMHEAD_FUSED = 1 };

static inline int tr_lmhead_pass(const tr_lmhead *h, int mode) {
    if (!h || !h->rows || h->N <= 0 || h->C <= 0 || h->V <= 0 || h->Vp < h->V ||
        (mode == TR_LMHEAD_FUSED && (!h->dw || !h->dx)))
        return KN_EINVAL;
    const size_t N = (size_t)h->N, C = (size_t)h->C, esz = kn_dtype_size(h->dt);
    size_t r0 = 0, r1 = 0;
    for (size_t i = 0; tr_lmhead_chunk_at(N, h->rows, i, &r0, &r1); i++) {
        const int n = (int)(r1 - r0); /* <= rows <= N: an int */
        const void *x = (const char *)h->x + r0 * C * esz;
        int rc = kn_matmul_forward_cuda(h->ctx, h->logits, nullptr, x, h->w, nullptr, n, h->C, h->Vp, h->dt);
        if (rc == KN_OK)
            rc = kn_softmax_xent_fused_cuda(h->losses + r0, h->logits, h->logits, h->targets + r0, nullptr, h->dloss, n,
                                            h->V, h->Vp, h->dt, h->s);
        if (rc == KN_OK && mode == TR_LMHEAD_FUSED)
            rc = kn_matmul_backward_cuda(h->ctx, (char *)h->dx + r0 * C * esz, h->dw, nullptr, h->logits, x, h->w, n,
                                         h->C, h->Vp, h->scratch, h->scratch_bytes, h->dt);
        if (rc != KN_OK) return rc;
    }
    return KN_OK;
}

#endif /* TR_GPU_LMHEAD_CUH */
