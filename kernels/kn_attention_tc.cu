/* kn_attention_tc.cu - causal attention forward on the tensor cores
 * (mma.sync m16n8k16 bf16 -> fp32), flash-attention-2 style: 64 query rows
 * per block (4 warps x 16), 64-key tiles in shared memory, online softmax in
 * registers, the S fragments reused as the A operand of P.V.  bf16, head
 * size 64 only; same contract and outputs (out, lse) as
 * kn_attention_forward_cuda; the bf16 default for heads of 64 since it
 * passed test_kernels_gpu on the H200 (docs/gpu-results.md), the SIMT
 * kernels otherwise (or with MKS_CUDA_ATTENTION=simt). */
#include <math.h>
#include <string.h>

#include "kn_attention_tc.cuh"

/* acc (16 x 64) += P (16 x 64, C-fragment floats) . B where B[k][n] = Mt[n][k] */
static __device__ __forceinline__ void mma_cfrag(float (&acc)[8][4], float (&p)[8][4], kn_bf16 (*Mt)[TC_PAD], int g,
                                                 int t4) {
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
        uint32_t pa[4];
        pfrag_a(pa, p, ks);
#pragma unroll
        for (int n = 0; n < 8; n++) {
            uint32_t bb[2];
            bb[0] = *reinterpret_cast<const uint32_t *>(&Mt[n * 8 + g][ks * 16 + 2 * t4]);
            bb[1] = *reinterpret_cast<const uint32_t *>(&Mt[n * 8 + g][ks * 16 + 8 + 2 * t4]);
            mma_bf16(acc[n], pa, bb);
        }
    }
}

/* grid (ceil(T/64), NH, B), block 128 */
template <bool LDSM>
__global__ void __launch_bounds__(128) att_fwd_tc_kernel(kn_bf16 *out, float *lse, const kn_bf16 *qkv,
                                                         const int32_t *doc, int Tn, int C, int NH, float scale) {
    __shared__ __align__(16) kn_bf16 Ks[TC_BK][TC_PAD];
    __shared__ __align__(16) kn_bf16 Vt[LDSM ? 1 : TC_HS][TC_PAD]; /* V transposed: [d][key] */
    __shared__ __align__(16) kn_bf16 Vs[LDSM ? TC_BK : 1][TC_PAD]; /* V rows: [key][d] */
    __shared__ int Dk[TC_BK];
    const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * TC_BQ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const size_t C3 = 3 * (size_t)C;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    const int r0 = q0 + warp * 16 + g, r1 = r0 + 8; /* the two query rows of this thread */
    const int dq0 = (drow && r0 < Tn) ? drow[r0] : 0, dq1 = (drow && r1 < Tn) ? drow[r1] : 0;

    /* Q fragments for the 4 k-steps over the head dimension (rows past T read as 0) */
    uint32_t qa[4][4];
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
        int c0 = ks * 16 + 2 * t4;
#pragma unroll
        for (int half = 0; half < 2; half++) { /* half 0: cols c0, half 1: cols c0 + 8 */
            int c = c0 + half * 8;
            uint32_t v0 = 0, v1 = 0;
            if (r0 < Tn) v0 = *reinterpret_cast<const uint32_t *>(qkv + ((size_t)b * Tn + r0) * C3 + h * TC_HS + c);
            if (r1 < Tn) v1 = *reinterpret_cast<const uint32_t *>(qkv + ((size_t)b * Tn + r1) * C3 + h * TC_HS + c);
            qa[ks][half * 2 + 0] = v0; /* a0a1 / a4a5: row g */
            qa[ks][half * 2 + 1] = v1; /* a2a3 / a6a7: row g + 8 */
        }
    }
    float o[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    const int last = min(q0 + TC_BQ, Tn) - 1;
    const int warp_last = min(q0 + warp * 16 + 15, Tn - 1);

    for (int k0 = 0; k0 <= last; k0 += TC_BK) {
        __syncthreads();
        /* K tile (16-byte loads) and V tile transposed */
        for (int i = threadIdx.x; i < TC_BK * (TC_HS / 8); i += blockDim.x) {
            int j = i / (TC_HS / 8), d0 = (i % (TC_HS / 8)) * 8, key = k0 + j;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (key < Tn) {
                const kn_bf16 *row = qkv + ((size_t)b * Tn + key) * C3 + h * TC_HS + d0;
                kv = *reinterpret_cast<const uint4 *>(row + C);
                vv = *reinterpret_cast<const uint4 *>(row + 2 * C);
            }
            *reinterpret_cast<uint4 *>(&Ks[j][d0]) = kv;
            if constexpr (LDSM) {
                *reinterpret_cast<uint4 *>(&Vs[j][d0]) = vv;
            } else {
                const kn_bf16 *ve = reinterpret_cast<const kn_bf16 *>(&vv);
#pragma unroll
                for (int e = 0; e < 8; e++) Vt[d0 + e][j] = ve[e];
            }
        }
        if (threadIdx.x < TC_BK) {
            int key = k0 + threadIdx.x;
            Dk[threadIdx.x] = (drow && key < Tn) ? drow[key] : 0;
        }
        __syncthreads();
        if (k0 > warp_last) continue; /* every key of this tile is after every row of this warp */

        /* S = Q K^T: 16 rows x 64 keys (8 n-tiles of 8 keys) */
        float sc[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++) {
            sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                uint32_t bb[2];
                bb[0] = *reinterpret_cast<const uint32_t *>(&Ks[n * 8 + g][ks * 16 + 2 * t4]);
                bb[1] = *reinterpret_cast<const uint32_t *>(&Ks[n * 8 + g][ks * 16 + 8 + 2 * t4]);
                mma_bf16(sc[n], qa[ks], bb);
            }
        }
        /* scale, mask, row maxima (rows r0: elements 0,1; r1: elements 2,3) */
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int n = 0; n < 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int col = n * 8 + 2 * t4 + (e & 1), key = k0 + col;
                int row = e < 2 ? r0 : r1, dq = e < 2 ? dq0 : dq1;
                bool ok = key <= row && key < Tn && row < Tn && (!drow || Dk[col] == dq);
                float v = ok ? sc[n][e] * scale : -INFINITY;
                sc[n][e] = v;
                if (e < 2) mx0 = fmaxf(mx0, v);
                else mx1 = fmaxf(mx1, v);
            }
        }
        mx0 = quad_max(mx0);
        mx1 = quad_max(mx1);
        float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        float corr0 = mn0 == -INFINITY ? 1.0f : __expf(m0 - mn0); /* m = -inf before: 0 */
        float corr1 = mn1 == -INFINITY ? 1.0f : __expf(m1 - mn1);
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int n = 0; n < 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float mref = e < 2 ? mn0 : mn1;
                float p = sc[n][e] == -INFINITY ? 0.0f : __expf(sc[n][e] - mref);
                sc[n][e] = p;
                if (e < 2) ps0 += p;
                else ps1 += p;
            }
        }
        online_row(l0, m0, ps0, corr0, mn0);
        online_row(l1, m1, ps1, corr1, mn1);
        scale_cfrag(o, corr0, corr1);
        /* O += P V: k-steps of 16 keys; P's A fragment is two S n-tiles */
        if constexpr (LDSM) mma_cfrag_kn(o, sc, Vs, lane);
        else mma_cfrag(o, sc, Vt, g, t4);
    }
    /* normalise and store: thread holds rows r0 (o[n][0..1]) and r1 (o[n][2..3]), cols n*8 + 2*t4 (+1) */
    float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        int col = n * 8 + 2 * t4;
        if (r0 < Tn)
            *reinterpret_cast<__nv_bfloat162 *>(out + ((size_t)b * Tn + r0) * C + h * TC_HS + col) =
                __floats2bfloat162_rn(o[n][0] * inv0, o[n][1] * inv0);
        if (r1 < Tn)
            *reinterpret_cast<__nv_bfloat162 *>(out + ((size_t)b * Tn + r1) * C + h * TC_HS + col) =
                __floats2bfloat162_rn(o[n][2] * inv1, o[n][3] * inv1);
    }
    if (t4 == 0) {
        if (r0 < Tn) lse[((size_t)b * NH + h) * Tn + r0] = m0 + logf(l0);
        if (r1 < Tn) lse[((size_t)b * NH + h) * Tn + r1] = m1 + logf(l1);
    }
}

/* The variant (kn_attention_tc_variant; MKS_ATTN_TC=copy|ldsm|pipe|pipe3):
 * 0 "copy", B operands from transposed shared copies (the first version to
 * pass on the H200); 1 "ldsm", the same by ldmatrix .trans; 2 "pipe", the
 * cp.async-pipelined kernels of kn_attention_tc_pipe.cu, the default; 3
 * "pipe3", those with the dk/dv kernel held to 168 registers for 3 blocks per
 * SM.  All four passed every kernel row on the H200 (2026-12-04, quick runs);
 * at d12 B16 T1024 forward + backward took 1.85 / 1.46 / 0.60 / 0.63 ms. */
static int g_tc_variant = -1;
static int tc_variant(void) {
    if (g_tc_variant < 0) {
        const char *v = getenv("MKS_ATTN_TC");
        g_tc_variant = !v || !strcmp(v, "pipe") ? 2
                       : !strcmp(v, "copy")     ? 0
                       : !strcmp(v, "ldsm")     ? 1
                       : !strcmp(v, "pipe3")    ? 3
                                                : 2;
    }
    return g_tc_variant;
}

extern "C" void kn_attention_tc_variant(int v) { g_tc_variant = v < 0 ? -1 : v > 3 ? 3 : v; }

extern "C" int kn_attention_forward_tc_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T,
                                            int C, int NH, kn_dtype dt, kn_stream s) {
    if (!out || !lse || !qkv || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return KN_EINVAL;
    const int HS = C / NH;
    if (dt != KN_BF16 || (HS != 64 && HS != 128) || C % 8 || B > 65535 || NH > 65535) {
        kn_cuda_set_error("attention_forward_tc: bf16 with heads of 64 or 128 only (got %s, hs %d)",
                          dt == KN_BF16 ? "bf16" : "fp32", HS);
        return KN_EINVAL;
    }
    if (((uintptr_t)qkv % 16) || ((uintptr_t)out % 4)) {
        kn_cuda_set_error("attention_forward_tc: qkv must be 16-byte aligned");
        return KN_EINVAL;
    }
    dim3 grid((unsigned)((T + TC_BQ - 1) / TC_BQ), (unsigned)NH, (unsigned)B);
    const int variant = tc_variant();
    if (variant >= 2 || HS == 128) /* heads of 128: the pipelined kernels only */
        kn_att_pipe_forward((kn_bf16 *)out, lse, (const kn_bf16 *)qkv, doc, B, kn_att_geo_gpt2(T, C, NH), HS, s);
    else if (variant == 1)
        att_fwd_tc_kernel<true>
            <<<grid, 128, 0, s>>>((kn_bf16 *)out, lse, (const kn_bf16 *)qkv, doc, T, C, NH, 1.0f / sqrtf((float)TC_HS));
    else
        att_fwd_tc_kernel<false>
            <<<grid, 128, 0, s>>>((kn_bf16 *)out, lse, (const kn_bf16 *)qkv, doc, T, C, NH, 1.0f / sqrtf((float)TC_HS));
    KN_CUDA_LAUNCHED("attention_forward_tc");
    return KN_OK;
}

/* ================================ backward ================================================
 * Two kernels, no atomics (deterministic): dq per query block (64 rows, key
 * tiles), dk/dv per key block (64 keys, query tiles).  D = rowsum(dout * out)
 * first (fp32, scratch).  Same fragment conventions as the forward. */

/* 64 rows x 64 cols of bf16 (row stride ld, rows from `first`) into shared
 * memory, as rows (dst) and/or transposed (dstT: [col][row]); zero past T. */
static __device__ __forceinline__ void load_tile(kn_bf16 (*dst)[TC_PAD], kn_bf16 (*dstT)[TC_PAD], const kn_bf16 *base,
                                                 size_t ld, int first, int Tn) {
    for (int i = threadIdx.x; i < 64 * 8; i += blockDim.x) {
        int j = i / 8, d0 = (i % 8) * 8, r = first + j;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < Tn) v = *reinterpret_cast<const uint4 *>(base + (size_t)r * ld + d0);
        if (dst) *reinterpret_cast<uint4 *>(&dst[j][d0]) = v;
        if (dstT) {
            const kn_bf16 *e = reinterpret_cast<const kn_bf16 *>(&v);
#pragma unroll
            for (int k = 0; k < 8; k++) dstT[d0 + k][j] = e[k];
        }
    }
}

/* acc[n] (16 x 64) += A (16 x 64, frags) . B where B[k][n] = M[n][k] and M is
 * a shared 64 x 64 tile (row n, col k). */
static __device__ __forceinline__ void mma_rows(float acc[8][4], const uint32_t a[4][4], kn_bf16 (*M)[TC_PAD], int g,
                                                int t4) {
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            uint32_t bb[2];
            bb[0] = *reinterpret_cast<const uint32_t *>(&M[n * 8 + g][ks * 16 + 2 * t4]);
            bb[1] = *reinterpret_cast<const uint32_t *>(&M[n * 8 + g][ks * 16 + 8 + 2 * t4]);
            mma_bf16(acc[n], a[ks], bb);
        }
}

/* D = rowsum(dout * out) per (b, h, t), a thread per row (the version that ran
 * on the H200). */
__global__ void att_dsum_tc_kernel(float *Dsum, const kn_bf16 *dout, const kn_bf16 *out, int B, int Tn, int C, int NH) {
    size_t total = (size_t)B * NH * Tn;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(i % Tn), h = (int)((i / Tn) % NH), b = (int)(i / ((size_t)Tn * NH));
        size_t base = ((size_t)b * Tn + t) * C + (size_t)h * TC_HS;
        float acc = 0.0f;
        for (int d = 0; d < TC_HS; d++) acc += __bfloat162float(dout[base + d]) * __bfloat162float(out[base + d]);
        Dsum[i] = acc;
    }
}

/* dq: grid (ceil(T/64), NH, B), block 128 */
template <bool LDSM>
__global__ void __launch_bounds__(128)
    att_dq_tc_kernel(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                     const int32_t *doc, int Tn, int C, int NH, float scale) {
    __shared__ __align__(16) kn_bf16 Ks[64][TC_PAD];
    __shared__ __align__(16) kn_bf16 Vs[64][TC_PAD];
    __shared__ __align__(16) kn_bf16 Kt[LDSM ? 1 : 64][TC_PAD];
    __shared__ int Dk[64];
    const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * 64;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const size_t C3 = 3 * (size_t)C;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    const int rw = q0 + warp * 16, r0 = rw + g, r1 = r0 + 8;
    const int dq0 = (drow && r0 < Tn) ? drow[r0] : 0, dq1 = (drow && r1 < Tn) ? drow[r1] : 0;
    const float *lrow = lse + ((size_t)b * NH + h) * Tn, *drw = Dsum + ((size_t)b * NH + h) * Tn;
    const float L0 = r0 < Tn ? lrow[r0] : 0.0f, L1 = r1 < Tn ? lrow[r1] : 0.0f;
    const float D0 = r0 < Tn ? drw[r0] : 0.0f, D1 = r1 < Tn ? drw[r1] : 0.0f;
    uint32_t qa[4][4], da[4][4];
    load_a_frags(qa, qkv + (size_t)b * Tn * C3 + h * TC_HS, C3, rw + g, Tn, t4);
    load_a_frags(da, dout + (size_t)b * Tn * C + h * TC_HS, C, rw + g, Tn, t4);
    float dq[8][4];
    zero_cfrag(dq);
    const int last = min(q0 + 64, Tn) - 1, warp_last = min(rw + 15, Tn - 1);
    for (int k0 = 0; k0 <= last; k0 += 64) {
        __syncthreads();
        const kn_bf16 *kb = qkv + (size_t)b * Tn * C3 + C + h * TC_HS;
        load_tile(Ks, LDSM ? nullptr : Kt, kb, C3, k0, Tn);
        load_tile(Vs, nullptr, kb + C, C3, k0, Tn);
        if (threadIdx.x < 64) Dk[threadIdx.x] = (drow && k0 + (int)threadIdx.x < Tn) ? drow[k0 + threadIdx.x] : 0;
        __syncthreads();
        if (k0 > warp_last) continue;
        float s[8][4], dp[8][4];
        zero_cfrag(s);
        zero_cfrag(dp);
        mma_rows(s, qa, Ks, g, t4);
        mma_rows(dp, da, Vs, g, t4);
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int col = n * 8 + 2 * t4 + (e & 1), key = k0 + col, row = e < 2 ? r0 : r1;
                bool ok = key <= row && row < Tn && key < Tn && (!drow || Dk[col] == (e < 2 ? dq0 : dq1));
                float p = ok ? __expf(s[n][e] * scale - (e < 2 ? L0 : L1)) : 0.0f;
                s[n][e] = p * (dp[n][e] - (e < 2 ? D0 : D1)) * scale; /* dS (d/d raw score) */
            }
        if constexpr (LDSM) mma_cfrag_kn(dq, s, Ks, lane);
        else mma_cfrag(dq, s, Kt, g, t4);
    }
    store_cfrag(dqkv + (size_t)b * Tn * C3 + h * TC_HS, C3, dq, rw + g, Tn, t4, 1.0f);
}

/* dk, dv: grid (ceil(T/64), NH, B), block 128; rows are keys */
template <bool LDSM>
__global__ void __launch_bounds__(128)
    att_dkdv_tc_kernel(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                       const int32_t *doc, int Tn, int C, int NH, float scale) {
    __shared__ __align__(16) kn_bf16 Qs[64][TC_PAD];
    __shared__ __align__(16) kn_bf16 Qt[LDSM ? 1 : 64][TC_PAD];
    __shared__ __align__(16) kn_bf16 Os[64][TC_PAD];            /* dout rows */
    __shared__ __align__(16) kn_bf16 Ot[LDSM ? 1 : 64][TC_PAD]; /* dout transposed */
    __shared__ float Ls[64], Dd[64];
    __shared__ int Dq[64];
    const int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * 64;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const size_t C3 = 3 * (size_t)C;
    const int32_t *drow = doc ? doc + (size_t)b * Tn : nullptr;
    const int kw = k0 + warp * 16, kr0 = kw + g, kr1 = kr0 + 8;
    const int dk0 = (drow && kr0 < Tn) ? drow[kr0] : 0, dk1 = (drow && kr1 < Tn) ? drow[kr1] : 0;
    const float *lrow = lse + ((size_t)b * NH + h) * Tn, *drw = Dsum + ((size_t)b * NH + h) * Tn;
    uint32_t ka[4][4], va[4][4];
    const kn_bf16 *qb = qkv + (size_t)b * Tn * C3 + h * TC_HS;
    load_a_frags(ka, qb + C, C3, kw + g, Tn, t4);
    load_a_frags(va, qb + 2 * C, C3, kw + g, Tn, t4);
    float dk[8][4], dv[8][4];
    zero_cfrag(dk);
    zero_cfrag(dv);
    const kn_bf16 *ob = dout + (size_t)b * Tn * C + h * TC_HS;
    for (int q0 = k0; q0 < Tn; q0 += 64) {
        __syncthreads();
        load_tile(Qs, LDSM ? nullptr : Qt, qb, C3, q0, Tn);
        load_tile(Os, LDSM ? nullptr : Ot, ob, C, q0, Tn);
        if (threadIdx.x < 64) {
            int q = q0 + threadIdx.x;
            Ls[threadIdx.x] = q < Tn ? lrow[q] : 0.0f;
            Dd[threadIdx.x] = q < Tn ? drw[q] : 0.0f;
            Dq[threadIdx.x] = (drow && q < Tn) ? drow[q] : 0;
        }
        __syncthreads();
        if (q0 + 63 < kw) continue; /* every query of this tile is before every key of this warp */
        float s[8][4], dp[8][4];
        zero_cfrag(s);
        zero_cfrag(dp);
        mma_rows(s, ka, Qs, g, t4);  /* S^T: keys x queries */
        mma_rows(dp, va, Os, g, t4); /* dP^T = V dO^T */
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int col = n * 8 + 2 * t4 + (e & 1), q = q0 + col, key = e < 2 ? kr0 : kr1;
                bool ok = key <= q && q < Tn && key < Tn && (!drow || Dq[col] == (e < 2 ? dk0 : dk1));
                float p = ok ? __expf(s[n][e] * scale - Ls[col]) : 0.0f;
                s[n][e] = p;
                dp[n][e] = p * (dp[n][e] - Dd[col]) * scale; /* dS^T */
            }
        if constexpr (LDSM) {
            mma_cfrag_kn(dv, s, Os, lane);  /* dV += P^T dO */
            mma_cfrag_kn(dk, dp, Qs, lane); /* dK += dS^T Q */
        } else {
            mma_cfrag(dv, s, Ot, g, t4);
            mma_cfrag(dk, dp, Qt, g, t4);
        }
    }
    kn_bf16 *base = dqkv + (size_t)b * Tn * C3 + h * TC_HS;
    store_cfrag(base + C, C3, dk, kw + g, Tn, t4, 1.0f);
    store_cfrag(base + 2 * C, C3, dv, kw + g, Tn, t4, 1.0f);
}

extern "C" int kn_attention_backward_tc_cuda(void *dqkv, const void *dout, const void *qkv, const void *out,
                                             const float *lse, const int32_t *doc, int B, int T, int C, int NH,
                                             void *scratch, size_t scratch_bytes, kn_dtype dt, kn_stream s) {
    if (!dqkv || !dout || !qkv || !out || !lse || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return KN_EINVAL;
    const int HS = C / NH;
    if (dt != KN_BF16 || (HS != 64 && HS != 128) || C % 8 || B > 65535 || NH > 65535) {
        kn_cuda_set_error("attention_backward_tc: bf16 with heads of 64 or 128 only");
        return KN_EINVAL;
    }
    const int variant = HS == 128 ? 2 : tc_variant(); /* heads of 128: the pipelined kernels only (pipe3 is pipe) */
    const bool ldsm = variant >= 1; /* the 16-byte D = rowsum(dout * out) goes with both opt-in variants */
    if (((uintptr_t)qkv % 16) || ((uintptr_t)dout % 16) || (ldsm && (uintptr_t)out % 16) || ((uintptr_t)dqkv % 4)) {
        kn_cuda_set_error("attention_backward_tc: qkv and dout (and out, but with MKS_ATTN_TC=copy) must be 16-byte "
                          "aligned");
        return KN_EINVAL;
    }
    if (!scratch || scratch_bytes < kn_attention_backward_scratch_bytes(B, T, NH)) return KN_EINVAL;
    float *Dsum = (float *)scratch, scale = 1.0f / sqrtf((float)TC_HS);
    size_t rows = (size_t)B * NH * T;
    if (HS == 128)
        att_dsum_vec_kernel<128>
            <<<kn_blocks(rows * 8, 256), 256, 0, s>>>(Dsum, (const kn_bf16 *)dout, (const kn_bf16 *)out, B, T, C, NH);
    else if (ldsm)
        att_dsum_vec_kernel<64>
            <<<kn_blocks(rows * 8, 256), 256, 0, s>>>(Dsum, (const kn_bf16 *)dout, (const kn_bf16 *)out, B, T, C, NH);
    else
        att_dsum_tc_kernel<<<kn_blocks(rows, 256), 256, 0, s>>>(Dsum, (const kn_bf16 *)dout, (const kn_bf16 *)out, B, T,
                                                                C, NH);
    KN_CUDA_LAUNCHED("attention_backward_tc dsum");
    if (variant >= 2) {
        kn_att_pipe_backward((kn_bf16 *)dqkv, (const kn_bf16 *)dout, (const kn_bf16 *)qkv, lse, Dsum, doc, B,
                             kn_att_geo_gpt2(T, C, NH), HS, variant == 3 ? 3 : 2, s);
        KN_CUDA_LAUNCHED("attention_backward_tc dq, dkdv (pipelined)");
        return KN_OK;
    }
    dim3 grid((unsigned)((T + 63) / 64), (unsigned)NH, (unsigned)B);
    if (ldsm)
        att_dq_tc_kernel<true><<<grid, 128, 0, s>>>((kn_bf16 *)dqkv, (const kn_bf16 *)dout, (const kn_bf16 *)qkv, lse,
                                                    Dsum, doc, T, C, NH, scale);
    else
        att_dq_tc_kernel<false><<<grid, 128, 0, s>>>((kn_bf16 *)dqkv, (const kn_bf16 *)dout, (const kn_bf16 *)qkv, lse,
                                                     Dsum, doc, T, C, NH, scale);
    KN_CUDA_LAUNCHED("attention_backward_tc dq");
    if (ldsm)
        att_dkdv_tc_kernel<true><<<grid, 128, 0, s>>>((kn_bf16 *)dqkv, (const kn_bf16 *)dout, (const kn_bf16 *)qkv, lse,
                                                      Dsum, doc, T, C, NH, scale);
    else
        att_dkdv_tc_kernel<false><<<grid, 128, 0, s>>>((kn_bf16 *)dqkv, (const kn_bf16 *)dout, (const kn_bf16 *)qkv,
                                                       lse, Dsum, doc, T, C, NH, scale);
    KN_CUDA_LAUNCHED("attention_backward_tc dkdv");
    return KN_OK;
}

/* ================================ grouped-query attention ==================================
 * The pipelined kernels on the Llama family's row [q (NH HS) | k (NKV HS) |
 * v (NKV HS)] (kn_cuda.h).  The "copy" and "ldsm" variants exist for GPT-2's
 * row only, so the pipelined kernels run whatever MKS_ATTN_TC says, with
 * pipe3's register cap for dk/dv when it says pipe3. */
static int gqa_tc_check(const char *what, int B, int T, int NH, int NKV, int HS, kn_dtype dt) {
    if (dt != KN_BF16 || (HS != 64 && HS != 128)) {
        kn_cuda_set_error("%s: bf16 with heads of 64 or 128 only (got %s, hs %d)", what,
                          dt == KN_BF16 ? "bf16" : "not bf16", HS);
        return KN_EINVAL;
    }
    return kn_att_gqa_shape_ok(B, T, NH, NKV, HS) ? KN_OK : KN_EINVAL;
}

extern "C" int kn_gqa_attention_forward_tc_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B,
                                                int T, int NH, int NKV, int HS, kn_dtype dt, kn_stream s) {
    if (!out || !lse || !qkv) return KN_EINVAL;
    int rc = gqa_tc_check("gqa_attention_forward_tc", B, T, NH, NKV, HS, dt);
    if (rc != KN_OK) return rc;
    /* cp.async reads 16 bytes at a time (every row offset is a multiple of 64 elements); the
     * output is written as bf16 pairs */
    if (((uintptr_t)qkv % 16) || ((uintptr_t)out % 4)) {
        kn_cuda_set_error("gqa_attention_forward_tc: qkv must be 16-byte aligned");
        return KN_EINVAL;
    }
    kn_att_pipe_forward((kn_bf16 *)out, lse, (const kn_bf16 *)qkv, doc, B, kn_att_geo_gqa(T, NH, NKV, HS), HS, s);
    KN_CUDA_LAUNCHED("gqa_attention_forward_tc");
    return KN_OK;
}

extern "C" int kn_gqa_attention_backward_tc_cuda(void *dqkv, const void *dout, const void *qkv, const void *out,
                                                 const float *lse, const int32_t *doc, int B, int T, int NH, int NKV,
                                                 int HS, void *scratch, size_t scratch_bytes, kn_dtype dt,
                                                 kn_stream s) {
    if (!dqkv || !dout || !qkv || !out || !lse) return KN_EINVAL;
    int rc = gqa_tc_check("gqa_attention_backward_tc", B, T, NH, NKV, HS, dt);
    if (rc != KN_OK) return rc;
    if (((uintptr_t)qkv % 16) || ((uintptr_t)dout % 16) || ((uintptr_t)out % 16) || ((uintptr_t)dqkv % 4)) {
        kn_cuda_set_error("gqa_attention_backward_tc: qkv, out and dout must be 16-byte aligned");
        return KN_EINVAL;
    }
    if (!scratch || scratch_bytes < kn_attention_backward_scratch_bytes(B, T, NH)) return KN_EINVAL;
    float *Dsum = (float *)scratch;
    size_t rows = (size_t)B * NH * T;
    /* D = rowsum(dout * out): the out / dout row is NH HS wide, the kernel's C */
    if (HS == 128)
        att_dsum_vec_kernel<128><<<kn_blocks(rows * 8, 256), 256, 0, s>>>(Dsum, (const kn_bf16 *)dout,
                                                                          (const kn_bf16 *)out, B, T, NH * HS, NH);
    else
        att_dsum_vec_kernel<64><<<kn_blocks(rows * 8, 256), 256, 0, s>>>(Dsum, (const kn_bf16 *)dout,
                                                                         (const kn_bf16 *)out, B, T, NH * HS, NH);
    KN_CUDA_LAUNCHED("gqa_attention_backward_tc dsum");
    kn_att_pipe_backward((kn_bf16 *)dqkv, (const kn_bf16 *)dout, (const kn_bf16 *)qkv, lse, Dsum, doc, B,
                         kn_att_geo_gqa(T, NH, NKV, HS), HS, tc_variant() == 3 ? 3 : 2, s);
    KN_CUDA_LAUNCHED("gqa_attention_backward_tc dq, dkdv (pipelined)");
    return KN_OK;
}
