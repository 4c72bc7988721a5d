/* test_kn_ops: unit tests of the kn_*_ref kernels.
 *  - every backward against central finite differences of the forward
 *    (scalar objective sum(w * out) accumulated in double, small sizes);
 *  - matmul forward/backward against a naive double GEMM on sizes that
 *    cross every blocking boundary (MR/NR/MC/NC/KC edges), with each
 *    micro-kernel (portable, AVX-512 where the CPU has it), and the two
 *    kernels bitwise equal to each other;
 *  - softmax-xent, GELU, AdamW, grad norm/clip against double formulas;
 *  - document-mask semantics, padded-vocab semantics, targets < 0;
 *  - bitwise identical results for 1 and 3 threads;
 *  - argument errors.
 * A check passes only if err <= tol (NaN fails).  Prints a matmul GFLOP/s
 * figure (informational). */
#include "kn.h"
#include "kn_internal.h" /* kn_matmul_set_a_in_place */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int failures;
static uint64_t rng_state = 42;

static double urand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}
static float nrand(void) {
    double u1 = urand() + 1e-12, u2 = urand();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static float *rnd(size_t n, float scale) {
    float *p = malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) p[i] = nrand() * scale;
    return p;
}
static float *zeros(size_t n) { return calloc(n + 1, sizeof(float)); }

static void check(int ok, const char *what, double err, double tol) {
    if (!ok) failures++;
    printf("%-4s %-44s err %.3e (tol %.1e)\n", ok ? "ok" : "FAIL", what, err, tol);
}

/* worst |a-b| / max(|a|,|b|, floor_frac * max|b|); NaN -> inf */
static double relerr(const float *a, const double *b, size_t n, double floor_frac) {
    double mx = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
    double fl = fmax(floor_frac * mx, 1e-30);
    for (size_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / fmax(fmax(fabs(a[i]), fabs(b[i])), fl);
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}
static void check_close(const char *what, const float *a, const double *b, size_t n, double tol, double floor_frac) {
    double e = relerr(a, b, n, floor_frac);
    check(e <= tol, what, e, tol);
}

/* ---- finite differences ---------------------------------------------------- */

typedef double (*objective)(void *ctx); /* forward + sum(w * out) in double */

static double dot_w(const float *out, const float *w, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * w[i];
    return s;
}

/* Compares analytic grad g (n) of x with central differences of f. */
static void fd_check(const char *what, float *x, const float *g, size_t n, objective f, void *ctx, float h,
                     double tol) {
    double *num = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i];
        x[i] = x0 + h;
        double fp = f(ctx);
        x[i] = x0 - h;
        double fm = f(ctx);
        x[i] = x0;
        num[i] = (fp - fm) / (2.0 * (double)h);
    }
    char buf[128];
    snprintf(buf, sizeof buf, "fd %s", what);
    check_close(buf, g, num, n, tol, 0.05);
    free(num);
}

/* encoder */
typedef struct {
    float *out, *wte, *wpe, *w;
    uint32_t *inp;
    int32_t *pos;
    int B, T, C, V, maxT;
} enc_ctx;
static double enc_obj(void *p) {
    enc_ctx *c = p;
    kn_encoder_forward_ref(c->out, c->inp, c->pos, c->wte, c->wpe, c->B, c->T, c->C, c->V, c->maxT);
    return dot_w(c->out, c->w, (size_t)c->B * c->T * c->C);
}
static void test_encoder(void) {
    enc_ctx c = {0};
    c.B = 2, c.T = 5, c.C = 6, c.V = 7, c.maxT = 8;
    size_t BT = 10, BTC = 60;
    c.out = zeros(BTC), c.wte = rnd(7 * 6, 1), c.wpe = rnd(8 * 6, 1), c.w = rnd(BTC, 1);
    c.inp = malloc(BT * 4), c.pos = malloc(BT * 4);
    for (size_t i = 0; i < BT; i++) c.inp[i] = (uint32_t)(urand() * 7), c.pos[i] = (int32_t)(i % 3);
    c.inp[0] = c.inp[1] = 3; /* repeated token: accumulation */
    float *dwte = zeros(42), *dwpe = zeros(48);
    kn_encoder_backward_ref(dwte, dwpe, c.w, c.inp, c.pos, 2, 5, 6, 7, 8);
    fd_check("encoder dwte", c.wte, dwte, 42, enc_obj, &c, 1e-2f, 1e-3);
    fd_check("encoder dwpe", c.wpe, dwpe, 48, enc_obj, &c, 1e-2f, 1e-3);
    c.inp[3] = 7;
    check(kn_encoder_forward_ref(c.out, c.inp, c.pos, c.wte, c.wpe, 2, 5, 6, 7, 8) == KN_EINVAL,
          "encoder rejects token >= V", 0, 0);
    c.inp[3] = 0;
    c.pos[2] = 8;
    check(kn_encoder_forward_ref(c.out, c.inp, c.pos, c.wte, c.wpe, 2, 5, 6, 7, 8) == KN_EINVAL,
          "encoder rejects pos >= maxT", 0, 0);
    free(c.out), free(c.wte), free(c.wpe), free(c.w), free(c.inp), free(c.pos), free(dwte), free(dwpe);
}

/* layernorm */
typedef struct {
    float *out, *mean, *rstd, *inp, *wt, *b, *w;
    int N, C;
} ln_ctx;
static double ln_obj(void *p) {
    ln_ctx *c = p;
    kn_layernorm_forward_ref(c->out, c->mean, c->rstd, c->inp, c->wt, c->b, c->N, c->C);
    return dot_w(c->out, c->w, (size_t)c->N * c->C);
}
static void test_layernorm(void) {
    ln_ctx c = {0};
    c.N = 5, c.C = 70;
    size_t NC = 350;
    c.out = zeros(NC), c.mean = zeros(5), c.rstd = zeros(5), c.inp = rnd(NC, 1);
    c.wt = rnd(70, 1), c.b = rnd(70, 1), c.w = rnd(NC, 1);
    for (int i = 0; i < 70; i++) c.inp[i] += 3.0f; /* row with offset */
    ln_obj(&c);
    /* forward vs double */
    double *ref = malloc(NC * sizeof(double));
    for (int n = 0; n < 5; n++) {
        double m = 0, v = 0;
        for (int i = 0; i < 70; i++) m += c.inp[n * 70 + i];
        m /= 70;
        for (int i = 0; i < 70; i++) v += (c.inp[n * 70 + i] - m) * (c.inp[n * 70 + i] - m);
        double r = 1.0 / sqrt(v / 70 + 1e-5);
        for (int i = 0; i < 70; i++) ref[n * 70 + i] = (c.inp[n * 70 + i] - m) * r * c.wt[i] + c.b[i];
    }
    check_close("layernorm forward vs double", c.out, ref, NC, 1e-5, 0.01);
    float *dinp = zeros(NC), *dw = zeros(70), *db = zeros(70);
    kn_layernorm_backward_ref(dinp, dw, db, c.w, c.inp, c.wt, c.mean, c.rstd, 5, 70);
    fd_check("layernorm dinp", c.inp, dinp, NC, ln_obj, &c, 1e-2f, 1e-2);
    fd_check("layernorm dweight", c.wt, dw, 70, ln_obj, &c, 1e-2f, 1e-3);
    fd_check("layernorm dbias", c.b, db, 70, ln_obj, &c, 1e-2f, 1e-3);
    /* dinp accumulates */
    float *d2 = zeros(NC);
    for (size_t i = 0; i < NC; i++) d2[i] = 1.0f;
    kn_layernorm_backward_ref(d2, NULL, NULL, c.w, c.inp, c.wt, c.mean, c.rstd, 5, 70);
    double e = 0;
    for (size_t i = 0; i < NC; i++) e = fmax(e, fabs(d2[i] - 1.0f - dinp[i]));
    check(e <= 1e-6, "layernorm dinp accumulates (+=)", e, 1e-6);
    free(ref), free(dinp), free(dw), free(db), free(d2);
    free(c.out), free(c.mean), free(c.rstd), free(c.inp), free(c.wt), free(c.b), free(c.w);
}

/* matmul */
static void naive_mm(double *out, const float *inp, const float *w, const float *b, int N, int C, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0.0;
            for (int k = 0; k < C; k++) s += (double)inp[(size_t)n * C + k] * w[(size_t)o * C + k];
            out[(size_t)n * OC + o] = s;
        }
}

static const char *mm_isa = "auto";

static void test_matmul_shape(int N, int C, int OC) {
    char what[96];
    float *inp = rnd((size_t)N * C, 1), *w = rnd((size_t)OC * C, 1), *b = rnd(OC, 1);
    float *out = zeros((size_t)N * OC), *dout = rnd((size_t)N * OC, 1);
    double *ref = malloc(sizeof(double) * (size_t)N * OC);
    naive_mm(ref, inp, w, b, N, C, OC);
    int rc = kn_matmul_forward_ref(out, inp, w, b, N, C, OC);
    snprintf(what, sizeof what, "matmul %s fwd %dx%d->%d vs double", mm_isa, N, C, OC);
    check_close(what, out, ref, (size_t)N * OC, rc ? 0 : 1e-5, 0.1);
    /* backward vs double */
    float *dinp = rnd((size_t)N * C, 1), *dw = rnd((size_t)OC * C, 1), *db = rnd(OC, 1);
    float *dw0 = malloc(sizeof(float) * (size_t)OC * C), *db0 = malloc(sizeof(float) * OC);
    memcpy(dw0, dw, sizeof(float) * (size_t)OC * C);
    memcpy(db0, db, sizeof(float) * OC);
    rc = kn_matmul_backward_ref(dinp, dw, db, dout, inp, w, N, C, OC);
    double *r1 = malloc(sizeof(double) * (size_t)N * C), *r2 = malloc(sizeof(double) * (size_t)OC * C);
    double *r3 = malloc(sizeof(double) * OC);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < C; k++) {
            double s = 0;
            for (int o = 0; o < OC; o++) s += (double)dout[(size_t)n * OC + o] * w[(size_t)o * C + k];
            r1[(size_t)n * C + k] = s;
        }
    for (int o = 0; o < OC; o++) {
        double sb = db0[o];
        for (int k = 0; k < C; k++) {
            double s = dw0[(size_t)o * C + k];
            for (int n = 0; n < N; n++) s += (double)dout[(size_t)n * OC + o] * inp[(size_t)n * C + k];
            r2[(size_t)o * C + k] = s;
        }
        for (int n = 0; n < N; n++) sb += dout[(size_t)n * OC + o];
        r3[o] = sb;
    }
    snprintf(what, sizeof what, "matmul %s dinp %dx%d->%d (overwrite)", mm_isa, N, C, OC);
    check_close(what, dinp, r1, (size_t)N * C, rc ? 0 : 1e-5, 0.1);
    snprintf(what, sizeof what, "matmul %s dweight %dx%d->%d (+=)", mm_isa, N, C, OC);
    check_close(what, dw, r2, (size_t)OC * C, 1e-5, 0.1);
    snprintf(what, sizeof what, "matmul %s dbias %dx%d->%d (+=)", mm_isa, N, C, OC);
    check_close(what, db, r3, OC, 1e-5, 0.1);
    free(inp), free(w), free(b), free(out), free(dout), free(ref), free(dinp), free(dw), free(db);
    free(dw0), free(db0), free(r1), free(r2), free(r3);
}

typedef struct {
    float *out, *inp, *wt, *b, *w;
    int N, C, OC;
} mm_ctx;
static double mm_obj(void *p) {
    mm_ctx *c = p;
    kn_matmul_forward_ref(c->out, c->inp, c->wt, c->b, c->N, c->C, c->OC);
    return dot_w(c->out, c->w, (size_t)c->N * c->OC);
}
/* One forward + backward (dweight accumulated onto nonzero values) with the
 * micro-kernel isa; NULL outputs when the ISA is not available here. */
static int matmul_run(int isa, float *out, float *dinp, float *dw, const float *inp, const float *w, const float *b,
                      const float *dout, int N, int C, int OC) {
    if (kn_matmul_set_isa(isa) != isa) return 0;
    for (size_t i = 0; i < (size_t)OC * C; i++) dw[i] = 0.25f * (float)(i % 7) - 0.5f;
    int rc = kn_matmul_forward_ref(out, inp, w, b, N, C, OC);
    rc |= kn_matmul_backward_ref(dinp, dw, NULL, dout, inp, w, N, C, OC);
    return rc == KN_OK;
}

/* Two runs of one matmul shape (forward out, dinp, dweight each), to be
 * compared bitwise, and its inputs. */
typedef struct {
    int N, C, OC;
    float *inp, *w, *b, *dout, *o[2], *di[2], *dw[2];
} mm_pair;
static void mm_pair_init(mm_pair *m, int N, int C, int OC) {
    m->N = N, m->C = C, m->OC = OC;
    /* one at a time: the generator's order is the inputs' values */
    m->inp = rnd((size_t)N * C, 1);
    m->w = rnd((size_t)OC * C, 1);
    m->b = rnd(OC, 1);
    m->dout = rnd((size_t)N * OC, 1);
    for (int r = 0; r < 2; r++)
        m->o[r] = zeros((size_t)N * OC), m->di[r] = zeros((size_t)N * C), m->dw[r] = zeros((size_t)OC * C);
}
/* run r of the pair on kernel ISA (0 when this CPU lacks it) */
static int mm_pair_run(mm_pair *m, int r, int isa) {
    return matmul_run(isa, m->o[r], m->di[r], m->dw[r], m->inp, m->w, m->b, m->dout, m->N, m->C, m->OC);
}
static int mm_pair_same(const mm_pair *m) {
    return !memcmp(m->o[0], m->o[1], sizeof(float) * m->N * m->OC) &&
           !memcmp(m->di[0], m->di[1], sizeof(float) * m->N * m->C) &&
           !memcmp(m->dw[0], m->dw[1], sizeof(float) * m->OC * m->C);
}
static void mm_pair_free(mm_pair *m) {
    for (int r = 0; r < 2; r++) free(m->o[r]), free(m->di[r]), free(m->dw[r]);
    free(m->inp), free(m->w), free(m->b), free(m->dout);
}

/* every matmul kernel, by name */
static const struct {
    int isa;
    const char *name;
} mm_isas[] = {{KN_MATMUL_ISA_PORTABLE, "portable"},
               {KN_MATMUL_ISA_AVX512, "avx512"},
               {KN_MATMUL_ISA_AVX2_FMA, "avx2-fma"},
               {KN_MATMUL_ISA_AVX512_FMA, "avx512-fma"}};

/* Kernels of one numerics do the same operations in the same order, so they
 * must agree to the bit: the AVX-512 kernel with the portable one (rounded
 * multiply, rounded add), the AVX2 FMA kernel (6 x 16 tile) with the AVX-512
 * FMA one (8 x 32), on shapes that are not multiples of any tile, of the
 * 48/64-row A blocks or of the task blocks, with K across several 256-deep
 * blocks (the forward's B is a transposed view, the dinp's a plain one, the
 * dweight's A a transposed one, accumulating). */
static void test_matmul_isa_bitwise(void) {
    int shapes[][3] = {{1, 1, 1}, {7, 9, 33}, {37, 70, 45}, {300, 530, 290}, {65, 769, 17}, {263, 33, 515}};
    const struct {
        int a, b;
        const char *what;
    } pairs[] = {{KN_MATMUL_ISA_PORTABLE, KN_MATMUL_ISA_AVX512, "avx512 == portable"},
                 {KN_MATMUL_ISA_AVX2_FMA, KN_MATMUL_ISA_AVX512_FMA, "avx512-fma == avx2-fma"}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
            mm_pair m;
            mm_pair_init(&m, N, C, OC);
            char what[96];
            if (!mm_pair_run(&m, 0, pairs[p].a)) {
                if (pairs[p].a == KN_MATMUL_ISA_PORTABLE) check(0, "matmul portable kernel runs", 0, 0);
                else if (s == 0) printf("info no AVX2 FMA on this CPU: %s not checked\n", pairs[p].what);
            } else if (!mm_pair_run(&m, 1, pairs[p].b)) {
                if (s == 0) printf("info no AVX-512 on this CPU: %s not checked\n", pairs[p].what);
            } else {
                snprintf(what, sizeof what, "matmul %s bitwise %dx%d->%d", pairs[p].what, N, C, OC);
                check(mm_pair_same(&m), what, 0, 0);
            }
            mm_pair_free(&m);
        }
    kn_matmul_set_isa(KN_MATMUL_ISA_AUTO);
}

/* The micro-kernels read full MR-row panels of a row-major A (the forward's
 * inp, dinp's dout) in place and pack only the zero-padded last panel; that
 * must give the bits every panel packed gives, for each kernel, on shapes
 * with an edge panel, several 64/48-row A blocks, K across 256-deep blocks,
 * and with fewer rows than one panel (nothing read in place). */
static void test_matmul_a_in_place(void) {
    int shapes[][3] = {{5, 9, 33}, {7, 9, 33}, {37, 70, 45}, {300, 530, 290}, {65, 769, 17}, {263, 33, 515}};
    for (size_t k = 0; k < sizeof mm_isas / sizeof mm_isas[0]; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
            mm_pair m;
            mm_pair_init(&m, N, C, OC);
            int ran = 1;
            for (int r = 0; r < 2; r++) {
                int prev = kn_matmul_set_a_in_place(r == 0);
                ran &= mm_pair_run(&m, r, mm_isas[k].isa);
                kn_matmul_set_a_in_place(prev);
            }
            if (ran) {
                char what[96];
                snprintf(what, sizeof what, "matmul %s A in place == packed, bitwise %dx%d->%d", mm_isas[k].name, N, C,
                         OC);
                check(mm_pair_same(&m), what, 0, 0);
            }
            mm_pair_free(&m);
        }
    kn_matmul_set_isa(KN_MATMUL_ISA_AUTO);
}

static void test_matmul(void) {
    int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {37, 70, 45}, {130, 300, 270}, {65, 257, 17}, {300, 530, 290}};
    for (size_t k = 0; k < sizeof mm_isas / sizeof mm_isas[0]; k++) {
        if (kn_matmul_set_isa(mm_isas[k].isa) != mm_isas[k].isa) continue;
        mm_isa = mm_isas[k].name;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            test_matmul_shape(shapes[i][0], shapes[i][1], shapes[i][2]);
    }
    kn_matmul_set_isa(KN_MATMUL_ISA_AUTO);
    mm_isa = "auto";
    test_matmul_isa_bitwise();
    test_matmul_a_in_place();
    mm_ctx c = {0};
    c.N = 6, c.C = 9, c.OC = 5;
    c.out = zeros(30), c.inp = rnd(54, 1), c.wt = rnd(45, 1), c.b = rnd(5, 1), c.w = rnd(30, 1);
    float *dinp = zeros(54), *dw = zeros(45), *db = zeros(5);
    kn_matmul_backward_ref(dinp, dw, db, c.w, c.inp, c.wt, 6, 9, 5);
    fd_check("matmul dinp", c.inp, dinp, 54, mm_obj, &c, 1e-2f, 1e-3);
    fd_check("matmul dweight", c.wt, dw, 45, mm_obj, &c, 1e-2f, 1e-3);
    fd_check("matmul dbias", c.b, db, 5, mm_obj, &c, 1e-2f, 1e-3);
    free(c.out), free(c.inp), free(c.wt), free(c.b), free(c.w), free(dinp), free(dw), free(db);
}

/* attention */
typedef struct {
    float *out, *att, *qkv, *w;
    int32_t *doc;
    int B, T, C, NH;
} att_ctx;
static double att_obj(void *p) {
    att_ctx *c = p;
    kn_attention_forward_ref(c->out, c->att, c->qkv, c->doc, c->B, c->T, c->C, c->NH);
    return dot_w(c->out, c->w, (size_t)c->B * c->T * c->C);
}
static void test_attention(int use_doc) {
    att_ctx c = {0};
    c.B = 2, c.T = 7, c.C = 8, c.NH = 2;
    size_t BTC = 112;
    c.out = zeros(BTC), c.att = zeros(2 * 2 * 49), c.qkv = rnd(3 * BTC, 1), c.w = rnd(BTC, 1);
    int32_t docs[14] = {0, 0, 0, 1, 1, 2, 2, 5, 5, 5, 5, 5, 6, 6};
    c.doc = use_doc ? docs : NULL;
    att_obj(&c);
    /* rows sum to 1, masked entries 0 */
    double e = 0;
    int masked_ok = 1;
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 2; h++)
            for (int t = 0; t < 7; t++) {
                const float *a = c.att + (((size_t)b * 2 + h) * 7 + t) * 7;
                double s = 0;
                for (int t2 = 0; t2 < 7; t2++) {
                    int vis = t2 <= t && (!use_doc || docs[b * 7 + t2] == docs[b * 7 + t]);
                    if (!vis && a[t2] != 0.0f) masked_ok = 0;
                    if (vis && !(a[t2] > 0.0f)) masked_ok = 0;
                    s += a[t2];
                }
                e = fmax(e, fabs(s - 1.0));
            }
    char what[96];
    snprintf(what, sizeof what, "attention%s rows sum to 1", use_doc ? " (doc)" : "");
    check(e <= 1e-6, what, e, 1e-6);
    snprintf(what, sizeof what, "attention%s mask pattern", use_doc ? " (doc)" : "");
    check(masked_ok, what, 0, 0);
    if (use_doc) {
        /* output of a position in doc 1 (b0 t3..4) must not change when the
         * other documents' q/k/v change */
        float keep[8];
        memcpy(keep, c.out + 4 * 8, sizeof keep);
        float *q2 = malloc(sizeof(float) * 3 * BTC);
        memcpy(q2, c.qkv, sizeof(float) * 3 * BTC);
        for (int t = 0; t < 7; t++)
            if (docs[t] != 1)
                for (int i = 0; i < 24; i++) c.qkv[t * 24 + i] += 1.0f;
        att_obj(&c);
        check(!memcmp(keep, c.out + 4 * 8, sizeof keep), "attention (doc) isolated from other docs", 0, 0);
        memcpy(c.qkv, q2, sizeof(float) * 3 * BTC);
        free(q2);
        att_obj(&c);
    }
    float *dqkv = rnd(3 * BTC, 1); /* overwritten */
    kn_attention_backward_ref(dqkv, c.w, c.qkv, c.att, c.doc, 2, 7, 8, 2);
    snprintf(what, sizeof what, "attention%s dqkv", use_doc ? " (doc)" : "");
    fd_check(what, c.qkv, dqkv, 3 * BTC, att_obj, &c, 1e-2f, 1e-2);
    free(c.out), free(c.att), free(c.qkv), free(c.w), free(dqkv);
}

/* GELU */
typedef struct {
    float *out, *inp, *w;
    size_t n;
} gelu_ctx;
static double gelu_obj(void *p) {
    gelu_ctx *c = p;
    kn_gelu_forward_ref(c->out, c->inp, c->n);
    return dot_w(c->out, c->w, c->n);
}
static void test_gelu(void) {
    gelu_ctx c = {0};
    c.n = 200;
    c.out = zeros(200), c.inp = rnd(200, 3), c.w = rnd(200, 1);
    gelu_obj(&c);
    double *ref = malloc(200 * sizeof(double));
    for (int i = 0; i < 200; i++) {
        double x = c.inp[i];
        ref[i] = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    }
    check_close("gelu forward vs double", c.out, ref, 200, 1e-5, 0.01);
    float *d = zeros(200);
    kn_gelu_backward_ref(d, c.inp, c.w, 200);
    fd_check("gelu dinp", c.inp, d, 200, gelu_obj, &c, 1e-3f, 1e-2);
    memcpy(d, c.w, 200 * sizeof(float));
    float *d2 = zeros(200);
    kn_gelu_backward_ref(d2, c.inp, c.w, 200);
    kn_gelu_backward_ref(d, c.inp, d, 200); /* in place */
    check(!memcmp(d, d2, 200 * sizeof(float)), "gelu backward in place", 0, 0);
    free(ref), free(d), free(d2), free(c.out), free(c.inp), free(c.w);
}

/* softmax + cross-entropy */
typedef struct {
    float *losses, *logits, *dl;
    int32_t *tg;
    int N, V, Vp;
} sx_ctx;
static double sx_obj(void *p) {
    sx_ctx *c = p;
    kn_softmax_xent_forward_ref(c->losses, NULL, c->logits, c->tg, c->N, c->V, c->Vp);
    return dot_w(c->losses, c->dl, (size_t)c->N);
}
static void test_softmax_xent(void) {
    sx_ctx c = {0};
    c.N = 6, c.V = 100, c.Vp = 128;
    size_t NV = 6 * 128;
    c.losses = zeros(6), c.logits = rnd(NV, 2), c.dl = rnd(6, 1);
    int32_t tg[6] = {3, -1, 99, 0, -5, 50};
    c.tg = tg;
    for (int n = 0; n < 6; n++)
        for (int v = 100; v < 128; v++) c.logits[n * 128 + v] = 1e3f; /* padding: must be ignored */
    float *probs = zeros(NV);
    kn_softmax_xent_forward_ref(c.losses, probs, c.logits, tg, 6, 100, 128);
    double ref[6];
    double pe = 0;
    int pad_ok = 1;
    for (int n = 0; n < 6; n++) {
        double mx = -1e30, s = 0;
        for (int v = 0; v < 100; v++) mx = fmax(mx, c.logits[n * 128 + v]);
        for (int v = 0; v < 100; v++) s += exp(c.logits[n * 128 + v] - mx);
        ref[n] = tg[n] < 0 ? 0.0 : log(s) + mx - c.logits[n * 128 + tg[n]];
        for (int v = 0; v < 100; v++) pe = fmax(pe, fabs(probs[n * 128 + v] - exp(c.logits[n * 128 + v] - mx) / s));
        for (int v = 100; v < 128; v++) pad_ok &= probs[n * 128 + v] == 0.0f;
    }
    check_close("softmax_xent loss vs double (target<0 -> 0)", c.losses, ref, 6, 1e-6, 0.01);
    check(pe <= 1e-7, "softmax_xent probs vs double", pe, 1e-7);
    check(pad_ok, "softmax_xent padded columns have p = 0", 0, 0);
    float *dlog = zeros(NV);
    kn_softmax_xent_backward_ref(dlog, probs, tg, c.dl, 0.0f, 6, 100, 128);
    int zero_ok = 1;
    for (int n = 0; n < 6; n++)
        for (int v = 0; v < 128; v++)
            if ((tg[n] < 0 || v >= 100) && dlog[n * 128 + v] != 0.0f) zero_ok = 0;
    check(zero_ok, "softmax_xent dlogits 0 on padding / target<0", 0, 0);
    fd_check("softmax_xent dlogits", c.logits, dlog, NV, sx_obj, &c, 1e-2f, 1e-2);
    /* in place (probs and dlogits in the logits buffer) with constant scale */
    float *inpl = malloc(NV * sizeof(float)), *l2 = zeros(6);
    memcpy(inpl, c.logits, NV * sizeof(float));
    kn_softmax_xent_forward_ref(l2, inpl, inpl, tg, 6, 100, 128);
    kn_softmax_xent_backward_ref(inpl, inpl, tg, NULL, 0.25f, 6, 100, 128);
    kn_softmax_xent_backward_ref(dlog, probs, tg, NULL, 0.25f, 6, 100, 128);
    check(!memcmp(inpl, dlog, NV * sizeof(float)) && !memcmp(l2, c.losses, 6 * sizeof(float)),
          "softmax_xent in place == out of place", 0, 0);
    tg[0] = 100;
    check(kn_softmax_xent_forward_ref(l2, NULL, c.logits, tg, 6, 100, 128) == KN_EINVAL,
          "softmax_xent rejects target >= V", 0, 0);
    free(probs), free(dlog), free(inpl), free(l2), free(c.losses), free(c.logits), free(c.dl);
}

/* AdamW + norms */
static void test_adamw_norm(void) {
    size_t n = 1000;
    float *p = rnd(n, 1), *m = zeros(n), *v = zeros(n);
    double *pd = malloc(n * sizeof(double)), *md = calloc(n, sizeof(double)), *vd = calloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) pd[i] = p[i];
    float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    for (int t = 1; t <= 5; t++) {
        float *g = rnd(n, 0.1f);
        int decay = t != 3;
        kn_adamw_step_ref(p, g, m, v, n, lr, b1, b2, eps, wd, decay, t);
        for (size_t i = 0; i < n; i++) {
            md[i] = (double)b1 * md[i] + (1.0 - (double)b1) * g[i];
            vd[i] = (double)b2 * vd[i] + (1.0 - (double)b2) * (double)g[i] * g[i];
            if (decay) pd[i] *= 1.0 - (double)lr * wd;
            double mh = md[i] / (1.0 - pow(b1, t)), vh = vd[i] / (1.0 - pow(b2, t));
            pd[i] -= lr * mh / (sqrt(vh) + eps);
        }
        free(g);
    }
    check_close("adamw 5 steps vs double (decay on/off)", p, pd, n, 1e-5, 0.01);
    /* norm / clip */
    float *g = rnd(100003, 1);
    double ss = 0;
    for (size_t i = 0; i < 100003; i++) ss += (double)g[i] * g[i];
    float norm;
    kn_clip_grad_norm_ref(g, 100003, 0.0f, &norm);
    check(fabs(norm - sqrt(ss)) <= 1e-6 * sqrt(ss), "grad norm vs double", fabs(norm - sqrt(ss)), 1e-6 * sqrt(ss));
    float *g2 = malloc(100003 * sizeof(float));
    memcpy(g2, g, 100003 * sizeof(float));
    kn_clip_grad_norm_ref(g, 100003, 1.0f, &norm);
    double ss2 = 0;
    for (size_t i = 0; i < 100003; i++) ss2 += (double)g[i] * g[i];
    check(fabs(sqrt(ss2) - 1.0) <= 1e-5, "clip to max_norm 1", fabs(sqrt(ss2) - 1.0), 1e-5);
    memcpy(g, g2, 100003 * sizeof(float));
    kn_clip_grad_norm_ref(g, 100003, 1e6f, &norm);
    check(!memcmp(g, g2, 100003 * sizeof(float)), "no clip below max_norm", 0, 0);
    g[77] = NAN;
    kn_clip_grad_norm_ref(g, 100003, 0.0f, &norm);
    check(isnan(norm), "grad norm propagates NaN", 0, 0);
    free(p), free(m), free(v), free(pd), free(md), free(vd), free(g), free(g2);
}

/* determinism across thread counts + speed */
static void test_threads_and_speed(void) {
#ifdef _OPENMP
    int N = 200, C = 96, OC = 300;
    float *inp = rnd((size_t)N * C, 1), *w = rnd((size_t)OC * C, 1), *b = rnd(OC, 1);
    float *dout = rnd((size_t)N * OC, 1);
    float *o[2], *di[2], *dw[2], *qkv = rnd(3 * 4 * 33 * 64, 1), *ao[2], *aa[2], *dq[2];
    int32_t doc[4 * 33];
    for (int i = 0; i < 4 * 33; i++) doc[i] = i / 10;
    int nt[2] = {1, 3}, saved = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(nt[r]);
        o[r] = zeros((size_t)N * OC), di[r] = zeros((size_t)N * C), dw[r] = zeros((size_t)OC * C);
        kn_matmul_forward_ref(o[r], inp, w, b, N, C, OC);
        kn_matmul_backward_ref(di[r], dw[r], NULL, dout, inp, w, N, C, OC);
        ao[r] = zeros(4 * 33 * 64), aa[r] = zeros(4 * 4 * 33 * 33), dq[r] = zeros(3 * 4 * 33 * 64);
        kn_attention_forward_ref(ao[r], aa[r], qkv, doc, 4, 33, 64, 4);
        kn_attention_backward_ref(dq[r], ao[r], qkv, aa[r], doc, 4, 33, 64, 4);
    }
    omp_set_num_threads(saved);
    int same = !memcmp(o[0], o[1], sizeof(float) * N * OC) && !memcmp(di[0], di[1], sizeof(float) * N * C) &&
               !memcmp(dw[0], dw[1], sizeof(float) * OC * C) && !memcmp(ao[0], ao[1], sizeof(float) * 4 * 33 * 64) &&
               !memcmp(dq[0], dq[1], sizeof(float) * 3 * 4 * 33 * 64);
    check(same, "matmul/attention bitwise equal for 1 and 3 threads", 0, 0);
    for (int r = 0; r < 2; r++) free(o[r]), free(di[r]), free(dw[r]), free(ao[r]), free(aa[r]), free(dq[r]);
    free(inp), free(w), free(b), free(dout), free(qkv);
#endif
    /* speed (informational): GPT-2 d12 MLP-sized matmul */
    int M = 256, K = 768, NO = 3072;
    float *x = rnd((size_t)M * K, 1), *W = rnd((size_t)NO * K, 1), *y = zeros((size_t)M * NO);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kn_matmul_forward_ref(y, x, W, NULL, M, K, NO);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    printf("info matmul %dx%d->%d: %.2f GFLOP/s (%d threads)\n", M, K, NO, 2.0 * M * K * NO / s * 1e-9,
           kn_num_threads());
    free(x), free(W), free(y);
}

static void test_errors(void) {
    float x[4] = {0};
    int ok = kn_matmul_forward_ref(NULL, x, x, NULL, 1, 1, 1) == KN_EINVAL &&
             kn_matmul_forward_ref(x, x, x, NULL, 0, 1, 1) == KN_EINVAL &&
             kn_attention_forward_ref(x, x, x, NULL, 1, 1, 3, 2) == KN_EINVAL &&
             kn_layernorm_forward_ref(x, NULL, NULL, x, NULL, x, 1, 1) == KN_EINVAL &&
             kn_adamw_step_ref(x, x, x, x, 1, 1, 0.9f, 0.9f, 0, 0, 0, 0) == KN_EINVAL &&
             kn_residual_forward_ref(x, x, NULL, 1) == KN_EINVAL && kn_pad_vocab(50257) == 50304 &&
             kn_pad_vocab(128) == 128 && kn_pad_vocab(0) == KN_EINVAL;
    check(ok, "argument errors / kn_pad_vocab", 0, 0);
    float ra[5] = {1, 2, 3, 4, 5}, rb[5] = {0.5f, -2, 1e-8f, 4, -5}, ro[5];
    kn_residual_forward_ref(ro, ra, rb, 5);
    int rok = 1;
    for (int i = 0; i < 5; i++) rok &= ro[i] == ra[i] + rb[i];
    kn_residual_forward_ref(ra, ra, rb, 5); /* in place */
    rok &= !memcmp(ra, ro, sizeof ro);
    check(rok, "residual add (and in place)", 0, 0);
    /* the checker itself must reject NaN */
    float a[3] = {1, NAN, 3};
    double b[3] = {1, 2, 3};
    check(!(relerr(a, b, 3, 0.1) <= 1e-5), "checker rejects NaN", 0, 0);
}

int main(void) {
    test_errors();
    test_encoder();
    test_layernorm();
    test_matmul();
    test_attention(0);
    test_attention(1);
    test_gelu();
    test_softmax_xent();
    test_adamw_norm();
    test_threads_and_speed();
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
