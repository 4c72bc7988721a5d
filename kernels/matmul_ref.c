/* matmul_ref.c - linear layer forward/backward on a packed, cache-blocked,
 * register-tiled SGEMM.
 *
 * gemm computes C (M,N) (+)= A (M,K) * B (K,N) where A and B are strided
 * views (any transpose is a stride swap).  The output is split into MB x NB
 * tasks handed to threads; for each task the K dimension is walked in KC
 * blocks: the B block is packed once into NR-column micro-panels, then each
 * MC-row A block into MR-row micro-panels (zero padded), and a micro-kernel
 * keeps an MR x NR tile in registers: 8 x 32 on 16-float AVX-512 vectors
 * where the CPU has them (picked at run time, so portable builds use it),
 * else 4 x 16 on 8-float vectors.  Each output element is computed by one
 * thread in a fixed order (k ascending within a KC block, rounded multiply
 * then rounded add, blocks added into C in k order) whatever the kernel or
 * the thread count, so results depend on neither.
 */
#include "kn.h"
#include "kn_internal.h"

#include <stdlib.h>
#include <string.h>

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
#define KC 256
#define NB 256 /* columns of a thread task / packed B block, multiple of every NR */

typedef kn_v8f v8f;

typedef struct {
    const float *p;
    ptrdiff_t rs, cs; /* element (r, c) = p[r * rs + c * cs] */
} view;

/* C[mr x nr] (first ? = : +=) Ap(MR x kc) * Bp(kc x NR), MR x NR the kernel's tile */
typedef void (*micro_fn)(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, int mr, int nr, int first);

typedef struct {
    int mr, nr; /* register tile */
    int mc;     /* rows of a packed A block, multiple of mr */
    int mb;     /* rows of a thread task, multiple of mc */
    micro_fn kernel;
} gemm_kernel;

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
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        if (first)
            for (int j = 0; j < nr; j++) cr[j] = tmp[r][j];
        else
            for (int j = 0; j < nr; j++) cr[j] += tmp[r][j];
    }
}

static const gemm_kernel k_portable = {P_MR, P_NR, 64, 256, micro_portable};

#ifdef KN_HAVE_AVX512
/* AVX-512 X_MR x 32 tile: 2 x X_MR zmm accumulators. Per element the same
 * operations in the same order as micro_portable (acc = 0; acc = acc + a*b
 * for k = 0..kc-1, rounded multiply then rounded add, no FMA; then C = acc or
 * C = C + acc), only wider, so both kernels give bit-identical results. */
#define X_MR 8
#define X_NR 32
__attribute__((target("avx512f"))) static void micro_avx512(int kc, const float *ap, const float *bp, float *c,
                                                            ptrdiff_t ldc, int mr, int nr, int first) {
    __m512 acc0[X_MR], acc1[X_MR];
    _Pragma("GCC unroll 16") for (int r = 0; r < X_MR; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(bp + (size_t)k * X_NR), b1 = _mm512_loadu_ps(bp + (size_t)k * X_NR + 16);
        const float *a = ap + (size_t)k * X_MR;
        _Pragma("GCC unroll 16") for (int r = 0; r < X_MR; r++) {
            __m512 av = _mm512_set1_ps(a[r]);
            acc0[r] = _mm512_add_ps(acc0[r], _mm512_mul_ps(av, b0));
            acc1[r] = _mm512_add_ps(acc1[r], _mm512_mul_ps(av, b1));
        }
    }
    __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xFFFF : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
    _Pragma("GCC unroll 16") for (int r = 0; r < X_MR; r++) {
        if (r >= mr) break;
        float *cr = c + r * ldc;
        __m512 v0 = acc0[r], v1 = acc1[r];
        if (!first) {
            v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cr), v0);
            v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cr + 16), v1);
        }
        _mm512_mask_storeu_ps(cr, m0, v0);
        _mm512_mask_storeu_ps(cr + 16, m1, v1);
    }
}

static const gemm_kernel k_avx512 = {X_MR, X_NR, 64, 256, micro_avx512};
#endif

/* KN_MATMUL_ISA_*: -1 until the first gemm (or kn_matmul_set_isa) decides. */
static int g_isa = -1;

static int cpu_has_avx512(void) {
#ifdef KN_HAVE_AVX512
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

static int isa_auto(void) {
    const char *e = getenv("KN_MATMUL_ISA");
    if (e && !strcmp(e, "portable")) return KN_MATMUL_ISA_PORTABLE;
    return cpu_has_avx512() ? KN_MATMUL_ISA_AVX512 : KN_MATMUL_ISA_PORTABLE;
}

int kn_matmul_set_isa(int isa) {
    if (isa == KN_MATMUL_ISA_AUTO) isa = isa_auto();
    else if (isa != KN_MATMUL_ISA_PORTABLE && !(isa == KN_MATMUL_ISA_AVX512 && cpu_has_avx512())) return KN_EINVAL;
    g_isa = isa;
    return isa;
}

static const gemm_kernel *pick_kernel(void) {
    int isa = g_isa;
    if (isa < 0) g_isa = isa = isa_auto(); /* gemm runs it outside parallel regions */
#ifdef KN_HAVE_AVX512
    if (isa == KN_MATMUL_ISA_AVX512) return &k_avx512;
#endif
    return &k_portable;
}

static int gemm(int M, int N, int K, view A, view B, float *C, ptrdiff_t ldc, int accumulate) {
    /* task = MB x NB output block; inside it each KC x NB B panel is packed
     * once and reused by MB/MC packed A panels (packing ~2/256 of the work) */
    const gemm_kernel *kd = pick_kernel();
    const int MR = kd->mr, NR = kd->nr, MC = kd->mc, MB = kd->mb;
    int mt = (M + MB - 1) / MB, nt = (N + NB - 1) / NB;
    long ntiles = (long)mt * nt;
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
                pack_b(bbuf, B, k0, kc, j0, nb, NR);
                for (int ic = 0; ic < mb; ic += MC) {
                    int mc = mb - ic < MC ? mb - ic : MC;
                    pack_a(abuf, A, i0 + ic, mc, k0, kc, MR);
                    for (int jp = 0; jp < nb; jp += NR)
                        for (int ip = 0; ip < mc; ip += MR)
                            kd->kernel(kc, abuf + (size_t)ip * kc, bbuf + (size_t)jp * kc,
                                       C + (ptrdiff_t)(i0 + ic + ip) * ldc + j0 + jp, ldc, mc - ip < MR ? mc - ip : MR,
                                       nb - jp < NR ? nb - jp : NR, first);
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
