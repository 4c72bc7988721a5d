/* kn_llama.cu - the Llama family's CUDA kernels (CUDA twins of llama_ref.c
 * and llama_gqa_ref.c; API and contracts in kn_cuda.h): RMSNorm with the
 * fused residual add and a deterministic backward, rotary embeddings from a
 * cos/sin table built once per run, the SwiGLU gate, and grouped-query
 * attention that indexes the KV head of each query head.
 *
 * Why GQA has its own kernels instead of a KV-head index in kn_attention.cu:
 * those kernels (and the tensor-core ones) take the GPT-2 row [q | k | v] of
 * 3C with head size 32/64, and they are the ones validated on an H200; the
 * Llama row is [q (NH HS) | k (NKV HS) | v (NKV HS)] with head size 64 or
 * 128, and the dK/dV of a KV head must sum over its query heads.  The
 * kernels below are the SIMT design of kn_attention.cu (thread per query row
 * for the forward and dq, thread per key row for dk/dv, online softmax, no
 * atomics) with that indexing; a tensor-core version is the next step. */
#include <math.h>

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
/* Tiles: forward / dq blocks of BQ query rows (a thread each) walking keys in
 * tiles of BK in shared memory (K and V: 2 BK HS floats, 16 KiB at HS 64,
 * 32 KiB at 128); dk/dv blocks of KB key rows (a thread each, own K/V row in
 * padded shared memory) walking query tiles of QB rows.  At HS 128 the dk/dv
 * block is halved to stay under the 48 KiB of static shared memory. */
template <int HS> struct gqa_cfg {
    static constexpr int BQ = 64;
    static constexpr int BK = 32;
    static constexpr int KB = HS >= 128 ? 32 : 64;
    static constexpr int QB = HS >= 128 ? 8 : 16;
};

/* Row geometry of the packed [q | k | v] row. */
struct gqa_geo {
    int Tn, NH, NKV, rep; /* rep = NH / NKV query heads per KV head */
    size_t RS;            /* elements per token row of qkv: (NH + 2 NKV) HS */
    size_t OS;            /* elements per token row of out: NH HS */
    size_t koff, voff;    /* where the k and v heads start in a row */
};

static __device__ __forceinline__ bool gqa_ok(int tq, int tk, const int32_t *drow, int dq, int dk) {
    return tk <= tq && (!drow || dq == dk);
}

/* grid (ceil(T/BQ), NH, B), block BQ. */
template <int HS, typename T>
__global__ void __launch_bounds__(gqa_cfg<HS>::BQ)
    gqa_fwd_kernel(T *out, float *lse, const T *qkv, const int32_t *doc, gqa_geo g, float scale) {
    constexpr int BQ = gqa_cfg<HS>::BQ, BK = gqa_cfg<HS>::BK;
    __shared__ float Ks[BK][HS];
    __shared__ float Vs[BK][HS];
    __shared__ int Ds[BK];
    const int b = blockIdx.z, h = blockIdx.y, kv = h / g.rep, Tn = g.Tn;
    const int q0 = blockIdx.x * BQ, t = q0 + threadIdx.x;
    const bool active = t < Tn;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    const int dqv = (active && drow) ? drow[t] : 0;
    const T *base = qkv + (size_t)b * Tn * g.RS;
    float q[HS], o[HS];
#pragma unroll
    for (int d = 0; d < HS; d++) {
        q[d] = active ? kn_ld(base + (size_t)t * g.RS + (size_t)h * HS + d) * scale : 0.0f;
        o[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const int last = min(q0 + BQ, Tn) - 1;
    for (int k0 = 0; k0 <= last; k0 += BK) {
        __syncthreads();
        for (int i = threadIdx.x; i < BK * HS; i += BQ) {
            int j = i / HS, d = i % HS, tk = k0 + j;
            const T *row = base + (size_t)(tk < Tn ? tk : 0) * g.RS + (size_t)kv * HS + d;
            Ks[j][d] = tk < Tn ? kn_ld(row + g.koff) : 0.0f;
            Vs[j][d] = tk < Tn ? kn_ld(row + g.voff) : 0.0f;
        }
        if (threadIdx.x < BK) {
            int tk = k0 + threadIdx.x;
            Ds[threadIdx.x] = (drow && tk < Tn) ? drow[tk] : 0;
        }
        __syncthreads();
        if (!active || k0 > t) continue;
        float sc[BK];
        float tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < BK; j++) {
            float sv = 0.0f;
#pragma unroll
            for (int d = 0; d < HS; d++) sv += q[d] * Ks[j][d];
            sc[j] = gqa_ok(t, k0 + j, drow, dqv, Ds[j]) ? sv : -INFINITY;
            tmax = fmaxf(tmax, sc[j]);
        }
        if (tmax == -INFINITY) continue;
        float mn = fmaxf(m, tmax), corr = expf(m - mn); /* m = -inf the first time: 0 */
        l *= corr;
#pragma unroll
        for (int d = 0; d < HS; d++) o[d] *= corr;
#pragma unroll
        for (int j = 0; j < BK; j++) {
            float p = sc[j] == -INFINITY ? 0.0f : expf(sc[j] - mn);
            l += p;
#pragma unroll
            for (int d = 0; d < HS; d++) o[d] += p * Vs[j][d];
        }
        m = mn;
    }
    if (!active) return;
    float inv = 1.0f / l;
    T *orow = out + ((size_t)b * Tn + t) * g.OS + (size_t)h * HS;
#pragma unroll
    for (int d = 0; d < HS; d++) kn_st(orow + d, o[d] * inv);
    lse[((size_t)b * g.NH + h) * Tn + t] = m + logf(l);
}

/* Dsum[b,h,t] = dout[b,t,h,:] . out[b,t,h,:] */
template <typename T>
__global__ void gqa_dsum_kernel(float *Dsum, const T *dout, const T *out, int B, gqa_geo g, int HS) {
    size_t total = (size_t)B * g.NH * g.Tn;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i % g.Tn, h = i / g.Tn % g.NH, b = i / ((size_t)g.Tn * g.NH);
        size_t at = (b * g.Tn + t) * g.OS + h * HS;
        float acc = 0.0f;
        for (int d = 0; d < HS; d++) acc += kn_ld(dout + at + d) * kn_ld(out + at + d);
        Dsum[i] = acc;
    }
}

/* dq: grid (ceil(T/BQ), NH, B), block BQ, a thread per query row (its q, dout
 * and dq rows in registers). */
template <int HS, typename T>
__global__ void __launch_bounds__(gqa_cfg<HS>::BQ)
    gqa_dq_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, const int32_t *doc,
                  gqa_geo g, float scale) {
    constexpr int BQ = gqa_cfg<HS>::BQ, BK = gqa_cfg<HS>::BK;
    __shared__ float Ks[BK][HS];
    __shared__ float Vs[BK][HS];
    __shared__ int Ds[BK];
    const int b = blockIdx.z, h = blockIdx.y, kv = h / g.rep, Tn = g.Tn;
    const int q0 = blockIdx.x * BQ, t = q0 + threadIdx.x;
    const bool active = t < Tn;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    const int dqv = (active && drow) ? drow[t] : 0;
    const T *base = qkv + (size_t)b * Tn * g.RS;
    float q[HS], dq[HS], dO[HS];
#pragma unroll
    for (int d = 0; d < HS; d++) {
        q[d] = active ? kn_ld(base + (size_t)t * g.RS + (size_t)h * HS + d) * scale : 0.0f;
        dO[d] = active ? kn_ld(dout + ((size_t)b * Tn + t) * g.OS + (size_t)h * HS + d) : 0.0f;
        dq[d] = 0.0f;
    }
    const float L = active ? lse[((size_t)b * g.NH + h) * Tn + t] : 0.0f;
    const float Di = active ? Dsum[((size_t)b * g.NH + h) * Tn + t] : 0.0f;
    const int last = min(q0 + BQ, Tn) - 1;
    for (int k0 = 0; k0 <= last; k0 += BK) {
        __syncthreads();
        for (int i = threadIdx.x; i < BK * HS; i += BQ) {
            int j = i / HS, d = i % HS, tk = k0 + j;
            const T *row = base + (size_t)(tk < Tn ? tk : 0) * g.RS + (size_t)kv * HS + d;
            Ks[j][d] = tk < Tn ? kn_ld(row + g.koff) : 0.0f;
            Vs[j][d] = tk < Tn ? kn_ld(row + g.voff) : 0.0f;
        }
        if (threadIdx.x < BK) {
            int tk = k0 + threadIdx.x;
            Ds[threadIdx.x] = (drow && tk < Tn) ? drow[tk] : 0;
        }
        __syncthreads();
        if (!active || k0 > t) continue;
        for (int j = 0; j < BK; j++) {
            if (!gqa_ok(t, k0 + j, drow, dqv, Ds[j])) continue;
            float sv = 0.0f, dp = 0.0f;
#pragma unroll
            for (int d = 0; d < HS; d++) {
                sv += q[d] * Ks[j][d];
                dp += dO[d] * Vs[j][d];
            }
            float ds = expf(sv - L) * (dp - Di) * scale;
#pragma unroll
            for (int d = 0; d < HS; d++) dq[d] += ds * Ks[j][d];
        }
    }
    if (!active) return;
    T *row = dqkv + ((size_t)b * Tn + t) * g.RS + (size_t)h * HS;
#pragma unroll
    for (int d = 0; d < HS; d++) kn_st(row + d, dq[d]);
}

/* dk, dv: grid (ceil(T/KB), NKV, B), block KB, a thread per key row of KV
 * head kv; the query heads of the group are walked in order kv*rep ..
 * kv*rep + rep - 1, each over its query tiles, into one accumulator: a fixed
 * order, so deterministic without atomics. */
template <int HS, typename T>
__global__ void __launch_bounds__(gqa_cfg<HS>::KB)
    gqa_dkdv_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, const int32_t *doc,
                    gqa_geo g, float scale) {
    constexpr int KB = gqa_cfg<HS>::KB, QB = gqa_cfg<HS>::QB;
    __shared__ float Ks[KB][HS + 1];
    __shared__ float Vs[KB][HS + 1];
    __shared__ float Qs[QB][HS];
    __shared__ float DOs[QB][HS];
    __shared__ float Ls[QB], Dd[QB];
    __shared__ int Dc[QB];
    const int b = blockIdx.z, kv = blockIdx.y, Tn = g.Tn;
    const int k0 = blockIdx.x * KB, tk = k0 + threadIdx.x;
    const bool active = tk < Tn;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    const int dkv = (active && drow) ? drow[tk] : 0;
    const T *base = qkv + (size_t)b * Tn * g.RS;
    float dk[HS], dv[HS];
#pragma unroll
    for (int d = 0; d < HS; d++) {
        const T *row = base + (size_t)(active ? tk : 0) * g.RS + (size_t)kv * HS + d;
        Ks[threadIdx.x][d] = active ? kn_ld(row + g.koff) : 0.0f;
        Vs[threadIdx.x][d] = active ? kn_ld(row + g.voff) : 0.0f;
        dk[d] = 0.0f;
        dv[d] = 0.0f;
    }
    for (int h = kv * g.rep; h < (kv + 1) * g.rep; h++) {
        const float *lh = lse + ((size_t)b * g.NH + h) * Tn, *dh = Dsum + ((size_t)b * g.NH + h) * Tn;
        for (int qt = (k0 / QB) * QB; qt < Tn; qt += QB) {
            __syncthreads();
            for (int i = threadIdx.x; i < QB * HS; i += KB) {
                int r = i / HS, d = i % HS, tq = qt + r;
                bool in = tq < Tn;
                Qs[r][d] = in ? kn_ld(base + (size_t)tq * g.RS + (size_t)h * HS + d) * scale : 0.0f;
                DOs[r][d] = in ? kn_ld(dout + ((size_t)b * Tn + tq) * g.OS + (size_t)h * HS + d) : 0.0f;
            }
            for (int r = threadIdx.x; r < QB; r += KB) {
                int tq = qt + r;
                bool in = tq < Tn;
                Ls[r] = in ? lh[tq] : 0.0f;
                Dd[r] = in ? dh[tq] : 0.0f;
                Dc[r] = (in && drow) ? drow[tq] : 0;
            }
            __syncthreads();
            if (!active) continue;
            for (int r = 0; r < QB; r++) {
                int tq = qt + r;
                if (tq >= Tn || !gqa_ok(tq, tk, drow, Dc[r], dkv)) continue;
                float sv = 0.0f, dp = 0.0f;
#pragma unroll
                for (int d = 0; d < HS; d++) {
                    sv += Qs[r][d] * Ks[threadIdx.x][d];
                    dp += DOs[r][d] * Vs[threadIdx.x][d];
                }
                float p = expf(sv - Ls[r]), ds = p * (dp - Dd[r]);
#pragma unroll
                for (int d = 0; d < HS; d++) {
                    dv[d] += p * DOs[r][d];
                    dk[d] += ds * Qs[r][d]; /* Qs holds q * scale: dk = ds * q * scale */
                }
            }
        }
    }
    if (!active) return;
    T *row = dqkv + ((size_t)b * Tn + tk) * g.RS + (size_t)kv * HS;
#pragma unroll
    for (int d = 0; d < HS; d++) {
        kn_st(row + g.koff + d, dk[d]);
        kn_st(row + g.voff + d, dv[d]);
    }
}

/* Shape checks shared by forward and backward; fills the geometry. */
static int gqa_setup(gqa_geo *g, int B, int T, int NH, int NKV, int HS) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || NH % NKV) return KN_EINVAL;
    if (B > 65535 || NH > 65535) return KN_EINVAL; /* grid.z / grid.y limits */
    if (HS != 64 && HS != 128) {
        kn_cuda_set_error("gqa attention: head size %d not supported (64 or 128)", HS);
        return KN_EINVAL;
    }
    /* row widths are int-sized for the callers' matmuls; the products below are size_t */
    if ((size_t)(NH + 2 * NKV) * HS > (size_t)INT32_MAX) return KN_EINVAL;
    g->Tn = T, g->NH = NH, g->NKV = NKV, g->rep = NH / NKV;
    g->RS = (size_t)(NH + 2 * NKV) * HS;
    g->OS = (size_t)NH * HS;
    g->koff = (size_t)NH * HS;
    g->voff = (size_t)(NH + NKV) * HS;
    return KN_OK;
}

template <int HS, typename T>
static int gqa_fwd_launch(T *out, float *lse, const T *qkv, const int32_t *doc, int B, const gqa_geo &g,
                          cudaStream_t s) {
    constexpr int BQ = gqa_cfg<HS>::BQ;
    dim3 grid((unsigned)((g.Tn + BQ - 1) / BQ), (unsigned)g.NH, (unsigned)B);
    gqa_fwd_kernel<HS, T><<<grid, BQ, 0, s>>>(out, lse, qkv, doc, g, 1.0f / sqrtf((float)HS));
    KN_CUDA_LAUNCHED("gqa_attention_forward");
    return KN_OK;
}

extern "C" int kn_gqa_attention_forward_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T,
                                             int NH, int NKV, int HS, kn_dtype dt, kn_stream s) {
    if (!out || !lse || !qkv) return KN_EINVAL;
    gqa_geo g;
    int rc = gqa_setup(&g, B, T, NH, NKV, HS);
    if (rc != KN_OK) return rc;
    if (HS == 64) KN_DISPATCH(dt, return gqa_fwd_launch<64, DT>((DT *)out, lse, (const DT *)qkv, doc, B, g, s));
    KN_DISPATCH(dt, return gqa_fwd_launch<128, DT>((DT *)out, lse, (const DT *)qkv, doc, B, g, s));
    return KN_EINVAL; /* not reached: every branch above returns */
}

template <int HS, typename T>
static int gqa_bwd_launch(T *dqkv, const T *dout, const T *qkv, const T *out, const float *lse, const int32_t *doc,
                          int B, const gqa_geo &g, float *Dsum, cudaStream_t s) {
    constexpr int BQ = gqa_cfg<HS>::BQ, KB = gqa_cfg<HS>::KB;
    const float scale = 1.0f / sqrtf((float)HS);
    size_t rows = (size_t)B * g.NH * g.Tn;
    gqa_dsum_kernel<T><<<kn_blocks(rows, 256), 256, 0, s>>>(Dsum, dout, out, B, g, HS);
    KN_CUDA_LAUNCHED("gqa_attention_backward dsum");
    dim3 gq((unsigned)((g.Tn + BQ - 1) / BQ), (unsigned)g.NH, (unsigned)B);
    gqa_dq_kernel<HS, T><<<gq, BQ, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, g, scale);
    KN_CUDA_LAUNCHED("gqa_attention_backward dq");
    dim3 gk((unsigned)((g.Tn + KB - 1) / KB), (unsigned)g.NKV, (unsigned)B);
    gqa_dkdv_kernel<HS, T><<<gk, KB, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, g, scale);
    KN_CUDA_LAUNCHED("gqa_attention_backward dkdv");
    return KN_OK;
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
    if (HS == 64)
        KN_DISPATCH(dt, return gqa_bwd_launch<64, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out,
                                                      lse, doc, B, g, Dsum, s));
    KN_DISPATCH(dt, return gqa_bwd_launch<128, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out, lse,
                                                   doc, B, g, Dsum, s));
    return KN_EINVAL; /* not reached: every branch above returns */
}
