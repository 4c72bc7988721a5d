/* kn_llama.cu - the Llama family's CUDA kernels (CUDA twins of llama_ref.c
 * and llama_gqa_ref.c; API and contracts in kn_cuda.h): RMSNorm with the
 * fused residual add and a deterministic backward, rotary embeddings from a
 * cos/sin table built once per run, the SwiGLU gate, and grouped-query
 * attention that indexes the KV head of each query head.
 *
 * GQA runs GPT-2's SIMT attention kernels (kn_attention_simt.cuh: one set
 * for any packed row by strides and offsets) on the Llama row [q (NH HS) |
 * k (NKV HS) | v (NKV HS)], head size 16 to 128, the dK/dV of a KV head
 * summed over its query heads in a fixed order.  For bf16 heads of 64 the
 * GPU model runs GPT-2's pipelined tensor-core kernels on the same row
 * instead (kn_gqa_attention_*_tc_cuda, kn_attention_tc.cu). */
#include <math.h>

#include "kn_attention_simt.cuh" /* the SIMT attention kernels, shared with GPT-2's (kn_attention.cu) */
#include "kn_cuda_common.cuh"

/* x rounded to T's precision (the stored residual, read back as the
 * reference reads it) */
template <typename T> __device__ __forceinline__ float ll_round(float x) {
    T t;
    kn_st(&t, x);
    return kn_ld(&t);
}

/* ---- RMSNorm ----------------------------------------------------------------------------- */
/* One warp per row; blocks of 256 threads (8 rows). */
template <typename T>
__global__ void rms_fwd_kernel(T *out, float *rstd, T *resid_out, const T *inp, const T *inp2, const float *w, int N,
                               int C, float eps) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (size_t)row * C;
    const T *x2 = inp2 ? inp2 + (size_t)row * C : nullptr;
    T *xr = resid_out ? resid_out + (size_t)row * C : nullptr;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float v = kn_ld(x + c);
        if (x2) {
            v = ll_round<T>(v + kn_ld(x2 + c));
            if (xr) kn_st(xr + c, v);
        }
        ss += v * v;
    }
    float r = 1.0f / sqrtf(kn_warp_sum(ss) / C + eps);
    T *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        /* resid_out may alias inp: read the sum back from where this lane stored it */
        float v = xr ? kn_ld(xr + c) : (x2 ? ll_round<T>(kn_ld(x + c) + kn_ld(x2 + c)) : kn_ld(x + c));
        kn_st(o + c, w[c] * (v * r));
    }
    if (lane == 0 && rstd) rstd[row] = r;
}

extern "C" int kn_rmsnorm_forward_cuda(void *out, float *rstd, void *resid_out, const void *inp, const void *inp2,
                                       const float *weight, int N, int C, float eps, kn_dtype dt, kn_stream s) {
    if (!out || !inp || !weight || N <= 0 || C <= 0 || !(eps > 0)) return KN_EINVAL;
    if (resid_out && !inp2) return KN_EINVAL;
    unsigned grid = (unsigned)((N + 7) / 8);
    KN_DISPATCH(dt, (rms_fwd_kernel<DT><<<grid, 256, 0, s>>>((DT *)out, rstd, (DT *)resid_out, (const DT *)inp,
                                                             (const DT *)inp2, weight, N, C, eps)));
    KN_CUDA_LAUNCHED("rmsnorm_forward");
    return KN_OK;
}

/* Block: KN_LN_BWD_ROWS rows, 8 warps.  A warp per row: dinp += r (dy w - x k),
 * k = mean(dy w x) r^2; then a thread per column: the partial dweight of these
 * rows, in row order, to partial[block][C] (summed in block order after). */
template <typename T>
__global__ void rms_bwd_kernel(T *dinp, float *partial, const T *dout, const T *inp, const float *w, const float *rstd,
                               int N, int C) {
    int r0 = blockIdx.x * KN_LN_BWD_ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    for (int r = r0 + warp; r < r0 + KN_LN_BWD_ROWS && r < N; r += nw) {
        const T *dy = dout + (size_t)r * C, *x = inp + (size_t)r * C;
        float rs = rstd[r], dot = 0.0f;
        for (int c = lane; c < C; c += 32) dot += kn_ld(dy + c) * w[c] * kn_ld(x + c);
        float k = kn_warp_sum(dot) / C * rs * rs;
        T *dx = dinp + (size_t)r * C;
        for (int c = lane; c < C; c += 32)
            kn_st(dx + c, kn_ld(dx + c) + rs * (kn_ld(dy + c) * w[c] - kn_ld(x + c) * k));
    }
    if (!partial) return;
    float *pw = partial + (size_t)blockIdx.x * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float a = 0.0f;
        for (int r = r0; r < r0 + KN_LN_BWD_ROWS && r < N; r++)
            a += kn_ld(dout + (size_t)r * C + c) * (kn_ld(inp + (size_t)r * C + c) * rstd[r]);
        pw[c] = a;
    }
}

__global__ void rms_bwd_reduce_kernel(float *dweight, const float *partial, int nblocks, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float a = 0.0f;
    for (int k = 0; k < nblocks; k++) a += partial[(size_t)k * C + c];
    dweight[c] += a;
}

extern "C" int kn_rmsnorm_backward_cuda(void *dinp, float *dweight, const void *dout, const void *inp,
                                        const float *weight, const float *rstd, int N, int C, void *scratch,
                                        size_t scratch_bytes, kn_dtype dt, kn_stream s) {
    if (!dinp || !dout || !inp || !weight || !rstd || N <= 0 || C <= 0) return KN_EINVAL;
    if (dweight && (!scratch || scratch_bytes < kn_rmsnorm_backward_scratch_bytes(N, C))) return KN_EINVAL;
    int nb = (N + KN_LN_BWD_ROWS - 1) / KN_LN_BWD_ROWS;
    float *partial = dweight ? (float *)scratch : nullptr;
    KN_DISPATCH(dt, (rms_bwd_kernel<DT>
                     <<<nb, 256, 0, s>>>((DT *)dinp, partial, (const DT *)dout, (const DT *)inp, weight, rstd, N, C)));
    KN_CUDA_LAUNCHED("rmsnorm_backward");
    if (dweight) {
        rms_bwd_reduce_kernel<<<(C + 255) / 256, 256, 0, s>>>(dweight, partial, nb, C);
        KN_CUDA_LAUNCHED("rmsnorm_backward reduce");
    }
    return KN_OK;
}

/* ---- rotary embeddings ---------------------------------------------------------------------- */
/* In double, then rounded, as kn_rope_table_ref (the angle itself in fp32,
 * one product, as torch forms it). */
__global__ void rope_table_kernel(float *table, const float *inv_freq, int max_pos, int h2) {
    size_t total = (size_t)max_pos * h2;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        int p = (int)(k / h2), i = (int)(k % h2);
        float a = __fmul_rn((float)p, inv_freq[i]);
        table[2 * k] = (float)cos((double)a);
        table[2 * k + 1] = (float)sin((double)a);
    }
}

extern "C" int kn_rope_table_cuda(float *table, const float *inv_freq, int max_pos, int head_dim, kn_stream s) {
    if (!table || !inv_freq || max_pos <= 0 || head_dim <= 0 || head_dim % 2) return KN_EINVAL;
    size_t n = (size_t)max_pos * (head_dim / 2);
    rope_table_kernel<<<kn_blocks(n, 256), 256, 0, s>>>(table, inv_freq, max_pos, head_dim / 2);
    KN_CUDA_LAUNCHED("rope_table");
    return KN_OK;
}

/* A thread per rotated pair (row n, head h, i < head_dim / 2); dir +1 forward,
 * -1 the inverse rotation (backward). */
template <typename T>
__global__ void rope_kernel(T *out, const T *x, const int32_t *pos, const float *table, int N, int Tn, int nh, int hd,
                            int ld, int max_pos, float dir) {
    int h2 = hd / 2;
    size_t total = (size_t)N * nh * h2;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(k % h2), h = (int)(k / h2 % nh);
        size_t n = k / ((size_t)h2 * nh);
        int p = pos ? pos[n] : (int)(n % Tn);
        float c = NAN, sn = NAN;
        if (p >= 0 && p < max_pos) {
            c = table[((size_t)p * h2 + i) * 2];
            sn = table[((size_t)p * h2 + i) * 2 + 1] * dir;
        }
        size_t b = n * ld + (size_t)h * hd;
        float x1 = kn_ld(x + b + i), x2 = kn_ld(x + b + i + h2);
        /* __fmul_rn: no FMA contraction, the reference's two roundings */
        kn_st(out + b + i, __fmul_rn(x1, c) - __fmul_rn(x2, sn));
        kn_st(out + b + i + h2, __fmul_rn(x2, c) + __fmul_rn(x1, sn));
    }
}

static int rope_launch(void *out, const void *x, const int32_t *pos, const float *table, int N, int T, int nh, int hd,
                       int ld, int max_pos, kn_dtype dt, kn_stream s, float dir) {
    if (!out || !x || !table || N <= 0 || nh <= 0 || hd <= 0 || hd % 2 || max_pos <= 0) return KN_EINVAL;
    if (!pos && T <= 0) return KN_EINVAL;
    if (ld < 0 || (size_t)ld < (size_t)nh * hd) return KN_EINVAL;
    size_t n = (size_t)N * nh * (hd / 2);
    KN_DISPATCH(dt, (rope_kernel<DT><<<kn_blocks(n, 256), 256, 0, s>>>((DT *)out, (const DT *)x, pos, table, N, T, nh,
                                                                       hd, ld, max_pos, dir)));
    KN_CUDA_LAUNCHED(dir > 0 ? "rope_forward" : "rope_backward");
    return KN_OK;
}

extern "C" int kn_rope_forward_cuda(void *out, const void *x, const int32_t *pos, const float *table, int N, int T,
                                    int n_heads, int head_dim, int ld, int max_pos, kn_dtype dt, kn_stream s) {
    return rope_launch(out, x, pos, table, N, T, n_heads, head_dim, ld, max_pos, dt, s, 1.0f);
}

extern "C" int kn_rope_backward_cuda(void *dx, const void *dout, const int32_t *pos, const float *table, int N, int T,
                                     int n_heads, int head_dim, int ld, int max_pos, kn_dtype dt, kn_stream s) {
    return rope_launch(dx, dout, pos, table, N, T, n_heads, head_dim, ld, max_pos, dt, s, -1.0f);
}

/* ---- SwiGLU -------------------------------------------------------------------------------- */
template <typename T> __global__ void swiglu_fwd_kernel(T *out, const T *gate, const T *up, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = kn_ld(gate + i);
        kn_st(out + i, g / (1.0f + expf(-g)) * kn_ld(up + i));
    }
}

template <typename T>
__global__ void swiglu_bwd_kernel(T *dgate, T *dup, const T *dout, const T *gate, const T *up, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = kn_ld(gate + i), sg = 1.0f / (1.0f + expf(-g)), dy = kn_ld(dout + i), u = kn_ld(up + i);
        kn_st(dup + i, dy * g * sg);
        kn_st(dgate + i, dy * u * sg * (1.0f + g * (1.0f - sg)));
    }
}

extern "C" int kn_swiglu_forward_cuda(void *out, const void *gate, const void *up, size_t n, kn_dtype dt, kn_stream s) {
    if (!out || !gate || !up || !n) return KN_EINVAL;
    KN_DISPATCH(
        dt, (swiglu_fwd_kernel<DT><<<kn_blocks(n, 256), 256, 0, s>>>((DT *)out, (const DT *)gate, (const DT *)up, n)));
    KN_CUDA_LAUNCHED("swiglu_forward");
    return KN_OK;
}

extern "C" int kn_swiglu_backward_cuda(void *dgate, void *dup, const void *dout, const void *gate, const void *up,
                                       size_t n, kn_dtype dt, kn_stream s) {
    if (!dgate || !dup || !dout || !gate || !up || !n) return KN_EINVAL;
    KN_DISPATCH(dt, (swiglu_bwd_kernel<DT><<<kn_blocks(n, 256), 256, 0, s>>>((DT *)dgate, (DT *)dup, (const DT *)dout,
                                                                             (const DT *)gate, (const DT *)up, n)));
    KN_CUDA_LAUNCHED("swiglu_backward");
    return KN_OK;
}

/* ---- grouped-query attention ------------------------------------------------------------------ */
/* The kernels of kn_attention_simt.cuh on the packed GQA row, tiled by
 * kn_att_gqa_cfg (there, so that test_attn_tc_emu runs the same tiling). */
typedef kn_att_geo gqa_geo;

/* Shape checks shared by forward and backward; fills the geometry. */
static int gqa_setup(gqa_geo *g, int B, int T, int NH, int NKV, int HS) {
    if (HS != 16 && HS != 32 && HS != 64 && HS != 128) {
        kn_cuda_set_error("gqa attention: head size %d not supported (16, 32, 64 or 128)", HS);
        return KN_EINVAL;
    }
    if (!kn_att_gqa_shape_ok(B, T, NH, NKV, HS)) return KN_EINVAL;
    *g = kn_att_geo_gqa(T, NH, NKV, HS);
    return KN_OK;
}

template <int HS, typename T>
static int gqa_fwd_launch(T *out, float *lse, const T *qkv, const int32_t *doc, int B, const gqa_geo &g,
                          cudaStream_t s) {
    return kn_att_fwd_launch<HS, kn_att_gqa_cfg<HS>, T>(out, lse, qkv, doc, B, g, s, "gqa_attention_forward");
}

extern "C" int kn_gqa_attention_forward_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T,
                                             int NH, int NKV, int HS, kn_dtype dt, kn_stream s) {
    if (!out || !lse || !qkv) return KN_EINVAL;
    gqa_geo g;
    int rc = gqa_setup(&g, B, T, NH, NKV, HS);
    if (rc != KN_OK) return rc;
    /* 16 and 32: small test shapes (llama-tiny's heads of 16) */
    if (HS == 16) KN_DISPATCH(dt, return gqa_fwd_launch<16, DT>((DT *)out, lse, (const DT *)qkv, doc, B, g, s));
    if (HS == 32) KN_DISPATCH(dt, return gqa_fwd_launch<32, DT>((DT *)out, lse, (const DT *)qkv, doc, B, g, s));
    if (HS == 64) KN_DISPATCH(dt, return gqa_fwd_launch<64, DT>((DT *)out, lse, (const DT *)qkv, doc, B, g, s));
    KN_DISPATCH(dt, return gqa_fwd_launch<128, DT>((DT *)out, lse, (const DT *)qkv, doc, B, g, s));
    return KN_EINVAL; /* not reached: every branch above returns */
}

template <int HS, typename T>
static int gqa_bwd_launch(T *dqkv, const T *dout, const T *qkv, const T *out, const float *lse, const int32_t *doc,
                          int B, const gqa_geo &g, float *Dsum, cudaStream_t s) {
    return kn_att_bwd_launch<HS, kn_att_gqa_cfg<HS>, T>(dqkv, dout, qkv, out, lse, doc, B, g, Dsum, s,
                                                        "gqa_attention_backward");
}

extern "C" int kn_gqa_attention_backward_cuda(void *dqkv, const void *dout, const void *qkv, const void *out,
                                              const float *lse, const int32_t *doc, int B, int T, int NH, int NKV,
                                              int HS, void *scratch, size_t scratch_bytes, kn_dtype dt, kn_stream s) {
    if (!dqkv || !dout || !qkv || !out || !lse) return KN_EINVAL;
    gqa_geo g;
    int rc = gqa_setup(&g, B, T, NH, NKV, HS);
    if (rc != KN_OK) return rc;
    if (!scratch || scratch_bytes < kn_attention_backward_scratch_bytes(B, T, NH)) return KN_EINVAL;
    float *Dsum = (float *)scratch;
    if (HS == 16)
        KN_DISPATCH(dt, return gqa_bwd_launch<16, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out,
                                                      lse, doc, B, g, Dsum, s));
    if (HS == 32)
        KN_DISPATCH(dt, return gqa_bwd_launch<32, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out,
                                                      lse, doc, B, g, Dsum, s));
    if (HS == 64)
        KN_DISPATCH(dt, return gqa_bwd_launch<64, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out,
                                                      lse, doc, B, g, Dsum, s));
    KN_DISPATCH(dt, return gqa_bwd_launch<128, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out, lse,
                                                   doc, B, g, Dsum, s));
    return KN_EINVAL; /* not reached: every branch above returns */
}
