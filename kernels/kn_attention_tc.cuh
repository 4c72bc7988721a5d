/* kn_attention_tc.cuh - what the tensor-core attention kernels share
 * (kn_attention_tc.cu: the first kernels and their ldmatrix variant;
 * kn_attention_tc_pipe.cu: the cp.async-pipelined ones, the default): mma.sync
 * m16n8k16 bf16 -> fp32 fragments, ldmatrix loads, C-fragment stores.  Not
 * installed.  Fragment layout (PTX ISA, mma.m16n8k16): thread (g = lane / 4,
 * t4 = lane % 4) holds A rows g and g + 8, B column g, C rows g and g + 8 at
 * columns 2*t4 and 2*t4 + 1. */
#ifndef KN_ATTENTION_TC_CUH
#define KN_ATTENTION_TC_CUH

#include "kn_attention_geo.cuh"
#include "kn_cuda_common.cuh"

#define TC_BQ 64
#define TC_BK 64
#define TC_HS 64
#define TC_PAD 72 /* bf16 per shared row: 144 bytes, conflict-free fragment reads */

/* The PTX wrappers (mma.sync, ldmatrix, cp.async, ex2) are the only device
 * assembly of the tensor-core kernels: under KN_EMU (tests/emu/kn_emu.h, the
 * CPU run of these kernels in test_attn_tc_emu) the emulator defines them. */
#ifndef KN_EMU
static __device__ __forceinline__ void mma_bf16(float *d, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x (lower half) = lo */
    return *reinterpret_cast<uint32_t *>(&v);
}

/* The A fragment of k-step ks (keys ks*16 .. +15) of P, a 16-row C-fragment
 * accumulator (NP n-tiles of 8 keys): its n-tiles 2ks and 2ks + 1, rounded to
 * bf16 pairs. */
template <int NP> static __device__ __forceinline__ void pfrag_a(uint32_t pa[4], float (&p)[NP][4], int ks) {
    pa[0] = pack_bf16(p[2 * ks][0], p[2 * ks][1]);
    pa[1] = pack_bf16(p[2 * ks][2], p[2 * ks][3]);
    pa[2] = pack_bf16(p[2 * ks + 1][0], p[2 * ks + 1][1]);
    pa[3] = pack_bf16(p[2 * ks + 1][2], p[2 * ks + 1][3]);
}

/* The same product with B[k][n] = M[k][n], M a row-major shared tile (64 k-rows):
 * B fragments straight from M's rows by ldmatrix .trans, two n-tiles per
 * ldmatrix.x4 (lanes 0-15 address rows ks*16 + 0..15 at column n*8, lanes 16-31
 * the same rows at (n+1)*8; with .trans thread (g, t4) receives M[2*t4 (+1)][g]
 * of each 8x8 matrix, which is the m16n8k16 B fragment).  It replaces the
 * transposed shared copies (2-byte stores, 8-way bank conflicts at this pad)
 * that mma_cfrag reads, and halves the backward kernels' shared memory.
 * Variant "ldsm" (MKS_ATTN_TC=ldsm); the pipelined kernels read all their
 * B operands this way. */
#ifndef KN_EMU
static __device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const kn_bf16 *row) {
    uint32_t a = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
#endif

/* acc (16 x NO*8) += P (16 x NP*8 keys, C-fragment floats) . M, M a row-major
 * shared tile of NP*8 key rows (PAD bf16 per row); the kernels' NP = 8, NO = 8
 * (heads of 64) or NP = 4 / 2, NO = 16 (heads of 128, kn_attention_tc_pipe.cu). */
template <int NO, int NP, int PAD>
static __device__ __forceinline__ void mma_cfrag_kn(float (&acc)[NO][4], float (&p)[NP][4], kn_bf16 (*M)[PAD],
                                                    int lane) {
#pragma unroll
    for (int ks = 0; ks < NP / 2; ks++) {
        uint32_t pa[4];
        pfrag_a(pa, p, ks);
#pragma unroll
        for (int n = 0; n < NO; n += 2) {
            uint32_t bb[4];
            ldsm_x4_trans(bb, &M[ks * 16 + (lane & 15)][(n + (lane >> 4)) * 8]);
            mma_bf16(acc[n], pa, bb);
            mma_bf16(acc[n + 1], pa, bb + 2);
        }
    }
}

/* A fragments (16 rows x KS*16 cols, KS k-steps) of a row-major bf16 matrix
 * in global memory: rows r0 / r0 + 8 of `base` with row stride `ld`. */
template <int KS>
static __device__ __forceinline__ void load_a_frags(uint32_t (&a)[KS][4], const kn_bf16 *base, size_t ld, int r0,
                                                    int Tn, int t4) {
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            int c = ks * 16 + 2 * t4 + half * 8;
            a[ks][half * 2 + 0] = r0 < Tn ? *reinterpret_cast<const uint32_t *>(base + (size_t)r0 * ld + c) : 0u;
            a[ks][half * 2 + 1] =
                r0 + 8 < Tn ? *reinterpret_cast<const uint32_t *>(base + (size_t)(r0 + 8) * ld + c) : 0u;
        }
}

template <int N> static __device__ __forceinline__ void zero_cfrag(float (&a)[N][4]) {
#pragma unroll
    for (int n = 0; n < N; n++) a[n][0] = a[n][1] = a[n][2] = a[n][3] = 0.0f;
}

/* store a 16 x N*8 C-fragment accumulator (rows r0, r0 + 8) as bf16 */
template <int N>
static __device__ __forceinline__ void store_cfrag(kn_bf16 *base, size_t ld, const float (&acc)[N][4], int r0, int Tn,
                                                   int t4, float mul) {
#pragma unroll
    for (int n = 0; n < N; n++) {
        int col = n * 8 + 2 * t4;
        if (r0 < Tn)
            *reinterpret_cast<__nv_bfloat162 *>(base + (size_t)r0 * ld + col) =
                __floats2bfloat162_rn(acc[n][0] * mul, acc[n][1] * mul);
        if (r0 + 8 < Tn)
            *reinterpret_cast<__nv_bfloat162 *>(base + (size_t)(r0 + 8) * ld + col) =
                __floats2bfloat162_rn(acc[n][2] * mul, acc[n][3] * mul);
    }
}

/* Row statistics across the 4 threads (t4 = 0..3) that hold one C-fragment row */
static __device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
static __device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* The online softmax's running sum and maximum of one row after a tile:
 * l = l * corr + (this tile's row sum over the quad), m = the new maximum */
static __device__ __forceinline__ void online_row(float &l, float &m, float tile_sum, float corr, float m_new) {
    l = l * corr + quad_sum(tile_sum);
    m = m_new;
}

/* acc rows r0 (elements 0, 1) times c0, rows r0 + 8 (elements 2, 3) times c1 */
template <int N> static __device__ __forceinline__ void scale_cfrag(float (&acc)[N][4], float c0, float c1) {
#pragma unroll
    for (int n = 0; n < N; n++) {
        acc[n][0] *= c0;
        acc[n][1] *= c0;
        acc[n][2] *= c1;
        acc[n][3] *= c1;
    }
}

/* D = rowsum(dout * out) per (b, h, t), the tensor-core backward's Dsum
 * (launched by kn_attention_tc.cu; here so that test_attn_tc_emu runs it on
 * the CPU too): 8 lanes per row, one 16-byte load of each operand per lane
 * (two at heads of 128: at sub*8 and 64 + sub*8), rows ordered (b, t, h) so
 * that a warp reads 4 heads' contiguous bytes.  att_dsum_tc_kernel
 * (kn_attention_tc.cu, a thread per row) walks its 64 elements 2 bytes at a
 * time at a 1.5 KB stride between lanes, inside the tensor-core backward's
 * 1.47 ms at d12 B16 T1024.  With every variant but "copy". */
template <int HS>
__global__ void att_dsum_vec_kernel(float *Dsum, const kn_bf16 *dout, const kn_bf16 *out, int B, int Tn, int C,
                                    int NH) {
    size_t rows = (size_t)B * Tn * NH, step = ((size_t)gridDim.x * blockDim.x) >> 3;
    int sub = threadIdx.x & 7;
    /* i0 is the warp's first row (the same in all its lanes: the shuffles below need every lane) */
    for (size_t i0 = ((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 3) & ~(size_t)3; i0 < rows; i0 += step) {
        size_t i = i0 + ((threadIdx.x >> 3) & 3);
        bool live = i < rows;
        int h = (int)(i % NH);
        size_t bt = i / NH;
        float acc = 0.0f;
        if (live) {
#pragma unroll
            for (int c = 0; c < HS / 64; c++) {
                size_t base = bt * C + (size_t)h * HS + c * 64 + sub * 8;
                uint4 a = *reinterpret_cast<const uint4 *>(dout + base),
                      o = *reinterpret_cast<const uint4 *>(out + base);
                const __nv_bfloat162 *a2 = reinterpret_cast<const __nv_bfloat162 *>(&a);
                const __nv_bfloat162 *o2 = reinterpret_cast<const __nv_bfloat162 *>(&o);
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    float2 x = __bfloat1622float2(a2[k]), y = __bfloat1622float2(o2[k]);
                    acc += x.x * y.x + x.y * y.y;
                }
            }
        }
        acc += __shfl_xor_sync(0xffffffffu, acc, 1);
        acc += __shfl_xor_sync(0xffffffffu, acc, 2);
        acc += __shfl_xor_sync(0xffffffffu, acc, 4);
        if (live && sub == 0) {
            int b = (int)(bt / Tn), t = (int)(bt % Tn);
            Dsum[((size_t)b * NH + h) * Tn + t] = acc;
        }
    }
}

/* The pipelined variant (kn_attention_tc_pipe.cu): same contracts as
 * kn_attention_forward_tc_cuda / the backward's dq and dk/dv kernels, whose
 * launchers have checked the arguments; Dsum = rowsum(dout * out) computed.
 * Rows by the geometry G: GPT-2's (kn_att_geo_gpt2) or the grouped-query
 * one (kn_att_geo_gqa, kn_gqa_attention_*_tc_cuda); heads of HS = 64 or 128. */
void kn_att_pipe_forward(kn_bf16 *out, float *lse, const kn_bf16 *qkv, const int32_t *doc, int B, const kn_att_geo &G,
                         int HS, cudaStream_t s);
void kn_att_pipe_backward(kn_bf16 *dqkv, const kn_bf16 *dout, const kn_bf16 *qkv, const float *lse, const float *Dsum,
                          const int32_t *doc, int B, const kn_att_geo &G, int HS, int dkdv_min_blocks, cudaStream_t s);

#endif
