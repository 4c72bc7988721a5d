/* llama_attn_fma_ref.c - the CPU model's grouped-query attention as blocked
 * matmuls on the FMA numerics (what kn_gqa_attention_*_cpu run when the
 * matmul runs its FMA kernels: kn_matmul_is_fma).
 *
 * Per (batch row, head) the forward is S = Q K^T in tiles of RB query rows x
 * KB keys (K^T packed per key block; tiles wholly above the diagonal are
 * skipped), the softmax in place in att, then O = P V over the keys up to
 * the tile's last row. The backward, per (batch row, KV head) and key block:
 * dP = dO V^T, dS = P (dP - D) / sqrt(hs) with D = rowsum(dO * O) (which is
 * rowsum(P * dP), so a tile needs no other tile's dP), dQ += dS K, and the
 * group's query heads summed into dK^T += Q^T dS and dV^T += dO^T P, the
 * group's q heads being K steps of one wider matmul.
 *
 * Numerics: every output element is one chain of fused multiply-adds in k
 * order (keys ascending for S, O, dQ; query head, then query row ascending
 * for dK, dV), whatever the tile, vector width or thread count, so results
 * are deterministic and the same on AVX2 and AVX-512 machines (16-float
 * AVX-512 tiles where the CPU has them, else 8-float AVX2 ones:
 * kn_gqa_attention_fma_lanes). Entries that the causal or
 * document mask hides are exact zeros in P and dS, so a tile that covers
 * some of them adds 0 products. Against the exact references
 * (kn_gqa_attention_*_ref) the results differ in the last bits
 * (tests/test_llama_cpu_kernels.c bounds them).
 *
 * Workspace: malloc'd per thread, bounded by the head size and the tile
 * sizes, not by T: forward HS x KB floats, backward 3 HS x KB + RB x KB. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn.h"
#include "kn_cpu_size.h"
#include "kn_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FMA_OK 1
#define FMA_TARGET __attribute__((target("avx2,fma")))
#else
#define FMA_OK 0
#define FMA_TARGET
#endif

enum {
    RB = KN_CPU_ATT_RB,
    KB = KN_CPU_ATT_KB
}; /* query rows and keys of a tile (the planner counts their buffers: kn_cpu_size.h) */

#if FMA_OK
/* C (mr x 8 nv) (= or +=) A B, A(i, k) = a[i ars + k aks], B rows ldb apart;
 * the last vector's lanes >= nlast (when nlast < 8) are neither read nor
 * written. Inlined with constant mr, nv so the accumulators stay in
 * registers. */
FMA_TARGET static inline __attribute__((always_inline)) void tile(int mr, int nv, int nlast, int K, const float *a,
                                                                  ptrdiff_t ars, ptrdiff_t aks, const float *b,
                                                                  ptrdiff_t ldb, float *c, ptrdiff_t ldc, int acc) {
    __m256 cc[6][2];
    __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nlast), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    int tail = nlast < 8;
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) {
            const float *p = c + r * ldc + 8 * v;
            if (!acc) cc[r][v] = _mm256_setzero_ps();
            else if (tail && v == nv - 1) cc[r][v] = _mm256_maskload_ps(p, mask);
            else cc[r][v] = _mm256_loadu_ps(p);
        }
    for (int k = 0; k < K; k++) {
        const float *bk = b + k * ldb, *ak = a + k * aks;
        __m256 bv[2];
        for (int v = 0; v < nv; v++)
            bv[v] = tail && v == nv - 1 ? _mm256_maskload_ps(bk + 8 * v, mask) : _mm256_loadu_ps(bk + 8 * v);
        for (int r = 0; r < mr; r++) {
            __m256 av = _mm256_broadcast_ss(ak + r * ars);
            for (int v = 0; v < nv; v++) cc[r][v] = _mm256_fmadd_ps(av, bv[v], cc[r][v]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) {
            float *p = c + r * ldc + 8 * v;
            if (tail && v == nv - 1) _mm256_maskstore_ps(p, mask, cc[r][v]);
            else _mm256_storeu_ps(p, cc[r][v]);
        }
}

/* one 16-column (or narrower) panel, rows in tiles of 6, 4, 2, 1 */
#define ROWS(MR, NV, NL)                                                                                               \
    for (; i + MR <= M; i += MR) tile(MR, NV, NL, K, a + i * ars, ars, aks, b, ldb, c + i * ldc, ldc, acc)
FMA_TARGET static void panel16(int M, int K, const float *a, ptrdiff_t ars, ptrdiff_t aks, const float *b,
                               ptrdiff_t ldb, float *c, ptrdiff_t ldc, int acc) {
    int i = 0;
    ROWS(6, 2, 8);
    ROWS(4, 2, 8);
    ROWS(2, 2, 8);
    ROWS(1, 2, 8);
}
FMA_TARGET static void panel_n(int M, int n, int K, const float *a, ptrdiff_t ars, ptrdiff_t aks, const float *b,
                               ptrdiff_t ldb, float *c, ptrdiff_t ldc, int acc) {
    int i = 0;
    if (n > 8) {
        ROWS(6, 2, n - 8);
        ROWS(4, 2, n - 8);
        ROWS(2, 2, n - 8);
        ROWS(1, 2, n - 8);
    } else {
        ROWS(6, 1, n);
        ROWS(4, 1, n);
        ROWS(2, 1, n);
        ROWS(1, 1, n);
    }
}
#undef ROWS

/* The same tiles on 16-float AVX-512 vectors (twice the multiply-adds per
 * instruction; the same FMA chain per element, so the same bits): C (mr x
 * 16 nv), lanes >= nlast of the last vector masked off. */
#define T512 __attribute__((target("avx512f,avx2,fma")))
T512 static inline __attribute__((always_inline)) void tile512(int mr, int nv, int nlast, int K, const float *a,
                                                               ptrdiff_t ars, ptrdiff_t aks, const float *b,
                                                               ptrdiff_t ldb, float *c, ptrdiff_t ldc, int acc) {
    __m512 cc[6][2];
    const __mmask16 full = 0xFFFF, last = nlast >= 16 ? full : (__mmask16)((1u << nlast) - 1u);
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++)
            cc[r][v] =
                acc ? _mm512_maskz_loadu_ps(v == nv - 1 ? last : full, c + r * ldc + 16 * v) : _mm512_setzero_ps();
    for (int k = 0; k < K; k++) {
        const float *bk = b + k * ldb, *ak = a + k * aks;
        __m512 bv[2];
        for (int v = 0; v < nv; v++) bv[v] = _mm512_maskz_loadu_ps(v == nv - 1 ? last : full, bk + 16 * v);
        for (int r = 0; r < mr; r++) {
            __m512 av = _mm512_set1_ps(ak[r * ars]);
            for (int v = 0; v < nv; v++) cc[r][v] = _mm512_fmadd_ps(av, bv[v], cc[r][v]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, v == nv - 1 ? last : full, cc[r][v]);
}
#define ROWS(MR, NV, NL)                                                                                               \
    for (; i + MR <= M; i += MR) tile512(MR, NV, NL, K, a + i * ars, ars, aks, b, ldb, c + i * ldc, ldc, acc)
T512 static void panel32(int M, int K, const float *a, ptrdiff_t ars, ptrdiff_t aks, const float *b, ptrdiff_t ldb,
                         float *c, ptrdiff_t ldc, int acc) {
    int i = 0;
    ROWS(6, 2, 16);
    ROWS(4, 2, 16);
    ROWS(2, 2, 16);
    ROWS(1, 2, 16);
}
T512 static void panel512_n(int M, int n, int K, const float *a, ptrdiff_t ars, ptrdiff_t aks, const float *b,
                            ptrdiff_t ldb, float *c, ptrdiff_t ldc, int acc) {
    int i = 0;
    if (n > 16) {
        ROWS(6, 2, n - 16);
        ROWS(4, 2, n - 16);
        ROWS(2, 2, n - 16);
        ROWS(1, 2, n - 16);
    } else {
        ROWS(6, 1, n);
        ROWS(4, 1, n);
        ROWS(2, 1, n);
        ROWS(1, 1, n);
    }
}
#undef ROWS
T512 static void cols512(int M, int N, int K, const float *a, ptrdiff_t ars, ptrdiff_t aks, const float *b,
                         ptrdiff_t ldb, float *c, ptrdiff_t ldc, int acc) {
    int j = 0;
    for (; j + 32 <= N; j += 32) panel32(M, K, a, ars, aks, b + j, ldb, c + j, ldc, acc);
    if (j < N) panel512_n(M, N - j, K, a, ars, aks, b + j, ldb, c + j, ldc, acc);
}

/* vector lanes of the tiles: 16 (AVX-512F) or 8 (AVX2); 0 until chosen */
static int g_lanes;

/* C (M x N) (= or +=) A (M x K) B (K x N): each element one FMA chain in k
 * order. Column panels outermost, so a panel of B stays in L1 while the
 * rows go by. Not kn_matmul (matmul_ref.c): that is the layer product
 * (packed panels, sums in KC blocks added into C, its own parallel region),
 * while these are small tiles on strided views of the qkv rows, called
 * inside a parallel region over heads, with one chain over the whole K. */
FMA_TARGET static void gemm_fma(int M, int N, int K, const float *a, ptrdiff_t ars, ptrdiff_t aks, const float *b,
                                ptrdiff_t ldb, float *c, ptrdiff_t ldc, int acc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { /* an empty sum: 0, or C unchanged */
        if (!acc)
            for (int i = 0; i < M; i++) memset(c + i * ldc, 0, sizeof(float) * (size_t)N);
        return;
    }
    if (__atomic_load_n(&g_lanes, __ATOMIC_RELAXED) == 16) {
        cols512(M, N, K, a, ars, aks, b, ldb, c, ldc, acc);
        return;
    }
    int j = 0;
    for (; j + 16 <= N; j += 16) panel16(M, K, a, ars, aks, b + j, ldb, c + j, ldc, acc);
    if (j < N) panel_n(M, N - j, K, a, ars, aks, b + j, ldb, c + j, ldc, acc);
}
#endif

int kn_gqa_attention_fma_lanes(int lanes) {
#if FMA_OK
    int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    if (lanes == 0) lanes = has512 ? 16 : 8;
    else if (!(lanes == 8 || (lanes == 16 && has512))) return KN_EINVAL;
    __atomic_store_n(&g_lanes, lanes, __ATOMIC_RELAXED);
    return lanes;
#else
    return lanes == 0 ? 0 : KN_EINVAL;
#endif
}

#if FMA_OK

/* dst (hs x n) = src^T, src rows rs apart */
static void transpose_in(float *dst, const float *src, ptrdiff_t rs, int n, int hs) {
    for (int t = 0; t < n; t++)
        for (int d = 0; d < hs; d++) dst[(size_t)d * n + t] = src[t * rs + d];
}

/* lanes j + l < n of an 8-float vector */
FMA_TARGET static inline __m256i lanes_below(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* expf on 8 lanes: Cephes' range reduction (x = n ln2 + r, ln2 in two parts)
 * and degree-6 polynomial (within ~2 ulp of expf); 0 below -87.3 (where
 * expf is subnormal or 0), so the -inf of hidden entries gives 0. */
FMA_TARGET static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3f);
    __m256 xc = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.37f)), lo);
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_GE_OQ));
}

/* which of the 8 keys t2 = j.. (lanes below n) row t sees: same document */
FMA_TARGET static inline __m256 visible8(const int32_t *docrow, int t, int j, __m256i in) {
    if (!docrow) return _mm256_castsi256_ps(in);
    __m256i d = _mm256_maskload_epi32((const int *)docrow + j, in);
    return _mm256_castsi256_ps(_mm256_and_si256(in, _mm256_cmpeq_epi32(d, _mm256_set1_epi32(docrow[t]))));
}

/* sum of x[i] y[i]: 8 FMA chains, added in double in a fixed order */
FMA_TARGET static inline float dot8(const float *x, const float *y, int n) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        __m256i in = lanes_below(n - i);
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(x + i, in), _mm256_maskload_ps(y + i, in), acc);
    }
    __m256d s =
        _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(acc)), _mm256_cvtps_pd(_mm256_extractf128_ps(acc, 1)));
    double d4[4];
    _mm256_storeu_pd(d4, s);
    return (float)((d4[0] + d4[1]) + (d4[2] + d4[3]));
}

/* softmax of row t of att in place: the scaled visible scores t2 <= t, 0
 * for hidden and future entries; 8 lanes at a time, the sum of the
 * exponentials in double in a fixed order */
FMA_TARGET static void softmax_row(float *a, const int32_t *docrow, int t, int T, float scale) {
    const int n = t + 1;
    const __m256 ninf = _mm256_set1_ps(-INFINITY), vs = _mm256_set1_ps(scale);
    __m256 vmx = ninf;
    for (int j = 0; j < n; j += 8) {
        __m256i in = lanes_below(n - j);
        __m256 x = _mm256_mul_ps(_mm256_maskload_ps(a + j, in), vs);
        x = _mm256_blendv_ps(ninf, x, visible8(docrow, t, j, in));
        _mm256_maskstore_ps(a + j, in, x);
        vmx = _mm256_max_ps(vmx, x);
    }
    float m8[8];
    _mm256_storeu_ps(m8, vmx);
    float mx = m8[0];
    for (int l = 1; l < 8; l++) mx = m8[l] > mx ? m8[l] : mx;
    const __m256 vm = _mm256_set1_ps(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (int j = 0; j < n; j += 8) {
        __m256i in = lanes_below(n - j);
        /* hidden lanes hold -inf (exp 0); lanes past n load 0 and are masked */
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(a + j, in), vm)), _mm256_castsi256_ps(in));
        _mm256_maskstore_ps(a + j, in, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double d8[4];
    _mm256_storeu_pd(d8, _mm256_add_pd(s0, s1));
    const __m256 inv = _mm256_set1_ps((float)(1.0 / ((d8[0] + d8[1]) + (d8[2] + d8[3]))));
    for (int j = 0; j < n; j += 8) {
        __m256i in = lanes_below(n - j);
        _mm256_maskstore_ps(a + j, in, _mm256_mul_ps(_mm256_maskload_ps(a + j, in), inv));
    }
    memset(a + n, 0, sizeof(float) * (size_t)(T - n));
}

/* query head h of batch row b: att rows and out rows */
FMA_TARGET static void head_fwd(float *out_b, float *att_bh, const float *base, const int32_t *docrow, float *kt, int T,
                                size_t RS, size_t C, size_t qo, size_t ko, size_t vo, int hs, float scale) {
    for (int k0 = 0; k0 < T; k0 += KB) {
        int kw = T - k0 < KB ? T - k0 : KB;
        transpose_in(kt, base + (size_t)k0 * RS + ko, (ptrdiff_t)RS, kw, hs);
        /* row tiles holding a row >= k0: the first one is k0's */
        for (int t0 = k0 / RB * RB; t0 < T; t0 += RB) {
            int rows = T - t0 < RB ? T - t0 : RB, t1 = t0 + rows - 1;
            int n = t1 + 1 - k0 < kw ? t1 + 1 - k0 : kw;
            gemm_fma(rows, n, hs, base + (size_t)t0 * RS + qo, (ptrdiff_t)RS, 1, kt, kw, att_bh + (size_t)t0 * T + k0,
                     T, 0);
        }
    }
    for (int t = 0; t < T; t++) softmax_row(att_bh + (size_t)t * T, docrow, t, T, scale);
    for (int t0 = 0; t0 < T; t0 += RB) {
        int rows = T - t0 < RB ? T - t0 : RB;
        gemm_fma(rows, hs, t0 + rows, att_bh + (size_t)t0 * T, T, 1, base + vo, (ptrdiff_t)RS, out_b + t0 * C + qo,
                 (ptrdiff_t)C, 0);
    }
}
#endif

int kn_gqa_attention_forward_fma(float *out, float *att, const float *qkv, const int32_t *doc, int B, int T, int NH,
                                 int NKV, int HS) {
#if FMA_OK
    if (!__atomic_load_n(&g_lanes, __ATOMIC_RELAXED)) kn_gqa_attention_fma_lanes(0);
    size_t C = (size_t)NH * HS, KVd = (size_t)NKV * HS, RS = C + 2 * KVd;
    int rep = NH / NKV, err = 0;
    float scale = 1.0f / sqrtf((float)HS);
    long pairs = (long)B * NH;
    KN_OMP(parallel) {
        float *kt = malloc(sizeof(float) * (size_t)HS * KB);
        if (!kt) {
            KN_OMP(atomic write)
            err = 1;
        }
        KN_OMP(for schedule(dynamic, 1))
        for (long bh = 0; bh < pairs; bh++) {
            if (!kt) continue;
            int b = (int)(bh / NH), h = (int)(bh % NH);
            size_t g = (size_t)(h / rep);
            head_fwd(out + (size_t)b * T * C, att + (size_t)bh * T * T, qkv + (size_t)b * T * RS,
                     doc ? doc + (size_t)b * T : NULL, kt, T, RS, C, (size_t)h * HS, C + g * HS, C + KVd + g * HS, HS,
                     scale);
        }
        free(kt);
    }
    return err ? KN_ENOMEM : KN_OK;
#else
    (void)out, (void)att, (void)qkv, (void)doc, (void)B, (void)T, (void)NH, (void)NKV, (void)HS;
    return KN_EINVAL;
#endif
}

#if FMA_OK
typedef struct {
    float *vt, *dkt, *dvt, *ds; /* V^T, dK^T, dV^T of a key block; a dS tile */
} bwd_ws;

/* KV head of batch row b: every query head of the group, key block by key
 * block; dq of the group's heads accumulated across key blocks (the first
 * writes), dK/dV of the key block written at its end. */
FMA_TARGET static void group_bwd(float *db, const float *dout_b, const float *out_b, const float *base,
                                 const float *att_b, const int32_t *docrow, const bwd_ws *w, int T, size_t RS, size_t C,
                                 int h_first, int rep, size_t ko, size_t vo, int hs, float scale) {
    for (int k0 = 0; k0 < T; k0 += KB) {
        int kw = T - k0 < KB ? T - k0 : KB;
        transpose_in(w->vt, base + (size_t)k0 * RS + vo, (ptrdiff_t)RS, kw, hs);
        memset(w->dkt, 0, sizeof(float) * (size_t)hs * kw);
        memset(w->dvt, 0, sizeof(float) * (size_t)hs * kw);
        for (int h = h_first; h < h_first + rep; h++) {
            size_t qo = (size_t)h * hs;
            const float *att_bh = att_b + (size_t)h * T * T;
            for (int t0 = k0 / RB * RB; t0 < T; t0 += RB) {
                int rows = T - t0 < RB ? T - t0 : RB, t1 = t0 + rows - 1;
                int n = t1 + 1 - k0 < kw ? t1 + 1 - k0 : kw;
                const float *dO = dout_b + (size_t)t0 * C + qo, *P = att_bh + (size_t)t0 * T + k0;
                /* dP = dO V^T into the dS tile (rows x n, kw apart) */
                gemm_fma(rows, n, hs, dO, (ptrdiff_t)C, 1, w->vt, kw, w->ds, kw, 0);
                for (int r = 0; r < rows; r++) {
                    int t = t0 + r;
                    /* D = rowsum(dO * O) (hs products: cheap beside the tile, so
                     * formed again for each key block) */
                    float D = dot8(dO + (size_t)r * C, out_b + (size_t)t * C + qo, hs);
                    float *ds = w->ds + (size_t)r * kw;
                    const float *p = P + (size_t)r * T;
                    const __m256 vD = _mm256_set1_ps(D), vsc = _mm256_set1_ps(scale);
                    int nv = t + 1 - k0 < n ? t + 1 - k0 : n; /* keys t2 <= t; the rest of the row 0 */
                    for (int j = 0; j < nv; j += 8) {
                        __m256i in = lanes_below(nv - j);
                        __m256 d = _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(p + j, in),
                                                               _mm256_sub_ps(_mm256_maskload_ps(ds + j, in), vD)),
                                                 vsc);
                        d = _mm256_and_ps(d, visible8(docrow ? docrow + k0 : NULL, t - k0, j, in));
                        _mm256_maskstore_ps(ds + j, in, d);
                    }
                    if (nv < 0) nv = 0;
                    memset(ds + nv, 0, sizeof(float) * (size_t)(n - nv));
                }
                /* dQ (rows x hs) += dS K over this key block: q slots of db */
                gemm_fma(rows, hs, n, w->ds, kw, 1, base + (size_t)k0 * RS + ko, (ptrdiff_t)RS,
                         db + (size_t)t0 * RS + qo, (ptrdiff_t)RS, k0 > 0);
                /* dK^T (hs x n) += Q^T dS, dV^T += dO^T P: K = the tile's rows */
                gemm_fma(hs, n, rows, base + (size_t)t0 * RS + qo, 1, (ptrdiff_t)RS, w->ds, kw, w->dkt, kw, 1);
                gemm_fma(hs, n, rows, dO, 1, (ptrdiff_t)C, P, T, w->dvt, kw, 1);
            }
        }
        for (int j = 0; j < kw; j++) {
            float *dk = db + (size_t)(k0 + j) * RS + ko, *dv = db + (size_t)(k0 + j) * RS + vo;
            for (int d = 0; d < hs; d++) {
                dk[d] = w->dkt[(size_t)d * kw + j];
                dv[d] = w->dvt[(size_t)d * kw + j];
            }
        }
    }
}
#endif

int kn_gqa_attention_backward_fma(float *dqkv, const float *dout, const float *out, const float *qkv, const float *att,
                                  const int32_t *doc, int B, int T, int NH, int NKV, int HS) {
#if FMA_OK
    if (!__atomic_load_n(&g_lanes, __ATOMIC_RELAXED)) kn_gqa_attention_fma_lanes(0);
    size_t C = (size_t)NH * HS, KVd = (size_t)NKV * HS, RS = C + 2 * KVd;
    int rep = NH / NKV, err = 0;
    float scale = 1.0f / sqrtf((float)HS);
    long groups = (long)B * NKV;
    KN_OMP(parallel) {
        size_t hk = (size_t)HS * KB;
        float *buf = malloc(sizeof(float) * (3 * hk + (size_t)RB * KB));
        bwd_ws w = {buf, buf + hk, buf + 2 * hk, buf + 3 * hk};
        if (!buf) {
            KN_OMP(atomic write)
            err = 1;
        }
        KN_OMP(for schedule(dynamic, 1))
        for (long bg = 0; bg < groups; bg++) {
            if (!buf) continue;
            int b = (int)(bg / NKV), g = (int)(bg % NKV);
            group_bwd(dqkv + (size_t)b * T * RS, dout + (size_t)b * T * C, out + (size_t)b * T * C,
                      qkv + (size_t)b * T * RS, att + (size_t)b * NH * T * T, doc ? doc + (size_t)b * T : NULL, &w, T,
                      RS, C, g * rep, rep, C + (size_t)g * HS, C + KVd + (size_t)g * HS, HS, scale);
        }
        free(buf);
    }
    return err ? KN_ENOMEM : KN_OK;
#else
    (void)dqkv, (void)dout, (void)out, (void)qkv, (void)att, (void)doc, (void)B, (void)T, (void)NH, (void)NKV, (void)HS;
    return KN_EINVAL;
#endif
}

/* SwiGLU on the FMA numerics: the sigmoid's exponential from exp8 (8 lanes)
 * instead of libm's expf; the same formulas as kn_swiglu_packed_*_cpu. */
#if FMA_OK
FMA_TARGET static void swiglu_fwd_row(float *o, const float *g, const float *u, int F) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int i = 0; i < F; i += 8) {
        __m256i in = lanes_below(F - i);
        __m256 gv = _mm256_maskload_ps(g + i, in);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        _mm256_maskstore_ps(o + i, in,
                            _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_maskload_ps(u + i, in)));
    }
}
FMA_TARGET static void swiglu_bwd_row(float *dg, float *du, const float *dy, const float *gt, const float *up, int F) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int i = 0; i < F; i += 8) {
        __m256i in = lanes_below(F - i);
        __m256 g = _mm256_maskload_ps(gt + i, in), d = _mm256_maskload_ps(dy + i, in),
               u = _mm256_maskload_ps(up + i, in);
        __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
        _mm256_maskstore_ps(du + i, in, _mm256_mul_ps(_mm256_mul_ps(d, g), s));
        __m256 t = _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, s)));
        _mm256_maskstore_ps(dg + i, in, _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(d, u), s), t));
    }
}
#endif

int kn_swiglu_packed_forward_fma(float *out, const float *gu, int N, int F) {
#if FMA_OK
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F;
        swiglu_fwd_row(out + (size_t)n * F, g, g + F, F);
    }
    return KN_OK;
#else
    (void)out, (void)gu, (void)N, (void)F;
    return KN_EINVAL;
#endif
}

int kn_swiglu_packed_backward_fma(float *dgu, const float *dout, const float *gu, int N, int F) {
#if FMA_OK
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F;
        float *d = dgu + (size_t)n * 2 * F;
        swiglu_bwd_row(d, d + F, dout + (size_t)n * F, g, g + F, F);
    }
    return KN_OK;
#else
    (void)dgu, (void)dout, (void)gu, (void)N, (void)F;
    return KN_EINVAL;
#endif
}

/* Softmax + cross-entropy over the vocabulary on the FMA numerics, as
 * kn_softmax_xent_forward_ref with V == Vp (the Llama model's logits):
 * max, exponentials (exp8) and their sum (8 lanes into two double vectors,
 * a fixed order) vectorized; the ref's serial double sum of libm expf was
 * latency bound. probs may alias logits; the target's logit is read first. */
#if FMA_OK
FMA_TARGET static void xent_row(float *loss, float *p, const float *l, int t, int V) {
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    for (int v = 0; v < V; v += 8) {
        __m256i in = lanes_below(V - v);
        vmx = _mm256_max_ps(vmx, _mm256_blendv_ps(vmx, _mm256_maskload_ps(l + v, in), _mm256_castsi256_ps(in)));
    }
    float m8[8];
    _mm256_storeu_ps(m8, vmx);
    float mx = m8[0];
    for (int i = 1; i < 8; i++) mx = m8[i] > mx ? m8[i] : mx;
    float lt = t >= 0 ? l[t] : 0.0f;
    const __m256 vm = _mm256_set1_ps(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (int v = 0; v < V; v += 8) {
        __m256i in = lanes_below(V - v);
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(l + v, in), vm)), _mm256_castsi256_ps(in));
        if (p) _mm256_maskstore_ps(p + v, in, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double d4[4];
    _mm256_storeu_pd(d4, _mm256_add_pd(s0, s1));
    double s = (d4[0] + d4[1]) + (d4[2] + d4[3]);
    if (p) {
        const __m256 inv = _mm256_set1_ps((float)(1.0 / s));
        for (int v = 0; v < V; v += 8) {
            __m256i in = lanes_below(V - v);
            _mm256_maskstore_ps(p + v, in, _mm256_mul_ps(_mm256_maskload_ps(p + v, in), inv));
        }
    }
    if (loss) *loss = t < 0 ? 0.0f : (float)(log(s) + mx - lt);
}
#endif

int kn_softmax_xent_forward_fma(float *losses, float *probs, const float *logits, const int32_t *targets, int N,
                                int V) {
#if FMA_OK
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++)
        xent_row(losses ? losses + n : NULL, probs ? probs + (size_t)n * V : NULL, logits + (size_t)n * V,
                 targets ? targets[n] : -1, V);
    return KN_OK;
#else
    (void)losses, (void)probs, (void)logits, (void)targets, (void)N, (void)V;
    return KN_EINVAL;
#endif
}
