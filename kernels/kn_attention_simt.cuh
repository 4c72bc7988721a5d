/* kn_attention_simt.cuh - the one SIMT attention (issue 26: kn_attention.cu
 * and kn_llama.cu had a copy each), flash-style, for any packed row given by
 * strides and offsets, as kn_attn_row_fwd does for the C references
 * (kernels/attention_ref.c):
 *   - GPT-2's row [q | k | v] of 3C: NKV = NH, k at C, v at 2C
 *     (kn_attention.cu);
 *   - the Llama family's [q (NH HS) | k (NKV HS) | v (NKV HS)]: query head h
 *     reads KV head h / (NH / NKV), and a KV head's dK/dV sum over its query
 *     heads in a fixed order (kn_llama.cu).
 * One thread per query row in the forward and dq kernels, one per key row in
 * the dk/dv kernel, tiles in shared memory, online softmax, no atomics
 * (deterministic). Each caller keeps its own tiling and the choices its
 * kernels were validated with (the Cfg template argument): the arithmetic
 * per element is the same in every configuration except FAST_CORR (GPT-2's
 * forward rescales with __expf, as it always has).  Internal to kn_cuda. */
#ifndef KN_ATTENTION_SIMT_CUH
#define KN_ATTENTION_SIMT_CUH

#include <math.h>

#include "kn_attention_geo.cuh"
#include "kn_cuda_common.cuh"

static __device__ __forceinline__ bool kn_att_ok(int tq, int tk, const int32_t *drow, int dq, int dk) {
    return tk <= tq && (!drow || dq == dk);
}

/* Stage keys k0 .. k0+BK-1 of KV head kv: K and V rows and document ids
 * (keys past Tn read as zero); blocks of BQ threads. */
template <int HS, int BQ, int BK, typename T>
static __device__ __forceinline__ void kn_att_stage_keys(float (*Ks)[HS], float (*Vs)[HS], int *Ds, const T *base,
                                                         const int32_t *drow, int kv, int k0, const kn_att_geo &g) {
    for (int i = threadIdx.x; i < BK * HS; i += BQ) {
        int j = i / HS, d = i % HS, tk = k0 + j;
        const T *row = base + (size_t)(tk < g.Tn ? tk : 0) * g.RS + (size_t)kv * HS + d;
        Ks[j][d] = tk < g.Tn ? kn_ld(row + g.koff) : 0.0f;
        Vs[j][d] = tk < g.Tn ? kn_ld(row + g.voff) : 0.0f;
    }
    if (threadIdx.x < BK) {
        int tk = k0 + threadIdx.x;
        Ds[threadIdx.x] = (drow && tk < g.Tn) ? drow[tk] : 0;
    }
}

/* grid (ceil(T/BQ), NH, B), block BQ. */
template <int HS, typename Cfg, typename T>
__global__ void __launch_bounds__(Cfg::BQ)
    kn_att_fwd_kernel(T *out, float *lse, const T *qkv, const int32_t *doc, kn_att_geo g, float scale) {
    constexpr int BQ = Cfg::BQ, BK = Cfg::BK;
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
    const int last = min(q0 + BQ, Tn) - 1; /* largest query of the block */
    for (int k0 = 0; k0 <= last; k0 += BK) {
        __syncthreads();
        kn_att_stage_keys<HS, BQ, BK>(Ks, Vs, Ds, base, drow, kv, k0, g);
        __syncthreads();
        if (!active || k0 > t) continue;
        float sc[BK];
        float tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < BK; j++) {
            float sv = 0.0f;
#pragma unroll
            for (int d = 0; d < HS; d++) sv += q[d] * Ks[j][d];
            sc[j] = kn_att_ok(t, k0 + j, drow, dqv, Ds[j]) ? sv : -INFINITY;
            tmax = fmaxf(tmax, sc[j]);
        }
        if (tmax == -INFINITY) continue;
        float mn = fmaxf(m, tmax);
        float corr = Cfg::FAST_CORR ? __expf(m - mn) : expf(m - mn); /* m = -inf the first time: 0 */
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
__global__ void kn_att_dsum_kernel(float *Dsum, const T *dout, const T *out, int B, kn_att_geo g, int HS) {
    size_t total = (size_t)B * g.NH * g.Tn;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i % g.Tn, h = i / g.Tn % g.NH, b = i / ((size_t)g.Tn * g.NH);
        size_t at = (b * g.Tn + t) * g.OS + h * HS;
        float acc = 0.0f;
        for (int d = 0; d < HS; d++) acc += kn_ld(dout + at + d) * kn_ld(out + at + d);
        Dsum[i] = acc;
    }
}

/* dq: grid (ceil(T/BQ), NH, B), block BQ, a thread per query row. Its dout
 * row in shared memory (Cfg::DO_SHARED, GPT-2's choice) or in registers:
 * the same values either way. */
template <int HS, typename Cfg, typename T>
__global__ void __launch_bounds__(Cfg::BQ)
    kn_att_dq_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, const int32_t *doc,
                     kn_att_geo g, float scale) {
    constexpr int BQ = Cfg::BQ, BK = Cfg::BK;
    constexpr int DR = Cfg::DO_SHARED ? 1 : HS; /* dout in registers: HS floats; else 1 (unused) */
    __shared__ float Ks[BK][HS];
    __shared__ float Vs[BK][HS];
    __shared__ float DOs[Cfg::DO_SHARED ? BQ : 1][HS + 1];
    __shared__ int Ds[BK];
    const int b = blockIdx.z, h = blockIdx.y, kv = h / g.rep, Tn = g.Tn;
    const int q0 = blockIdx.x * BQ, t = q0 + threadIdx.x;
    const bool active = t < Tn;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    const int dqv = (active && drow) ? drow[t] : 0;
    const T *base = qkv + (size_t)b * Tn * g.RS;
    float q[HS], dq[HS], dOr[DR];
#pragma unroll
    for (int d = 0; d < HS; d++) {
        q[d] = active ? kn_ld(base + (size_t)t * g.RS + (size_t)h * HS + d) * scale : 0.0f;
        dq[d] = 0.0f;
        float v = active ? kn_ld(dout + ((size_t)b * Tn + t) * g.OS + (size_t)h * HS + d) : 0.0f;
        if (Cfg::DO_SHARED) DOs[threadIdx.x][d] = v;
        else dOr[Cfg::DO_SHARED ? 0 : d] = v;
    }
    const float L = active ? lse[((size_t)b * g.NH + h) * Tn + t] : 0.0f;
    const float Di = active ? Dsum[((size_t)b * g.NH + h) * Tn + t] : 0.0f;
    const int last = min(q0 + BQ, Tn) - 1;
    for (int k0 = 0; k0 <= last; k0 += BK) {
        __syncthreads();
        kn_att_stage_keys<HS, BQ, BK>(Ks, Vs, Ds, base, drow, kv, k0, g);
        __syncthreads();
        if (!active || k0 > t) continue;
        for (int j = 0; j < BK; j++) {
            if (!kn_att_ok(t, k0 + j, drow, dqv, Ds[j])) continue;
            float sv = 0.0f, dp = 0.0f;
#pragma unroll
            for (int d = 0; d < HS; d++) {
                sv += q[d] * Ks[j][d];
                dp += (Cfg::DO_SHARED ? DOs[Cfg::DO_SHARED ? threadIdx.x : 0][d] : dOr[Cfg::DO_SHARED ? 0 : d]) *
                      Vs[j][d];
            }
            float p = expf(sv - L);
            float ds = p * (dp - Di) * scale;
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
 * head kv (its k and v rows in padded shared memory, the accumulators in
 * registers); the query heads of the group are walked in order kv*rep ..
 * kv*rep + rep - 1, each over its query tiles of QB rows, into one
 * accumulator: a fixed order, so deterministic without atomics. */
template <int HS, typename Cfg, typename T>
__global__ void __launch_bounds__(Cfg::KB)
    kn_att_dkdv_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, const int32_t *doc,
                       kn_att_geo g, float scale) {
    constexpr int KB = Cfg::KB, QB = Cfg::QB;
    (void)scale; /* Qs holds q * scale */
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
                if (tq >= Tn || !kn_att_ok(tq, tk, drow, Dc[r], dkv)) continue;
                float sv = 0.0f, dp = 0.0f;
#pragma unroll
                for (int d = 0; d < HS; d++) {
                    sv += Qs[r][d] * Ks[threadIdx.x][d];
                    dp += DOs[r][d] * Vs[threadIdx.x][d];
                }
                float p = expf(sv - Ls[r]);
                float ds = p * (dp - Dd[r]);
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

/* The Llama family's tiling (kn_llama.cu): forward / dq blocks of BQ query
 * rows walking keys in tiles of BK in shared memory (K and V: 2 BK HS floats,
 * 16 KiB at HS 64, 32 KiB at 128); dk/dv blocks of KB key rows walking query
 * tiles of QB rows.  At HS 128 the dk/dv block is halved to stay under the
 * 48 KiB of static shared memory; dq keeps its dout row in registers. */
template <int HS> struct kn_att_gqa_cfg {
    static constexpr int BQ = 64;
    static constexpr int BK = 32;
    static constexpr int KB = HS >= 128 ? 32 : 64;
    static constexpr int QB = HS >= 128 ? 8 : 16;
    static constexpr bool FAST_CORR = false, DO_SHARED = false;
};

#ifndef KN_EMU /* the CPU run (test_attn_tc_emu) launches the kernels itself */
/* The launches: forward; backward (Dsum in the caller's scratch, then dq and
 * dk/dv).  what: the op's name in launch errors. */
template <int HS, typename Cfg, typename T>
static int kn_att_fwd_launch(T *out, float *lse, const T *qkv, const int32_t *doc, int B, const kn_att_geo &g,
                             cudaStream_t s, const char *what) {
    dim3 grid((unsigned)((g.Tn + Cfg::BQ - 1) / Cfg::BQ), (unsigned)g.NH, (unsigned)B);
    kn_att_fwd_kernel<HS, Cfg, T><<<grid, Cfg::BQ, 0, s>>>(out, lse, qkv, doc, g, 1.0f / sqrtf((float)HS));
    KN_CUDA_LAUNCHED(what);
    return KN_OK;
}

template <int HS, typename Cfg, typename T>
static int kn_att_bwd_launch(T *dqkv, const T *dout, const T *qkv, const T *out, const float *lse, const int32_t *doc,
                             int B, const kn_att_geo &g, float *Dsum, cudaStream_t s, const char *what) {
    const float scale = 1.0f / sqrtf((float)HS);
    size_t rows = (size_t)B * g.NH * g.Tn;
    kn_att_dsum_kernel<T><<<kn_blocks(rows, 256), 256, 0, s>>>(Dsum, dout, out, B, g, HS);
    KN_CUDA_LAUNCHED(what);
    dim3 gq((unsigned)((g.Tn + Cfg::BQ - 1) / Cfg::BQ), (unsigned)g.NH, (unsigned)B);
    kn_att_dq_kernel<HS, Cfg, T><<<gq, Cfg::BQ, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, g, scale);
    KN_CUDA_LAUNCHED(what);
    dim3 gk((unsigned)((g.Tn + Cfg::KB - 1) / Cfg::KB), (unsigned)g.NKV, (unsigned)B);
    kn_att_dkdv_kernel<HS, Cfg, T><<<gk, Cfg::KB, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, g, scale);
    KN_CUDA_LAUNCHED(what);
    return KN_OK;
}

#endif /* KN_EMU */

#endif /* KN_ATTENTION_SIMT_CUH */
