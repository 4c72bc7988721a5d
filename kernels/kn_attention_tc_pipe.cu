/* kn_attention_tc_pipe.cu - the tensor-core attention, pipelined: the default
 * for bf16 with heads of 64 (MKS_ATTN_TC=pipe; see kn_attention_tc.cu).
 *
 * Same tiling and fragment conventions as kn_attention_tc.cu (64-row blocks
 * of 4 warps x 16 rows, 64-wide tiles, head size 64, bf16), with what the
 * H200 run of those kernels showed them to lack (7% / 4% of the tensor peak,
 * forward / backward; docs/gpu-results.md):
 *   - the next K/V (or Q/dO) tile is fetched with cp.async into a second
 *     shared buffer while the current one is multiplied, instead of every warp
 *     waiting on its own global loads between two barriers;
 *   - every B operand comes from shared memory by ldmatrix (.x4: two n-tiles
 *     per instruction), none by 32-bit shared loads or transposed copies;
 *   - tiles wholly below the diagonal, without a document mask, skip the
 *     per-element mask; the softmax works in base 2 with the scale folded into
 *     one FMA before ex2 (what __expf does anyway, minus a multiply);
 *   - the forward and dq grids start with the longest rows (the last query
 *     blocks), so the short ones fill the tail instead of the long ones.
 * Results equal the other variants' up to summation order.  On the H200 at
 * d12 B16 T1024: forward 0.368 -> 0.150 ms (70 -> 172 TFLOP/s), backward
 * 1.481 -> 0.451 ms (44 -> 143 TFLOP/s) against the "copy" kernels. */
#include <math.h>

#include "kn_attention_tc.cuh"

#define LOG2E_F 1.4426950408889634f

#ifndef KN_EMU /* tests/emu/kn_emu.h defines these for the CPU run */
static __device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* 16 bytes global -> shared, asynchronously; zero-filled when !valid (src-size
 * 0: nothing is read, src stays a valid address anyway) */
static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}
static __device__ __forceinline__ void cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
/* wait until at most one committed group (the tile just requested) is in flight */
static __device__ __forceinline__ void cp_async_wait1(void) { asm volatile("cp.async.wait_group 1;\n" ::); }
#endif

/* rows first .. first + 63 (row stride ld, 64 bf16 each) into a shared tile,
 * zeros past T; 128 threads, 4 x 16 bytes each */
static __device__ __forceinline__ void tile_async(kn_bf16 (*dst)[TC_PAD], const kn_bf16 *base, size_t ld, int first,
                                                  int Tn) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int i = threadIdx.x + k * 128, j = i >> 3, d0 = (i & 7) * 8, r = first + j;
        bool ok = r < Tn;
        cp_async16(&dst[j][d0], base + (size_t)(ok ? r : 0) * ld + d0, ok);
    }
}

/* tiles `first` .. first + 63 of two operands (rows of stride lda / ldb) into
 * buffers a and b, as one cp.async group when committed */
static __device__ __forceinline__ void tiles_async(kn_bf16 (*a)[TC_PAD], const kn_bf16 *abase, size_t lda,
                                                   kn_bf16 (*b)[TC_PAD], const kn_bf16 *bbase, size_t ldb, int first,
                                                   int Tn) {
    tile_async(a, abase, lda, first, Tn);
    tile_async(b, bbase, ldb, first, Tn);
}

/* Close this iteration's (possibly empty) group of requests, wait for every
 * group but that one - the current tiles - and make them visible to the
 * block.  Committing an empty group keeps "all but the newest" uniform. */
static __device__ __forceinline__ void tiles_ready(void) {
    cp_async_commit();
    cp_async_wait1();
    __syncthreads();
}

#ifndef KN_EMU
static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], const kn_bf16 *row) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
#endif

/* acc (16 x 64) += A (16 x 64, fragments) . B where B[k][n] = M[n][k], M a
 * row-major shared 64 x 64 tile: B fragments by ldmatrix (no .trans), two
 * n-tiles per x4: lanes 0-7 address rows n*8 + 0..7 at column ks*16, lanes
 * 8-15 the same rows at ks*16 + 8, lanes 16-31 rows n*8 + 8..15 likewise;
 * thread (g, t4) receives M[row g][2*t4, 2*t4 + 1] of each 8x8 matrix, the
 * m16n8k16 B fragment b0 / b1 of n-tile n, then of n + 1. */
static __device__ __forceinline__ void mma_rows_ldsm(float acc[8][4], const uint32_t a[4][4], kn_bf16 (*M)[TC_PAD],
                                                     int lane) {
#pragma unroll
    for (int n = 0; n < 8; n += 2)
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            uint32_t bb[4];
            ldsm_x4(bb, &M[n * 8 + (lane & 7) + ((lane >> 4) << 3)][ks * 16 + ((lane >> 3) & 1) * 8]);
            mma_bf16(acc[n], a[ks], bb);
            mma_bf16(acc[n + 1], a[ks], bb + 2);
        }
}

/* grid (ceil(T/64), NH, B), block 128; block x takes query block
 * gridDim.x - 1 - x (longest first).  Softmax statistics in raw-score units:
 * p = 2^(s * sl2 - m * sl2) with sl2 = scale * log2(e). */
template <bool DOC>
__global__ void __launch_bounds__(128)
    att_fwd_pipe_kernel(kn_bf16 *out, float *lse, const kn_bf16 *qkv, const int32_t *doc, kn_att_geo G, float scale) {
    __shared__ __align__(16) kn_bf16 Ks[2][TC_BK][TC_PAD];
    __shared__ __align__(16) kn_bf16 Vs[2][TC_BK][TC_PAD];
    __shared__ int Dk[2][TC_BK];
    const int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * TC_BQ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const int Tn = G.Tn, NH = G.NH;
    const size_t RS = G.RS; /* the qkv row */
    const float sl2 = scale * LOG2E_F;
    const int32_t *drow = DOC ? doc + (size_t)b * Tn : nullptr;
    const int rw = q0 + warp * 16, r0 = rw + g, r1 = r0 + 8;
    const int dq0 = (DOC && r0 < Tn) ? drow[r0] : 0, dq1 = (DOC && r1 < Tn) ? drow[r1] : 0;
    const kn_bf16 *rows = qkv + (size_t)b * Tn * RS, *qb = rows + h * TC_HS;
    const kn_bf16 *kb = rows + G.koff + (h / G.rep) * TC_HS, *vb = rows + G.voff + (h / G.rep) * TC_HS;
    uint32_t qa[4][4];
    load_a_frags(qa, qb, RS, r0, Tn, t4);
    float o[8][4];
    zero8x4(o);
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    const int last = min(q0 + TC_BQ, Tn) - 1, warp_last = min(rw + 15, Tn - 1);
    const int ntiles = last / TC_BK + 1;

    tiles_async(Ks[0], kb, RS, Vs[0], vb, RS, 0, Tn);
    cp_async_commit();
    if (DOC && threadIdx.x < TC_BK) Dk[0][threadIdx.x] = (int)threadIdx.x < Tn ? drow[threadIdx.x] : 0;
    for (int it = 0; it < ntiles; it++) {
        const int buf = it & 1, k0 = it * TC_BK;
        int dnext = 0; /* the next tile's document id of key threadIdx.x, stored after this tile's work */
        if (it + 1 < ntiles) {
            tiles_async(Ks[buf ^ 1], kb, RS, Vs[buf ^ 1], vb, RS, k0 + TC_BK, Tn);
            if (DOC && threadIdx.x < TC_BK && k0 + TC_BK + (int)threadIdx.x < Tn)
                dnext = drow[k0 + TC_BK + threadIdx.x];
        }
        tiles_ready();
        if (k0 <= warp_last) {
            float sc[8][4];
            zero8x4(sc);
            mma_rows_ldsm(sc, qa, Ks[buf], lane); /* raw scores, 16 rows x 64 keys */
            float mx0 = -INFINITY, mx1 = -INFINITY;
            if (!DOC && k0 + TC_BK - 1 <= rw) { /* every key <= every row of this warp: no mask */
#pragma unroll
                for (int n = 0; n < 8; n++) {
                    mx0 = fmaxf(mx0, fmaxf(sc[n][0], sc[n][1]));
                    mx1 = fmaxf(mx1, fmaxf(sc[n][2], sc[n][3]));
                }
            } else {
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int col = n * 8 + 2 * t4 + (e & 1), key = k0 + col, row = e < 2 ? r0 : r1;
                        bool ok = key <= row && row < Tn && (!DOC || Dk[buf][col] == (e < 2 ? dq0 : dq1));
                        float v = ok ? sc[n][e] : -INFINITY;
                        sc[n][e] = v;
                        if (e < 2) mx0 = fmaxf(mx0, v);
                        else mx1 = fmaxf(mx1, v);
                    }
            }
            mx0 = quad_max(mx0);
            mx1 = quad_max(mx1);
            const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
            /* a row with nothing visible yet keeps m = -inf: its offset is 0, so
             * masked scores give 2^-inf = 0, never -inf - -inf */
            const float ms0 = mn0 == -INFINITY ? 0.0f : mn0 * sl2, ms1 = mn1 == -INFINITY ? 0.0f : mn1 * sl2;
            const float corr0 = ex2(m0 * sl2 - ms0), corr1 = ex2(m1 * sl2 - ms1); /* m = -inf before: 0 */
            float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
            for (int n = 0; n < 8; n++) {
                sc[n][0] = ex2(fmaf(sc[n][0], sl2, -ms0));
                sc[n][1] = ex2(fmaf(sc[n][1], sl2, -ms0));
                sc[n][2] = ex2(fmaf(sc[n][2], sl2, -ms1));
                sc[n][3] = ex2(fmaf(sc[n][3], sl2, -ms1));
                ps0 += sc[n][0] + sc[n][1];
                ps1 += sc[n][2] + sc[n][3];
            }
            online_row(l0, m0, ps0, corr0, mn0);
            online_row(l1, m1, ps1, corr1, mn1);
            scale_cfrag(o, corr0, corr1);
            mma_cfrag_kn(o, sc, Vs[buf], lane); /* O += P V */
        }
        if (DOC && threadIdx.x < TC_BK && it + 1 < ntiles) Dk[buf ^ 1][threadIdx.x] = dnext;
        __syncthreads(); /* buffer buf is refilled by the next iteration */
    }
    const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    scale_cfrag(o, inv0, inv1);
    store_cfrag(out + (size_t)b * Tn * G.OS + h * TC_HS, G.OS, o, r0, Tn, t4, 1.0f);
    if (t4 == 0) {
        if (r0 < Tn) lse[((size_t)b * NH + h) * Tn + r0] = m0 * scale + logf(l0);
        if (r1 < Tn) lse[((size_t)b * NH + h) * Tn + r1] = m1 * scale + logf(l1);
    }
}

/* dq: grid (ceil(T/64), NH, B), block 128, longest query blocks first; K and
 * V tiles double-buffered.  dS = P * (dP - D) * scale, P = 2^(s*sl2 - lse*log2e). */
template <bool DOC>
__global__ void __launch_bounds__(128)
    att_dq_pipe_kernel(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                       const int32_t *doc, kn_att_geo G, float scale) {
    __shared__ __align__(16) kn_bf16 Ks[2][64][TC_PAD];
    __shared__ __align__(16) kn_bf16 Vs[2][64][TC_PAD];
    __shared__ int Dk[2][64];
    const int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * 64;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const int Tn = G.Tn, NH = G.NH;
    const size_t RS = G.RS, OS = G.OS; /* the qkv row, the out / dout row */
    const float sl2 = scale * LOG2E_F;
    const int32_t *drow = DOC ? doc + (size_t)b * Tn : nullptr;
    const int rw = q0 + warp * 16, r0 = rw + g, r1 = r0 + 8;
    const int dq0 = (DOC && r0 < Tn) ? drow[r0] : 0, dq1 = (DOC && r1 < Tn) ? drow[r1] : 0;
    const float *lrow = lse + ((size_t)b * NH + h) * Tn, *drw = Dsum + ((size_t)b * NH + h) * Tn;
    const float L0 = r0 < Tn ? lrow[r0] * LOG2E_F : 0.0f, L1 = r1 < Tn ? lrow[r1] * LOG2E_F : 0.0f;
    const float D0 = r0 < Tn ? drw[r0] : 0.0f, D1 = r1 < Tn ? drw[r1] : 0.0f;
    const kn_bf16 *rows = qkv + (size_t)b * Tn * RS, *qb = rows + h * TC_HS;
    const kn_bf16 *kb = rows + G.koff + (h / G.rep) * TC_HS, *vb = rows + G.voff + (h / G.rep) * TC_HS;
    uint32_t qa[4][4], da[4][4];
    load_a_frags(qa, qb, RS, r0, Tn, t4);
    load_a_frags(da, dout + (size_t)b * Tn * OS + h * TC_HS, OS, r0, Tn, t4);
    float dq[8][4];
    zero8x4(dq);
    const int last = min(q0 + 64, Tn) - 1, warp_last = min(rw + 15, Tn - 1);
    const int ntiles = last / 64 + 1;

    tiles_async(Ks[0], kb, RS, Vs[0], vb, RS, 0, Tn);
    cp_async_commit();
    if (DOC && threadIdx.x < 64) Dk[0][threadIdx.x] = (int)threadIdx.x < Tn ? drow[threadIdx.x] : 0;
    for (int it = 0; it < ntiles; it++) {
        const int buf = it & 1, k0 = it * 64;
        int dnext = 0;
        if (it + 1 < ntiles) {
            tiles_async(Ks[buf ^ 1], kb, RS, Vs[buf ^ 1], vb, RS, k0 + 64, Tn);
            if (DOC && threadIdx.x < 64 && k0 + 64 + (int)threadIdx.x < Tn) dnext = drow[k0 + 64 + threadIdx.x];
        }
        tiles_ready();
        if (k0 <= warp_last) {
            float s[8][4], dp[8][4];
            zero8x4(s);
            zero8x4(dp);
            mma_rows_ldsm(s, qa, Ks[buf], lane);  /* S = Q K^T */
            mma_rows_ldsm(dp, da, Vs[buf], lane); /* dP = dO V^T */
            if (!DOC && k0 + 63 <= rw) {
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        float p = ex2(fmaf(s[n][e], sl2, -(e < 2 ? L0 : L1)));
                        s[n][e] = p * (dp[n][e] - (e < 2 ? D0 : D1)) * scale;
                    }
            } else {
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int col = n * 8 + 2 * t4 + (e & 1), key = k0 + col, row = e < 2 ? r0 : r1;
                        bool ok = key <= row && row < Tn && (!DOC || Dk[buf][col] == (e < 2 ? dq0 : dq1));
                        float p = ok ? ex2(fmaf(s[n][e], sl2, -(e < 2 ? L0 : L1))) : 0.0f;
                        s[n][e] = p * (dp[n][e] - (e < 2 ? D0 : D1)) * scale;
                    }
            }
            mma_cfrag_kn(dq, s, Ks[buf], lane); /* dQ += dS K */
        }
        if (DOC && threadIdx.x < 64 && it + 1 < ntiles) Dk[buf ^ 1][threadIdx.x] = dnext;
        __syncthreads();
    }
    store_cfrag(dqkv + (size_t)b * Tn * RS + h * TC_HS, RS, dq, r0, Tn, t4, 1.0f);
}

/* dk, dv: grid (ceil(T/64), NKV, B), block 128, rows are keys of KV head
 * blockIdx.y; block x takes keys x*64.. (the lowest keys see the most queries
 * and start first).  It walks the query tiles of each of the KV head's rep
 * query heads in turn (one head, rep = 1, in GPT-2's row), so a KV head's
 * dK/dV sum over its query heads in a fixed order in registers: no atomics,
 * no second pass.  Q and dO tiles double-buffered across that whole walk,
 * with their lse (base 2), D and document ids.
 * It needs ~245 registers, which allows 2 blocks (8 warps) per SM; MINB 3
 * caps it at 168 and spills ~200 bytes to L1 (variant 3: which is faster is
 * for the GPU to say). */
template <bool DOC, int MINB>
__global__ void __launch_bounds__(128, MINB)
    att_dkdv_pipe_kernel(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                         const int32_t *doc, kn_att_geo G, float scale) {
    __shared__ __align__(16) kn_bf16 Qs[2][64][TC_PAD];
    __shared__ __align__(16) kn_bf16 Os[2][64][TC_PAD]; /* dout rows */
    __shared__ float Ls[2][64], Dd[2][64];
    __shared__ int Dq[2][64];
    const int b = blockIdx.z, hk = blockIdx.y, k0 = blockIdx.x * 64;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const int Tn = G.Tn, NH = G.NH, rep = G.rep;
    const size_t RS = G.RS, OS = G.OS; /* the qkv row, the out / dout row */
    const float sl2 = scale * LOG2E_F;
    const int32_t *drow = DOC ? doc + (size_t)b * Tn : nullptr;
    const int kw = k0 + warp * 16, kr0 = kw + g, kr1 = kr0 + 8;
    const int dk0 = (DOC && kr0 < Tn) ? drow[kr0] : 0, dk1 = (DOC && kr1 < Tn) ? drow[kr1] : 0;
    const kn_bf16 *rows = qkv + (size_t)b * Tn * RS, *orows = dout + (size_t)b * Tn * OS;
    uint32_t ka[4][4], va[4][4];
    load_a_frags(ka, rows + G.koff + hk * TC_HS, RS, kr0, Tn, t4);
    load_a_frags(va, rows + G.voff + hk * TC_HS, RS, kr0, Tn, t4);
    float dk[8][4], dv[8][4];
    zero8x4(dk);
    zero8x4(dv);
    /* step it = (query head hk * rep + it / qtiles, query tile it % qtiles) */
    const int qtiles = (Tn - k0 + 63) / 64, nsteps = qtiles * rep;
    const int tq = threadIdx.x; /* threads 0..63 carry the per-query scalars */

    {
        const int h = hk * rep;
        const float *lrow = lse + ((size_t)b * NH + h) * Tn, *drw = Dsum + ((size_t)b * NH + h) * Tn;
        tiles_async(Qs[0], rows + h * TC_HS, RS, Os[0], orows + h * TC_HS, OS, k0, Tn);
        cp_async_commit();
        if (tq < 64) {
            int q = k0 + tq;
            Ls[0][tq] = q < Tn ? lrow[q] * LOG2E_F : 0.0f;
            Dd[0][tq] = q < Tn ? drw[q] : 0.0f;
            Dq[0][tq] = (DOC && q < Tn) ? drow[q] : 0;
        }
    }
    for (int it = 0; it < nsteps; it++) {
        const int buf = it & 1, q0 = k0 + (it % qtiles) * 64;
        float nl = 0.0f, nd = 0.0f;
        int ndoc = 0;
        if (it + 1 < nsteps) {
            const int h = hk * rep + (it + 1) / qtiles, nq0 = k0 + ((it + 1) % qtiles) * 64;
            const float *lrow = lse + ((size_t)b * NH + h) * Tn, *drw = Dsum + ((size_t)b * NH + h) * Tn;
            tiles_async(Qs[buf ^ 1], rows + h * TC_HS, RS, Os[buf ^ 1], orows + h * TC_HS, OS, nq0, Tn);
            int q = nq0 + tq;
            if (tq < 64 && q < Tn) {
                nl = lrow[q] * LOG2E_F;
                nd = drw[q];
                if (DOC) ndoc = drow[q];
            }
        }
        tiles_ready();
        {
            float s[8][4], dp[8][4];
            zero8x4(s);
            zero8x4(dp);
            mma_rows_ldsm(s, ka, Qs[buf], lane);         /* S^T: keys x queries */
            mma_rows_ldsm(dp, va, Os[buf], lane);        /* dP^T = V dO^T */
            if (!DOC && q0 >= kw + 15 && q0 + 63 < Tn) { /* every query >= every key of this warp */
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int col = n * 8 + 2 * t4 + (e & 1);
                        float p = ex2(fmaf(s[n][e], sl2, -Ls[buf][col]));
                        s[n][e] = p;
                        dp[n][e] = p * (dp[n][e] - Dd[buf][col]) * scale;
                    }
            } else {
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int col = n * 8 + 2 * t4 + (e & 1), q = q0 + col, key = e < 2 ? kr0 : kr1;
                        bool ok = key <= q && q < Tn && (!DOC || Dq[buf][col] == (e < 2 ? dk0 : dk1));
                        float p = ok ? ex2(fmaf(s[n][e], sl2, -Ls[buf][col])) : 0.0f;
                        s[n][e] = p;
                        dp[n][e] = p * (dp[n][e] - Dd[buf][col]) * scale; /* dS^T */
                    }
            }
            mma_cfrag_kn(dv, s, Os[buf], lane);  /* dV += P^T dO */
            mma_cfrag_kn(dk, dp, Qs[buf], lane); /* dK += dS^T Q */
        }
        if (tq < 64 && it + 1 < nsteps) {
            Ls[buf ^ 1][tq] = nl;
            Dd[buf ^ 1][tq] = nd;
            Dq[buf ^ 1][tq] = ndoc;
        }
        __syncthreads();
    }
    kn_bf16 *base = dqkv + (size_t)b * Tn * RS + hk * TC_HS;
    store_cfrag(base + G.koff, RS, dk, kr0, Tn, t4, 1.0f);
    store_cfrag(base + G.voff, RS, dv, kr0, Tn, t4, 1.0f);
}

#ifndef KN_EMU /* the CPU run (test_attn_tc_emu) launches the kernels itself */
void kn_att_pipe_forward(kn_bf16 *out, float *lse, const kn_bf16 *qkv, const int32_t *doc, int B, const kn_att_geo &G,
                         cudaStream_t s) {
    dim3 grid((unsigned)((G.Tn + TC_BQ - 1) / TC_BQ), (unsigned)G.NH, (unsigned)B);
    const float scale = 1.0f / sqrtf((float)TC_HS);
    if (doc) att_fwd_pipe_kernel<true><<<grid, 128, 0, s>>>(out, lse, qkv, doc, G, scale);
    else att_fwd_pipe_kernel<false><<<grid, 128, 0, s>>>(out, lse, qkv, nullptr, G, scale);
}

template <bool DOC>
static void dkdv_launch(dim3 grid, int minb, kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse,
                        const float *Dsum, const int32_t *doc, const kn_att_geo &G, float scale, cudaStream_t s) {
    if (minb >= 3) att_dkdv_pipe_kernel<DOC, 3><<<grid, 128, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, G, scale);
    else att_dkdv_pipe_kernel<DOC, 1><<<grid, 128, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, G, scale);
}

void kn_att_pipe_backward(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                          const int32_t *doc, int B, const kn_att_geo &G, int dkdv_min_blocks, cudaStream_t s) {
    dim3 qgrid((unsigned)((G.Tn + 63) / 64), (unsigned)G.NH, (unsigned)B);
    dim3 kgrid((unsigned)((G.Tn + 63) / 64), (unsigned)G.NKV, (unsigned)B);
    const float scale = 1.0f / sqrtf((float)TC_HS);
    if (doc) {
        att_dq_pipe_kernel<true><<<qgrid, 128, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, G, scale);
        dkdv_launch<true>(kgrid, dkdv_min_blocks, dqkv, dout, qkv, lse, Dsum, doc, G, scale, s);
    } else {
        att_dq_pipe_kernel<false><<<qgrid, 128, 0, s>>>(dqkv, dout, qkv, lse, Dsum, nullptr, G, scale);
        dkdv_launch<false>(kgrid, dkdv_min_blocks, dqkv, dout, qkv, lse, Dsum, nullptr, G, scale, s);
    }
}
#endif
