/* test_model_ref: the C GPT-2 (train/model.c on the kn reference kernels)
 * against PyTorch fixtures written by tests/ref/make_fixtures.py
 * (tests/data/ref/gpt2_tiny_ref.bin; the reference runs in float64).
 *
 * Checked, for the plain causal mask and for the document mask:
 *   logits, loss sum and target count of one micro-batch, every parameter
 *   gradient (grad_scale = 1/n_targets), and 10 AdamW steps of 2
 *   micro-batches each (step losses, pre-clip gradient norms, and for the
 *   plain case the final parameters).
 * Criterion per element: |a - r| <= RTOL * max(|a|, |r|, floor) with
 * floor = FLOOR_FRAC * max|r| over the tensor (a gradient that cancels to
 * ~0 is compared at the tensor's scale).  NaN never passes.  The worst
 * element of every tensor is reported. */
#include "kn.h"
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RTOL 1e-5
#define FLOOR_FRAC 0.1
/* Parameters after 10 AdamW steps are ill-conditioned: Adam divides every
 * gradient element by its own running magnitude, so a few elements' paths
 * amplify rounding noise, and the key biases (gradient exactly 0 in exact
 * arithmetic: softmax is shift invariant) move by noise alone and are only
 * reported.  The bound is set by what correct fp32 implementations do
 * (tests/ref/final_params_noise.py): torch fp32 itself, at 1 or 2 threads,
 * lands 1.29e-3 from the fp64 reference on one element (qkvw 4570, layer 0
 * k row 7, a median-sized gradient), and only 3 of its elements are over
 * 1e-4; this model measured 8.9e-4 (matmul without FMA) and 1.21e-3 (FMA)
 * on that element, 3 or fewer over 1e-4.  So the check is the one torch
 * passes with a margin: every element within RTOL_FINAL (1.5x torch's
 * worst), and at most FINAL_BULK_MAX (3x torch's count) elements over
 * RTOL_BULK: the bulk of the parameters still tracks fp64 to 1e-4. */
#define RTOL_FINAL 2e-3
#define RTOL_BULK 1e-4
#define FINAL_BULK_MAX 9

typedef struct {
    char name[64];
    int dtype; /* 0 f32, 1 i32, 2 u32 */
    int ndim;
    uint32_t dims[8];
    size_t n;
    void *data;
} fx_t;

static fx_t fx[64];
static int nfx;
static int failures;

static int load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    char magic[8];
    uint32_t count;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "MKSREF01", 8) || fread(&count, 4, 1, f) != 1 || count > 64)
        goto bad;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t nl, dt, nd, dims[8];
        if (fread(&nl, 4, 1, f) != 1 || nl >= sizeof fx[i].name) goto bad;
        if (fread(fx[i].name, 1, nl, f) != nl) goto bad;
        fx[i].name[nl] = 0;
        if (fread(&dt, 4, 1, f) != 1 || fread(&nd, 4, 1, f) != 1 || nd > 8 || dt > 2) goto bad;
        if (fread(dims, 4, nd, f) != nd) goto bad;
        size_t n = 1;
        for (uint32_t d = 0; d < nd; d++) n *= dims[d];
        fx[i].dtype = (int)dt;
        fx[i].ndim = (int)nd;
        memcpy(fx[i].dims, dims, sizeof(uint32_t) * nd);
        fx[i].n = n;
        fx[i].data = malloc(n * 4 + 1);
        if (!fx[i].data || fread(fx[i].data, 4, n, f) != n) goto bad;
        nfx++;
    }
    fclose(f);
    return 0;
bad:
    fprintf(stderr, "%s: corrupt fixture file\n", path);
    fclose(f);
    return -1;
}

static const fx_t *get(const char *name, size_t expect_n) {
    for (int i = 0; i < nfx; i++)
        if (!strcmp(fx[i].name, name)) {
            if (expect_n && fx[i].n != expect_n) {
                fprintf(stderr, "fixture %s: %zu elements, expected %zu\n", name, fx[i].n, expect_n);
                exit(1);
            }
            return &fx[i];
        }
    fprintf(stderr, "fixture %s missing\n", name);
    exit(1);
}

/* Compares a (stride sa) with r (stride sr) over rows x cols; reports. */
static double compare_tol(const char *what, const float *a, const float *r, size_t rows, size_t cols, size_t sa,
                          size_t sr, double rtol, int check) {
    double maxref = 0.0;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            double v = fabs((double)r[i * sr + j]);
            if (v > maxref) maxref = v;
        }
    double floor_ = FLOOR_FRAC * maxref;
    if (floor_ < 1e-30) floor_ = 1e-30;
    double worst = 0.0, maxabs = 0.0;
    size_t wi = 0;
    int bad = 0;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            double x = a[i * sa + j], y = r[i * sr + j];
            double d = fabs(x - y);
            double den = fmax(fmax(fabs(x), fabs(y)), floor_);
            double e = d / den;
            if (!(e <= rtol)) bad = 1;
            if (!(e <= worst)) { /* also catches NaN */
                worst = isnan(e) ? INFINITY : e;
                wi = i * cols + j;
            }
            if (d > maxabs) maxabs = d;
        }
    size_t wr = wi / cols, wc = wi % cols;
    if (!check) bad = 0;
    printf("%-4s %-28s worst rel %.3e (abs max %.3e) at %zu: c=%.9g ref=%.9g\n",
           !check ? "info"
           : bad  ? "FAIL"
                  : "ok",
           what, worst, maxabs, wi, a[wr * sa + wc], r[wr * sr + wc]);
    if (bad) failures++;
    return worst;
}

/* elements of a (n) with |a - r| / max(|a|, |r|, FLOOR_FRAC * max|r|) > rtol:
 * compare_tol's criterion, counted */
static size_t count_over(const float *a, const float *r, size_t n, double rtol) {
    double maxref = 0.0;
    for (size_t i = 0; i < n; i++) maxref = fmax(maxref, fabs((double)r[i]));
    double floor_ = fmax(FLOOR_FRAC * maxref, 1e-30);
    size_t over = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - r[i]), den = fmax(fmax(fabs((double)a[i]), fabs((double)r[i])), floor_);
        over += !(d <= rtol * den);
    }
    return over;
}

static double compare(const char *what, const float *a, const float *r, size_t rows, size_t cols, size_t sa,
                      size_t sr) {
    return compare_tol(what, a, r, rows, cols, sa, sr, RTOL, 1);
}

static void compare_scalar(const char *what, double a, double r) {
    double e = fabs(a - r) / fmax(fmax(fabs(a), fabs(r)), 1e-30);
    int bad = !(e <= RTOL);
    printf("%-4s %-28s rel %.3e: c=%.9g ref=%.9g\n", bad ? "FAIL" : "ok", what, e, a, r);
    if (bad) failures++;
}

static int run_case(tr_model *m, const char *tag, int use_doc, const float *params0) {
    const tr_model_config *c = tr_model_get_config(m);
    size_t P = tr_model_param_count(c);
    int B, T, V = c->vocab, Vp = c->vocab_padded;
    char k[96];
#define FX(suffix, n) (snprintf(k, sizeof k, "%s/%s", tag, suffix), get(k, n))
    const fx_t *fin = FX("inputs", 0);
    if (fin->ndim != 2) return -1;
    B = (int)fin->dims[0];
    T = (int)fin->dims[1];
    size_t BT = (size_t)B * T;
    const uint32_t *inputs = fin->data;
    const int32_t *targets = FX("targets", BT)->data;
    const int32_t *pos = FX("pos", BT)->data;
    const int32_t *doc = use_doc ? FX("doc", BT)->data : NULL;
    const float *logits_ref = FX("logits", BT * Vp)->data;
    const float *loss_ref = FX("loss", 2)->data;
    const float *grads_ref = FX("grads", P)->data;
    char what[96];

    memcpy(tr_model_params(m), params0, P * sizeof(float));
    double loss_sum;
    uint64_t n;
    if (tr_model_forward(m, B, T, inputs, targets, pos, doc, &loss_sum, &n)) return -1;
    snprintf(what, sizeof what, "%s logits", tag);
    compare(what, tr_model_logits(m), logits_ref, BT, (size_t)V, (size_t)Vp, (size_t)Vp);
    snprintf(what, sizeof what, "%s loss sum", tag);
    compare_scalar(what, loss_sum, loss_ref[0]);
    if ((double)n != loss_ref[1]) {
        printf("FAIL %s n_targets %llu != %g\n", tag, (unsigned long long)n, loss_ref[1]);
        failures++;
    }

    tr_model_zero_grad(m);
    double ls2;
    uint64_t n2;
    if (tr_model_fwd_bwd(m, B, T, inputs, targets, pos, doc, 1.0f / (float)n, &ls2, &n2)) return -1;
    snprintf(what, sizeof what, "%s fwd_bwd loss sum", tag);
    compare_scalar(what, ls2, loss_ref[0]);
    size_t sizes[TR_NUM_PARAM_TENSORS], off = 0;
    tr_model_param_sizes(c, sizes);
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
        snprintf(what, sizeof what, "%s grad %s", tag, tr_model_param_name(i));
        compare(what, tr_model_grads(m) + off, grads_ref + off, 1, sizes[i], 0, 0);
        off += sizes[i];
    }

    /* 10 AdamW steps x 2 micro-batches */
    const fx_t *tin = FX("train_inputs", 0);
    int nmb = (int)(tin->n / BT), steps = nmb / 2;
    const uint32_t *tinputs = tin->data;
    const int32_t *ttargets = FX("train_targets", tin->n)->data;
    const int32_t *tpos = FX("train_pos", tin->n)->data;
    const int32_t *tdoc = use_doc ? FX("train_doc", tin->n)->data : NULL;
    const float *tlosses = FX("train_losses", (size_t)steps)->data;
    const float *tnorms = FX("train_norms", (size_t)steps)->data;
    memcpy(tr_model_params(m), params0, P * sizeof(float));
    if (tr_model_adamw_init(m)) return -1;
    memset(tr_model_adam_m(m), 0, P * sizeof(float));
    memset(tr_model_adam_v(m), 0, P * sizeof(float));
    tr_adamw_hparams h = {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
    float losses[64] = {0}, norms[64] = {0};
    for (int s = 0; s < steps; s++) {
        uint64_t ntok = 0;
        for (size_t i = 0; i < 2 * BT; i++) ntok += ttargets[2 * s * BT + i] >= 0;
        tr_model_zero_grad(m);
        double tot = 0.0;
        for (int mb = 0; mb < 2; mb++) {
            size_t o = (size_t)(2 * s + mb) * BT;
            double ls;
            if (tr_model_fwd_bwd(m, B, T, tinputs + o, ttargets + o, tpos + o, tdoc ? tdoc + o : NULL,
                                 1.0f / (float)ntok, &ls, NULL))
                return -1;
            tot += ls;
        }
        if (tr_model_clip_grad_norm(m, 1.0f, &norms[s])) return -1;
        if (tr_model_adamw_step(m, &h, s + 1, NULL)) return -1;
        losses[s] = (float)(tot / (double)ntok);
    }
    snprintf(what, sizeof what, "%s train step losses", tag);
    compare(what, losses, tlosses, 1, (size_t)steps, 0, 0);
    snprintf(what, sizeof what, "%s train grad norms", tag);
    compare(what, norms, tnorms, 1, (size_t)steps, 0, 0);
    for (int s = 0; s < steps; s++)
        printf("     step %2d loss %.7f (ref %.7f) norm %.6f (ref %.6f)\n", s + 1, losses[s], tlosses[s], norms[s],
               tnorms[s]);
    if (!use_doc) {
        const float *fp = FX("train_final_params", P)->data;
        size_t bulk = 0;
        off = 0;
        for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
            snprintf(what, sizeof what, "%s final %s", tag, tr_model_param_name(i));
            if (i == TR_P_QKVB) {
                /* per layer: q bias, k bias (info only), v bias */
                int C = c->d_model;
                for (int l = 0; l < c->n_layer; l++)
                    for (int part = 0; part < 3; part++) {
                        size_t o = off + (size_t)l * 3 * C + (size_t)part * C;
                        snprintf(what, sizeof what, "%s final qkvb L%d %c", tag, l, "qkv"[part]);
                        compare_tol(what, tr_model_params(m) + o, fp + o, 1, (size_t)C, 0, 0, RTOL_FINAL, part != 1);
                        if (part != 1) bulk += count_over(tr_model_params(m) + o, fp + o, (size_t)C, RTOL_BULK);
                    }
            } else {
                compare_tol(what, tr_model_params(m) + off, fp + off, 1, sizes[i], 0, 0, RTOL_FINAL, 1);
                bulk += count_over(tr_model_params(m) + off, fp + off, sizes[i], RTOL_BULK);
            }
            off += sizes[i];
        }
        int bad = bulk > FINAL_BULK_MAX;
        printf("%-4s %s final: %zu elements over %.0e (at most %d)\n", bad ? "FAIL" : "ok", tag, bulk, RTOL_BULK,
               FINAL_BULK_MAX);
        if (bad) failures++;
    }
#undef FX
    return 0;
}

int main(void) {
    if (load(MKS_TEST_DATA "/ref/gpt2_tiny_ref.bin")) return 1;
    const int32_t *cf = get("config", 6)->data;
    tr_model_config c;
    if (tr_model_config_make(cf[0], cf[1], cf[2], cf[3], cf[4], &c) || c.vocab_padded != cf[5]) {
        fprintf(stderr, "bad config\n");
        return 1;
    }
    tr_model *m;
    if (tr_model_create(&c, 1, &m)) return 1;
    const float *params0 = get("params0", tr_model_param_count(&c))->data;
    printf("tiny GPT-2: L=%d NH=%d C=%d maxT=%d V=%d Vp=%d, %zu params, %d threads\n", c.n_layer, c.n_head, c.d_model,
           c.max_seq, c.vocab, c.vocab_padded, tr_model_param_count(&c), kn_num_threads());
    if (run_case(m, "plain", 0, params0) || run_case(m, "doc", 1, params0)) {
        fprintf(stderr, "model call failed\n");
        return 1;
    }
    tr_model_free(m);
    for (int i = 0; i < nfx; i++) free(fx[i].data);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
