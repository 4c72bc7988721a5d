/* kn_layernorm.cu - LayerNorm forward (with the fused residual add) and a
 * deterministic backward (CUDA twin of layernorm_ref; see kn_cuda.h). */
#include "kn_cuda_common.cuh"

template <typename T> __device__ __forceinline__ float kn_round(float x);
template <> __device__ __forceinline__ float kn_round<float>(float x) { return x; }
template <> __device__ __forceinline__ float kn_round<kn_f16>(float x) { return __half2float(__float2half_rn(x)); }
template <> __device__ __forceinline__ float kn_round<kn_bf16>(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

/* One warp per row.  x = inp (+ inp2, stored to resid_out as T). */
template <typename T>
__global__ void ln_fwd_kernel(T *out, float *mean, float *rstd, T *resid_out, const T *inp, const T *inp2,
                              const float *w, const float *b, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *x = inp + (size_t)row * C;
    const T *x2 = inp2 ? inp2 + (size_t)row * C : nullptr;
    T *xr = resid_out ? resid_out + (size_t)row * C : nullptr;
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float v = kn_ld(x + c);
        if (x2) {
            v = kn_round<T>(v + kn_ld(x2 + c));
            if (xr) kn_st(xr + c, v);
        }
        sum += v;
    }
    float m = kn_warp_sum(sum) / C;
    float var = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float v = x2 ? kn_round<T>(kn_ld(x + c) + kn_ld(x2 + c)) : kn_ld(x + c);
        float d = v - m;
        var += d * d;
    }
    float rs = 1.0f / sqrtf(kn_warp_sum(var) / C + KN_LN_EPS);
    T *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float v = x2 ? kn_round<T>(kn_ld(x + c) + kn_ld(x2 + c)) : kn_ld(x + c);
        kn_st(o + c, (v - m) * rs * w[c] + b[c]);
    }
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = rs;
    }
}

/* The same with 16-byte accesses: a warp per row, the row held in registers
 * (LN_FWD_MAXV 8-element vectors per lane: C <= 32 * 8 * LN_FWD_MAXV = 2048),
 * read once; mean and variance from the registers (two passes, as above).
 * The scalar kernel reads each element three times, 2 bytes at a time with a
 * 64-byte stride between lanes: 0.073 ms per call at d12 B16 T1024 on the
 * H200 (1,378 GB/s), 24 calls a step. */
#define LN_FWD_MAXV 8
template <typename T>
__global__ void __launch_bounds__(256) ln_fwd_vec_kernel(T *out, float *mean, float *rstd, T *resid_out, const T *inp,
                                                         const T *inp2, const float *w, const float *b, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) return;
    const int nv = C / 8; /* vectors in the row; lane takes lane, lane + 32, ... */
    const size_t base = (size_t)row * C;
    float v[LN_FWD_MAXV][8];
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < LN_FWD_MAXV; i++) {
        int k = i * 32 + lane;
        if (k < nv) {
            ld8(inp + base + (size_t)k * 8, v[i]);
            if (inp2) {
                float y[8];
                ld8(inp2 + base + (size_t)k * 8, y);
#pragma unroll
                for (int e = 0; e < 8; e++) v[i][e] = kn_round<T>(v[i][e] + y[e]);
                if (resid_out) st8(resid_out + base + (size_t)k * 8, v[i]);
            }
#pragma unroll
            for (int e = 0; e < 8; e++) sum += v[i][e];
        }
    }
    const float m = kn_warp_sum(sum) / C;
    float var = 0.0f;
#pragma unroll
    for (int i = 0; i < LN_FWD_MAXV; i++)
        if (i * 32 + lane < nv)
#pragma unroll
            for (int e = 0; e < 8; e++) var += (v[i][e] - m) * (v[i][e] - m);
    const float rs = 1.0f / sqrtf(kn_warp_sum(var) / C + KN_LN_EPS);
#pragma unroll
    for (int i = 0; i < LN_FWD_MAXV; i++) {
        int k = i * 32 + lane;
        if (k < nv) {
            float wv[8], bv[8], o[8];
            ld8(w + (size_t)k * 8, wv);
            ld8(b + (size_t)k * 8, bv);
#pragma unroll
            for (int e = 0; e < 8; e++) o[e] = (v[i][e] - m) * rs * wv[e] + bv[e];
            st8(out + base + (size_t)k * 8, o);
        }
    }
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = rs;
    }
}

static int g_ln_fwd_scalar = -1; /* MKS_LN_FWD_SCALAR=1: the scalar kernel (tests/gpu/run.sh's fallback) */

extern "C" int kn_layernorm_forward_cuda(void *out, float *mean, float *rstd, void *resid_out, const void *inp,
                                         const void *inp2, const float *weight, const float *bias, int N, int C,
                                         kn_dtype dt, kn_stream s) {
    if (!out || !inp || !weight || !bias || N <= 0 || C <= 0) return KN_EINVAL;
    if (resid_out && !inp2) return KN_EINVAL;
    unsigned grid = (unsigned)((N + 7) / 8);
    const uintptr_t ptrs =
        (uintptr_t)out | (uintptr_t)inp | (uintptr_t)inp2 | (uintptr_t)resid_out | (uintptr_t)weight | (uintptr_t)bias;
    bool vec = dt != KN_F32 && C % 8 == 0 && C <= 32 * 8 * LN_FWD_MAXV && ptrs % 16 == 0 &&
               !kn_opt_in(&g_ln_fwd_scalar, "MKS_LN_FWD_SCALAR");
    if (vec) {
        if (dt == KN_BF16)
            ln_fwd_vec_kernel<kn_bf16><<<grid, 256, 0, s>>>((kn_bf16 *)out, mean, rstd, (kn_bf16 *)resid_out,
                                                            (const kn_bf16 *)inp, (const kn_bf16 *)inp2, weight, bias,
                                                            N, C);
        else
            ln_fwd_vec_kernel<kn_f16><<<grid, 256, 0, s>>>((kn_f16 *)out, mean, rstd, (kn_f16 *)resid_out,
                                                           (const kn_f16 *)inp, (const kn_f16 *)inp2, weight, bias, N,
                                                           C);
    } else {
        KN_DISPATCH(dt, (ln_fwd_kernel<DT><<<grid, 256, 0, s>>>((DT *)out, mean, rstd, (DT *)resid_out, (const DT *)inp,
                                                                (const DT *)inp2, weight, bias, N, C)));
    }
    KN_CUDA_LAUNCHED("layernorm_forward");
    return KN_OK;
}

/* ---- backward ------------------------------------------------------------------------------ */
/* rows per block: kn_cuda_size.h, where kn_layernorm_backward_scratch_bytes
 * sizes the partial sums from it */
#define LN_BWD_ROWS KN_LN_BWD_ROWS

static int ln_bwd_blocks(int N) { return (N + LN_BWD_ROWS - 1) / LN_BWD_ROWS; }

/* Block: LN_BWD_ROWS rows, 8 warps.  Phase A (a warp per row): dinp +=.
 * Phase B (a thread per column): partial dweight/dbias of these rows, in
 * row order, to partial[block][2C]. */
template <typename T>
__global__ void ln_bwd_kernel(T *dinp, float *partial, const T *dout, const T *inp, const float *w, const float *mean,
                              const float *rstd, int N, int C) {
    int r0 = blockIdx.x * LN_BWD_ROWS;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    for (int r = r0 + warp; r < r0 + LN_BWD_ROWS && r < N; r += nw) {
        const T *dy = dout + (size_t)r * C;
        const T *x = inp + (size_t)r * C;
        float m = mean[r], rs = rstd[r];
        float s1 = 0.0f, s2 = 0.0f;
        for (int c = lane; c < C; c += 32) {
            float xh = (kn_ld(x + c) - m) * rs;
            float dn = kn_ld(dy + c) * w[c];
            s1 += dn;
            s2 += dn * xh;
        }
        s1 = kn_warp_sum(s1) / C;
        s2 = kn_warp_sum(s2) / C;
        T *dx = dinp + (size_t)r * C;
        for (int c = lane; c < C; c += 32) {
            float xh = (kn_ld(x + c) - m) * rs;
            float dn = kn_ld(dy + c) * w[c];
            kn_st(dx + c, kn_ld(dx + c) + (dn - s1 - xh * s2) * rs);
        }
    }
    float *pw = partial + (size_t)blockIdx.x * 2 * C, *pb = pw + C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float aw = 0.0f, ab = 0.0f;
        for (int r = r0; r < r0 + LN_BWD_ROWS && r < N; r++) {
            float dy = kn_ld(dout + (size_t)r * C + c);
            aw += dy * (kn_ld(inp + (size_t)r * C + c) - mean[r]) * rstd[r];
            ab += dy;
        }
        pw[c] = aw;
        pb[c] = ab;
    }
}

/* The same contract as ln_bwd_kernel (dinp +=, partial[block][2C] for the
 * same LN_BWD_ROWS rows), for C % 8 == 0 and 16-byte aligned rows: a warp
 * owns LN_BWD_ROWS / 8 consecutive rows and reads 8 columns per lane per
 * access.  Pass 1 takes each row's two sums; pass 2 walks the row in
 * chunks of 256 columns, writes dinp and keeps the chunk's dweight/dbias
 * of the warp's rows in registers; the 8 warps' chunk sums are then added
 * in warp order through shared memory (deterministic: no atomics).  The
 * first version (ln_bwd_kernel, 2-byte lane-strided loads, a column pass
 * that read the block's rows again) ran at 185 GB/s on the H200: 0.55 ms
 * per call at d12, B16 T1024, 24 calls a step. */
#define LN_BWD_RPW (LN_BWD_ROWS / 8)
template <typename T>
__global__ void __launch_bounds__(256)
    ln_bwd_vec_kernel(T *dinp, float *partial, const T *dout, const T *inp, const float *w, const float *mean,
                      const float *rstd, int N, int C) {
    __shared__ float sw[8][256], sb[8][256];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int r0 = blockIdx.x * LN_BWD_ROWS, rw = r0 + warp * LN_BWD_RPW;
    float s1[LN_BWD_RPW], s2[LN_BWD_RPW];
#pragma unroll
    for (int j = 0; j < LN_BWD_RPW; j++) {
        int r = rw + j;
        float a = 0.0f, b = 0.0f;
        if (r < N) {
            float m = mean[r], rs = rstd[r];
            for (int c = lane * 8; c < C; c += 256) {
                float x[8], dy[8], wv[8];
                ld8(inp + (size_t)r * C + c, x);
                ld8(dout + (size_t)r * C + c, dy);
                ld8(w + c, wv);
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    float dn = dy[i] * wv[i];
                    a += dn;
                    b += dn * ((x[i] - m) * rs);
                }
            }
        }
        s1[j] = kn_warp_sum(a) / C;
        s2[j] = kn_warp_sum(b) / C;
    }
    float *pw = partial + (size_t)blockIdx.x * 2 * C, *pb = pw + C;
    for (int c0 = 0; c0 < C; c0 += 256) {
        int c = c0 + lane * 8;
        float aw[8], ab[8];
#pragma unroll
        for (int i = 0; i < 8; i++) aw[i] = ab[i] = 0.0f;
        if (c < C) {
            float wv[8];
            ld8(w + c, wv);
#pragma unroll
            for (int j = 0; j < LN_BWD_RPW; j++) {
                int r = rw + j;
                if (r >= N) break;
                float m = mean[r], rs = rstd[r];
                float x[8], dy[8], dx[8];
                ld8(inp + (size_t)r * C + c, x);
                ld8(dout + (size_t)r * C + c, dy);
                ld8(dinp + (size_t)r * C + c, dx);
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    float xh = (x[i] - m) * rs;
                    dx[i] += (dy[i] * wv[i] - s1[j] - xh * s2[j]) * rs;
                    aw[i] += dy[i] * xh;
                    ab[i] += dy[i];
                }
                st8(dinp + (size_t)r * C + c, dx);
            }
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            sw[warp][lane * 8 + i] = aw[i];
            sb[warp][lane * 8 + i] = ab[i];
        }
        __syncthreads();
        int cc = c0 + threadIdx.x;
        if (cc < C) {
            float a = 0.0f, b = 0.0f;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                a += sw[k][threadIdx.x];
                b += sb[k][threadIdx.x];
            }
            pw[cc] = a;
            pb[cc] = b;
        }
        __syncthreads();
    }
}

__global__ void ln_bwd_reduce_kernel(float *dweight, float *dbias, const float *partial, int nblocks, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float aw = 0.0f, ab = 0.0f;
    for (int k = 0; k < nblocks; k++) {
        aw += partial[(size_t)k * 2 * C + c];
        ab += partial[(size_t)k * 2 * C + C + c];
    }
    if (dweight) dweight[c] += aw;
    if (dbias) dbias[c] += ab;
}

static int g_ln_bwd_scalar = -1; /* MKS_LN_BWD_SCALAR=1: the first version (tests/gpu/run.sh's fallback) */

extern "C" int kn_layernorm_backward_cuda(void *dinp, float *dweight, float *dbias, const void *dout, const void *inp,
                                          const float *weight, const float *mean, const float *rstd, int N, int C,
                                          void *scratch, size_t scratch_bytes, kn_dtype dt, kn_stream s) {
    if (!dinp || !dout || !inp || !weight || !mean || !rstd || N <= 0 || C <= 0) return KN_EINVAL;
    if (!scratch || scratch_bytes < kn_layernorm_backward_scratch_bytes(N, C)) return KN_EINVAL;
    int nb = ln_bwd_blocks(N);
    size_t ebytes = dt == KN_F32 ? 4 : 2;
    bool vec = C % 8 == 0 && ((uintptr_t)dinp | (uintptr_t)dout | (uintptr_t)inp | (uintptr_t)weight) % 16 == 0 &&
               (C * ebytes) % 16 == 0 && !kn_opt_in(&g_ln_bwd_scalar, "MKS_LN_BWD_SCALAR");
    if (vec)
        KN_DISPATCH(dt, (ln_bwd_vec_kernel<DT><<<nb, 256, 0, s>>>((DT *)dinp, (float *)scratch, (const DT *)dout,
                                                                  (const DT *)inp, weight, mean, rstd, N, C)));
    else
        KN_DISPATCH(dt, (ln_bwd_kernel<DT><<<nb, 256, 0, s>>>((DT *)dinp, (float *)scratch, (const DT *)dout,
                                                              (const DT *)inp, weight, mean, rstd, N, C)));
    KN_CUDA_LAUNCHED("layernorm_backward");
    if (dweight || dbias) {
        ln_bwd_reduce_kernel<<<(C + 255) / 256, 256, 0, s>>>(dweight, dbias, (const float *)scratch, nb, C);
        KN_CUDA_LAUNCHED("layernorm_backward reduce");
    }
    return KN_OK;
}
