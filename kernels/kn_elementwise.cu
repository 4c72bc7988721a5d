/* kn_elementwise.cu - casts, GELU, AdamW, gradient norm (CUDA twins of
 * gelu_ref / adamw_ref / gradnorm_ref; see kn_cuda.h). */
#include <math.h>
#include <stdarg.h>

#include "kn_adamw.cuh"
#include "kn_cuda_common.cuh"

/* error recording: kernels/kn_cuda_err.c (plain C, tested without a GPU) */

extern "C" size_t kn_dtype_size(kn_dtype dt) { return dt == KN_F32 ? 4 : 2; }

/* ---- casts and fills ------------------------------------------------------------ */
template <typename D, typename S> __global__ void cast_kernel(D *dst, const S *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        kn_st(dst + i, kn_ld(src + i));
}

extern "C" int kn_cast_cuda(void *dst, kn_dtype dst_dt, const void *src, kn_dtype src_dt, size_t n, kn_stream s) {
    if (!dst || !src) return KN_EINVAL;
    if (n == 0) return KN_OK;
    unsigned g = kn_blocks(n, 256);
    if (src_dt == KN_F32) {
        KN_DISPATCH(dst_dt, (cast_kernel<<<g, 256, 0, s>>>((DT *)dst, (const float *)src, n)));
    } else if (src_dt == KN_BF16) {
        KN_DISPATCH(dst_dt, (cast_kernel<<<g, 256, 0, s>>>((DT *)dst, (const kn_bf16 *)src, n)));
    } else if (src_dt == KN_F16) {
        KN_DISPATCH(dst_dt, (cast_kernel<<<g, 256, 0, s>>>((DT *)dst, (const kn_f16 *)src, n)));
    } else {
        return KN_EINVAL;
    }
    KN_CUDA_LAUNCHED("cast");
    return KN_OK;
}

__global__ void fill_kernel(float *dst, float v, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = v;
}

extern "C" int kn_fill_cuda(float *dst, float value, size_t n, kn_stream s) {
    if (!dst) return KN_EINVAL;
    if (n == 0) return KN_OK;
    fill_kernel<<<kn_blocks(n, 256), 256, 0, s>>>(dst, value, n);
    KN_CUDA_LAUNCHED("fill");
    return KN_OK;
}

/* ---- residual add ------------------------------------------------------------------------ */
template <typename T> __global__ void residual_kernel(T *out, const T *a, const T *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        kn_st(out + i, kn_ld(a + i) + kn_ld(b + i));
}

extern "C" int kn_residual_forward_cuda(void *out, const void *a, const void *b, size_t n, kn_dtype dt, kn_stream s) {
    if (!out || !a || !b) return KN_EINVAL;
    if (n == 0) return KN_OK;
    KN_DISPATCH(dt,
                (residual_kernel<DT><<<kn_blocks(n, 256), 256, 0, s>>>((DT *)out, (const DT *)a, (const DT *)b, n)));
    KN_CUDA_LAUNCHED("residual_forward");
    return KN_OK;
}

/* ---- GELU (tanh approximation) ------------------------------------------------------ */
#define KN_GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define KN_GELU_A 0.044715f

template <typename T> __global__ void gelu_fwd_kernel(T *out, const T *inp, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = kn_ld(inp + i);
        float u = KN_GELU_S * (x + KN_GELU_A * x * x * x);
        kn_st(out + i, 0.5f * x * (1.0f + tanhf(u)));
    }
}

template <typename T> __global__ void gelu_bwd_kernel(T *dinp, const T *inp, const T *dout, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = kn_ld(inp + i);
        float u = KN_GELU_S * (x + KN_GELU_A * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float d = 0.5f * (1.0f + th) + 0.5f * x * sech2 * KN_GELU_S * (1.0f + 3.0f * KN_GELU_A * x * x);
        kn_st(dinp + i, d * kn_ld(dout + i));
    }
}

extern "C" int kn_gelu_forward_cuda(void *out, const void *inp, size_t n, kn_dtype dt, kn_stream s) {
    if (!out || !inp) return KN_EINVAL;
    if (n == 0) return KN_OK;
    KN_DISPATCH(dt, (gelu_fwd_kernel<DT><<<kn_blocks(n, 256), 256, 0, s>>>((DT *)out, (const DT *)inp, n)));
    KN_CUDA_LAUNCHED("gelu_forward");
    return KN_OK;
}

extern "C" int kn_gelu_backward_cuda(void *dinp, const void *inp, const void *dout, size_t n, kn_dtype dt,
                                     kn_stream s) {
    if (!dinp || !inp || !dout) return KN_EINVAL;
    if (n == 0) return KN_OK;
    KN_DISPATCH(
        dt, (gelu_bwd_kernel<DT><<<kn_blocks(n, 256), 256, 0, s>>>((DT *)dinp, (const DT *)inp, (const DT *)dout, n)));
    KN_CUDA_LAUNCHED("gelu_backward");
    return KN_OK;
}

/* ---- AdamW ---------------------------------------------------------------------------- */
/* adamw_elem, adamw_kernel, adamw_multi_kernel: kn_adamw.cuh (also run on
 * the CPU by tests/test_adamw_emu.cpp) */
extern "C" int kn_adamw_step_cuda(float *params, void *params_lp, kn_dtype lp_dt, const float *grads, float *m,
                                  float *v, size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                                  int decay, int t, const float *grad_scale, kn_stream s) {
    if (!params || !grads || !m || !v || t < 1) return KN_EINVAL;
    if (n == 0) return KN_OK;
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    unsigned g = kn_blocks(n, 256);
    if (lp_dt == KN_BF16)
        adamw_kernel<<<g, 256, 0, s>>>(params, (kn_bf16 *)params_lp, grads, m, v, n, lr, beta1, beta2, eps,
                                       weight_decay, decay, bc1, bc2, grad_scale);
    else if (lp_dt == KN_F16)
        adamw_kernel<<<g, 256, 0, s>>>(params, (kn_f16 *)params_lp, grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                       decay, bc1, bc2, grad_scale);
    else
        adamw_kernel<<<g, 256, 0, s>>>(params, (float *)params_lp, grads, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                       decay, bc1, bc2, grad_scale);
    KN_CUDA_LAUNCHED("adamw");
    return KN_OK;
}

extern "C" int kn_adamw_multi_cuda(const kn_adamw_tensor *tab, const uint32_t *bstart, int nt, unsigned blocks,
                                   float *params, void *params_lp, kn_dtype lp_dt, const float *grads, float *m,
                                   float *v, float lr, float beta1, float beta2, float eps, float weight_decay, int t,
                                   const float *grad_scale, kn_stream s) {
    if (!tab || !bstart || nt < 1 || !params || !grads || !m || !v || t < 1 || blocks > (unsigned)INT32_MAX)
        return KN_EINVAL;
    if (blocks == 0) return KN_OK;
    /* the same bias corrections, computed the same way, as kn_adamw_step_cuda */
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    if (lp_dt == KN_BF16)
        adamw_multi_kernel<<<blocks, 256, 0, s>>>(tab, bstart, nt, params, (kn_bf16 *)params_lp, grads, m, v, lr, beta1,
                                                  beta2, eps, weight_decay, bc1, bc2, grad_scale);
    else if (lp_dt == KN_F16)
        adamw_multi_kernel<<<blocks, 256, 0, s>>>(tab, bstart, nt, params, (kn_f16 *)params_lp, grads, m, v, lr, beta1,
                                                  beta2, eps, weight_decay, bc1, bc2, grad_scale);
    else
        adamw_multi_kernel<<<blocks, 256, 0, s>>>(tab, bstart, nt, params, (float *)params_lp, grads, m, v, lr, beta1,
                                                  beta2, eps, weight_decay, bc1, bc2, grad_scale);
    KN_CUDA_LAUNCHED("adamw_multi");
    return KN_OK;
}

/* ---- gradient norm (KN_SUMSQ_CHUNK: kn_cuda_size.h) ----------------------------------------- */

/* One block (256 threads) per 4096-element chunk; double throughout. */
__global__ void sumsq_chunk_kernel(double *partial, const float *g, size_t n) {
    __shared__ double sh[256];
    size_t base = (size_t)blockIdx.x * KN_SUMSQ_CHUNK;
    double acc = 0.0;
    for (int k = threadIdx.x; k < KN_SUMSQ_CHUNK; k += 256) {
        size_t i = base + k;
        if (i < n) {
            double x = g[i];
            acc += x * x;
        }
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int o = 128; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

__global__ void sumsq_final_kernel(double *out, const double *partial, size_t nchunks) {
    __shared__ double sh[1024];
    double acc = 0.0;
    for (size_t i = threadIdx.x; i < nchunks; i += 1024) acc += partial[i];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int o = 512; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = sh[0];
}

extern "C" int kn_sumsq_cuda(double *out, const float *g, size_t n, void *scratch, size_t scratch_bytes, kn_stream s) {
    if (!out || !g || n == 0 || !scratch || scratch_bytes < kn_sumsq_scratch_bytes(n)) return KN_EINVAL;
    size_t nch = (n + KN_SUMSQ_CHUNK - 1) / KN_SUMSQ_CHUNK;
    if (nch > 0x7fffffffu) return KN_EINVAL;
    sumsq_chunk_kernel<<<(unsigned)nch, 256, 0, s>>>((double *)scratch, g, n);
    KN_CUDA_LAUNCHED("sumsq_chunk");
    sumsq_final_kernel<<<1, 1024, 0, s>>>(out, (const double *)scratch, nch);
    KN_CUDA_LAUNCHED("sumsq_final");
    return KN_OK;
}

__global__ void clip_scale_kernel(float *scale, float *norm_out, const double *sumsq, float max_norm) {
    float norm = (float)sqrt(*sumsq);
    if (norm_out) *norm_out = norm;
    *scale = (max_norm > 0.0f && norm > max_norm) ? max_norm / (norm + 1e-6f) : 1.0f;
}

extern "C" int kn_clip_scale_cuda(float *scale, float *norm_out, const double *sumsq, float max_norm, kn_stream s) {
    if (!scale || !sumsq) return KN_EINVAL;
    clip_scale_kernel<<<1, 1, 0, s>>>(scale, norm_out, sumsq, max_norm);
    KN_CUDA_LAUNCHED("clip_scale");
    return KN_OK;
}

__global__ void scale_kernel(float *g, size_t n, float sc) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] *= sc;
}

extern "C" int kn_scale_cuda(float *g, size_t n, float scale, kn_stream s) {
    if (!g) return KN_EINVAL;
    if (n == 0) return KN_OK;
    scale_kernel<<<kn_blocks(n, 256), 256, 0, s>>>(g, n, scale);
    KN_CUDA_LAUNCHED("scale");
    return KN_OK;
}
