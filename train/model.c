/* model.c - GPT-2 on the kn reference kernels (see model.h, docs/model.md). */
#include "model.h"
#include "family.h"

#include "kn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- activations ------------------------------------------------------------ */

typedef struct {
    float *encoded;                   /* (B,T,C) */
    float *ln1, *ln1_mean, *ln1_rstd; /* (L,B,T,C) (L,B,T) (L,B,T) */
    float *qkv;                       /* (L,B,T,3C) */
    float *atty;                      /* (L,B,T,C) */
    float *att;                       /* (L,B,NH,T,T) */
    float *residual2;                 /* (L,B,T,C) */
    float *ln2, *ln2_mean, *ln2_rstd; /* (L,B,T,C) (L,B,T) (L,B,T) */
    float *fch, *fch_gelu;            /* (L,B,T,4C) each */
    float *residual3;                 /* (L,B,T,C) */
    float *lnf, *lnf_mean, *lnf_rstd; /* (B,T,C) (B,T) (B,T) */
    float *proj;                      /* (B,T,C) projection scratch */
    float *logits;                    /* (B,T,Vp): logits / probs / dlogits */
    float *losses;                    /* (B,T) */
    /* backward scratch */
    float *dres, *dbuf; /* (B,T,C) each */
    float *dbig;        /* (B,T,4C): dfch, dqkv */
} acts_t;

/* the layout whose size acts_floats + grad_acts_floats (model_config.c) give */
static void carve(const tr_model_config *c, size_t B, size_t T, float *p, acts_t *a) {
    size_t L = (size_t)c->n_layer, C = (size_t)c->d_model, BT = B * T;
    size_t NH = (size_t)c->n_head, Vp = (size_t)c->vocab_padded;
#define TAKE(field, n) (a->field = p, p += (n))
    TAKE(encoded, BT * C);
    TAKE(ln1, L * BT * C);
    TAKE(ln1_mean, L * BT);
    TAKE(ln1_rstd, L * BT);
    TAKE(qkv, L * BT * 3 * C);
    TAKE(atty, L * BT * C);
    TAKE(att, L * B * NH * T * T);
    TAKE(residual2, L * BT * C);
    TAKE(ln2, L * BT * C);
    TAKE(ln2_mean, L * BT);
    TAKE(ln2_rstd, L * BT);
    TAKE(fch, L * BT * 4 * C);
    TAKE(fch_gelu, L * BT * 4 * C);
    TAKE(residual3, L * BT * C);
    TAKE(lnf, BT * C);
    TAKE(lnf_mean, BT);
    TAKE(lnf_rstd, BT);
    TAKE(proj, BT * C);
    TAKE(logits, BT * Vp);
    TAKE(losses, BT);
    TAKE(dres, BT * C);
    TAKE(dbuf, BT * C);
    TAKE(dbig, BT * 4 * C);
#undef TAKE
}

/* ---- model ------------------------------------------------------------------ */

struct tr_model {
    tr_model_config cfg;
    size_t sizes[TR_NUM_PARAM_TENSORS], offs[TR_NUM_PARAM_TENSORS], nparams;
    float *params, *grads;
    void *state[TR_MODEL_MAX_STATE]; /* optimizer state (tr_model_state_init) */
    int n_state;
    size_t state_bytes; /* per element */
    float *acts;
    size_t acts_cap; /* floats */
    acts_t a;
    int have_logits;
    tr_model_grad_hook hook; /* gradient readiness (tr_model_set_grad_hook) */
    void *hook_ctx;
    /* another family (train/family.h): its instance, which owns params and grads */
    const tr_family_ops *fam;
    void *impl;
};

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill_normal(float *p, size_t n, float std, uint64_t *s) {
    for (size_t i = 0; i < n; i += 2) {
        double u1 = ((splitmix64(s) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
        double u2 = (splitmix64(s) >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
        p[i] = (float)(std * r * cos(th));
        if (i + 1 < n) p[i + 1] = (float)(std * r * sin(th));
    }
}

int tr_model_create(const tr_model_config *c, uint64_t seed, tr_model **out) {
    if (!out) return TR_MODEL_EINVAL;
    *out = NULL;
    if (tr_model_config_check(c)) return TR_MODEL_EINVAL;
    tr_model *m = calloc(1, sizeof *m);
    if (!m) return TR_MODEL_ENOMEM;
    m->cfg = *c;
    if (c->family != TR_FAMILY_GPT2) { /* its family computes; the buffers are its own */
        m->fam = tr_family_of(c);
        m->nparams = tr_model_param_count(c);
        int rc = m->fam->create(c, seed, &m->impl, &m->params, &m->grads);
        if (rc) {
            free(m);
            return rc;
        }
        *out = m;
        return TR_MODEL_OK;
    }
    tr_model_param_sizes(c, m->sizes);
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
        m->offs[i] = m->nparams;
        m->nparams += m->sizes[i];
    }
    m->params = malloc(sizeof(float) * m->nparams);
    m->grads = calloc(m->nparams, sizeof(float));
    if (!m->params || !m->grads) {
        tr_model_free(m);
        return TR_MODEL_ENOMEM;
    }
    uint64_t s = seed;
    float std = 0.02f, pstd = 0.02f / sqrtf(2.0f * c->n_layer);
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
        float *p = m->params + m->offs[i];
        size_t n = m->sizes[i];
        switch (i) {
        case TR_P_WTE:
            fill_normal(p, (size_t)c->vocab * c->d_model, std, &s);
            memset(p + (size_t)c->vocab * c->d_model, 0, sizeof(float) * (n - (size_t)c->vocab * c->d_model));
            break;
        case TR_P_WPE:
        case TR_P_QKVW:
        case TR_P_FCW: fill_normal(p, n, std, &s); break;
        case TR_P_ATTPROJW:
        case TR_P_FCPROJW: fill_normal(p, n, pstd, &s); break;
        case TR_P_LN1W:
        case TR_P_LN2W:
        case TR_P_LNFW:
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
            break;
        default: memset(p, 0, sizeof(float) * n);
        }
    }
    *out = m;
    return TR_MODEL_OK;
}

void tr_model_free(tr_model *m) {
    if (!m) return;
    if (m->fam) m->fam->destroy(m->impl);
    else {
        free(m->params);
        free(m->grads);
    }
    for (int k = 0; k < m->n_state; k++) free(m->state[k]);
    free(m->acts);
    free(m);
}

const tr_model_config *tr_model_get_config(const tr_model *m) { return m ? &m->cfg : NULL; }
float *tr_model_params(tr_model *m) { return m ? m->params : NULL; }
float *tr_model_grads(tr_model *m) { return m ? m->grads : NULL; }
void *tr_model_state(tr_model *m, int k) { return m && k >= 0 && k < m->n_state ? m->state[k] : NULL; }
float *tr_model_adam_m(tr_model *m) { return m && m->state_bytes == 4 ? tr_model_state(m, 0) : NULL; }
float *tr_model_adam_v(tr_model *m) { return m && m->state_bytes == 4 ? tr_model_state(m, 1) : NULL; }

float *tr_model_param_tensor(tr_model *m, int i) {
    if (!m || i < 0 || i >= tr_model_n_tensors(&m->cfg)) return NULL;
    if (!m->fam) return m->params + m->offs[i];
    size_t off = 0;
    for (int k = 0; k < i; k++) off += tr_model_tensor_size(&m->cfg, k);
    return m->params + off;
}

void tr_model_zero_grad(tr_model *m) {
    if (m) memset(m->grads, 0, sizeof(float) * m->nparams);
}

void tr_model_set_grad_hook(tr_model *m, tr_model_grad_hook fn, void *ctx) {
    if (!m) return;
    m->hook = fn;
    m->hook_ctx = ctx;
}

#define GRAD_READY(g)                                                                                                  \
    do {                                                                                                               \
        if (m->hook) m->hook(m->hook_ctx, (g));                                                                        \
    } while (0)

const float *tr_model_logits(const tr_model *m) {
    if (m && m->fam) return m->fam->logits(m->impl);
    return m && m->have_logits ? m->a.logits : NULL;
}

int tr_model_reserve(tr_model *m, int B, int T) {
    if (!m || B <= 0 || T <= 0 || T > m->cfg.max_seq) return TR_MODEL_EINVAL;
    if (m->fam) return m->fam->reserve(m->impl, B, T);
    tr_model_mem mem;
    if (tr_model_memory(&m->cfg, B, T, &mem) != TR_MODEL_OK) return TR_MODEL_EINVAL;
    size_t need = (mem.acts + mem.grad_acts) / sizeof(float);
    if (need > m->acts_cap) {
        free(m->acts);
        m->acts_cap = 0;
        m->have_logits = 0;
        m->acts = malloc(sizeof(float) * need);
        if (!m->acts) return TR_MODEL_ENOMEM;
        m->acts_cap = need;
    }
    return TR_MODEL_OK;
}

/* ---- forward / backward ------------------------------------------------------ */

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        int rc_ = (x);                                                                                                 \
        if (rc_) return rc_ == KN_ENOMEM ? TR_MODEL_ENOMEM : TR_MODEL_EINVAL;                                          \
    } while (0)

static int check_batch(tr_model *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos) {
    const tr_model_config *c = &m->cfg;
    if (!inputs || B <= 0 || T <= 0 || T > c->max_seq) return TR_MODEL_EINVAL;
    for (size_t i = 0; i < (size_t)B * T; i++) {
        if (inputs[i] >= (uint32_t)c->vocab) return TR_MODEL_EINVAL;
        if (targets && targets[i] >= c->vocab) return TR_MODEL_EINVAL;
        if (pos && (pos[i] < 0 || pos[i] >= c->max_seq)) return TR_MODEL_EINVAL;
    }
    return TR_MODEL_OK;
}

static int forward(tr_model *m, int B, int T, const uint32_t *inputs, const int32_t *pos, const int32_t *doc) {
    const tr_model_config *c = &m->cfg;
    int rc = tr_model_reserve(m, B, T);
    if (rc) return rc;
    m->have_logits = 0;
    carve(c, (size_t)B, (size_t)T, m->acts, &m->a);
    acts_t *a = &m->a;
    int L = c->n_layer, C = c->d_model, NH = c->n_head, N = B * T;
    size_t BTC = (size_t)N * C;
    float *P[TR_NUM_PARAM_TENSORS];
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) P[i] = m->params + m->offs[i];

    CK(kn_encoder_forward_ref(a->encoded, inputs, pos, P[TR_P_WTE], P[TR_P_WPE], B, T, C, c->vocab, c->max_seq));
    for (int l = 0; l < L; l++) {
        const float *res = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BTC;
        float *ln1 = a->ln1 + l * BTC, *qkv = a->qkv + l * BTC * 3;
        float *atty = a->atty + l * BTC, *res2 = a->residual2 + l * BTC;
        float *ln2 = a->ln2 + l * BTC, *fch = a->fch + l * BTC * 4;
        float *fchg = a->fch_gelu + l * BTC * 4, *res3 = a->residual3 + l * BTC;
        float *att = a->att + (size_t)l * B * NH * T * T;
        CK(kn_layernorm_forward_ref(ln1, a->ln1_mean + (size_t)l * N, a->ln1_rstd + (size_t)l * N, res,
                                    P[TR_P_LN1W] + (size_t)l * C, P[TR_P_LN1B] + (size_t)l * C, N, C));
        CK(kn_matmul_forward_ref(qkv, ln1, P[TR_P_QKVW] + (size_t)l * 3 * C * C, P[TR_P_QKVB] + (size_t)l * 3 * C, N, C,
                                 3 * C));
        CK(kn_attention_forward_ref(atty, att, qkv, doc, B, T, C, NH));
        CK(kn_matmul_forward_ref(a->proj, atty, P[TR_P_ATTPROJW] + (size_t)l * C * C, P[TR_P_ATTPROJB] + (size_t)l * C,
                                 N, C, C));
        CK(kn_residual_forward_ref(res2, res, a->proj, BTC));
        CK(kn_layernorm_forward_ref(ln2, a->ln2_mean + (size_t)l * N, a->ln2_rstd + (size_t)l * N, res2,
                                    P[TR_P_LN2W] + (size_t)l * C, P[TR_P_LN2B] + (size_t)l * C, N, C));
        CK(kn_matmul_forward_ref(fch, ln2, P[TR_P_FCW] + (size_t)l * 4 * C * C, P[TR_P_FCB] + (size_t)l * 4 * C, N, C,
                                 4 * C));
        CK(kn_gelu_forward_ref(fchg, fch, BTC * 4));
        CK(kn_matmul_forward_ref(a->proj, fchg, P[TR_P_FCPROJW] + (size_t)l * 4 * C * C,
                                 P[TR_P_FCPROJB] + (size_t)l * C, N, 4 * C, C));
        CK(kn_residual_forward_ref(res3, res2, a->proj, BTC));
    }
    CK(kn_layernorm_forward_ref(a->lnf, a->lnf_mean, a->lnf_rstd, a->residual3 + (size_t)(L - 1) * BTC, P[TR_P_LNFW],
                                P[TR_P_LNFB], N, C));
    CK(kn_matmul_forward_ref(a->logits, a->lnf, P[TR_P_WTE], NULL, N, C, c->vocab_padded));
    return TR_MODEL_OK;
}

static void sum_losses(const acts_t *a, const int32_t *targets, size_t n, double *loss_sum, uint64_t *n_targets) {
    double s = 0.0;
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (targets[i] >= 0) {
            s += a->losses[i];
            k++;
        }
    if (loss_sum) *loss_sum = s;
    if (n_targets) *n_targets = k;
}

int tr_model_forward(tr_model *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                     const int32_t *doc, double *loss_sum, uint64_t *n_targets) {
    if (loss_sum) *loss_sum = 0.0;
    if (n_targets) *n_targets = 0;
    if (!m) return TR_MODEL_EINVAL;
    if (m->fam) return m->fam->forward(m->impl, B, T, inputs, targets, pos, doc, loss_sum, n_targets);
    int rc = check_batch(m, B, T, inputs, targets, pos);
    if (!rc) rc = forward(m, B, T, inputs, pos, doc);
    if (rc) return rc;
    m->have_logits = 1;
    if (targets) {
        CK(kn_softmax_xent_forward_ref(m->a.losses, NULL, m->a.logits, targets, B * T, m->cfg.vocab,
                                       m->cfg.vocab_padded));
        sum_losses(&m->a, targets, (size_t)B * T, loss_sum, n_targets);
    }
    return TR_MODEL_OK;
}

int tr_model_fwd_bwd(tr_model *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                     const int32_t *doc, float grad_scale, double *loss_sum, uint64_t *n_targets) {
    if (loss_sum) *loss_sum = 0.0;
    if (n_targets) *n_targets = 0;
    if (!m || !targets) return TR_MODEL_EINVAL;
    if (m->fam) { /* one readiness group: the whole gradient, when backward is done */
        int frc = m->fam->fwd_bwd(m->impl, B, T, inputs, targets, pos, doc, grad_scale, loss_sum, n_targets);
        if (!frc) GRAD_READY(0);
        return frc;
    }
    int rc = check_batch(m, B, T, inputs, targets, pos);
    if (!rc) rc = forward(m, B, T, inputs, pos, doc);
    if (rc) return rc;
    const tr_model_config *c = &m->cfg;
    acts_t *a = &m->a;
    int L = c->n_layer, C = c->d_model, NH = c->n_head, N = B * T;
    int V = c->vocab, Vp = c->vocab_padded;
    size_t BTC = (size_t)N * C;
    float *P[TR_NUM_PARAM_TENSORS], *G[TR_NUM_PARAM_TENSORS];
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
        P[i] = m->params + m->offs[i];
        G[i] = m->grads + m->offs[i];
    }
    /* softmax in place, then dlogits in place */
    CK(kn_softmax_xent_forward_ref(a->losses, a->logits, a->logits, targets, N, V, Vp));
    sum_losses(a, targets, (size_t)N, loss_sum, n_targets);
    CK(kn_softmax_xent_backward_ref(a->logits, a->logits, targets, NULL, grad_scale, N, V, Vp));
    CK(kn_matmul_backward_ref(a->dbuf, G[TR_P_WTE], NULL, a->logits, a->lnf, P[TR_P_WTE], N, C, Vp));
    memset(a->dres, 0, sizeof(float) * BTC);
    CK(kn_layernorm_backward_ref(a->dres, G[TR_P_LNFW], G[TR_P_LNFB], a->dbuf, a->residual3 + (size_t)(L - 1) * BTC,
                                 P[TR_P_LNFW], a->lnf_mean, a->lnf_rstd, N, C));
    GRAD_READY(0);
    for (int l = L - 1; l >= 0; l--) {
        const float *res = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BTC;
        float *ln1 = a->ln1 + l * BTC, *qkv = a->qkv + l * BTC * 3;
        float *atty = a->atty + l * BTC, *res2 = a->residual2 + l * BTC;
        float *ln2 = a->ln2 + l * BTC, *fch = a->fch + l * BTC * 4;
        float *fchg = a->fch_gelu + l * BTC * 4;
        float *att = a->att + (size_t)l * B * NH * T * T;
        size_t C2 = (size_t)C * C;
        /* dres holds d(residual3[l]) */
        CK(kn_matmul_backward_ref(a->dbig, G[TR_P_FCPROJW] + l * 4 * C2, G[TR_P_FCPROJB] + (size_t)l * C, a->dres, fchg,
                                  P[TR_P_FCPROJW] + l * 4 * C2, N, 4 * C, C));
        CK(kn_gelu_backward_ref(a->dbig, fch, a->dbig, BTC * 4));
        CK(kn_matmul_backward_ref(a->dbuf, G[TR_P_FCW] + l * 4 * C2, G[TR_P_FCB] + (size_t)l * 4 * C, a->dbig, ln2,
                                  P[TR_P_FCW] + l * 4 * C2, N, C, 4 * C));
        CK(kn_layernorm_backward_ref(a->dres, G[TR_P_LN2W] + (size_t)l * C, G[TR_P_LN2B] + (size_t)l * C, a->dbuf, res2,
                                     P[TR_P_LN2W] + (size_t)l * C, a->ln2_mean + (size_t)l * N,
                                     a->ln2_rstd + (size_t)l * N, N, C));
        /* dres holds d(residual2[l]) */
        CK(kn_matmul_backward_ref(a->dbuf, G[TR_P_ATTPROJW] + l * C2, G[TR_P_ATTPROJB] + (size_t)l * C, a->dres, atty,
                                  P[TR_P_ATTPROJW] + l * C2, N, C, C));
        CK(kn_attention_backward_ref(a->dbig, a->dbuf, qkv, att, doc, B, T, C, NH));
        CK(kn_matmul_backward_ref(a->dbuf, G[TR_P_QKVW] + l * 3 * C2, G[TR_P_QKVB] + (size_t)l * 3 * C, a->dbig, ln1,
                                  P[TR_P_QKVW] + l * 3 * C2, N, C, 3 * C));
        CK(kn_layernorm_backward_ref(a->dres, G[TR_P_LN1W] + (size_t)l * C, G[TR_P_LN1B] + (size_t)l * C, a->dbuf, res,
                                     P[TR_P_LN1W] + (size_t)l * C, a->ln1_mean + (size_t)l * N,
                                     a->ln1_rstd + (size_t)l * N, N, C));
        /* dres holds d(residual3[l-1]) (or d(encoded)) */
        GRAD_READY(L - l);
    }
    CK(kn_encoder_backward_ref(G[TR_P_WTE], G[TR_P_WPE], a->dres, inputs, pos, B, T, C, V, c->max_seq));
    GRAD_READY(L + 1);
    return TR_MODEL_OK;
}

/* ---- optimiser ---------------------------------------------------------------- */

int tr_model_state_init(tr_model *m, int n, size_t elem_bytes) {
    if (!m || n < 1 || n > TR_MODEL_MAX_STATE || elem_bytes < 1 || elem_bytes > 16) return TR_MODEL_EINVAL;
    if (m->n_state) return m->n_state == n && m->state_bytes == elem_bytes ? TR_MODEL_OK : TR_MODEL_EINVAL;
    for (int k = 0; k < n; k++) {
        m->state[k] = calloc(m->nparams, elem_bytes);
        if (!m->state[k]) {
            while (k-- > 0) {
                free(m->state[k]);
                m->state[k] = NULL;
            }
            return TR_MODEL_ENOMEM;
        }
    }
    m->n_state = n;
    m->state_bytes = elem_bytes;
    return TR_MODEL_OK;
}

int tr_model_adamw_init(tr_model *m) { return tr_model_state_init(m, 2, sizeof(float)); }

int tr_model_adamw_step(tr_model *m, const tr_adamw_hparams *h, int t, const int *decay_mask) {
    if (!m || !h || t < 1) return TR_MODEL_EINVAL;
    float *am = tr_model_adam_m(m), *av = tr_model_adam_v(m);
    if (!am || !av) return TR_MODEL_ESTATE;
    if (m->fam) return TR_MODEL_EINVAL; /* GPT-2's test optimiser; the trainer steps through optim.h */
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
        size_t o = m->offs[i];
        int decay = decay_mask ? decay_mask[i] != 0 : tr_model_param_decay(i);
        CK(kn_adamw_step_ref(m->params + o, m->grads + o, am + o, av + o, m->sizes[i], h->lr, h->beta1, h->beta2,
                             h->eps, h->weight_decay, decay, t));
    }
    return TR_MODEL_OK;
}

int tr_model_clip_grad_norm(tr_model *m, float max_norm, float *norm_out) {
    if (!m) return TR_MODEL_EINVAL;
    CK(kn_clip_grad_norm_ref(m->grads, m->nparams, max_norm, norm_out));
    return TR_MODEL_OK;
}
