/* kn_attention.cu - causal self-attention with the document mask, flash-style:
 * O(T) memory (the row log-sum-exp is all that is saved), never a T x T
 * matrix (CUDA twin of attention_ref; see kn_cuda.h).
 *
 * This first version is SIMT fp32 arithmetic (one thread per query row in
 * the forward and dq kernels, one per key row in the dk/dv kernel, tiles in
 * shared memory, online softmax).  It is correct and deterministic (no
 * atomics: dq and dk/dv are separate kernels); a tensor-core (mma/wgmma)
 * version is the next step for speed. */
#include <math.h>

#include "kn_cuda_common.cuh"

#define ATT_BQ 64 /* query rows per forward / dq block (one thread each) */
#define ATT_BK 32 /* keys per shared-memory tile */

static __device__ __forceinline__ bool att_ok(int tq, int tk, const int32_t *doc_row, int dq, int dk) {
    return tk <= tq && (!doc_row || dq == dk);
}

/* Stage keys k0 .. k0+ATT_BK-1 of head h in shared memory: their K and V rows
 * from qkv and their document ids (keys past Tn read as zero). Called by the
 * forward and dq kernels, whose blocks are ATT_BQ threads. */
template <int HS, typename T>
static __device__ __forceinline__ void att_stage_keys(float (*Ks)[HS], float (*Vs)[HS], int *Ds, const T *qkv,
                                                      const int32_t *drow, int b, int h, int k0, int Tn, int C) {
    size_t C3 = 3 * (size_t)C;
    for (int i = threadIdx.x; i < ATT_BK * HS; i += ATT_BQ) {
        int j = i / HS, d = i % HS, tk = k0 + j;
        const T *row = qkv + ((size_t)b * Tn + (tk < Tn ? tk : 0)) * C3 + h * HS + d;
        Ks[j][d] = tk < Tn ? kn_ld(row + C) : 0.0f;
        Vs[j][d] = tk < Tn ? kn_ld(row + 2 * C) : 0.0f;
    }
    if (threadIdx.x < ATT_BK) {
        int tk = k0 + threadIdx.x;
        Ds[threadIdx.x] = (drow && tk < Tn) ? drow[tk] : 0;
    }
}

/* grid (ceil(T/64), NH, B), block 64. */
template <int HS, typename T>
__global__ void __launch_bounds__(ATT_BQ)
    att_fwd_kernel(T *out, float *lse, const T *qkv, const int32_t *doc, int Tn, int C, int NH, float scale) {
    __shared__ float Ks[ATT_BK][HS];
    __shared__ float Vs[ATT_BK][HS];
    __shared__ int Ds[ATT_BK];
    int b = blockIdx.z, h = blockIdx.y;
    int q0 = blockIdx.x * ATT_BQ;
    int t = q0 + threadIdx.x;
    bool active = t < Tn;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    int dqv = (active && drow) ? drow[t] : 0;
    size_t C3 = 3 * (size_t)C;
    float q[HS], o[HS];
#pragma unroll
    for (int d = 0; d < HS; d++) {
        q[d] = active ? kn_ld(qkv + ((size_t)b * Tn + t) * C3 + h * HS + d) * scale : 0.0f;
        o[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int last = min(q0 + ATT_BQ, Tn) - 1; /* largest query of the block */
    for (int k0 = 0; k0 <= last; k0 += ATT_BK) {
        __syncthreads();
        att_stage_keys<HS>(Ks, Vs, Ds, qkv, drow, b, h, k0, Tn, C);
        __syncthreads();
        if (!active || k0 > t) continue;
        float sc[ATT_BK];
        float tmax = -INFINITY;
#pragma unroll
        for (int j = 0; j < ATT_BK; j++) {
            float s = 0.0f;
#pragma unroll
            for (int d = 0; d < HS; d++) s += q[d] * Ks[j][d];
            bool ok = att_ok(t, k0 + j, drow, dqv, Ds[j]);
            sc[j] = ok ? s : -INFINITY;
            tmax = fmaxf(tmax, sc[j]);
        }
        if (tmax == -INFINITY) continue;
        float mn = fmaxf(m, tmax);
        float corr = __expf(m - mn); /* m = -inf the first time: 0 */
        l *= corr;
#pragma unroll
        for (int d = 0; d < HS; d++) o[d] *= corr;
#pragma unroll
        for (int j = 0; j < ATT_BK; j++) {
            float p = sc[j] == -INFINITY ? 0.0f : expf(sc[j] - mn);
            l += p;
#pragma unroll
            for (int d = 0; d < HS; d++) o[d] += p * Vs[j][d];
        }
        m = mn;
    }
    if (!active) return;
    float inv = 1.0f / l;
    T *orow = out + ((size_t)b * Tn + t) * C + h * HS;
#pragma unroll
    for (int d = 0; d < HS; d++) kn_st(orow + d, o[d] * inv);
    lse[((size_t)b * NH + h) * Tn + t] = m + logf(l);
}

/* D[b,h,t] = dout[t,h,:] . out[t,h,:] */
template <typename T>
__global__ void att_dsum_kernel(float *Dsum, const T *dout, const T *out, int B, int Tn, int C, int NH, int HS) {
    size_t total = (size_t)B * NH * Tn;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(i % Tn);
        int h = (int)((i / Tn) % NH);
        int b = (int)(i / ((size_t)Tn * NH));
        size_t base = ((size_t)b * Tn + t) * C + (size_t)h * HS;
        float acc = 0.0f;
        for (int d = 0; d < HS; d++) acc += kn_ld(dout + base + d) * kn_ld(out + base + d);
        Dsum[i] = acc;
    }
}

/* dq: grid (ceil(T/64), NH, B), block 64; thread per query row. */
template <int HS, typename T>
__global__ void __launch_bounds__(ATT_BQ)
    att_dq_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, const int32_t *doc, int Tn,
                  int C, int NH, float scale) {
    __shared__ float Ks[ATT_BK][HS];
    __shared__ float Vs[ATT_BK][HS];
    __shared__ float DOs[ATT_BQ][HS + 1];
    __shared__ int Ds[ATT_BK];
    int b = blockIdx.z, h = blockIdx.y;
    int q0 = blockIdx.x * ATT_BQ;
    int t = q0 + threadIdx.x;
    bool active = t < Tn;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    int dqv = (active && drow) ? drow[t] : 0;
    size_t C3 = 3 * (size_t)C;
    float q[HS], dq[HS];
#pragma unroll
    for (int d = 0; d < HS; d++) {
        q[d] = active ? kn_ld(qkv + ((size_t)b * Tn + t) * C3 + h * HS + d) * scale : 0.0f;
        dq[d] = 0.0f;
        DOs[threadIdx.x][d] = active ? kn_ld(dout + ((size_t)b * Tn + t) * C + h * HS + d) : 0.0f;
    }
    float L = active ? lse[((size_t)b * NH + h) * Tn + t] : 0.0f;
    float Di = active ? Dsum[((size_t)b * NH + h) * Tn + t] : 0.0f;
    int last = min(q0 + ATT_BQ, Tn) - 1;
    for (int k0 = 0; k0 <= last; k0 += ATT_BK) {
        __syncthreads();
        att_stage_keys<HS>(Ks, Vs, Ds, qkv, drow, b, h, k0, Tn, C);
        __syncthreads();
        if (!active || k0 > t) continue;
        for (int j = 0; j < ATT_BK; j++) {
            if (!att_ok(t, k0 + j, drow, dqv, Ds[j])) continue;
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int d = 0; d < HS; d++) {
                s += q[d] * Ks[j][d];
                dp += DOs[threadIdx.x][d] * Vs[j][d];
            }
            float p = expf(s - L);
            float ds = p * (dp - Di) * scale;
#pragma unroll
            for (int d = 0; d < HS; d++) dq[d] += ds * Ks[j][d];
        }
    }
    if (!active) return;
    T *row = dqkv + ((size_t)b * Tn + t) * C3 + h * HS;
#pragma unroll
    for (int d = 0; d < HS; d++) kn_st(row + d, dq[d]);
}

/* dk, dv: grid (ceil(T/KB), NH, B), block KB; thread per key row.  The
 * accumulators in registers, k and v in shared memory (own row, padded),
 * queries and dout in tiles of QB rows. */
template <int HS> struct att_kv_cfg {
    static constexpr int KB = 64;
    static constexpr int QB = HS >= 64 ? 16 : 32;
};

template <int HS, typename T>
__global__ void __launch_bounds__(att_kv_cfg<HS>::KB)
    att_dkdv_kernel(T *dqkv, const T *dout, const T *qkv, const float *lse, const float *Dsum, const int32_t *doc,
                    int Tn, int C, int NH, float scale) {
    constexpr int KB = att_kv_cfg<HS>::KB, QB = att_kv_cfg<HS>::QB;
    __shared__ float Ks[KB][HS + 1];
    __shared__ float Vs[KB][HS + 1];
    __shared__ float Qs[QB][HS];
    __shared__ float DOs[QB][HS];
    __shared__ float Ls[QB], Dd[QB];
    __shared__ int Dc[QB];
    int b = blockIdx.z, h = blockIdx.y;
    int k0 = blockIdx.x * KB;
    int tk = k0 + threadIdx.x;
    bool active = tk < Tn;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    int dkv = (active && drow) ? drow[tk] : 0;
    size_t C3 = 3 * (size_t)C;
    float dk[HS], dv[HS];
#pragma unroll
    for (int d = 0; d < HS; d++) {
        const T *row = qkv + ((size_t)b * Tn + (active ? tk : 0)) * C3 + h * HS + d;
        Ks[threadIdx.x][d] = active ? kn_ld(row + C) : 0.0f;
        Vs[threadIdx.x][d] = active ? kn_ld(row + 2 * C) : 0.0f;
        dk[d] = 0.0f;
        dv[d] = 0.0f;
    }
    for (int qt = (k0 / QB) * QB; qt < Tn; qt += QB) {
        __syncthreads();
        for (int i = threadIdx.x; i < QB * HS; i += KB) {
            int r = i / HS, d = i % HS, tq = qt + r;
            bool in = tq < Tn;
            Qs[r][d] = in ? kn_ld(qkv + ((size_t)b * Tn + tq) * C3 + h * HS + d) * scale : 0.0f;
            DOs[r][d] = in ? kn_ld(dout + ((size_t)b * Tn + tq) * C + h * HS + d) : 0.0f;
        }
        for (int r = threadIdx.x; r < QB; r += KB) {
            int tq = qt + r;
            bool in = tq < Tn;
            Ls[r] = in ? lse[((size_t)b * NH + h) * Tn + tq] : 0.0f;
            Dd[r] = in ? Dsum[((size_t)b * NH + h) * Tn + tq] : 0.0f;
            Dc[r] = (in && drow) ? drow[tq] : 0;
        }
        __syncthreads();
        if (!active) continue;
        for (int r = 0; r < QB; r++) {
            int tq = qt + r;
            if (tq >= Tn || !att_ok(tq, tk, drow, Dc[r], dkv)) continue;
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int d = 0; d < HS; d++) {
                s += Qs[r][d] * Ks[threadIdx.x][d];
                dp += DOs[r][d] * Vs[threadIdx.x][d];
            }
            float p = expf(s - Ls[r]);
            float ds = p * (dp - Dd[r]);
#pragma unroll
            for (int d = 0; d < HS; d++) {
                dv[d] += p * DOs[r][d];
                dk[d] += ds * Qs[r][d]; /* Qs holds q * scale: dk = ds * q * scale */
            }
        }
    }
    if (!active) return;
    T *row = dqkv + ((size_t)b * Tn + tk) * C3 + h * HS;
#pragma unroll
    for (int d = 0; d < HS; d++) {
        kn_st(row + C + d, dk[d]);
        kn_st(row + 2 * C + d, dv[d]);
    }
}

template <int HS, typename T>
static int att_fwd_launch(T *out, float *lse, const T *qkv, const int32_t *doc, int B, int Tn, int C, int NH,
                          cudaStream_t s) {
    dim3 grid((unsigned)((Tn + ATT_BQ - 1) / ATT_BQ), (unsigned)NH, (unsigned)B);
    att_fwd_kernel<HS, T><<<grid, ATT_BQ, 0, s>>>(out, lse, qkv, doc, Tn, C, NH, 1.0f / sqrtf((float)HS));
    KN_CUDA_LAUNCHED("attention_forward");
    return KN_OK;
}

extern "C" int kn_attention_forward_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T,
                                         int C, int NH, kn_dtype dt, kn_stream s) {
    if (!out || !lse || !qkv || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return KN_EINVAL;
    if (B > 65535 || NH > 65535) return KN_EINVAL;
    int hs = C / NH;
    switch (hs) {
    case 32: KN_DISPATCH(dt, return att_fwd_launch<32, DT>((DT *)out, lse, (const DT *)qkv, doc, B, T, C, NH, s));
    case 64: KN_DISPATCH(dt, return att_fwd_launch<64, DT>((DT *)out, lse, (const DT *)qkv, doc, B, T, C, NH, s));
    default: kn_cuda_set_error("attention: head size %d not supported (32 or 64)", hs); return KN_EINVAL;
    }
}

template <int HS, typename T>
static int att_bwd_launch(T *dqkv, const T *dout, const T *qkv, const T *out, const float *lse, const int32_t *doc,
                          int B, int Tn, int C, int NH, float *Dsum, cudaStream_t s) {
    float scale = 1.0f / sqrtf((float)HS);
    size_t rows = (size_t)B * NH * Tn;
    att_dsum_kernel<T><<<kn_blocks(rows, 256), 256, 0, s>>>(Dsum, dout, out, B, Tn, C, NH, HS);
    KN_CUDA_LAUNCHED("attention_backward dsum");
    dim3 gq((unsigned)((Tn + ATT_BQ - 1) / ATT_BQ), (unsigned)NH, (unsigned)B);
    att_dq_kernel<HS, T><<<gq, ATT_BQ, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, Tn, C, NH, scale);
    KN_CUDA_LAUNCHED("attention_backward dq");
    constexpr int KB = att_kv_cfg<HS>::KB;
    dim3 gk((unsigned)((Tn + KB - 1) / KB), (unsigned)NH, (unsigned)B);
    att_dkdv_kernel<HS, T><<<gk, KB, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, Tn, C, NH, scale);
    KN_CUDA_LAUNCHED("attention_backward dkdv");
    return KN_OK;
}

extern "C" int kn_attention_backward_cuda(void *dqkv, const void *dout, const void *qkv, const void *out,
                                          const float *lse, const int32_t *doc, int B, int T, int C, int NH,
                                          void *scratch, size_t scratch_bytes, kn_dtype dt, kn_stream s) {
    if (!dqkv || !dout || !qkv || !out || !lse || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return KN_EINVAL;
    if (B > 65535 || NH > 65535) return KN_EINVAL;
    if (!scratch || scratch_bytes < kn_attention_backward_scratch_bytes(B, T, NH)) return KN_EINVAL;
    float *Dsum = (float *)scratch;
    int hs = C / NH;
    switch (hs) {
    case 32:
        KN_DISPATCH(dt, return att_bwd_launch<32, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out,
                                                      lse, doc, B, T, C, NH, Dsum, s));
    case 64:
        KN_DISPATCH(dt, return att_bwd_launch<64, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out,
                                                      lse, doc, B, T, C, NH, Dsum, s));
    default: kn_cuda_set_error("attention: head size %d not supported (32 or 64)", hs); return KN_EINVAL;
    }
}
