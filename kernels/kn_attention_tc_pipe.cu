/* kn_attention_tc_pipe.cu - the tensor-core attention, pipelined: the default
 * for bf16 with heads of 64 (MKS_ATTN_TC=pipe; see kn_attention_tc.cu), and
 * the only tensor-core kernels for heads of 128 (tc_tiles below: their tiles,
 * and why; checked on the CPU emulator, not yet run on a GPU).
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

/* The tiles by head size (HS 64 or 128; 4 warps x 16 rows per block, 64
 * query rows (forward, dq) or 64 keys (dk/dv) a block in both):
 *   KT: keys per K/V tile of the forward and dq kernels;
 *   QT: queries per Q/dO tile of the dk/dv kernel;
 *   PAD: bf16 per shared row, HS + 8 (144 / 272 bytes: an odd number of 16-byte
 *     units, so the 8 rows of an ldmatrix hit 8 different bank groups).
 * Heads of 64: 64-key and 64-query tiles, the kernels that ran on the H200.
 * Heads of 128 keep two bounds: 48 KB of static shared memory per block and
 * 255 registers per thread.
 *   - forward, dq: K and V double-buffered, 2 x 2 x KT x 272 bytes: KT = 64
 *     needs 69.6 KB, KT = 32 needs 34.8 KB.  A 32-key tile at HS 128 is the
 *     same work between two barriers as a 64-key tile at HS 64 (64 mma per
 *     warp forward: S 4 n-tiles x 8 k-steps, PV 2 x 16; the same 8 KB per
 *     operand per cp.async): the barrier and copy cost per mma of the kernels
 *     that ran at 64, not more.  Q (and
 *     dO) stay in registers: 32 (64) regs, the 16 x 128 fp32 output 64.
 *   - dk/dv: a warp holds its 16 keys' K and V A-fragments (2 x 32 regs) and
 *     the dK and dV accumulators (2 x 64 fp32), 192 registers before the
 *     scores; 16-query tiles keep S and dP at 8 registers each: 253 / 255
 *     registers with ptxas (sm_90), no spills (32-query tiles, 16 each, hit
 *     the 255 cap and spill 24 bytes).  Reading K and V from shared memory
 *     instead would free 64 registers but needs 2 x 64 x 272 bytes beside the
 *     Q/dO buffers: past 48 KB without dynamic shared memory.  Q and dO
 *     tiles double-buffered: 2 x 2 x 16 x 272 = 17.4 KB.  That is half the
 *     mma per barrier of the dk/dv kernel at 64 (64, not 128, per warp): the
 *     expected weak spot, for the GPU to measure.  Warps skip query tiles
 *     wholly before their keys (a tile of 16 is that at every block's
 *     start). */
template <int HS> struct tc_tiles;
template <> struct tc_tiles<64> { static constexpr int KT = 64, QT = 64, PAD = TC_PAD; };
template <> struct tc_tiles<128> { static constexpr int KT = 32, QT = 16, PAD = 136; };

/* R rows first .. first + R - 1 (row stride ld, HS bf16 each) into a shared
 * tile, zeros past T; 128 threads, R * HS / 1024 x 16 bytes each */
template <int HS, int R, int PAD>
static __device__ __forceinline__ void tile_async(kn_bf16 (*dst)[PAD], const kn_bf16 *base, size_t ld, int first,
                                                  int Tn) {
    constexpr int CH = HS / 8, SH = HS == 64 ? 3 : 4; /* 16-byte chunks per row, log2 of it */
    static_assert(CH == 1 << SH && (R * CH) % 128 == 0, "tile_async: whole 16-byte chunks per thread");
#pragma unroll
    for (int k = 0; k < R * CH / 128; k++) {
        int i = threadIdx.x + k * 128, j = i >> SH, d0 = (i & (CH - 1)) * 8, r = first + j;
        bool ok = r < Tn;
        cp_async16(&dst[j][d0], base + (size_t)(ok ? r : 0) * ld + d0, ok);
    }
}

/* tiles `first` .. first + R - 1 of two operands (rows of stride lda / ldb)
 * into buffers a and b, as one cp.async group when committed */
template <int HS, int R, int PAD>
static __device__ __forceinline__ void tiles_async(kn_bf16 (*a)[PAD], const kn_bf16 *abase, size_t lda,
                                                   kn_bf16 (*b)[PAD], const kn_bf16 *bbase, size_t ldb, int first,
                                                   int Tn) {
    tile_async<HS, R>(a, abase, lda, first, Tn);
    tile_async<HS, R>(b, bbase, ldb, first, Tn);
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

/* acc (16 x NT*8) += A (16 x KS*16, fragments) . B where B[k][n] = M[n][k],
 * M a row-major shared NT*8 x KS*16 tile: B fragments by ldmatrix (no .trans),
 * two n-tiles per x4: lanes 0-7 address rows n*8 + 0..7 at column ks*16,
 * lanes 8-15 the same rows at ks*16 + 8, lanes 16-31 rows n*8 + 8..15
 * likewise; thread (g, t4) receives M[row g][2*t4, 2*t4 + 1] of each 8x8
 * matrix, the m16n8k16 B fragment b0 / b1 of n-tile n, then of n + 1. */
template <int NT, int KS, int PAD>
static __device__ __forceinline__ void mma_rows_ldsm(float (&acc)[NT][4], const uint32_t (&a)[KS][4], kn_bf16 (*M)[PAD],
                                                     int lane) {
#pragma unroll
    for (int n = 0; n < NT; n += 2)
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            uint32_t bb[4];
            ldsm_x4(bb, &M[n * 8 + (lane & 7) + ((lane >> 4) << 3)][ks * 16 + ((lane >> 3) & 1) * 8]);
            mma_bf16(acc[n], a[ks], bb);
            mma_bf16(acc[n + 1], a[ks], bb + 2);
        }
}

/* grid (ceil(T/64), NH, B), block 128; block x takes query block
 * gridDim.x - 1 - x (longest first); key tiles of KT (tc_tiles).  Softmax
 * statistics in raw-score units: p = 2^(s * sl2 - m * sl2) with
 * sl2 = scale * log2(e). */
template <int HS, bool DOC>
__global__ void __launch_bounds__(128)
    att_fwd_pipe_kernel(kn_bf16 *out, float *lse, const kn_bf16 *qkv, const int32_t *doc, kn_att_geo G, float scale) {
    constexpr int BK = tc_tiles<HS>::KT, PAD = tc_tiles<HS>::PAD, NK = BK / 8, NO = HS / 8;
    __shared__ __align__(16) kn_bf16 Ks[2][BK][PAD];
    __shared__ __align__(16) kn_bf16 Vs[2][BK][PAD];
    __shared__ int Dk[2][BK];
    const int b = blockIdx.z, h = blockIdx.y, q0 = (gridDim.x - 1 - blockIdx.x) * TC_BQ;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const int Tn = G.Tn, NH = G.NH;
    const size_t RS = G.RS; /* the qkv row */
    const float sl2 = scale * LOG2E_F;
    const int32_t *drow = DOC ? doc + (size_t)b * Tn : nullptr;
    const int rw = q0 + warp * 16, r0 = rw + g, r1 = r0 + 8;
    const int dq0 = (DOC && r0 < Tn) ? drow[r0] : 0, dq1 = (DOC && r1 < Tn) ? drow[r1] : 0;
    const kn_bf16 *rows = qkv + (size_t)b * Tn * RS, *qb = rows + h * HS;
    const kn_bf16 *kb = rows + G.koff + (h / G.rep) * HS, *vb = rows + G.voff + (h / G.rep) * HS;
    uint32_t qa[HS / 16][4];
    load_a_frags(qa, qb, RS, r0, Tn, t4);
    float o[NO][4];
    zero_cfrag(o);
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    const int last = min(q0 + TC_BQ, Tn) - 1, warp_last = min(rw + 15, Tn - 1);
    const int ntiles = last / BK + 1;

    tiles_async<HS, BK>(Ks[0], kb, RS, Vs[0], vb, RS, 0, Tn);
    cp_async_commit();
    if (DOC && threadIdx.x < BK) Dk[0][threadIdx.x] = (int)threadIdx.x < Tn ? drow[threadIdx.x] : 0;
    for (int it = 0; it < ntiles; it++) {
        const int buf = it & 1, k0 = it * BK;
        int dnext = 0; /* the next tile's document id of key threadIdx.x, stored after this tile's work */
        if (it + 1 < ntiles) {
            tiles_async<HS, BK>(Ks[buf ^ 1], kb, RS, Vs[buf ^ 1], vb, RS, k0 + BK, Tn);
            if (DOC && threadIdx.x < BK && k0 + BK + (int)threadIdx.x < Tn) dnext = drow[k0 + BK + threadIdx.x];
        }
        tiles_ready();
        if (k0 <= warp_last) {
            float sc[NK][4];
            zero_cfrag(sc);
            mma_rows_ldsm(sc, qa, Ks[buf], lane); /* raw scores, 16 rows x BK keys */
            float mx0 = -INFINITY, mx1 = -INFINITY;
            if (!DOC && k0 + BK - 1 <= rw) { /* every key <= every row of this warp: no mask */
#pragma unroll
                for (int n = 0; n < NK; n++) {
                    mx0 = fmaxf(mx0, fmaxf(sc[n][0], sc[n][1]));
                    mx1 = fmaxf(mx1, fmaxf(sc[n][2], sc[n][3]));
                }
            } else {
#pragma unroll
                for (int n = 0; n < NK; n++)
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
            for (int n = 0; n < NK; n++) {
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
        if (DOC && threadIdx.x < BK && it + 1 < ntiles) Dk[buf ^ 1][threadIdx.x] = dnext;
        __syncthreads(); /* buffer buf is refilled by the next iteration */
    }
    const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    scale_cfrag(o, inv0, inv1);
    store_cfrag(out + (size_t)b * Tn * G.OS + h * HS, G.OS, o, r0, Tn, t4, 1.0f);
    if (t4 == 0) {
        if (r0 < Tn) lse[((size_t)b * NH + h) * Tn + r0] = m0 * scale + logf(l0);
        if (r1 < Tn) lse[((size_t)b * NH + h) * Tn + r1] = m1 * scale + logf(l1);
    }
}

/* dq: grid (ceil(T/64), NH, B), block 128, longest query blocks first; K and
 * V tiles of KT keys double-buffered.  dS = P * (dP - D) * scale,
 * P = 2^(s*sl2 - lse*log2e). */
template <int HS, bool DOC>
__global__ void __launch_bounds__(128)
    att_dq_pipe_kernel(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                       const int32_t *doc, kn_att_geo G, float scale) {
    constexpr int BK = tc_tiles<HS>::KT, PAD = tc_tiles<HS>::PAD, NK = BK / 8, NO = HS / 8;
    __shared__ __align__(16) kn_bf16 Ks[2][BK][PAD];
    __shared__ __align__(16) kn_bf16 Vs[2][BK][PAD];
    __shared__ int Dk[2][BK];
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
    const kn_bf16 *rows = qkv + (size_t)b * Tn * RS, *qb = rows + h * HS;
    const kn_bf16 *kb = rows + G.koff + (h / G.rep) * HS, *vb = rows + G.voff + (h / G.rep) * HS;
    uint32_t qa[HS / 16][4], da[HS / 16][4];
    load_a_frags(qa, qb, RS, r0, Tn, t4);
    load_a_frags(da, dout + (size_t)b * Tn * OS + h * HS, OS, r0, Tn, t4);
    float dq[NO][4];
    zero_cfrag(dq);
    const int last = min(q0 + 64, Tn) - 1, warp_last = min(rw + 15, Tn - 1);
    const int ntiles = last / BK + 1;

    tiles_async<HS, BK>(Ks[0], kb, RS, Vs[0], vb, RS, 0, Tn);
    cp_async_commit();
    if (DOC && threadIdx.x < BK) Dk[0][threadIdx.x] = (int)threadIdx.x < Tn ? drow[threadIdx.x] : 0;
    for (int it = 0; it < ntiles; it++) {
        const int buf = it & 1, k0 = it * BK;
        int dnext = 0;
        if (it + 1 < ntiles) {
            tiles_async<HS, BK>(Ks[buf ^ 1], kb, RS, Vs[buf ^ 1], vb, RS, k0 + BK, Tn);
            if (DOC && threadIdx.x < BK && k0 + BK + (int)threadIdx.x < Tn) dnext = drow[k0 + BK + threadIdx.x];
        }
        tiles_ready();
        if (k0 <= warp_last) {
            float s[NK][4], dp[NK][4];
            zero_cfrag(s);
            zero_cfrag(dp);
            mma_rows_ldsm(s, qa, Ks[buf], lane);  /* S = Q K^T */
            mma_rows_ldsm(dp, da, Vs[buf], lane); /* dP = dO V^T */
            if (!DOC && k0 + BK - 1 <= rw) {
#pragma unroll
                for (int n = 0; n < NK; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        float p = ex2(fmaf(s[n][e], sl2, -(e < 2 ? L0 : L1)));
                        s[n][e] = p * (dp[n][e] - (e < 2 ? D0 : D1)) * scale;
                    }
            } else {
#pragma unroll
                for (int n = 0; n < NK; n++)
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
        if (DOC && threadIdx.x < BK && it + 1 < ntiles) Dk[buf ^ 1][threadIdx.x] = dnext;
        __syncthreads();
    }
    store_cfrag(dqkv + (size_t)b * Tn * RS + h * HS, RS, dq, r0, Tn, t4, 1.0f);
}

/* dk, dv: grid (ceil(T/64), NKV, B), block 128, rows are keys of KV head
 * blockIdx.y; block x takes keys x*64.. (the lowest keys see the most queries
 * and start first).  It walks the query tiles of each of the KV head's rep
 * query heads in turn (one head, rep = 1, in GPT-2's row), so a KV head's
 * dK/dV sum over its query heads in a fixed order in registers: no atomics,
 * no second pass.  Q and dO tiles double-buffered across that whole walk,
 * with their lse (base 2), D and document ids.
 * Query tiles of QT (tc_tiles).  At HS 64 it needs ~245 registers, which
 * allows 2 blocks (8 warps) per SM; MINB 3 caps it at 168 and spills ~200
 * bytes to L1 (variant 3: which is faster is for the GPU to say).  At HS 128,
 * 253 / 255 registers (sm_90, without / with the document mask), no spills:
 * 2 blocks per SM as at 64. */
template <int HS, bool DOC, int MINB>
__global__ void __launch_bounds__(128, MINB)
    att_dkdv_pipe_kernel(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                         const int32_t *doc, kn_att_geo G, float scale) {
    constexpr int BQ = tc_tiles<HS>::QT, PAD = tc_tiles<HS>::PAD, NQ = BQ / 8, NO = HS / 8;
    __shared__ __align__(16) kn_bf16 Qs[2][BQ][PAD];
    __shared__ __align__(16) kn_bf16 Os[2][BQ][PAD]; /* dout rows */
    __shared__ float Ls[2][BQ], Dd[2][BQ];
    __shared__ int Dq[2][BQ];
    const int b = blockIdx.z, hk = blockIdx.y, k0 = blockIdx.x * 64;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
    const int Tn = G.Tn, NH = G.NH, rep = G.rep;
    const size_t RS = G.RS, OS = G.OS; /* the qkv row, the out / dout row */
    const float sl2 = scale * LOG2E_F;
    const int32_t *drow = DOC ? doc + (size_t)b * Tn : nullptr;
    const int kw = k0 + warp * 16, kr0 = kw + g, kr1 = kr0 + 8;
    const int dk0 = (DOC && kr0 < Tn) ? drow[kr0] : 0, dk1 = (DOC && kr1 < Tn) ? drow[kr1] : 0;
    const kn_bf16 *rows = qkv + (size_t)b * Tn * RS, *orows = dout + (size_t)b * Tn * OS;
    uint32_t ka[HS / 16][4], va[HS / 16][4];
    load_a_frags(ka, rows + G.koff + hk * HS, RS, kr0, Tn, t4);
    load_a_frags(va, rows + G.voff + hk * HS, RS, kr0, Tn, t4);
    float dk[NO][4], dv[NO][4];
    zero_cfrag(dk);
    zero_cfrag(dv);
    /* step it = (query head hk * rep + it / qtiles, query tile it % qtiles) */
    const int qtiles = (Tn - k0 + BQ - 1) / BQ, nsteps = qtiles * rep;
    const int tq = threadIdx.x; /* threads 0..BQ-1 carry the per-query scalars */

    {
        const int h = hk * rep;
        const float *lrow = lse + ((size_t)b * NH + h) * Tn, *drw = Dsum + ((size_t)b * NH + h) * Tn;
        tiles_async<HS, BQ>(Qs[0], rows + h * HS, RS, Os[0], orows + h * HS, OS, k0, Tn);
        cp_async_commit();
        if (tq < BQ) {
            int q = k0 + tq;
            Ls[0][tq] = q < Tn ? lrow[q] * LOG2E_F : 0.0f;
            Dd[0][tq] = q < Tn ? drw[q] : 0.0f;
            Dq[0][tq] = (DOC && q < Tn) ? drow[q] : 0;
        }
    }
    for (int it = 0; it < nsteps; it++) {
        const int buf = it & 1, q0 = k0 + (it % qtiles) * BQ;
        float nl = 0.0f, nd = 0.0f;
        int ndoc = 0;
        if (it + 1 < nsteps) {
            const int h = hk * rep + (it + 1) / qtiles, nq0 = k0 + ((it + 1) % qtiles) * BQ;
            const float *lrow = lse + ((size_t)b * NH + h) * Tn, *drw = Dsum + ((size_t)b * NH + h) * Tn;
            tiles_async<HS, BQ>(Qs[buf ^ 1], rows + h * HS, RS, Os[buf ^ 1], orows + h * HS, OS, nq0, Tn);
            int q = nq0 + tq;
            if (tq < BQ && q < Tn) {
                nl = lrow[q] * LOG2E_F;
                nd = drw[q];
                if (DOC) ndoc = drow[q];
            }
        }
        tiles_ready();
        /* heads of 128: a warp whose keys all follow the tile's queries adds nothing (HS 64: as run) */
        if (HS == 64 || q0 + BQ - 1 >= kw) {
            float s[NQ][4], dp[NQ][4];
            zero_cfrag(s);
            zero_cfrag(dp);
            mma_rows_ldsm(s, ka, Qs[buf], lane);             /* S^T: keys x queries */
            mma_rows_ldsm(dp, va, Os[buf], lane);            /* dP^T = V dO^T */
            if (!DOC && q0 >= kw + 15 && q0 + BQ - 1 < Tn) { /* every query >= every key of this warp */
#pragma unroll
                for (int n = 0; n < NQ; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int col = n * 8 + 2 * t4 + (e & 1);
                        float p = ex2(fmaf(s[n][e], sl2, -Ls[buf][col]));
                        s[n][e] = p;
                        dp[n][e] = p * (dp[n][e] - Dd[buf][col]) * scale;
                    }
            } else {
#pragma unroll
                for (int n = 0; n < NQ; n++)
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
        if (tq < BQ && it + 1 < nsteps) {
            Ls[buf ^ 1][tq] = nl;
            Dd[buf ^ 1][tq] = nd;
            Dq[buf ^ 1][tq] = ndoc;
        }
        __syncthreads();
    }
    kn_bf16 *base = dqkv + (size_t)b * Tn * RS + hk * HS;
    store_cfrag(base + G.koff, RS, dk, kr0, Tn, t4, 1.0f);
    store_cfrag(base + G.voff, RS, dv, kr0, Tn, t4, 1.0f);
}

#ifndef KN_EMU /* the CPU run (test_attn_tc_emu) launches the kernels itself */
template <int HS>
static void fwd_launch(kn_bf16 *out, float *lse, const kn_bf16 *qkv, const int32_t *doc, int B, const kn_att_geo &G,
                       cudaStream_t s) {
    dim3 grid((unsigned)((G.Tn + TC_BQ - 1) / TC_BQ), (unsigned)G.NH, (unsigned)B);
    const float scale = 1.0f / sqrtf((float)HS);
    if (doc) att_fwd_pipe_kernel<HS, true><<<grid, 128, 0, s>>>(out, lse, qkv, doc, G, scale);
    else att_fwd_pipe_kernel<HS, false><<<grid, 128, 0, s>>>(out, lse, qkv, nullptr, G, scale);
}

void kn_att_pipe_forward(kn_bf16 *out, float *lse, const kn_bf16 *qkv, const int32_t *doc, int B, const kn_att_geo &G,
                         int HS, cudaStream_t s) {
    if (HS == 128) fwd_launch<128>(out, lse, qkv, doc, B, G, s);
    else fwd_launch<64>(out, lse, qkv, doc, B, G, s);
}

/* MINB 3 (pipe3) for heads of 64 only: at 128 the cap of 168 registers would
 * spill most of the 192 that hold K, V, dK and dV */
template <int HS, bool DOC>
static void dkdv_launch(dim3 grid, int minb, kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse,
                        const float *Dsum, const int32_t *doc, const kn_att_geo &G, float scale, cudaStream_t s) {
    if constexpr (HS == 64)
        if (minb >= 3) {
            att_dkdv_pipe_kernel<HS, DOC, 3><<<grid, 128, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, G, scale);
            return;
        }
    att_dkdv_pipe_kernel<HS, DOC, 1><<<grid, 128, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, G, scale);
}

template <int HS>
static void bwd_launch(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                       const int32_t *doc, int B, const kn_att_geo &G, int dkdv_min_blocks, cudaStream_t s) {
    dim3 qgrid((unsigned)((G.Tn + 63) / 64), (unsigned)G.NH, (unsigned)B);
    dim3 kgrid((unsigned)((G.Tn + 63) / 64), (unsigned)G.NKV, (unsigned)B);
    const float scale = 1.0f / sqrtf((float)HS);
    if (doc) {
        att_dq_pipe_kernel<HS, true><<<qgrid, 128, 0, s>>>(dqkv, dout, qkv, lse, Dsum, doc, G, scale);
        dkdv_launch<HS, true>(kgrid, dkdv_min_blocks, dqkv, dout, qkv, lse, Dsum, doc, G, scale, s);
    } else {
        att_dq_pipe_kernel<HS, false><<<qgrid, 128, 0, s>>>(dqkv, dout, qkv, lse, Dsum, nullptr, G, scale);
        dkdv_launch<HS, false>(kgrid, dkdv_min_blocks, dqkv, dout, qkv, lse, Dsum, nullptr, G, scale, s);
    }
}

void kn_att_pipe_backward(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                          const int32_t *doc, int B, const kn_att_geo &G, int HS, int dkdv_min_blocks, cudaStream_t s) {
    if (HS == 128) bwd_launch<128>(dqkv, dout, qkv, lse, Dsum, doc, B, G, dkdv_min_blocks, s);
    else bwd_launch<64>(dqkv, dout, qkv, lse, Dsum, doc, B, G, dkdv_min_blocks, s);
}
#endif
