/* test_llama_cpu_kernels.c - the CPU model's Llama kernels
 * (kernels/llama_cpu_ref.c) against the references they replace in
 * train/llama_model.c (llama_ref.c, llama_gqa_ref.c) on random inputs:
 * RoPE from the cos/sin table on strided packed rows, SwiGLU on [gate|up]
 * rows and RMSNorm's backward give the reference's bits; GQA attention on
 * packed rows gives the expanded-K/V reference's output, probabilities and
 * dQ bit for bit, and dK/dV (summed over the query heads in another order)
 * within 1e-6 of the tensor's largest value; with and without a document mask, and argument
 * refusals. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kn.h"
#include "kn_internal.h" /* kn_gqa_attention_fma_lanes */
#include "kn_llama.h"

static int fails;
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fails++;                                                                                                   \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                                \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}
static float *rnd(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* worst |a - b| relative to the tensor's largest |b| (a reassociated sum
 * of cancelling terms can be far from an element's own size) */
static double worst_rel(const float *a, const float *b, size_t n) {
    double mx = 0, w = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d != d) return INFINITY; /* a NaN (an entry never written) fails */
        w = fmax(w, d);
    }
    return mx > 0 ? w / mx : w;
}

static void test_rope(void) {
    enum { N = 37, H = 4, KV = 2, HD = 16 };
    const int C = H * HD, KVd = KV * HD, Q = C + 2 * KVd;
    float inv[HD / 2];
    kn_rope_scaling sc = {8.0f, 1.0f, 4.0f, 64};
    CHECK(kn_rope_inv_freq_ref(inv, HD, 500000.0f, &sc) == KN_OK, "inv_freq");
    int32_t pos[N];
    for (int n = 0; n < N; n++) pos[n] = (n * 37) % 1000;
    float *cs = malloc((size_t)N * HD * sizeof *cs), *x = rnd((size_t)N * Q), *y = malloc((size_t)N * Q * sizeof *y);
    float *q = malloc((size_t)N * C * sizeof *q), *k = malloc((size_t)N * KVd * sizeof *k);
    CHECK(kn_rope_cos_sin_cpu(cs, pos, inv, N, HD) == KN_OK, "cos_sin");
    for (int inverse = 0; inverse <= 1; inverse++) {
        memcpy(y, x, (size_t)N * Q * sizeof *y);
        CHECK(kn_rope_rows_cpu(y, Q, cs, N, H, HD, inverse) == KN_OK, "rope q");
        CHECK(kn_rope_rows_cpu(y + C, Q, cs, N, KV, HD, inverse) == KN_OK, "rope k");
        for (int n = 0; n < N; n++) {
            memcpy(q + (size_t)n * C, x + (size_t)n * Q, C * sizeof *q);
            memcpy(k + (size_t)n * KVd, x + (size_t)n * Q + C, KVd * sizeof *k);
        }
        int (*ref)(float *, const float *, const int32_t *, const float *, int, int, int) =
            inverse ? kn_rope_backward_ref : kn_rope_forward_ref;
        ref(q, q, pos, inv, N, H, HD);
        ref(k, k, pos, inv, N, KV, HD);
        int same = 1;
        for (int n = 0; n < N; n++)
            same &= !memcmp(q + (size_t)n * C, y + (size_t)n * Q, C * sizeof *q) &&
                    !memcmp(k + (size_t)n * KVd, y + (size_t)n * Q + C, KVd * sizeof *k) &&
                    !memcmp(x + (size_t)n * Q + C + KVd, y + (size_t)n * Q + C + KVd, KVd * sizeof *k);
        CHECK(same, "rope rows (inverse %d) differ from kn_rope_*_ref or touched v", inverse);
    }
    int32_t bad = -1;
    CHECK(kn_rope_cos_sin_cpu(cs, &bad, inv, 1, HD) == KN_EINVAL, "negative position accepted");
    CHECK(kn_rope_rows_cpu(y, C - 1, cs, N, H, HD, 0) == KN_EINVAL, "row stride under the heads accepted");
    free(cs), free(x), free(y), free(q), free(k);
}

/* the matmul's exact numerics: the row loops, the reference's bits (dK/dV
 * summed in another order) */
static void test_attention(int with_doc) {
    enum { B = 2, T = 29, NH = 6, NKV = 2, HS = 8 };
    const size_t C = NH * HS, RS = C + 2 * NKV * HS, N = (size_t)B * T, NA = (size_t)B * NH * T * T;
    float *qkv = rnd(N * RS), *dout = rnd(N * C);
    float *o1 = malloc(N * C * 4), *o2 = malloc(N * C * 4), *a1 = malloc(NA * 4), *a2 = malloc(NA * 4);
    float *d1 = malloc(N * RS * 4), *d2 = malloc(N * RS * 4);
    int32_t doc[B * T];
    for (int i = 0; i < B * T; i++) doc[i] = (i % T) / 9 + (i / T);
    const int32_t *dm = with_doc ? doc : NULL;
    CHECK(kn_matmul_set_isa(KN_MATMUL_ISA_PORTABLE) == KN_MATMUL_ISA_PORTABLE, "portable matmul");
    memset(a2, 0xff, NA * 4); /* NaN garbage: every entry must be written */
    memset(d2, 0xff, N * RS * 4);
    CHECK(kn_gqa_attention_forward_ref(o1, a1, qkv, dm, B, T, NH, NKV, HS) == KN_OK, "ref fwd");
    CHECK(kn_gqa_attention_forward_cpu(o2, a2, qkv, dm, B, T, NH, NKV, HS) == KN_OK, "cpu fwd");
    CHECK(!memcmp(o1, o2, N * C * 4) && !memcmp(a1, a2, NA * 4), "doc %d: attention out/probabilities differ",
          with_doc);
    CHECK(kn_gqa_attention_backward_ref(d1, dout, qkv, a1, dm, B, T, NH, NKV, HS) == KN_OK, "ref bwd");
    CHECK(kn_gqa_attention_backward_cpu(d2, dout, o2, qkv, a2, dm, B, T, NH, NKV, HS) == KN_OK, "cpu bwd");
    int dq_same = 1;
    for (size_t n = 0; n < N; n++) dq_same &= !memcmp(d1 + n * RS, d2 + n * RS, C * 4);
    double w = worst_rel(d2, d1, N * RS);
    CHECK(dq_same, "doc %d: dQ differs", with_doc);
    CHECK(w <= 1e-6, "doc %d: dQKV worst rel %.3g > 1e-6", with_doc, w);
    printf("gqa attention, exact numerics (doc mask %d): out, probabilities, dQ bitwise; dK/dV worst rel %.2g\n",
           with_doc, w);
    CHECK(kn_gqa_attention_forward_cpu(o2, a2, qkv, dm, B, T, NH, 4, HS) == KN_EINVAL, "NKV not dividing NH");
    CHECK(kn_gqa_attention_backward_cpu(d2, dout, NULL, qkv, a2, dm, B, T, NH, NKV, HS) == KN_EINVAL, "no out");
    kn_matmul_set_isa(KN_MATMUL_ISA_AUTO);
    free(qkv), free(dout), free(o1), free(o2), free(a1), free(a2), free(d1), free(d2);
}

/* the matmul's FMA numerics: the blocked-matmul attention
 * (llama_attn_fma_ref.c) against the plain C reference within 1e-5 of each
 * tensor's largest value (one rounding per multiply-add instead of two, and
 * other sums); bit for bit the same with 8-lane (AVX2) and 16-lane (AVX-512)
 * tiles and at 1 or more threads. Shapes: sizes that are no multiple of the tiles
 * (24 query rows x 128 keys, 6 x 16 register tiles), T over one key block,
 * MHA (NKV = NH), GQA and MQA (NKV = 1), with and without a document mask. */
static void test_attention_fma(int B, int T, int NH, int NKV, int HS, int with_doc) {
    const int isas[2] = {KN_MATMUL_ISA_AVX2_FMA, KN_MATMUL_ISA_AVX512_FMA};
    const size_t C = (size_t)NH * HS, RS = C + 2 * (size_t)NKV * HS, N = (size_t)B * T, NA = (size_t)B * NH * T * T;
    float *qkv = rnd(N * RS), *dout = rnd(N * C);
    for (size_t i = 0; i < N * RS; i++) qkv[i] *= 2.0f; /* scores up to ~4 HS / sqrt(HS): peaked rows too */
    float *o1 = malloc(N * C * 4), *a1 = malloc(NA * 4), *d1 = malloc(N * RS * 4);
    float *o2 = malloc(N * C * 4), *a2 = malloc(NA * 4), *d2 = malloc(N * RS * 4);
    float *o3 = malloc(N * C * 4), *a3 = malloc(NA * 4), *d3 = malloc(N * RS * 4);
    int32_t *doc = malloc(N * sizeof *doc);
    for (size_t i = 0; i < N; i++) doc[i] = (int32_t)((i % T) * (i % T) / 700 + i / T); /* uneven documents */
    const int32_t *dm = with_doc ? doc : NULL;
    CHECK(kn_gqa_attention_forward_ref(o1, a1, qkv, dm, B, T, NH, NKV, HS) == KN_OK, "ref fwd");
    CHECK(kn_gqa_attention_backward_ref(d1, dout, qkv, a1, dm, B, T, NH, NKV, HS) == KN_OK, "ref bwd");
    int ran = 0;
    for (int k = 0; k < 2; k++) {
        if (kn_matmul_set_isa(isas[k]) != isas[k]) continue;
        /* the attention's own tiles: 8 lanes with the AVX2 kernel, 16 with
         * the AVX-512 one (where the CPU has them) */
        if (kn_gqa_attention_fma_lanes(k ? 16 : 8) != (k ? 16 : 8)) continue;
        for (int th = 0; th < 2; th++) {
#ifdef _OPENMP
            int nth = omp_get_max_threads();
            if (th) omp_set_num_threads(1);
#else
            if (th) continue;
#endif
            memset(a2, 0xff, NA * 4); /* NaN garbage: every entry must be written */
            memset(d2, 0xff, N * RS * 4);
            memset(o2, 0xff, N * C * 4);
            CHECK(kn_gqa_attention_forward_cpu(o2, a2, qkv, dm, B, T, NH, NKV, HS) == KN_OK, "fma fwd");
            CHECK(kn_gqa_attention_backward_cpu(d2, dout, o2, qkv, a2, dm, B, T, NH, NKV, HS) == KN_OK, "fma bwd");
#ifdef _OPENMP
            omp_set_num_threads(nth);
#endif
            double wo = worst_rel(o2, o1, N * C), wa = worst_rel(a2, a1, NA), wd = worst_rel(d2, d1, N * RS);
            CHECK(wo <= 1e-5 && wa <= 1e-5 && wd <= 1e-5,
                  "B%d T%d NH%d NKV%d HS%d doc %d isa %d: worst rel out %.3g att %.3g dqkv %.3g > 1e-5", B, T, NH, NKV,
                  HS, with_doc, isas[k], wo, wa, wd);
            int masked_zero = 1; /* future and other-document entries exactly 0 */
            for (size_t i = 0; i < NA; i++) masked_zero &= a1[i] != 0.0f || a2[i] == 0.0f;
            CHECK(masked_zero, "B%d T%d doc %d: a hidden entry of att is not 0", B, T, with_doc);
            if (!ran++) {
                memcpy(o3, o2, N * C * 4), memcpy(a3, a2, NA * 4), memcpy(d3, d2, N * RS * 4);
                printf("gqa attention, FMA numerics B%d T%d NH%d NKV%d HS%d doc %d: worst rel out %.2g att %.2g "
                       "dqkv %.2g\n",
                       B, T, NH, NKV, HS, with_doc, wo, wa, wd);
            } else {
                CHECK(!memcmp(o3, o2, N * C * 4) && !memcmp(a3, a2, NA * 4) && !memcmp(d3, d2, N * RS * 4),
                      "B%d T%d doc %d: isa %d (lanes %d) / threads %d not bitwise the first run", B, T, with_doc,
                      isas[k], k ? 16 : 8, th ? 1 : 0);
            }
        }
    }
    if (!ran) printf("gqa attention, FMA numerics: no FMA kernel on this CPU, skipped\n");
    kn_matmul_set_isa(KN_MATMUL_ISA_AUTO);
    kn_gqa_attention_fma_lanes(0);
    free(qkv), free(dout), free(o1), free(a1), free(d1), free(o2), free(a2), free(d2), free(o3), free(a3), free(d3);
    free(doc);
}

static void test_swiglu_rmsnorm(void) {
    enum { N = 23, F = 45, C = 150 };
    float *gu = rnd((size_t)N * 2 * F), *dy = rnd((size_t)N * F);
    float *g = malloc(N * F * 4), *u = malloc(N * F * 4), *o1 = malloc(N * F * 4), *o2 = malloc(N * F * 4);
    float *dg = malloc(N * F * 4), *du = malloc(N * F * 4), *dgu = malloc(N * 2 * F * 4);
    for (int n = 0; n < N; n++) {
        memcpy(g + n * F, gu + (size_t)n * 2 * F, F * 4);
        memcpy(u + n * F, gu + (size_t)n * 2 * F + F, F * 4);
    }
    kn_swiglu_forward_ref(o1, g, u, (size_t)N * F);
    kn_swiglu_backward_ref(dg, du, dy, g, u, (size_t)N * F);
    /* exact numerics: the reference's bits */
    CHECK(kn_matmul_set_isa(KN_MATMUL_ISA_PORTABLE) == KN_MATMUL_ISA_PORTABLE, "portable matmul");
    CHECK(kn_swiglu_packed_forward_cpu(o2, gu, N, F) == KN_OK, "swiglu fwd");
    CHECK(!memcmp(o1, o2, N * F * 4), "swiglu forward differs");
    CHECK(kn_swiglu_packed_backward_cpu(dgu, dy, gu, N, F) == KN_OK, "swiglu bwd");
    int same = 1;
    for (int n = 0; n < N; n++)
        same &= !memcmp(dg + n * F, dgu + (size_t)n * 2 * F, F * 4) &&
                !memcmp(du + n * F, dgu + (size_t)n * 2 * F + F, F * 4);
    CHECK(same, "swiglu backward differs");
    /* FMA numerics: the vectorized exponential, within 1e-6 of each output's
     * largest value, gates from -100 to 100 (the exponential's clamps) */
    if (kn_matmul_set_isa(KN_MATMUL_ISA_AUTO) >= KN_MATMUL_ISA_AVX2_FMA) {
        float *gw = malloc((size_t)N * 2 * F * 4), *gg = malloc(N * F * 4);
        for (int i = 0; i < N * 2 * F; i++) gw[i] = gu[i] * 12.0f;
        for (int n = 0; n < N; n++) gw[(size_t)n * 2 * F + n % F] = n % 2 ? 100.0f : -100.0f;
        for (int n = 0; n < N; n++)
            memcpy(gg + n * F, gw + (size_t)n * 2 * F, F * 4), memcpy(u + n * F, gw + (size_t)n * 2 * F + F, F * 4);
        kn_swiglu_forward_ref(o1, gg, u, (size_t)N * F);
        kn_swiglu_backward_ref(dg, du, dy, gg, u, (size_t)N * F);
        CHECK(kn_swiglu_packed_forward_cpu(o2, gw, N, F) == KN_OK, "swiglu fwd fma");
        double wf = worst_rel(o2, o1, (size_t)N * F);
        CHECK(kn_swiglu_packed_backward_cpu(dgu, dy, gw, N, F) == KN_OK, "swiglu bwd fma");
        float *dg2 = malloc(N * F * 4), *du2 = malloc(N * F * 4);
        for (int n = 0; n < N; n++)
            memcpy(dg2 + n * F, dgu + (size_t)n * 2 * F, F * 4),
                memcpy(du2 + n * F, dgu + (size_t)n * 2 * F + F, F * 4);
        double wg = worst_rel(dg2, dg, (size_t)N * F), wu = worst_rel(du2, du, (size_t)N * F);
        CHECK(wf <= 1e-6 && wg <= 1e-6 && wu <= 1e-6,
              "swiglu FMA numerics: worst rel out %.3g dgate %.3g dup %.3g > 1e-6", wf, wg, wu);
        printf("swiglu, FMA numerics: worst rel out %.2g dgate %.2g dup %.2g\n", wf, wg, wu);
        free(gw), free(gg), free(dg2), free(du2);
    }
    kn_matmul_set_isa(KN_MATMUL_ISA_AUTO);

    float *x = rnd((size_t)N * C), *w = rnd(C), *dout = rnd((size_t)N * C), *h = malloc(N * C * 4), r[N];
    float *dx1 = rnd((size_t)N * C), *dx2 = malloc(N * C * 4), *dw1 = rnd(C), *dw2 = malloc(C * 4);
    memcpy(dx2, dx1, N * C * 4), memcpy(dw2, dw1, C * 4); /* both accumulate */
    kn_rmsnorm_forward_ref(h, r, x, w, N, C, 1e-5f);
    kn_rmsnorm_backward_ref(dx1, dw1, dout, x, w, r, N, C);
    CHECK(kn_rmsnorm_backward_cpu(dx2, dw2, dout, x, w, r, N, C) == KN_OK, "rmsnorm bwd");
    CHECK(!memcmp(dx1, dx2, N * C * 4) && !memcmp(dw1, dw2, C * 4), "rmsnorm backward differs");
    free(gu), free(dy), free(g), free(u), free(o1), free(o2), free(dg), free(du), free(dgu);
    free(x), free(w), free(dout), free(h), free(dx1), free(dx2), free(dw1), free(dw2);
}

/* softmax + cross-entropy of the Llama model's logits (V = Vp, probabilities
 * in place): the reference's bits on the exact numerics, within 1e-6 of it
 * on the FMA ones (losses relative to the largest loss, probabilities to
 * the largest probability), V no multiple of the 8 lanes, ignored targets */
static void test_xent(void) {
    enum { N = 9, V = 1003 };
    float *lg = rnd((size_t)N * V), *p1 = malloc((size_t)N * V * 4), *p2 = malloc((size_t)N * V * 4);
    float l1[N], l2[N];
    int32_t tg[N];
    for (int i = 0; i < N * V; i++) lg[i] *= 9.0f;
    for (int n = 0; n < N; n++) tg[n] = n == 4 ? -1 : (int32_t)((n * 389) % V);
    CHECK(kn_softmax_xent_forward_ref(l1, p1, lg, tg, N, V, V) == KN_OK, "xent ref");
    for (int fma = 0; fma <= 1; fma++) {
        if (fma ? kn_matmul_set_isa(KN_MATMUL_ISA_AUTO) < KN_MATMUL_ISA_AVX2_FMA
                : kn_matmul_set_isa(KN_MATMUL_ISA_PORTABLE) != KN_MATMUL_ISA_PORTABLE)
            continue;
        memcpy(p2, lg, (size_t)N * V * 4); /* in place, as the model runs it */
        CHECK(kn_softmax_xent_forward_cpu(l2, p2, p2, tg, N, V) == KN_OK, "xent cpu");
        if (!fma) {
            CHECK(!memcmp(l1, l2, sizeof l1) && !memcmp(p1, p2, (size_t)N * V * 4), "xent exact: not the ref's bits");
        } else {
            double wl = worst_rel(l2, l1, N), wp = worst_rel(p2, p1, (size_t)N * V);
            CHECK(wl <= 1e-6 && wp <= 1e-6 && l2[4] == 0.0f, "xent FMA: worst rel loss %.3g probs %.3g > 1e-6", wl, wp);
            printf("softmax-xent, FMA numerics: worst rel loss %.2g probs %.2g\n", wl, wp);
        }
        tg[0] = V;
        CHECK(kn_softmax_xent_forward_cpu(l2, p2, p2, tg, N, V) == KN_EINVAL, "target >= V accepted");
        tg[0] = 0;
    }
    kn_matmul_set_isa(KN_MATMUL_ISA_AUTO);
    free(lg), free(p1), free(p2);
}

int main(void) {
    test_rope();
    test_attention(0);
    test_attention(1);
    for (int with_doc = 0; with_doc <= 1; with_doc++) {
        test_attention_fma(2, 29, 6, 2, 8, with_doc);
        test_attention_fma(1, 150, 6, 2, 20, with_doc);
        test_attention_fma(2, 131, 4, 4, 16, with_doc);
        test_attention_fma(1, 257, 3, 1, 64, with_doc);
    }
    test_swiglu_rmsnorm();
    test_xent();
    if (fails) return 1;
    printf("test_llama_cpu_kernels: all checks passed\n");
    return 0;
}
