/* matmul_ref.c - linear layer forward/backward on a packed, cache-blocked,
 * register-tiled SGEMM.
 *
 * gemm computes C (M,N) (+)= A (M,K) * B (K,N) where A and B are strided
 * views (any transpose is a stride swap).  The output is split into MB x NB
 * tasks handed to threads; for each task the K dimension is walked in KC
 * blocks: the B block is packed once into NR-column micro-panels, then each
 * MC-row A block into MR-row micro-panels (zero padded), and a micro-kernel
 * keeps an MR x NR tile in registers.
 *
 * Two numerics, each with kernels that agree bit for bit whatever the tile,
 * the ISA or the thread count (each output element is computed by one thread
 * in a fixed order: k ascending within a KC block, blocks added into C in k
 * order):
 *  - exact (no FMA): a rounded multiply then a rounded add, as the C standard
 *    mode compiles it anywhere: the portable 4 x 16 kernel on 8-float vectors
 *    and the AVX-512 8 x 32 one.  MKS_MATMUL_ISA=portable pins it; the golden
 *    records are made with it, so they are the same on every CPU.
 *  - FMA: acc = fma(a, b, acc), one rounding per multiply-add: the AVX-512
 *    8 x 48 kernel and the AVX2 6 x 16 one.  Half the vector uops of the
 *    exact kernels (the multiply-add is 2 uops there), so about twice their
 *    peak; the default where the CPU has FMA.  Results differ from the
 *    exact kernels in the last bits (tests/test_kn_ops.c bounds it; the
 *    model tests against PyTorch pass at their bounds with either).
 */
#include "kn.h"
#include "kn_internal.h"

#include <stdlib.h>
#include <string.h>
#include "kn_cpu_size.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define KN_HAVE_AVX512 1
#include <immintrin.h>
#endif

#if defined(__clang__)
/* the order of operations is the result: no a * b + c contracted to FMA */
#pragma clang fp contract(off)
#endif

/* KC is part of the numerics (each element sums k in KC blocks, then adds the
 * block into C): every micro-kernel uses the same KC, so they agree bitwise. */
#define KC KN_CPU_MM_KC

typedef kn_v8f v8f;
typedef float v16f __attribute__((vector_size(64))); /* a zmm under AVX-512, else 2 or 4 vectors */

typedef struct {
    const float *p;
    ptrdiff_t rs, cs; /* element (r, c) = p[r * rs + c * cs] */
} view;

/* C[mr x nr] (first ? = : +=) Ap(MR x kc) * Bp(kc x NR), MR x NR the kernel's tile */
typedef void (*micro_fn)(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, int mr, int nr, int first);
/* the same on an A read in place: element (r, k) of the MR x kc panel at
 * ap[r * ars + k * aks] */
typedef void (*micro_strided_fn)(int kc, const float *ap, ptrdiff_t ars, ptrdiff_t aks, const float *bp, float *c,
                                 ptrdiff_t ldc, int mr, int nr, int first);

typedef struct {
    int mr, nr; /* register tile */
    int mc;     /* rows of a packed A block, multiple of mr */
    micro_fn kernel;
    void (*pack_a)(float *dst, view A, int i0, int mc, int k0, int kc, int MR);
    void (*pack_b)(float *dst, view B, int k0, int kc, int j0, int nc, int NR);
    micro_strided_fn kernel_strided; /* NULL: A is always packed */
} gemm_kernel;

/* C[mr x nr] (first ? = : +=) the accumulator tile (row r at tile + r * tld),
 * mr <= MR, nr <= NR of the kernel that filled it: every micro-kernel's
 * write-back, full or edge tile. One rounded add per element (or a copy), so
 * where the tile comes from and how it is stored cannot change the bits.
 * Inlined into each kernel, so it is compiled for the kernel's ISA: 16- then
 * 8-float vectors where a row has them, then the row's tail element by
 * element. */
static inline __attribute__((always_inline)) void store_tile(float *c, ptrdiff_t ldc, const float *tile, int tld,
                                                             int mr, int nr, int first) {
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        const float *t = tile + (ptrdiff_t)r * tld;
        int j = 0;
        for (; j + 16 <= nr; j += 16) {
            v16f a, b;
            memcpy(&a, t + j, sizeof a);
            if (!first) {
                memcpy(&b, cr + j, sizeof b);
                a = b + a;
            }
            memcpy(cr + j, &a, sizeof a);
        }
        for (; j + 8 <= nr; j += 8) {
            v8f a, b;
            memcpy(&a, t + j, sizeof a);
            if (!first) {
                memcpy(&b, cr + j, sizeof b);
                a = b + a;
            }
            memcpy(cr + j, &a, sizeof a);
        }
        for (; j < nr; j++) cr[j] = first ? t[j] : cr[j] + t[j];
    }
}

/* Ask for the C tile's lines at a micro-kernel's start, so they arrive while
 * its kc steps run instead of stalling the write-back (dweight's += on a
 * gradient of megabytes missed on every tile: 18% of the kernel's samples
 * on the C load, 768 x 4096 dweight, one thread). */
static inline __attribute__((always_inline)) void prefetch_tile(const float *c, ptrdiff_t ldc, int mr, int nr) {
    for (int r = 0; r < mr; r++) {
        const float *cr = c + r * ldc;
        for (int j = 0; j < nr; j += 16) __builtin_prefetch(cr + j, 1, 3);
        __builtin_prefetch(cr + nr - 1, 1, 3);
    }
}

static void pack_a(float *dst, view A, int i0, int mc, int k0, int kc, int MR) {
    for (int ip = 0; ip < mc; ip += MR) {
        float *d = dst + (size_t)ip * kc;
        int rows = mc - ip < MR ? mc - ip : MR;
        if (A.cs == 1) {
            for (int r = 0; r < MR; r++) {
                if (r < rows) {
                    const float *s = A.p + (ptrdiff_t)(i0 + ip + r) * A.rs + k0;
                    for (int k = 0; k < kc; k++) d[k * MR + r] = s[k];
                } else {
                    for (int k = 0; k < kc; k++) d[k * MR + r] = 0.0f;
                }
            }
        } else {
            for (int k = 0; k < kc; k++) {
                const float *s = A.p + (ptrdiff_t)(k0 + k) * A.cs + (ptrdiff_t)(i0 + ip) * A.rs;
                for (int r = 0; r < MR; r++) d[k * MR + r] = r < rows ? s[r * A.rs] : 0.0f;
            }
        }
    }
}

static void pack_b(float *dst, view B, int k0, int kc, int j0, int nc, int NR) {
    for (int jp = 0; jp < nc; jp += NR) {
        float *d = dst + (size_t)jp * kc;
        int cols = nc - jp < NR ? nc - jp : NR;
        if (B.cs == 1) {
            for (int k = 0; k < kc; k++) {
                const float *s = B.p + (ptrdiff_t)(k0 + k) * B.rs + j0 + jp;
                for (int c = 0; c < NR; c++) d[k * NR + c] = c < cols ? s[c] : 0.0f;
            }
        } else {
            for (int c = 0; c < NR; c++) {
                if (c < cols) {
                    const float *s = B.p + (ptrdiff_t)(j0 + jp + c) * B.cs + (ptrdiff_t)k0 * B.rs;
                    for (int k = 0; k < kc; k++) d[k * NR + c] = s[(ptrdiff_t)k * B.rs];
                } else {
                    for (int k = 0; k < kc; k++) d[k * NR + c] = 0.0f;
                }
            }
        }
    }
}

/* Portable 4 x 16 tile on 8-float vectors (AVX2 clone or SSE2 baseline). */
#define P_MR 4
#define P_NR 16
KN_CLONES
static void micro_portable(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, int mr, int nr,
                           int first) {
    v8f acc[P_MR][2];
    memset(acc, 0, sizeof acc);
    prefetch_tile(c, ldc, mr, nr);
    for (int k = 0; k < kc; k++) {
        v8f b0, b1;
        memcpy(&b0, bp + k * P_NR, sizeof b0);
        memcpy(&b1, bp + k * P_NR + 8, sizeof b1);
        const float *a = ap + k * P_MR;
        for (int r = 0; r < P_MR; r++) {
            acc[r][0] += a[r] * b0;
            acc[r][1] += a[r] * b1;
        }
    }
    float tmp[P_MR][P_NR];
    memcpy(tmp, acc, sizeof tmp);
    store_tile(c, ldc, &tmp[0][0], P_NR, mr, nr, first);
}

/* each kernel's mc (third field) is at most KN_CPU_MM_MC_MAX: the A buffer
 * the planner counts (kn_cpu_size.h) */
_Static_assert(64 <= KN_CPU_MM_MC_MAX && 48 <= KN_CPU_MM_MC_MAX, "an A block over the planned buffer");
static const gemm_kernel k_portable = {P_MR, P_NR, 64, micro_portable, pack_a, pack_b, NULL};

#ifdef KN_HAVE_AVX512
/* AVX-512 X_MR x 32 tile: 2 x X_MR zmm accumulators. Per element the same
 * operations in the same order as micro_portable (acc = 0; acc = acc + a*b
 * for k = 0..kc-1, rounded multiply then rounded add, no FMA; then C = acc or
 * C = C + acc), only wider, so both kernels give bit-identical results. */
#define X_MR 8
#define X_NR 32
#define AVX512_FN __attribute__((target("avx512f")))
AVX512_FN static inline __attribute__((always_inline)) void micro_avx512_body(int kc, const float *ap, ptrdiff_t ars,
                                                                              ptrdiff_t aks, const float *bp, float *c,
                                                                              ptrdiff_t ldc, int mr, int nr,
                                                                              int first) {
    __m512 acc0[X_MR], acc1[X_MR];
    _Pragma("GCC unroll 16") for (int r = 0; r < X_MR; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
    prefetch_tile(c, ldc, mr, nr);
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(bp + (size_t)k * X_NR), b1 = _mm512_loadu_ps(bp + (size_t)k * X_NR + 16);
        const float *a = ap + k * aks;
        _Pragma("GCC unroll 16") for (int r = 0; r < X_MR; r++) {
            __m512 av = _mm512_set1_ps(a[r * ars]);
            acc0[r] = _mm512_add_ps(acc0[r], _mm512_mul_ps(av, b0));
            acc1[r] = _mm512_add_ps(acc1[r], _mm512_mul_ps(av, b1));
        }
    }
    float tmp[X_MR][X_NR] __attribute__((aligned(64)));
    _Pragma("GCC unroll 16") for (int r = 0; r < X_MR; r++) {
        _mm512_store_ps(tmp[r], acc0[r]);
        _mm512_store_ps(tmp[r] + 16, acc1[r]);
    }
    store_tile(c, ldc, &tmp[0][0], X_NR, mr, nr, first);
}

AVX512_FN static void micro_avx512(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, int mr, int nr,
                                   int first) {
    micro_avx512_body(kc, ap, 1, X_MR, bp, c, ldc, mr, nr, first);
}

AVX512_FN static void micro_avx512_strided(int kc, const float *ap, ptrdiff_t ars, ptrdiff_t aks, const float *bp,
                                           float *c, ptrdiff_t ldc, int mr, int nr, int first) {
    micro_avx512_body(kc, ap, ars, aks, bp, c, ldc, mr, nr, first);
}

/* The packs only move values (so they cannot change results); the ones that
 * transpose go through 8 x 8 register transposes instead of one scalar
 * store per element, which had made packing a third of the kernel's time. */
/* dst[j * dld + i] = src[i * ld + j] for i, j < 8 */
AVX512_FN static inline void transpose8(float *dst, ptrdiff_t dld, const float *src, ptrdiff_t ld) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ld), r2 = _mm256_loadu_ps(src + 2 * ld),
           r3 = _mm256_loadu_ps(src + 3 * ld), r4 = _mm256_loadu_ps(src + 4 * ld), r5 = _mm256_loadu_ps(src + 5 * ld),
           r6 = _mm256_loadu_ps(src + 6 * ld), r7 = _mm256_loadu_ps(src + 7 * ld);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)),
           s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
           s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)),
           s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)),
           s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)),
           s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2)),
           s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)),
           s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps(dst + dld, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps(dst + 2 * dld, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps(dst + 3 * dld, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps(dst + 4 * dld, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps(dst + 5 * dld, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps(dst + 6 * dld, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_storeu_ps(dst + 7 * dld, _mm256_permute2f128_ps(s3, s7, 0x31));
}

/* pack_a for MR == 8: full row panels of a row-major A (the forward's and
 * dinp's activations) by 8 x 8 transposes, of a column-major A (dweight's
 * dout^T) by 8-float copies; partial panels and other strides as pack_a. */
AVX512_FN static void pack_a_avx512(float *dst, view A, int i0, int mc, int k0, int kc, int MR) {
    int full = mc / X_MR * X_MR;
    for (int ip = 0; ip < full; ip += X_MR) {
        float *d = dst + (size_t)ip * kc;
        if (A.cs == 1) {
            const float *s = A.p + (ptrdiff_t)(i0 + ip) * A.rs + k0;
            int k = 0;
            for (; k + 8 <= kc; k += 8) transpose8(d + (size_t)k * X_MR, X_MR, s + k, A.rs);
            for (; k < kc; k++)
                for (int r = 0; r < X_MR; r++) d[k * X_MR + r] = s[r * A.rs + k];
        } else if (A.rs == 1) {
            for (int k = 0; k < kc; k++)
                _mm256_storeu_ps(d + (size_t)k * X_MR, _mm256_loadu_ps(A.p + (ptrdiff_t)(k0 + k) * A.cs + (i0 + ip)));
        } else {
            pack_a(d, A, i0 + ip, X_MR, k0, kc, MR);
        }
    }
    if (full < mc) pack_a(dst + (size_t)full * kc, A, i0 + full, mc - full, k0, kc, MR);
}

/* pack_b for NR a multiple of 16 (32 or 48): full column panels of a
 * row-major B (dinp's weight, dweight's activations) by 16-float copies, of a
 * column-major B (the forward's weight^T) by 8 x 8 transposes; the rest as
 * pack_b. */
AVX512_FN static void pack_b_avx512(float *dst, view B, int k0, int kc, int j0, int nc, int NR) {
    int full = nc / NR * NR;
    for (int jp = 0; jp < full; jp += NR) {
        float *d = dst + (size_t)jp * kc;
        if (B.cs == 1) {
            for (int k = 0; k < kc; k++) {
                const float *s = B.p + (ptrdiff_t)(k0 + k) * B.rs + j0 + jp;
                for (int c = 0; c < NR; c += 16) _mm512_storeu_ps(d + (size_t)k * NR + c, _mm512_loadu_ps(s + c));
            }
        } else if (B.rs == 1) {
            const float *s = B.p + (ptrdiff_t)(j0 + jp) * B.cs + k0;
            int k = 0;
            for (; k + 8 <= kc; k += 8)
                for (int c = 0; c < NR; c += 8) transpose8(d + (size_t)k * NR + c, NR, s + c * B.cs + k, B.cs);
            for (; k < kc; k++)
                for (int c = 0; c < NR; c++) d[k * NR + c] = s[c * B.cs + k];
        } else {
            pack_b(d, B, k0, kc, j0 + jp, NR, NR);
        }
    }
    if (full < nc) pack_b(dst + (size_t)full * kc, B, k0, kc, j0 + full, nc - full, NR);
}

static const gemm_kernel k_avx512 = {X_MR, X_NR, 64, micro_avx512, pack_a_avx512, pack_b_avx512, micro_avx512_strided};

/* AVX-512 FMA X_MR x 48 tile: 24 zmm accumulators (3 per row), so a k step
 * is 24 FMAs for 3 vector loads and 8 broadcasts (the 8 x 32 tile: 16 for 2
 * and 8). Per element acc = fma(a, b, acc) for k = 0..kc-1, then C = acc or
 * C = C + acc: the same operations in the same order as micro_avx2_fma, so
 * the two FMA kernels agree bitwise. */
#define XF_NR 48
#define AVX512_FMA_FN __attribute__((target("avx512f,fma")))
AVX512_FMA_FN static inline __attribute__((always_inline)) void micro_avx512_fma_body(int kc, const float *ap,
                                                                                      ptrdiff_t ars, ptrdiff_t aks,
                                                                                      const float *bp, float *c,
                                                                                      ptrdiff_t ldc, int mr, int nr,
                                                                                      int first) {
    __m512 acc0[X_MR], acc1[X_MR], acc2[X_MR];
    _Pragma("GCC unroll 16") for (int r = 0; r < X_MR; r++) acc0[r] = acc1[r] = acc2[r] = _mm512_setzero_ps();
    prefetch_tile(c, ldc, mr, nr);
    for (int k = 0; k < kc; k++) {
        const float *b = bp + (size_t)k * XF_NR;
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), b2 = _mm512_loadu_ps(b + 32);
        const float *a = ap + k * aks;
        _Pragma("GCC unroll 16") for (int r = 0; r < X_MR; r++) {
            __m512 av = _mm512_set1_ps(a[r * ars]);
            acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
            acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
            acc2[r] = _mm512_fmadd_ps(av, b2, acc2[r]);
        }
    }
    float tmp[X_MR][XF_NR] __attribute__((aligned(64)));
    _Pragma("GCC unroll 16") for (int r = 0; r < X_MR; r++) {
        _mm512_store_ps(tmp[r], acc0[r]);
        _mm512_store_ps(tmp[r] + 16, acc1[r]);
        _mm512_store_ps(tmp[r] + 32, acc2[r]);
    }
    store_tile(c, ldc, &tmp[0][0], XF_NR, mr, nr, first);
}

AVX512_FMA_FN static void micro_avx512_fma(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, int mr,
                                           int nr, int first) {
    micro_avx512_fma_body(kc, ap, 1, X_MR, bp, c, ldc, mr, nr, first);
}

AVX512_FMA_FN static void micro_avx512_fma_strided(int kc, const float *ap, ptrdiff_t ars, ptrdiff_t aks,
                                                   const float *bp, float *c, ptrdiff_t ldc, int mr, int nr,
                                                   int first) {
    micro_avx512_fma_body(kc, ap, ars, aks, bp, c, ldc, mr, nr, first);
}

static const gemm_kernel k_avx512_fma = {
    X_MR, XF_NR, 64, micro_avx512_fma, pack_a_avx512, pack_b_avx512, micro_avx512_fma_strided};

/* AVX2 FMA 6 x 16 tile (12 ymm accumulators: enough independent FMAs to
 * cover their latency on two ports), for FMA CPUs without AVX-512. */
#define F_MR 6
#define F_NR 16
#define AVX2_FMA_FN __attribute__((target("avx2,fma")))
AVX2_FMA_FN static inline __attribute__((always_inline)) void micro_avx2_fma_body(int kc, const float *ap,
                                                                                  ptrdiff_t ars, ptrdiff_t aks,
                                                                                  const float *bp, float *c,
                                                                                  ptrdiff_t ldc, int mr, int nr,
                                                                                  int first) {
    __m256 acc0[F_MR], acc1[F_MR];
    _Pragma("GCC unroll 8") for (int r = 0; r < F_MR; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();
    prefetch_tile(c, ldc, mr, nr);
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(bp + (size_t)k * F_NR), b1 = _mm256_loadu_ps(bp + (size_t)k * F_NR + 8);
        const float *a = ap + k * aks;
        _Pragma("GCC unroll 8") for (int r = 0; r < F_MR; r++) {
            __m256 av = _mm256_broadcast_ss(a + r * ars);
            acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
            acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
        }
    }
    float tmp[F_MR][F_NR];
    _Pragma("GCC unroll 8") for (int r = 0; r < F_MR; r++) {
        _mm256_storeu_ps(tmp[r], acc0[r]);
        _mm256_storeu_ps(tmp[r] + 8, acc1[r]);
    }
    store_tile(c, ldc, &tmp[0][0], F_NR, mr, nr, first);
}

AVX2_FMA_FN static void micro_avx2_fma(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, int mr,
                                       int nr, int first) {
    micro_avx2_fma_body(kc, ap, 1, F_MR, bp, c, ldc, mr, nr, first);
}

AVX2_FMA_FN static void micro_avx2_fma_strided(int kc, const float *ap, ptrdiff_t ars, ptrdiff_t aks, const float *bp,
                                               float *c, ptrdiff_t ldc, int mr, int nr, int first) {
    micro_avx2_fma_body(kc, ap, ars, aks, bp, c, ldc, mr, nr, first);
}

static const gemm_kernel k_avx2_fma = {F_MR, F_NR, 48, micro_avx2_fma, pack_a, pack_b, micro_avx2_fma_strided};
#endif

/* KN_MATMUL_ISA_*: -1 until the first gemm (or kn_matmul_set_isa) decides. */
static int g_isa = -1;
/* 0: every A panel packed (kn_matmul_set_a_in_place, for the tests) */
static int g_a_in_place = 1;

int kn_matmul_set_a_in_place(int on) { return __atomic_exchange_n(&g_a_in_place, on != 0, __ATOMIC_RELAXED); }

static int cpu_has(int isa) {
#ifdef KN_HAVE_AVX512
    __builtin_cpu_init();
    switch (isa) {
    case KN_MATMUL_ISA_PORTABLE: return 1;
    case KN_MATMUL_ISA_AVX512: return __builtin_cpu_supports("avx512f");
    case KN_MATMUL_ISA_AVX512_FMA: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    case KN_MATMUL_ISA_AVX2_FMA: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default: return 0;
    }
#else
    return isa == KN_MATMUL_ISA_PORTABLE;
#endif
}

/* MKS_MATMUL_ISA names a kernel (portable, avx512, avx2-fma, avx512-fma). A
 * named kernel this CPU cannot run gives way to one of the same numerics
 * (avx512 to portable, avx512-fma to avx2-fma) where there is one; else, or
 * with no name, the fastest it can run: AVX-512 FMA, AVX2 FMA, portable. */
static int isa_auto(void) {
    static const struct {
        const char *name;
        int isa;
    } names[] = {{"portable", KN_MATMUL_ISA_PORTABLE},
                 {"avx512", KN_MATMUL_ISA_AVX512},
                 {"avx2-fma", KN_MATMUL_ISA_AVX2_FMA},
                 {"avx512-fma", KN_MATMUL_ISA_AVX512_FMA}};
    const char *e = getenv("MKS_MATMUL_ISA");
    for (size_t i = 0; e && i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(e, names[i].name)) continue;
        int isa = names[i].isa;
        if (!cpu_has(isa)) isa = isa == KN_MATMUL_ISA_AVX512 ? KN_MATMUL_ISA_PORTABLE : KN_MATMUL_ISA_AVX2_FMA;
        if (cpu_has(isa)) return isa;
        break;
    }
    if (cpu_has(KN_MATMUL_ISA_AVX512_FMA)) return KN_MATMUL_ISA_AVX512_FMA;
    if (cpu_has(KN_MATMUL_ISA_AVX2_FMA)) return KN_MATMUL_ISA_AVX2_FMA;
    return KN_MATMUL_ISA_PORTABLE;
}

int kn_matmul_set_isa(int isa) {
    if (isa == KN_MATMUL_ISA_AUTO) isa = isa_auto();
    else if (!cpu_has(isa)) return KN_EINVAL;
    __atomic_store_n(&g_isa, isa, __ATOMIC_RELAXED);
    return isa;
}

/* the kernel in use, deciding it on first use (atomic: matmuls may run on
 * several user threads at once, each deciding the same value) */
static int current_isa(void) {
    int isa = __atomic_load_n(&g_isa, __ATOMIC_RELAXED);
    if (isa < 0) {
        isa = isa_auto();
        __atomic_store_n(&g_isa, isa, __ATOMIC_RELAXED);
    }
    return isa;
}

int kn_matmul_is_fma(void) {
    int isa = current_isa();
#ifdef KN_HAVE_AVX512
    return isa == KN_MATMUL_ISA_AVX512_FMA || isa == KN_MATMUL_ISA_AVX2_FMA;
#else
    (void)isa;
    return 0; /* pick_kernel runs the portable kernel whatever was asked */
#endif
}

static const gemm_kernel *pick_kernel(void) {
    int isa = current_isa();
#ifdef KN_HAVE_AVX512
    switch (isa) {
    case KN_MATMUL_ISA_AVX512: return &k_avx512;
    case KN_MATMUL_ISA_AVX512_FMA: return &k_avx512_fma;
    case KN_MATMUL_ISA_AVX2_FMA: return &k_avx2_fma;
    default: break;
    }
#endif
    return &k_portable;
}

/* Tasks: the output split into mt x nt blocks of up to TASK_M x TASK_N
 * (inside one, each KC x NB B block is packed once and each MC-row A block
 * once per B block, so packing costs ~1/MB + 1/NB of the multiply-adds; NB
 * is capped so the B buffer stays the 256 KiB per thread the memory planner
 * counts, train/plan.c), made smaller until there are enough to keep every
 * thread busy: a count that is a multiple of the threads, or at least 4 per
 * thread. */
#define TASK_M 1024
#define TASK_N KN_CPU_MM_NB_MAX
static void plan_tasks(int M, int N, const gemm_kernel *kd, int *MB, int *NB) {
    int nth = 1;
#ifdef _OPENMP
    nth = omp_in_parallel() ? 1 : omp_get_max_threads();
#endif
    int mt = (M + TASK_M - 1) / TASK_M, nt = (N + TASK_N - 1) / TASK_N;
    while (mt * nt % nth && mt * nt < 4 * nth && (mt < M / kd->mr || nt < N / kd->nr)) {
        if ((M / mt >= N / nt && mt < M / kd->mr) || nt >= N / kd->nr) mt++;
        else nt++;
    }
    int mb = (M + mt - 1) / mt, nb = (N + nt - 1) / nt;
    *MB = (mb + kd->mc - 1) / kd->mc * kd->mc;
    *NB = (nb + kd->nr - 1) / kd->nr * kd->nr;
    if (*NB > TASK_N) *NB = TASK_N / kd->nr * kd->nr;
}

static int gemm(int M, int N, int K, view A, view B, float *C, ptrdiff_t ldc, int accumulate) {
    const gemm_kernel *kd = pick_kernel();
    const int MR = kd->mr, NR = kd->nr, MC = kd->mc;
    int MB, NB;
    plan_tasks(M, N, kd, &MB, &NB);
    int mt = (M + MB - 1) / MB, nt = (N + NB - 1) / NB;
    long ntiles = (long)mt * nt;
    /* A row-major (the forward's activations, dinp's dout): the kernel reads
     * full panels in place, 8 rows at a time, instead of a transposed copy
     * per B block (pack_a was ~14% of the matmul's samples, one thread, on
     * the 100M Llama shapes). A column-major (dweight's dout^T) stays
     * packed: read in place, a k step is a row of dout OC floats away, a
     * new page per step on the logits' 32000 (measured 10-20% slower). */
    int strided = kd->kernel_strided && A.cs == 1 && __atomic_load_n(&g_a_in_place, __ATOMIC_RELAXED);
    int err = 0;
    KN_OMP(parallel) {
        float *abuf = aligned_alloc(64, sizeof(float) * MC * KC);
        float *bbuf = aligned_alloc(64, sizeof(float) * KC * NB);
        if (!abuf || !bbuf) {
            KN_OMP(atomic write)
            err = 1;
        }
        KN_OMP(for schedule(dynamic, 1))
        for (long tile = 0; tile < ntiles; tile++) {
            if (!abuf || !bbuf) continue;
            int i0 = (int)(tile / nt) * MB, j0 = (int)(tile % nt) * NB;
            int mb = M - i0 < MB ? M - i0 : MB;
            int nb = N - j0 < NB ? N - j0 : NB;
            for (int k0 = 0; k0 < K; k0 += KC) {
                int kc = K - k0 < KC ? K - k0 : KC;
                int first = (k0 == 0 && !accumulate);
                kd->pack_b(bbuf, B, k0, kc, j0, nb, NR);
                for (int ic = 0; ic < mb; ic += MC) {
                    int mc = mb - ic < MC ? mb - ic : MC;
                    /* full MR-row panels read in place; the packed buffer
                     * holds the rest (the zero-padded last panel) */
                    int direct = strided ? mc / MR * MR : 0;
                    if (direct < mc)
                        kd->pack_a(abuf + (size_t)direct * kc, A, i0 + ic + direct, mc - direct, k0, kc, MR);
                    for (int jp = 0; jp < nb; jp += NR)
                        for (int ip = 0; ip < mc; ip += MR) {
                            float *cp = C + (ptrdiff_t)(i0 + ic + ip) * ldc + j0 + jp;
                            int nr = nb - jp < NR ? nb - jp : NR;
                            if (ip < direct)
                                kd->kernel_strided(kc, A.p + (ptrdiff_t)(i0 + ic + ip) * A.rs + (ptrdiff_t)k0 * A.cs,
                                                   A.rs, A.cs, bbuf + (size_t)jp * kc, cp, ldc, MR, nr, first);
                            else
                                kd->kernel(kc, abuf + (size_t)ip * kc, bbuf + (size_t)jp * kc, cp, ldc,
                                           mc - ip < MR ? mc - ip : MR, nr, first);
                        }
                }
            }
        }
        free(abuf);
        free(bbuf);
    }
    return err ? KN_ENOMEM : KN_OK;
}

int kn_matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    if (!out || !inp || !weight || N <= 0 || C <= 0 || OC <= 0) return KN_EINVAL;
    view A = {inp, C, 1};
    view B = {weight, 1, C}; /* B(k, j) = weight[j, k] */
    int rc = gemm(N, OC, C, A, B, out, OC, 0);
    if (rc) return rc;
    if (bias) {
        KN_OMP(parallel for)
        for (int n = 0; n < N; n++) {
            float *o = out + (size_t)n * OC;
            for (int j = 0; j < OC; j++) o[j] += bias[j];
        }
    }
    return KN_OK;
}

int kn_matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, int N, int C, int OC) {
    if (!dout || N <= 0 || C <= 0 || OC <= 0) return KN_EINVAL;
    if ((dinp && !weight) || (dweight && !inp)) return KN_EINVAL;
    int rc;
    if (dinp) {
        view A = {dout, OC, 1};
        view B = {weight, C, 1};
        if ((rc = gemm(N, C, OC, A, B, dinp, C, 0))) return rc;
    }
    if (dweight) {
        view A = {dout, 1, OC}; /* A(o, n) = dout[n, o] */
        view B = {inp, C, 1};
        if ((rc = gemm(OC, C, N, A, B, dweight, C, 1))) return rc;
    }
    if (dbias) {
        enum { CB = 64 };
        int nb = (OC + CB - 1) / CB;
        KN_OMP(parallel for schedule(static))
        for (int blk = 0; blk < nb; blk++) {
            int o0 = blk * CB, oc = OC - o0 < CB ? OC - o0 : CB;
            float acc[CB] = {0};
            for (int n = 0; n < N; n++) {
                const float *d = dout + (size_t)n * OC + o0;
                for (int j = 0; j < oc; j++) acc[j] += d[j];
            }
            for (int j = 0; j < oc; j++) dbias[o0 + j] += acc[j];
        }
    }
    return KN_OK;
}
