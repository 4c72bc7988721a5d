/* kn_softmax_xent.cu - softmax + cross-entropy over a padded vocabulary, fused:
 * no probability tensor is ever written (CUDA twin of softmax_xent_ref; see
 * kn_cuda.h).  One block per row; the row max and sum come from one online
 * pass (deterministic tree reduction), the gradient from a second pass that
 * may overwrite the logits in place. */
#include <math.h>

#include "kn_cuda_common.cuh"

#define XENT_THREADS 512

/* One element into a thread's online (max, sum exp). */
__device__ __forceinline__ void lse_add(float &m, float &s, float z) {
    if (z > m) {
        s = s * __expf(m - z) + 1.0f;
        m = z;
    } else {
        s += __expf(z - m);
    }
}

/* The block's log-sum-exp from every thread's (m, s). */
__device__ float block_lse(float m, float s) {
    __shared__ float sm[XENT_THREADS / 32], ss[XENT_THREADS / 32];
    /* warp: combine (m, s) pairs */
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mn = fmaxf(m, m2);
        s = (m == -INFINITY ? 0.0f : s * __expf(m - mn)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mn));
        m = mn;
    }
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    if (lane == 0) {
        sm[w] = m;
        ss[w] = s;
    }
    __syncthreads();
    if (w == 0) {
        m = lane < nw ? sm[lane] : -INFINITY;
        s = lane < nw ? ss[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            float mn = fmaxf(m, m2);
            s = (m == -INFINITY ? 0.0f : s * __expf(m - mn)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mn));
            m = mn;
        }
        if (lane == 0) {
            sm[0] = m;
            ss[0] = s;
        }
    }
    __syncthreads();
    float r = sm[0] + logf(ss[0]);
    __syncthreads(); /* sm/ss reusable by a second call */
    return r;
}

/* Block-wide online (max, sum exp) over logits[0..V). */
template <typename T> __device__ float row_lse(const T *x, int V) {
    float m = -INFINITY, s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) lse_add(m, s, kn_ld(x + v));
    return block_lse(m, s);
}

template <typename T>
__global__ void __launch_bounds__(XENT_THREADS)
    xent_fwd_kernel(float *losses, float *lse, const T *logits, const int32_t *targets, int V, int Vp) {
    int n = blockIdx.x;
    const T *x = logits + (size_t)n * Vp;
    float L = row_lse(x, V);
    if (threadIdx.x == 0) {
        int tg = targets[n];
        if (lse) lse[n] = L;
        if (losses) losses[n] = tg < 0 ? 0.0f : (tg < V ? L - kn_ld(x + tg) : __int_as_float(0x7fc00000));
    }
}

template <typename T> __device__ void xent_grad_row(T *dx, const T *x, float L, int tg, float dl, int V, int Vp) {
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
        float g = 0.0f;
        if (tg >= 0 && v < V) g = dl * (__expf(kn_ld(x + v) - L) - (v == tg ? 1.0f : 0.0f));
        kn_st(dx + v, g);
    }
}

template <typename T>
__global__ void __launch_bounds__(XENT_THREADS)
    xent_bwd_kernel(T *dlogits, const T *logits, const float *lse, const int32_t *targets, const float *dloss,
                    float dscale, int V, int Vp) {
    int n = blockIdx.x;
    float dl = dloss ? dloss[n] : dscale;
    xent_grad_row(dlogits + (size_t)n * Vp, logits + (size_t)n * Vp, lse[n], targets[n], dl, V, Vp);
}

/* Row n's loss (thread 0) from its log-sum-exp, before a fused kernel
 * overwrites the row: the barrier orders the read of the target logit. */
template <typename T>
__device__ __forceinline__ void xent_row_loss(float *losses, int n, const T *x, float L, int tg, int V) {
    if (threadIdx.x == 0 && losses)
        losses[n] = tg < 0 ? 0.0f : (tg < V ? L - kn_ld(x + tg) : __int_as_float(0x7fc00000));
    __syncthreads();
}

template <typename T>
__global__ void __launch_bounds__(XENT_THREADS)
    xent_fused_kernel(float *losses, T *dlogits, const T *logits, const int32_t *targets, const float *dloss,
                      float dscale, int V, int Vp) {
    int n = blockIdx.x;
    const T *x = logits + (size_t)n * Vp;
    float L = row_lse(x, V);
    int tg = targets[n];
    xent_row_loss(losses, n, x, L, tg, V);
    float dl = dloss ? dloss[n] : dscale;
    xent_grad_row(dlogits + (size_t)n * Vp, x, L, tg, dl, V, Vp);
}

/* The fused kernel for 16-bit logits with 16-byte accesses: 8 logits per
 * load, one exp per logit and one more per 8 where the running maximum moves
 * (the scalar loop's exp per logit plus a branch per logit), gradients
 * stored 8 at a time.  The first H200 run timed the scalar kernel at 3.6 ms
 * (911 GB/s) for d12's 16384 x 50304 bf16 logits; this one 1.23 ms
 * (2,690 GB/s), passing every row there (2026-12-04).  The default for 16-bit
 * logits whose rows are 16-byte aligned (Vp % 8 == 0); MKS_XENT_SCALAR=1
 * keeps the scalar kernel (tests/gpu/run.sh's fallback). */
template <typename T>
__global__ void __launch_bounds__(XENT_THREADS)
    xent_fused_vec_kernel(float *losses, T *dlogits, const T *logits, const int32_t *targets, const float *dloss,
                          float dscale, int V, int Vp) {
    int n = blockIdx.x;
    const T *x = logits + (size_t)n * Vp;
    T *dx = dlogits + (size_t)n * Vp;
    const int V8 = V / 8;
    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < V8; j += blockDim.x) {
        float z[8], mx = m;
        ld8(x + (size_t)j * 8, z);
#pragma unroll
        for (int i = 0; i < 8; i++) mx = fmaxf(mx, z[i]);
        if (mx > m) {
            s *= __expf(m - mx); /* m = -inf: s is 0 */
            m = mx;
        }
#pragma unroll
        for (int i = 0; i < 8; i++) s += __expf(z[i] - m);
    }
    for (int v = V8 * 8 + threadIdx.x; v < V; v += blockDim.x) lse_add(m, s, kn_ld(x + v));
    float L = block_lse(m, s);
    int tg = targets[n];
    xent_row_loss(losses, n, x, L, tg, V);
    float dl = dloss ? dloss[n] : dscale;
    for (int j = threadIdx.x; j < Vp / 8; j += blockDim.x) {
        float z[8];
        ld8(x + (size_t)j * 8, z);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int v = j * 8 + i;
            z[i] = tg >= 0 && v < V ? dl * (__expf(z[i] - L) - (v == tg ? 1.0f : 0.0f)) : 0.0f;
        }
        st8(dx + (size_t)j * 8, z);
    }
}

static int g_xent_vec = -1; /* -1: from the environment (the 16-byte kernel unless MKS_XENT_SCALAR=1) */
static bool xent_vec(void) {
    if (g_xent_vec < 0) {
        int scalar = -1;
        g_xent_vec = !kn_opt_in(&scalar, "MKS_XENT_SCALAR");
    }
    return g_xent_vec == 1;
}

extern "C" void kn_softmax_xent_variant(int vec) { g_xent_vec = vec < 0 ? -1 : vec != 0; }

static int xent_args_ok(int N, int V, int Vp) { return N > 0 && V > 0 && Vp >= V && N <= 0x7fffffff; }

extern "C" int kn_softmax_xent_forward_cuda(float *losses, float *lse, const void *logits, const int32_t *targets,
                                            int N, int V, int Vp, kn_dtype dt, kn_stream s) {
    if (!logits || !targets || !xent_args_ok(N, V, Vp)) return KN_EINVAL;
    KN_DISPATCH(dt, (xent_fwd_kernel<DT><<<N, XENT_THREADS, 0, s>>>(losses, lse, (const DT *)logits, targets, V, Vp)));
    KN_CUDA_LAUNCHED("softmax_xent_forward");
    return KN_OK;
}

extern "C" int kn_softmax_xent_backward_cuda(void *dlogits, const void *logits, const float *lse,
                                             const int32_t *targets, const float *dloss, float dloss_scale, int N,
                                             int V, int Vp, kn_dtype dt, kn_stream s) {
    if (!dlogits || !logits || !lse || !targets || !xent_args_ok(N, V, Vp)) return KN_EINVAL;
    KN_DISPATCH(dt, (xent_bwd_kernel<DT><<<N, XENT_THREADS, 0, s>>>((DT *)dlogits, (const DT *)logits, lse, targets,
                                                                    dloss, dloss_scale, V, Vp)));
    KN_CUDA_LAUNCHED("softmax_xent_backward");
    return KN_OK;
}

extern "C" int kn_softmax_xent_fused_cuda(float *losses, void *dlogits, const void *logits, const int32_t *targets,
                                          const float *dloss, float dloss_scale, int N, int V, int Vp, kn_dtype dt,
                                          kn_stream s) {
    if (!dlogits || !logits || !targets || !xent_args_ok(N, V, Vp)) return KN_EINVAL;
    if (dt != KN_F32 && Vp % 8 == 0 && ((uintptr_t)logits | (uintptr_t)dlogits) % 16 == 0 && xent_vec()) {
        if (dt == KN_BF16)
            xent_fused_vec_kernel<kn_bf16><<<N, XENT_THREADS, 0, s>>>(
                losses, (kn_bf16 *)dlogits, (const kn_bf16 *)logits, targets, dloss, dloss_scale, V, Vp);
        else
            xent_fused_vec_kernel<kn_f16><<<N, XENT_THREADS, 0, s>>>(losses, (kn_f16 *)dlogits, (const kn_f16 *)logits,
                                                                     targets, dloss, dloss_scale, V, Vp);
        KN_CUDA_LAUNCHED("softmax_xent_fused (vec)");
        return KN_OK;
    }
    KN_DISPATCH(dt, (xent_fused_kernel<DT><<<N, XENT_THREADS, 0, s>>>(losses, (DT *)dlogits, (const DT *)logits,
                                                                      targets, dloss, dloss_scale, V, Vp)));
    KN_CUDA_LAUNCHED("softmax_xent_fused");
    return KN_OK;
}
