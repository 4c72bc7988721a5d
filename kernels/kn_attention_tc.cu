/* kn_attention_tc.cu - causal attention forward on the tensor cores
 * (mma.sync m16n8k16 bf16 -> fp32), flash-attention-2 style: 64 query rows
 * per block (4 warps x 16), 64-key tiles in shared memory, online softmax in
 * registers, the S fragments reused as the A operand of P.V.  bf16, head
 * size 64 only; same contract and outputs (out, lse) as
 * kn_attention_forward_cuda, whose SIMT version stays the default until this
 * one has passed test_kernels_gpu on a GPU (see docs/gpu-notes.md). */
#include <math.h>

#include "kn_cuda_common.cuh"

#define TC_BQ 64
#define TC_BK 64
#define TC_HS 64
#define TC_PAD 72 /* bf16 per shared row: 144 bytes, conflict-free fragment reads */

static __device__ __forceinline__ void mma_bf16(float *d, const uint32_t *a, const uint32_t *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (lower half) = lo */
    return *reinterpret_cast<uint32_t *>(&v);
}

/* grid (ceil(T/64), NH, B), block 128 */
__global__ void __launch_bounds__(128) att_fwd_tc_kernel(kn_bf16 *out, float *lse, const kn_bf16 *qkv,
                                                         const int32_t *doc, int Tn, int C, int NH, float scale)
{
    __shared__ __align__(16) kn_bf16 Ks[TC_BK][TC_PAD];
    __shared__ __align__(16) kn_bf16 Vt[TC_HS][TC_PAD]; /* V transposed: [d][key] */
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
            const kn_bf16 *ve = reinterpret_cast<const kn_bf16 *>(&vv);
#pragma unroll
            for (int e = 0; e < 8; e++) Vt[d0 + e][j] = ve[e];
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
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
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
        ps0 += __shfl_xor_sync(0xffffffffu, ps0, 1);
        ps0 += __shfl_xor_sync(0xffffffffu, ps0, 2);
        ps1 += __shfl_xor_sync(0xffffffffu, ps1, 1);
        ps1 += __shfl_xor_sync(0xffffffffu, ps1, 2);
        l0 = l0 * corr0 + ps0;
        l1 = l1 * corr1 + ps1;
        m0 = mn0;
        m1 = mn1;
#pragma unroll
        for (int n = 0; n < 8; n++) {
            o[n][0] *= corr0;
            o[n][1] *= corr0;
            o[n][2] *= corr1;
            o[n][3] *= corr1;
        }
        /* O += P V: k-steps of 16 keys; P's A fragment is two S n-tiles */
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            uint32_t pa[4];
            pa[0] = pack_bf16(sc[2 * ks][0], sc[2 * ks][1]);
            pa[1] = pack_bf16(sc[2 * ks][2], sc[2 * ks][3]);
            pa[2] = pack_bf16(sc[2 * ks + 1][0], sc[2 * ks + 1][1]);
            pa[3] = pack_bf16(sc[2 * ks + 1][2], sc[2 * ks + 1][3]);
#pragma unroll
            for (int n = 0; n < 8; n++) { /* n-tile over the head dimension */
                uint32_t bb[2];
                bb[0] = *reinterpret_cast<const uint32_t *>(&Vt[n * 8 + g][ks * 16 + 2 * t4]);
                bb[1] = *reinterpret_cast<const uint32_t *>(&Vt[n * 8 + g][ks * 16 + 8 + 2 * t4]);
                mma_bf16(o[n], pa, bb);
            }
        }
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

extern "C" int kn_attention_forward_tc_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T,
                                            int C, int NH, kn_dtype dt, kn_stream s)
{
    if (!out || !lse || !qkv || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return KN_EINVAL;
    if (dt != KN_BF16 || C / NH != TC_HS || C % 8 || B > 65535 || NH > 65535) {
        kn_cuda_set_error("attention_forward_tc: bf16 with head size 64 only (got %s, hs %d)",
                          dt == KN_BF16 ? "bf16" : "fp32", C / NH);
        return KN_EINVAL;
    }
    if (((uintptr_t)qkv % 16) || ((uintptr_t)out % 4)) {
        kn_cuda_set_error("attention_forward_tc: qkv must be 16-byte aligned");
        return KN_EINVAL;
    }
    dim3 grid((unsigned)((T + TC_BQ - 1) / TC_BQ), (unsigned)NH, (unsigned)B);
    att_fwd_tc_kernel<<<grid, 128, 0, s>>>((kn_bf16 *)out, lse, (const kn_bf16 *)qkv, doc, T, C, NH,
                                           1.0f / sqrtf((float)TC_HS));
    KN_CUDA_LAUNCHED("attention_forward_tc");
    return KN_OK;
}
