/* test_fp16_scale.c - fp16 loss scaling of the GPU trainer, emulated on the CPU
 * (issue 14, item 4; the scheme is in train/gpu_model.h).
 *
 * 1. fp16 rounding (round to nearest even, overflow to inf, subnormals) is
 *    checked against known values and a round trip of all 63488 finite halves.
 * 2. By construction: for any logits |dlogit| <= g = scale / D; g starts
 *    <= TR_FP16_DLOGIT_INIT and stays <= TR_FP16_DLOGIT_MAX for every
 *    micro-batch size D and every scale the scaler can reach (grown to its
 *    cap), so the first fp16 tensor of the backward is finite.
 * 3. The GPU model's forward + backward in fp16, emulated with the kn
 *    reference kernels: every tensor the GPU keeps in the compute dtype
 *    (weights' compute copy, activations, dlogits, dln, dresidual, d4C/dqkv)
 *    is rounded to fp16 after each op exactly where tr_cuda_model_fwd_bwd
 *    stores it; parameter gradients fp32.  A small model (2 layers, C=64,
 *    vocabulary 2048, 2 x 32 tokens per micro-batch) trains 100 steps with
 *    the real tr_loss_scaler and AdamW: no step may be skipped (no inf/nan
 *    anywhere), the largest |value| of each gradient tensor is printed with
 *    its headroom to 65504, and the loss must fall.
 * 4. Regression: the old scheme (scale 65536 on the SUMMED loss) overflows
 *    fp16 in dlogits on step 1 of a vocabulary-8192 model - the bug this
 *    replaces - while the new scheme's step 1 is finite. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kn.h"
#include "model.h"
#include "test_check.h"
#include "gpu_model.h"

/* ---- IEEE binary16 ----------------------------------------------------------------------- */
static uint16_t f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf / nan */
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) /* >= 65520: rounds (to even) past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal half: >= 2^-14 */
        uint32_t mant = ax & 0x7fffffu;
        uint32_t h = ((((ax >> 23) - 127 + 15) & 0x1fu) << 10) | (mant >> 13);
        uint32_t rem = mant & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry into the exponent is the right result */
        return (uint16_t)(sign | h);
    }
    if (ax < 0x33000000u) /* < 2^-25 (2^-25 itself: a tie, to even 0) */
        return (uint16_t)sign;
    /* subnormal half: units of 2^-24 */
    uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* value / 2^-24 = mant >> shift */
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

static float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1f) x = sign | 0x7f800000u | (m << 13);
    else if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    } else x = sign | ((e - 15 + 127) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static float r16(float f) { return h2f(f2h(f)); }

static void test_half(void) {
    struct {
        float f;
        uint16_t h;
    } k[] = {{1.0f, 0x3c00},       {-2.0f, 0xc000},    {65504.0f, 0x7bff}, {65519.0f, 0x7bff},    {65520.0f, 0x7c00},
             {1e6f, 0x7c00},       {-1e6f, 0xfc00},    {0x1p-14f, 0x0400}, {0x1p-24f, 0x0001},    {0x1p-25f, 0x0000},
             {0x1.8p-25f, 0x0001}, {0x3p-25f, 0x0002}, {0x1p-26f, 0x0000}, {0.1f, 0x2e66},        {0.0f, 0x0000},
             {-0.0f, 0x8000},      {2049.0f, 0x6800},  {2051.0f, 0x6802},  {0x1.ffcp-15f, 0x0400}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        CHECK(f2h(k[i].f) == k[i].h, "f2h(%a) = 0x%04x, want 0x%04x", k[i].f, f2h(k[i].f), k[i].h);
    CHECK(isnan(h2f(f2h(NAN))));
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if (((h >> 10) & 0x1f) == 0x1f) continue; /* inf / nan */
        if (f2h(h2f((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0, "%d halves do not round-trip", bad);
}

/* ---- 2. the bound holds by construction ------------------------------------------------- */
static void test_bound(void) {
    const int Ds[] = {1, 2, 3, 7, 64, 256, 1000, 4096, 32768, 131072, 1 << 20};
    for (size_t i = 0; i < sizeof Ds / sizeof Ds[0]; i++) {
        int D = Ds[i];
        tr_loss_scaler s;
        tr_loss_scaler_init(&s, D);
        float g0 = tr_loss_scaler_dloss(&s, D);
        CHECK(g0 <= TR_FP16_DLOGIT_INIT, "D %d: initial g %g", D, g0);
        CHECK(D < 512 || s.scale == TR_LOSS_SCALE_INIT, "D %d: scale %g", D, s.scale);
        /* step 1, worst logits: target probability 0 -> dlogit -g; a wrong class at 1 -> +g */
        CHECK(isfinite(r16(-g0)) && isfinite(r16(g0)), "D %d", D);
        for (int k = 0; k < 200000; k++) /* 100 growth periods: far past the cap */
            tr_loss_scaler_update(&s, 0);
        float g = tr_loss_scaler_dloss(&s, D);
        CHECK(g <= TR_FP16_DLOGIT_MAX * 1.0001f && g >= TR_FP16_DLOGIT_MAX * 0.4999f, "D %d: grown g %g", D, g);
        CHECK(isfinite(r16(-g)), "D %d", D);
        /* skips halve it, never below 1 */
        for (int k = 0; k < 200; k++) tr_loss_scaler_update(&s, 1);
        CHECK(s.scale == 1.0f && s.skipped_total == 200);
        /* the optimiser's factor undoes g * targets */
        tr_loss_scaler_init(&s, D);
        float u = tr_loss_scaler_unscale(&s, D, 1000);
        CHECK(fabs(u - (double)s.scale / D * 1000.0) <= 1e-3 * u, "D %d", D);
    }
    /* the old scheme: scale 65536 on the summed loss, target probability < 0.0005: overflows */
    CHECK(isinf(r16(65536.0f * (0.0001f - 1.0f))));
    /* a restored (checkpointed) scale is clamped into range */
    tr_loss_scaler s;
    tr_loss_scaler_init(&s, 4);
    s.scale = 1e30f;
    tr_loss_scaler_clamp(&s);
    CHECK(s.scale == s.max_scale && s.max_scale == 4 * TR_FP16_DLOGIT_MAX);
}

/* ---- 3. the fp16 forward/backward of tr_cuda_model, emulated --------------------------- */
enum { K_DLOGITS, K_DLN, K_DRES, K_D4C, K_ACT, NK };
static const char *kind_name[NK] = {"dlogits", "dln (dbuf)", "dresidual", "d4C / dqkv", "activations"};

typedef struct {
    double maxabs[NK];
    long nonfinite[NK];
    long zeros_made[NK]; /* non-zero fp32 values that fp16 flushed to 0 */
    long elems[NK];
} range_t;

static void round_buf(float *x, size_t n, int kind, range_t *r) {
    for (size_t i = 0; i < n; i++) {
        float v = r16(x[i]);
        if (!isfinite(v)) r->nonfinite[kind]++;
        else if (fabs(v) > r->maxabs[kind]) r->maxabs[kind] = fabs(v);
        if (v == 0.0f && x[i] != 0.0f) r->zeros_made[kind]++;
        x[i] = v;
    }
    r->elems[kind] += (long)n;
}

typedef struct {
    int B, T, C, L, NH, V, Vp, N;
    float *wc; /* fp16-rounded compute copy of the parameters */
    float *enc, *ln1, *qkv, *atty, *att, *res2, *ln2, *fch, *fchg, *res3, *proj, *lnf, *logits, *losses;
    float *ln1m, *ln1r, *ln2m, *ln2r, *lnfm, *lnfr;
    float *dres, *dbuf, *dbig;
} emu_t;

static float *zalloc(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static void emu_init(emu_t *e, const tr_model_config *c, int B, int T, size_t P) {
    memset(e, 0, sizeof *e);
    e->B = B, e->T = T, e->C = c->d_model, e->L = c->n_layer, e->NH = c->n_head, e->V = c->vocab;
    e->Vp = c->vocab_padded, e->N = B * T;
    size_t N = (size_t)e->N, C = (size_t)e->C, L = (size_t)e->L;
    e->wc = zalloc(P);
    e->enc = zalloc(N * C), e->proj = zalloc(N * C), e->lnf = zalloc(N * C);
    e->ln1 = zalloc(L * N * C), e->qkv = zalloc(L * N * 3 * C), e->atty = zalloc(L * N * C);
    e->att = zalloc(L * (size_t)B * e->NH * T * T), e->res2 = zalloc(L * N * C), e->ln2 = zalloc(L * N * C);
    e->fch = zalloc(L * N * 4 * C), e->fchg = zalloc(L * N * 4 * C), e->res3 = zalloc(L * N * C);
    e->ln1m = zalloc(L * N), e->ln1r = zalloc(L * N), e->ln2m = zalloc(L * N), e->ln2r = zalloc(L * N);
    e->lnfm = zalloc(N), e->lnfr = zalloc(N);
    e->logits = zalloc(N * (size_t)e->Vp), e->losses = zalloc(N);
    e->dres = zalloc(N * C), e->dbuf = zalloc(N * C), e->dbig = zalloc(N * 4 * C);
}

static void emu_free(emu_t *e) {
    float *ps[] = {e->wc,   e->enc,  e->proj, e->lnf,    e->ln1,    e->qkv,  e->atty, e->att,
                   e->res2, e->ln2,  e->fch,  e->fchg,   e->res3,   e->ln1m, e->ln1r, e->ln2m,
                   e->ln2r, e->lnfm, e->lnfr, e->logits, e->losses, e->dres, e->dbuf, e->dbig};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

#define OK(call)                                                                                                       \
    do {                                                                                                               \
        if ((call) != KN_OK) {                                                                                         \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);                                          \
            exit(2);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* Forward + backward as tr_cuda_model_fwd_bwd in fp16: grads (fp32) +=
 * d(g * summed loss); returns the summed loss; *ntgt = target count. */
static double emu_fwd_bwd(emu_t *e, const size_t *offs, const float *master, float *grads, const uint32_t *inp,
                          const int32_t *tgt, float g, uint64_t *ntgt, range_t *r) {
    int B = e->B, T = e->T, C = e->C, L = e->L, NH = e->NH, V = e->V, Vp = e->Vp, N = e->N;
    size_t BTC = (size_t)N * C, C2 = (size_t)C * C;
    const float *W[TR_NUM_PARAM_TENSORS], *Wf[TR_NUM_PARAM_TENSORS];
    float *G[TR_NUM_PARAM_TENSORS];
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
        W[i] = e->wc + offs[i];
        Wf[i] = master + offs[i];
        G[i] = grads + offs[i];
    }
    OK(kn_encoder_forward_ref(e->enc, inp, NULL, W[TR_P_WTE], W[TR_P_WPE], B, T, C, V, T));
    round_buf(e->enc, BTC, K_ACT, r);
    for (int l = 0; l < L; l++) {
        const float *res = l == 0 ? e->enc : e->res3 + (size_t)(l - 1) * BTC;
        float *ln1 = e->ln1 + l * BTC, *qkv = e->qkv + l * BTC * 3, *atty = e->atty + l * BTC;
        float *res2 = e->res2 + l * BTC, *ln2 = e->ln2 + l * BTC, *fch = e->fch + l * BTC * 4;
        float *fchg = e->fchg + l * BTC * 4, *res3 = e->res3 + l * BTC;
        float *att = e->att + (size_t)l * B * NH * T * T;
        OK(kn_layernorm_forward_ref(ln1, e->ln1m + (size_t)l * N, e->ln1r + (size_t)l * N, res,
                                    Wf[TR_P_LN1W] + (size_t)l * C, Wf[TR_P_LN1B] + (size_t)l * C, N, C));
        round_buf(ln1, BTC, K_ACT, r);
        OK(kn_matmul_forward_ref(qkv, ln1, W[TR_P_QKVW] + l * 3 * C2, W[TR_P_QKVB] + (size_t)l * 3 * C, N, C, 3 * C));
        round_buf(qkv, BTC * 3, K_ACT, r);
        OK(kn_attention_forward_ref(atty, att, qkv, NULL, B, T, C, NH));
        round_buf(atty, BTC, K_ACT, r);
        OK(kn_matmul_forward_ref(e->proj, atty, W[TR_P_ATTPROJW] + l * C2, W[TR_P_ATTPROJB] + (size_t)l * C, N, C, C));
        OK(kn_residual_forward_ref(res2, res, e->proj, BTC)); /* fused into ln2 on the GPU: fp32 sum, stored */
        round_buf(res2, BTC, K_ACT, r);
        OK(kn_layernorm_forward_ref(ln2, e->ln2m + (size_t)l * N, e->ln2r + (size_t)l * N, res2,
                                    Wf[TR_P_LN2W] + (size_t)l * C, Wf[TR_P_LN2B] + (size_t)l * C, N, C));
        round_buf(ln2, BTC, K_ACT, r);
        OK(kn_matmul_forward_ref(fch, ln2, W[TR_P_FCW] + l * 4 * C2, W[TR_P_FCB] + (size_t)l * 4 * C, N, C, 4 * C));
        round_buf(fch, BTC * 4, K_ACT, r);
        OK(kn_gelu_forward_ref(fchg, fch, BTC * 4));
        round_buf(fchg, BTC * 4, K_ACT, r);
        OK(kn_matmul_forward_ref(e->proj, fchg, W[TR_P_FCPROJW] + l * 4 * C2, W[TR_P_FCPROJB] + (size_t)l * C, N, 4 * C,
                                 C));
        OK(kn_residual_forward_ref(res3, res2, e->proj, BTC));
        round_buf(res3, BTC, K_ACT, r);
    }
    const float *last = e->res3 + (size_t)(L - 1) * BTC;
    OK(kn_layernorm_forward_ref(e->lnf, e->lnfm, e->lnfr, last, Wf[TR_P_LNFW], Wf[TR_P_LNFB], N, C));
    round_buf(e->lnf, BTC, K_ACT, r);
    OK(kn_matmul_forward_ref(e->logits, e->lnf, W[TR_P_WTE], NULL, N, C, Vp));
    round_buf(e->logits, (size_t)N * Vp, K_ACT, r);
    /* loss + dlogits in place: dlogit = g * (p - onehot), stored in fp16 */
    OK(kn_softmax_xent_forward_ref(e->losses, e->logits, e->logits, tgt, N, V, Vp));
    double ls = 0;
    uint64_t k = 0;
    for (int i = 0; i < N; i++)
        if (tgt[i] >= 0) ls += e->losses[i], k++;
    *ntgt = k;
    OK(kn_softmax_xent_backward_ref(e->logits, e->logits, tgt, NULL, g, N, V, Vp));
    round_buf(e->logits, (size_t)N * Vp, K_DLOGITS, r);
    OK(kn_matmul_backward_ref(e->dbuf, G[TR_P_WTE], NULL, e->logits, e->lnf, W[TR_P_WTE], N, C, Vp));
    round_buf(e->dbuf, BTC, K_DLN, r);
    memset(e->dres, 0, BTC * sizeof(float));
    OK(kn_layernorm_backward_ref(e->dres, G[TR_P_LNFW], G[TR_P_LNFB], e->dbuf, last, Wf[TR_P_LNFW], e->lnfm, e->lnfr, N,
                                 C));
    round_buf(e->dres, BTC, K_DRES, r);
    for (int l = L - 1; l >= 0; l--) {
        const float *res = l == 0 ? e->enc : e->res3 + (size_t)(l - 1) * BTC;
        float *ln1 = e->ln1 + l * BTC, *qkv = e->qkv + l * BTC * 3, *atty = e->atty + l * BTC;
        float *res2 = e->res2 + l * BTC, *ln2 = e->ln2 + l * BTC, *fch = e->fch + l * BTC * 4;
        float *fchg = e->fchg + l * BTC * 4, *att = e->att + (size_t)l * B * NH * T * T;
        OK(kn_matmul_backward_ref(e->dbig, G[TR_P_FCPROJW] + l * 4 * C2, G[TR_P_FCPROJB] + (size_t)l * C, e->dres, fchg,
                                  W[TR_P_FCPROJW] + l * 4 * C2, N, 4 * C, C));
        round_buf(e->dbig, BTC * 4, K_D4C, r);
        OK(kn_gelu_backward_ref(e->dbig, fch, e->dbig, BTC * 4));
        round_buf(e->dbig, BTC * 4, K_D4C, r);
        OK(kn_matmul_backward_ref(e->dbuf, G[TR_P_FCW] + l * 4 * C2, G[TR_P_FCB] + (size_t)l * 4 * C, e->dbig, ln2,
                                  W[TR_P_FCW] + l * 4 * C2, N, C, 4 * C));
        round_buf(e->dbuf, BTC, K_DLN, r);
        OK(kn_layernorm_backward_ref(e->dres, G[TR_P_LN2W] + (size_t)l * C, G[TR_P_LN2B] + (size_t)l * C, e->dbuf, res2,
                                     Wf[TR_P_LN2W] + (size_t)l * C, e->ln2m + (size_t)l * N, e->ln2r + (size_t)l * N, N,
                                     C));
        round_buf(e->dres, BTC, K_DRES, r);
        OK(kn_matmul_backward_ref(e->dbuf, G[TR_P_ATTPROJW] + l * C2, G[TR_P_ATTPROJB] + (size_t)l * C, e->dres, atty,
                                  W[TR_P_ATTPROJW] + l * C2, N, C, C));
        round_buf(e->dbuf, BTC, K_DLN, r);
        OK(kn_attention_backward_ref(e->dbig, e->dbuf, qkv, att, NULL, B, T, C, NH));
        round_buf(e->dbig, BTC * 3, K_D4C, r);
        OK(kn_matmul_backward_ref(e->dbuf, G[TR_P_QKVW] + l * 3 * C2, G[TR_P_QKVB] + (size_t)l * 3 * C, e->dbig, ln1,
                                  W[TR_P_QKVW] + l * 3 * C2, N, C, 3 * C));
        round_buf(e->dbuf, BTC, K_DLN, r);
        OK(kn_layernorm_backward_ref(e->dres, G[TR_P_LN1W] + (size_t)l * C, G[TR_P_LN1B] + (size_t)l * C, e->dbuf, res,
                                     Wf[TR_P_LN1W] + (size_t)l * C, e->ln1m + (size_t)l * N, e->ln1r + (size_t)l * N, N,
                                     C));
        round_buf(e->dres, BTC, K_DRES, r);
    }
    OK(kn_encoder_backward_ref(G[TR_P_WTE], G[TR_P_WPE], e->dres, inp, NULL, B, T, C, V, T));
    return ls;
}

/* Data with something to learn: a Zipf-like unigram mix plus a fixed
 * successor for half of the positions. */
static uint64_t g_rng = 0x1234567ull;
static uint64_t rnd(void) {
    g_rng += 0x9E3779B97F4A7C15ull;
    uint64_t z = g_rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t zipf(int V) {
    double u = (double)(rnd() >> 11) * (1.0 / 9007199254740992.0);
    uint32_t t = (uint32_t)(pow((double)V, u)) - 1; /* log-uniform rank: p ~ 1/rank */
    return t < (uint32_t)V ? t : (uint32_t)V - 1;
}
static void make_batch(uint32_t *inp, int32_t *tgt, int B, int T, int V) {
    for (int b = 0; b < B; b++) {
        uint32_t cur = zipf(V);
        for (int t = 0; t < T; t++) {
            inp[b * T + t] = cur;
            uint32_t nxt = (rnd() & 1) ? (uint32_t)((cur * 7u + 3u) % (uint32_t)V) : zipf(V);
            tgt[b * T + t] = (int32_t)nxt;
            cur = nxt;
        }
    }
}

/* old_only: just step 1 of the old scheme (the regression demo); else the
 * STEPS-step fp16 run with the new scheme */
static void test_training(int V, int B, int T, int STEPS, int old_only) {
    const int D = B * T;
    tr_model_config c;
    CHECK(tr_model_config_make(2, 2, 64, T, V, &c) == TR_MODEL_OK);
    tr_model *m = NULL;
    CHECK(tr_model_create(&c, 7, &m) == TR_MODEL_OK && m);
    if (!m) return;
    CHECK(tr_model_adamw_init(m) == TR_MODEL_OK);
    size_t sizes[TR_NUM_PARAM_TENSORS], offs[TR_NUM_PARAM_TENSORS], P = 0;
    tr_model_param_sizes(&c, sizes);
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) offs[i] = P, P += sizes[i];
    emu_t e;
    emu_init(&e, &c, B, T, P);
    uint32_t *inp = malloc(sizeof(uint32_t) * D);
    int32_t *tgt = malloc(sizeof(int32_t) * D);
    float *params = tr_model_params(m), *grads = tr_model_grads(m);

    /* 4. the old scheme on step 1: dloss 65536 on the summed loss */
    if (old_only) {
        range_t r0;
        memset(&r0, 0, sizeof r0);
        uint64_t n0 = 0;
        for (size_t i = 0; i < P; i++) e.wc[i] = r16(params[i]);
        make_batch(inp, tgt, B, T, V);
        tr_model_zero_grad(m);
        emu_fwd_bwd(&e, offs, params, grads, inp, tgt, 65536.0f, &n0, &r0);
        printf("old scheme (65536 x summed loss), step 1: %ld non-finite dlogits of %ld -> the step is skipped\n",
               r0.nonfinite[K_DLOGITS], r0.elems[K_DLOGITS]);
        CHECK(r0.nonfinite[K_DLOGITS] > 0, "the old scheme should overflow on step 1 (the bug this test guards)");
        /* the new scheme on the same step: finite */
        range_t r1;
        memset(&r1, 0, sizeof r1);
        tr_loss_scaler s1;
        tr_loss_scaler_init(&s1, D);
        g_rng = 0x1234567ull;
        make_batch(inp, tgt, B, T, V);
        tr_model_zero_grad(m);
        emu_fwd_bwd(&e, offs, params, grads, inp, tgt, tr_loss_scaler_dloss(&s1, D), &n0, &r1);
        long nf1 = 0;
        for (int k = 0; k < NK; k++) nf1 += r1.nonfinite[k];
        printf("new scheme (g = %g), same step 1: %ld non-finite values\n", (double)tr_loss_scaler_dloss(&s1, D), nf1);
        CHECK(nf1 == 0);
        emu_free(&e);
        free(inp);
        free(tgt);
        tr_model_free(m);
        return;
    }

    tr_loss_scaler s;
    tr_loss_scaler_init(&s, D);
    range_t r;
    memset(&r, 0, sizeof r);
    tr_adamw_hparams h = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
    double first = 0, last = 0, g_max = 0;
    int skipped = 0, t = 0;
    for (int step = 1; step <= STEPS; step++) {
        for (size_t i = 0; i < P; i++) /* the bf16/fp16 compute copy refreshed after AdamW */
            e.wc[i] = r16(params[i]);
        make_batch(inp, tgt, B, T, V);
        tr_model_zero_grad(m);
        float g = tr_loss_scaler_dloss(&s, D);
        if (g > g_max) g_max = g;
        range_t rs;
        memset(&rs, 0, sizeof rs);
        uint64_t nt = 0;
        double ls = emu_fwd_bwd(&e, offs, params, grads, inp, tgt, g, &nt, &rs);
        double ss = 0;
        kn_sumsq_ref(grads, P, &ss);
        long nf = 0;
        for (int k = 0; k < NK; k++) {
            nf += rs.nonfinite[k];
            r.nonfinite[k] += rs.nonfinite[k];
            r.zeros_made[k] += rs.zeros_made[k];
            r.elems[k] += rs.elems[k];
            if (rs.maxabs[k] > r.maxabs[k]) r.maxabs[k] = rs.maxabs[k];
        }
        CHECK(rs.maxabs[K_DLOGITS] <= g * 1.001, "step %d: |dlogit| %g > g %g", step, rs.maxabs[K_DLOGITS], g);
        int skip = nf > 0 || !isfinite(ss);
        if (skip) {
            skipped++;
            printf("step %d: SKIPPED (non-finite fp16 values: %ld)\n", step, nf);
        } else {
            /* tr_cuda_model_step_scaled: unscale by g * targets, clip 1.0, AdamW */
            kn_scale_ref(grads, P, 1.0f / tr_loss_scaler_unscale(&s, D, nt));
            float norm = 0;
            tr_model_clip_grad_norm(m, 1.0f, &norm);
            CHECK(tr_model_adamw_step(m, &h, ++t, NULL) == TR_MODEL_OK);
        }
        tr_loss_scaler_update(&s, skip);
        double loss = ls / (double)(nt ? nt : 1);
        if (step == 1) first = loss;
        last = loss;
        if (step == 1 || step % 25 == 0)
            printf("step %3d | loss %.4f | scale %.0f (dlogit factor g %.1f) | max |dlogit| %.3g dln %.3g dres %.3g "
                   "d4C %.3g\n",
                   step, loss, (double)s.scale, (double)g, rs.maxabs[K_DLOGITS], rs.maxabs[K_DLN], rs.maxabs[K_DRES],
                   rs.maxabs[K_D4C]);
    }
    printf("\nfp16 emulation, %d steps, D = %d tokens per micro-batch, g = scale / D <= %.1f:\n", STEPS, D, g_max);
    printf("| tensor | max |x| | headroom to 65504 | non-finite | flushed to 0 |\n|---|---|---|---|---|\n");
    for (int k = 0; k < NK; k++)
        printf("| %s | %.4g | %.0fx | %ld | %.2e |\n", kind_name[k], r.maxabs[k],
               r.maxabs[k] > 0 ? 65504.0 / r.maxabs[k] : INFINITY, r.nonfinite[k],
               r.elems[k] ? (double)r.zeros_made[k] / (double)r.elems[k] : 0.0);
    printf("skipped steps: %d of %d; loss %.4f -> %.4f\n", skipped, STEPS, first, last);
    CHECK(skipped == 0, "a clean fp16 run must skip no step in its first %d steps", STEPS);
    CHECK(s.skipped_total == 0);
    for (int k = 0; k < NK; k++) CHECK(r.nonfinite[k] == 0, "%s", kind_name[k]);
    CHECK(r.maxabs[K_DLOGITS] <= TR_FP16_DLOGIT_MAX);
    CHECK(last < first - 0.5, "the emulated fp16 run trains: loss %.4f -> %.4f", first, last);
    emu_free(&e);
    free(inp);
    free(tgt);
    tr_model_free(m);
}

int main(void) {
#ifdef _OPENMP
    omp_set_num_threads(1); /* small matrices: one thread is 3x faster than two spinning */
#endif
    test_half();
    test_bound();
    /* the old scheme's step-1 overflow needs a GPT-2-like vocabulary (target
     * probability < 1/4096 at init); one step of it */
    test_training(8192, 2, 32, 1, 1);
    /* 100 steps of the new scheme; small enough to run under ASan at -O0 */
    test_training(2048, 2, 32, 100, 0);
    if (failures) fprintf(stderr, "test_fp16_scale: %d check(s) failed\n", failures);
    else printf("test_fp16_scale: all checks passed\n");
    return failures ? 1 : 0;
}
