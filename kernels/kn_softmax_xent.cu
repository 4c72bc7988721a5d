/* kn_softmax_xent.cu - softmax + cross-entropy over a padded vocabulary, fused:
 * no probability tensor is ever written (CUDA twin of softmax_xent_ref; see
 * kn_cuda.h).  One block per row; the row max and sum come from one online
 * pass (deterministic tree reduction), the gradient from a second pass that
 * may overwrite the logits in place. */
#include <math.h>

#include "kn_cuda_common.cuh"

#define XENT_THREADS 512

/* Block-wide online (max, sum exp) over logits[0..V). */
template <typename T>
__device__ float row_lse(const T *x, int V)
{
    __shared__ float sm[XENT_THREADS / 32], ss[XENT_THREADS / 32];
    float m = -INFINITY, s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float z = kn_ld(x + v);
        if (z > m) {
            s = s * __expf(m - z) + 1.0f;
            m = z;
        } else {
            s += __expf(z - m);
        }
    }
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

template <typename T>
__global__ void __launch_bounds__(XENT_THREADS) xent_fwd_kernel(float *losses, float *lse, const T *logits,
                                                                const int32_t *targets, int V, int Vp)
{
    int n = blockIdx.x;
    const T *x = logits + (size_t)n * Vp;
    float L = row_lse(x, V);
    if (threadIdx.x == 0) {
        int tg = targets[n];
        if (lse) lse[n] = L;
        if (losses) losses[n] = tg < 0 ? 0.0f : (tg < V ? L - kn_ld(x + tg) : __int_as_float(0x7fc00000));
    }
}

template <typename T>
__device__ void xent_grad_row(T *dx, const T *x, float L, int tg, float dl, int V, int Vp)
{
    for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
        float g = 0.0f;
        if (tg >= 0 && v < V) g = dl * (__expf(kn_ld(x + v) - L) - (v == tg ? 1.0f : 0.0f));
        kn_st(dx + v, g);
    }
}

template <typename T>
__global__ void __launch_bounds__(XENT_THREADS) xent_bwd_kernel(T *dlogits, const T *logits, const float *lse,
                                                                const int32_t *targets, const float *dloss,
                                                                float dscale, int V, int Vp)
{
    int n = blockIdx.x;
    float dl = dloss ? dloss[n] : dscale;
    xent_grad_row(dlogits + (size_t)n * Vp, logits + (size_t)n * Vp, lse[n], targets[n], dl, V, Vp);
}

template <typename T>
__global__ void __launch_bounds__(XENT_THREADS) xent_fused_kernel(float *losses, T *dlogits, const T *logits,
                                                                  const int32_t *targets, const float *dloss,
                                                                  float dscale, int V, int Vp)
{
    int n = blockIdx.x;
    const T *x = logits + (size_t)n * Vp;
    float L = row_lse(x, V);
    int tg = targets[n];
    if (threadIdx.x == 0 && losses)
        losses[n] = tg < 0 ? 0.0f : (tg < V ? L - kn_ld(x + tg) : __int_as_float(0x7fc00000));
    __syncthreads(); /* the target logit is read before the row is overwritten */
    float dl = dloss ? dloss[n] : dscale;
    xent_grad_row(dlogits + (size_t)n * Vp, x, L, tg, dl, V, Vp);
}

static int xent_args_ok(int N, int V, int Vp) { return N > 0 && V > 0 && Vp >= V && N <= 0x7fffffff; }

extern "C" int kn_softmax_xent_forward_cuda(float *losses, float *lse, const void *logits, const int32_t *targets,
                                            int N, int V, int Vp, kn_dtype dt, kn_stream s)
{
    if (!logits || !targets || !xent_args_ok(N, V, Vp)) return KN_EINVAL;
    KN_DISPATCH(dt, (xent_fwd_kernel<DT><<<N, XENT_THREADS, 0, s>>>(losses, lse, (const DT *)logits, targets, V, Vp)));
    KN_CUDA_LAUNCHED("softmax_xent_forward");
    return KN_OK;
}

extern "C" int kn_softmax_xent_backward_cuda(void *dlogits, const void *logits, const float *lse,
                                             const int32_t *targets, const float *dloss, float dloss_scale, int N,
                                             int V, int Vp, kn_dtype dt, kn_stream s)
{
    if (!dlogits || !logits || !lse || !targets || !xent_args_ok(N, V, Vp)) return KN_EINVAL;
    KN_DISPATCH(dt, (xent_bwd_kernel<DT><<<N, XENT_THREADS, 0, s>>>((DT *)dlogits, (const DT *)logits, lse, targets,
                                                                    dloss, dloss_scale, V, Vp)));
    KN_CUDA_LAUNCHED("softmax_xent_backward");
    return KN_OK;
}

extern "C" int kn_softmax_xent_fused_cuda(float *losses, void *dlogits, const void *logits, const int32_t *targets,
                                          const float *dloss, float dloss_scale, int N, int V, int Vp, kn_dtype dt,
                                          kn_stream s)
{
    if (!dlogits || !logits || !targets || !xent_args_ok(N, V, Vp)) return KN_EINVAL;
    KN_DISPATCH(dt, (xent_fused_kernel<DT><<<N, XENT_THREADS, 0, s>>>(losses, (DT *)dlogits, (const DT *)logits,
                                                                      targets, dloss, dloss_scale, V, Vp)));
    KN_CUDA_LAUNCHED("softmax_xent_fused");
    return KN_OK;
}
