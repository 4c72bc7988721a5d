/* llama_model.c - the Llama-family model on the CPU reference kernels
 * (llama_model.h). A reference: every call allocates its activations. */
#include "llama_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn.h"

#define NAME_LEN 96

struct tr_llama {
    tr_llama_config c;
    int n;
    char (*names)[NAME_LEN];
    size_t *off, *len;
    float *p, *g;
    float *inv_freq;
};

static int add(tr_llama *m, int *k, size_t *at, size_t len, const char *fmt, int l) {
    if (m->names) snprintf(m->names[*k], NAME_LEN, fmt, l);
    if (m->off) {
        m->off[*k] = *at;
        m->len[*k] = len;
    }
    (*k)++;
    *at += len;
    return 0;
}

/* The tensor table, in transformers' named_parameters order per layer. */
static size_t layout(tr_llama *m) {
    const tr_llama_config *c = &m->c;
    size_t C = (size_t)c->d_model, hd = C / (size_t)c->n_head, KVd = (size_t)c->n_kv_head * hd, F = (size_t)c->d_ff,
           V = (size_t)c->vocab, at = 0;
    int k = 0;
    add(m, &k, &at, V * C, "model.embed_tokens.weight", 0);
    for (int l = 0; l < c->n_layer; l++) {
        add(m, &k, &at, C * C, "model.layers.%d.self_attn.q_proj.weight", l);
        if (c->qkv_bias) add(m, &k, &at, C, "model.layers.%d.self_attn.q_proj.bias", l);
        add(m, &k, &at, KVd * C, "model.layers.%d.self_attn.k_proj.weight", l);
        if (c->qkv_bias) add(m, &k, &at, KVd, "model.layers.%d.self_attn.k_proj.bias", l);
        add(m, &k, &at, KVd * C, "model.layers.%d.self_attn.v_proj.weight", l);
        if (c->qkv_bias) add(m, &k, &at, KVd, "model.layers.%d.self_attn.v_proj.bias", l);
        add(m, &k, &at, C * C, "model.layers.%d.self_attn.o_proj.weight", l);
        add(m, &k, &at, F * C, "model.layers.%d.mlp.gate_proj.weight", l);
        add(m, &k, &at, F * C, "model.layers.%d.mlp.up_proj.weight", l);
        add(m, &k, &at, C * F, "model.layers.%d.mlp.down_proj.weight", l);
        add(m, &k, &at, C, "model.layers.%d.input_layernorm.weight", l);
        add(m, &k, &at, C, "model.layers.%d.post_attention_layernorm.weight", l);
    }
    add(m, &k, &at, C, "model.norm.weight", 0);
    if (!c->tied) add(m, &k, &at, V * C, "lm_head.weight", 0);
    m->n = k;
    return at;
}

const tr_llama_config *tr_llama_get_config(const tr_llama *m) { return &m->c; }

int tr_llama_create(const tr_llama_config *c, tr_llama **out) {
    *out = NULL;
    if (tr_llama_config_check(c)) return -1;
    tr_llama *m = calloc(1, sizeof *m);
    if (!m) return -1;
    m->c = *c;
    size_t P = layout(m); /* counts */
    m->names = calloc((size_t)m->n, sizeof *m->names);
    m->off = calloc((size_t)m->n, sizeof *m->off);
    m->len = calloc((size_t)m->n, sizeof *m->len);
    m->p = calloc(P, sizeof *m->p);
    m->g = calloc(P, sizeof *m->g);
    m->inv_freq = calloc((size_t)(c->d_model / c->n_head / 2), sizeof *m->inv_freq);
    if (!m->names || !m->off || !m->len || !m->p || !m->g || !m->inv_freq ||
        kn_rope_inv_freq_ref(m->inv_freq, c->d_model / c->n_head, c->rope_theta, &c->rope_scaling)) {
        tr_llama_free(m);
        return -1;
    }
    layout(m);
    *out = m;
    return 0;
}

void tr_llama_free(tr_llama *m) {
    if (!m) return;
    free(m->names), free(m->off), free(m->len), free(m->p), free(m->g), free(m->inv_freq);
    free(m);
}

int tr_llama_n_tensors(const tr_llama *m) { return m->n; }
const char *tr_llama_tensor_name(const tr_llama *m, int i) { return i >= 0 && i < m->n ? m->names[i] : NULL; }

static float *lookup(tr_llama *m, float *base, const char *name, size_t *n) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->names[i], name)) {
            if (n) *n = m->len[i];
            return base + m->off[i];
        }
    return NULL;
}
float *tr_llama_param(tr_llama *m, const char *name, size_t *n) { return lookup(m, m->p, name, n); }
float *tr_llama_grad(tr_llama *m, const char *name, size_t *n) { return lookup(m, m->g, name, n); }

/* parameter / gradient of layer l by suffix */
static float *PL(tr_llama *m, float *base, int l, const char *suffix) {
    char nm[NAME_LEN];
    snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix);
    return lookup(m, base, nm, NULL);
}

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        if ((x) != KN_OK) {                                                                                            \
            rc = -1;                                                                                                   \
            goto done;                                                                                                 \
        }                                                                                                              \
    } while (0)

/* One forward/backward pass: the shapes, the activations kept for the
 * backward (A, one block of `per` floats per layer, then the head's) and the
 * backward's scratch (S). tr_llama_fwd_bwd runs it in phases. */
typedef struct {
    tr_llama *m;
    const tr_llama_config *c;
    int B, T, L, H, KV, C, hd, KVd, F, V, rep;
    size_t N, NC, NF, NA, per;
    float *A, *S;
    int32_t *ps;        /* positions */
    const int32_t *doc; /* document ids (NULL: one document per row) */
} llama_pass;

#define LAY(P, l, k) ((P)->A + (size_t)(l) * (P)->per + (k))
#define XIN(P, l) LAY(P, l, 0)
#define H1(P, l) LAY(P, l, (P)->NC)
#define QKV(P, l) LAY(P, l, 2 * (P)->NC)
#define AO(P, l) LAY(P, l, 5 * (P)->NC)
#define XMID(P, l) LAY(P, l, 6 * (P)->NC)
#define H2(P, l) LAY(P, l, 7 * (P)->NC)
#define GT(P, l) LAY(P, l, 8 * (P)->NC)
#define UP(P, l) LAY(P, l, 8 * (P)->NC + (P)->NF)
#define ACT(P, l) LAY(P, l, 8 * (P)->NC + 2 * (P)->NF)
#define ATT(P, l) LAY(P, l, 8 * (P)->NC + 3 * (P)->NF)
#define R1(P, l) LAY(P, l, 8 * (P)->NC + 3 * (P)->NF + (P)->NA)
#define R2(P, l) LAY(P, l, 8 * (P)->NC + 3 * (P)->NF + (P)->NA + (P)->N)

/* Layer l forward: xin -> xout (the next layer's input, or the final norm's). */
static int layer_forward(const llama_pass *P, int l, float *xout, float *tmp) {
    tr_llama *m = P->m;
    const tr_llama_config *c = P->c;
    const int N = (int)P->N, C = P->C, H = P->H, KV = P->KV, hd = P->hd, KVd = P->KVd, F = P->F, rep = P->rep;
    float *xin = XIN(P, l), *q = P->S, *k = P->S + P->NC, *v = k + P->N * (size_t)KVd; /* before packing */
    int rc = 0;
    CK(kn_rmsnorm_forward_ref(H1(P, l), R1(P, l), xin, PL(m, m->p, l, "input_layernorm.weight"), N, C, c->norm_eps));
    CK(kn_matmul_forward_ref(q, H1(P, l), PL(m, m->p, l, "self_attn.q_proj.weight"),
                             c->qkv_bias ? PL(m, m->p, l, "self_attn.q_proj.bias") : NULL, N, C, C));
    CK(kn_matmul_forward_ref(k, H1(P, l), PL(m, m->p, l, "self_attn.k_proj.weight"),
                             c->qkv_bias ? PL(m, m->p, l, "self_attn.k_proj.bias") : NULL, N, C, KVd));
    CK(kn_matmul_forward_ref(v, H1(P, l), PL(m, m->p, l, "self_attn.v_proj.weight"),
                             c->qkv_bias ? PL(m, m->p, l, "self_attn.v_proj.bias") : NULL, N, C, KVd));
    CK(kn_rope_forward_ref(q, q, P->ps, m->inv_freq, N, H, hd));
    CK(kn_rope_forward_ref(k, k, P->ps, m->inv_freq, N, KV, hd));
    float *qkv = QKV(P, l);
    for (size_t n = 0; n < P->N; n++) /* pack [q | k | v], each query head with its KV head */
        for (int h = 0; h < H; h++) {
            memcpy(qkv + n * 3 * C + (size_t)h * hd, q + n * C + (size_t)h * hd, (size_t)hd * sizeof *q);
            memcpy(qkv + n * 3 * C + C + (size_t)h * hd, k + n * KVd + (size_t)(h / rep) * hd, (size_t)hd * sizeof *k);
            memcpy(qkv + n * 3 * C + 2 * C + (size_t)h * hd, v + n * KVd + (size_t)(h / rep) * hd,
                   (size_t)hd * sizeof *v);
        }
    CK(kn_attention_forward_ref(AO(P, l), ATT(P, l), qkv, P->doc, P->B, P->T, C, H));
    CK(kn_matmul_forward_ref(tmp, AO(P, l), PL(m, m->p, l, "self_attn.o_proj.weight"), NULL, N, C, C));
    CK(kn_residual_forward_ref(XMID(P, l), xin, tmp, P->NC));
    CK(kn_rmsnorm_forward_ref(H2(P, l), R2(P, l), XMID(P, l), PL(m, m->p, l, "post_attention_layernorm.weight"), N, C,
                              c->norm_eps));
    CK(kn_matmul_forward_ref(GT(P, l), H2(P, l), PL(m, m->p, l, "mlp.gate_proj.weight"), NULL, N, C, F));
    CK(kn_matmul_forward_ref(UP(P, l), H2(P, l), PL(m, m->p, l, "mlp.up_proj.weight"), NULL, N, C, F));
    CK(kn_swiglu_forward_ref(ACT(P, l), GT(P, l), UP(P, l), P->NF));
    CK(kn_matmul_forward_ref(tmp, ACT(P, l), PL(m, m->p, l, "mlp.down_proj.weight"), NULL, N, F, C));
    CK(kn_residual_forward_ref(xout, XMID(P, l), tmp, P->NC));
done:
    return rc;
}

/* Layer l backward: dx holds the gradient of the layer's output on entry and
 * of its input on return; dqkv: 3NC floats of scratch outside S. */
static int layer_backward(const llama_pass *P, int l, float *dx, float *dqkv) {
    tr_llama *m = P->m;
    const tr_llama_config *c = P->c;
    const int N = (int)P->N, C = P->C, H = P->H, KV = P->KV, hd = P->hd, KVd = P->KVd, F = P->F, rep = P->rep;
    float *S = P->S, *dh = S + P->NC, *t1 = S + 2 * P->NC, *dq = S + 4 * P->NC, *dao = S + 5 * P->NC,
          *dk = S + 6 * P->NC, *dv = dk + P->N * (size_t)KVd, *dgt = dv + P->N * (size_t)KVd, *dup = dgt + P->NF;
    int rc = 0;
    /* dx: the gradient of the layer's output x = xmid + down(act) */
    CK(kn_matmul_backward_ref(dgt, PL(m, m->g, l, "mlp.down_proj.weight"), NULL, dx, ACT(P, l),
                              PL(m, m->p, l, "mlp.down_proj.weight"), N, F, C)); /* dgt = dact */
    CK(kn_swiglu_backward_ref(dgt, dup, dgt, GT(P, l), UP(P, l), P->NF));
    CK(kn_matmul_backward_ref(dh, PL(m, m->g, l, "mlp.gate_proj.weight"), NULL, dgt, H2(P, l),
                              PL(m, m->p, l, "mlp.gate_proj.weight"), N, C, F));
    CK(kn_matmul_backward_ref(t1, PL(m, m->g, l, "mlp.up_proj.weight"), NULL, dup, H2(P, l),
                              PL(m, m->p, l, "mlp.up_proj.weight"), N, C, F));
    CK(kn_residual_forward_ref(dh, dh, t1, P->NC));
    CK(kn_rmsnorm_backward_ref(dx, PL(m, m->g, l, "post_attention_layernorm.weight"), dh, XMID(P, l),
                               PL(m, m->p, l, "post_attention_layernorm.weight"), R2(P, l), N, C));
    /* dx: the gradient of xmid = xin + o_proj(ao) */
    CK(kn_matmul_backward_ref(dao, PL(m, m->g, l, "self_attn.o_proj.weight"), NULL, dx, AO(P, l),
                              PL(m, m->p, l, "self_attn.o_proj.weight"), N, C, C));
    CK(kn_attention_backward_ref(dqkv, dao, QKV(P, l), ATT(P, l), P->doc, P->B, P->T, C, H));
    memset(dk, 0, 2 * P->N * (size_t)KVd * sizeof *dk);
    for (size_t n = 0; n < P->N; n++) /* unpack: each KV head gets the sum over its query heads */
        for (int h = 0; h < H; h++) {
            const float *sq = dqkv + n * 3 * C + (size_t)h * hd, *sk = sq + C, *sv = sq + 2 * C;
            float *oq = dq + n * C + (size_t)h * hd, *ok = dk + n * KVd + (size_t)(h / rep) * hd,
                  *ov = dv + n * KVd + (size_t)(h / rep) * hd;
            for (int e = 0; e < hd; e++) {
                oq[e] = sq[e];
                ok[e] += sk[e];
                ov[e] += sv[e];
            }
        }
    CK(kn_rope_backward_ref(dq, dq, P->ps, m->inv_freq, N, H, hd));
    CK(kn_rope_backward_ref(dk, dk, P->ps, m->inv_freq, N, KV, hd));
    CK(kn_matmul_backward_ref(dh, PL(m, m->g, l, "self_attn.q_proj.weight"),
                              c->qkv_bias ? PL(m, m->g, l, "self_attn.q_proj.bias") : NULL, dq, H1(P, l),
                              PL(m, m->p, l, "self_attn.q_proj.weight"), N, C, C));
    CK(kn_matmul_backward_ref(t1, PL(m, m->g, l, "self_attn.k_proj.weight"),
                              c->qkv_bias ? PL(m, m->g, l, "self_attn.k_proj.bias") : NULL, dk, H1(P, l),
                              PL(m, m->p, l, "self_attn.k_proj.weight"), N, C, KVd));
    CK(kn_residual_forward_ref(dh, dh, t1, P->NC));
    CK(kn_matmul_backward_ref(t1, PL(m, m->g, l, "self_attn.v_proj.weight"),
                              c->qkv_bias ? PL(m, m->g, l, "self_attn.v_proj.bias") : NULL, dv, H1(P, l),
                              PL(m, m->p, l, "self_attn.v_proj.weight"), N, C, KVd));
    CK(kn_residual_forward_ref(dh, dh, t1, P->NC));
    CK(kn_rmsnorm_backward_ref(dx, PL(m, m->g, l, "input_layernorm.weight"), dh, XIN(P, l),
                               PL(m, m->p, l, "input_layernorm.weight"), R1(P, l), N, C));
done:
    return rc;
}

/* mean: the gradient of the mean loss (tr_llama_fwd_bwd); else of
 * grad_scale * the summed loss, no backward when grad_scale is 0
 * (tr_llama_fwd_bwd_sum). */
static int fwd_bwd(tr_llama *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                   const int32_t *doc, float *logits_out, int mean, float grad_scale, double *loss_out,
                   uint64_t *n_targets) {
    const tr_llama_config *c = &m->c;
    if (B <= 0 || T <= 0 || T > c->max_seq || !inputs || !targets) return -1;
    llama_pass P = {.m = m,
                    .c = c,
                    .B = B,
                    .T = T,
                    .L = c->n_layer,
                    .H = c->n_head,
                    .KV = c->n_kv_head,
                    .C = c->d_model,
                    .F = c->d_ff,
                    .V = c->vocab,
                    .doc = doc};
    P.hd = P.C / P.H;
    P.KVd = P.KV * P.hd;
    P.rep = P.H / P.KV;
    const int L = P.L, C = P.C, V = P.V;
    const size_t N = P.N = (size_t)B * T;
    for (size_t n = 0; n < N; n++)
        if (inputs[n] >= (uint32_t)V || targets[n] >= V || (pos && (pos[n] < 0 || pos[n] >= c->max_seq))) return -1;
    int rc = 0;
    const size_t NC = P.NC = N * C;
    P.NF = N * (size_t)P.F;
    P.NA = (size_t)B * P.H * T * T;
    /* activations: per layer xin, h1, qkv(3), ao, xmid, h2 (8 NC), gt, up, act (3 NF), att, r1, r2 */
    P.per = 8 * NC + 3 * P.NF + P.NA + 2 * N;
    P.A = calloc(P.per * (size_t)L + 3 * NC + N + 2 * N * (size_t)V, sizeof *P.A);
    P.S = calloc(6 * NC + 2 * N * (size_t)P.KVd + 2 * P.NF, sizeof *P.S); /* backward scratch */
    P.ps = malloc(N * sizeof *P.ps);
    float *losses = calloc(N, sizeof *losses);
    if (!P.A || !P.S || !P.ps || !losses) {
        rc = -1;
        goto done;
    }
    for (size_t n = 0; n < N; n++) P.ps[n] = pos ? pos[n] : (int32_t)(n % (size_t)T);
    float *XL = P.A + P.per * (size_t)L, *HF = XL + NC, *TMP = HF + NC, *RF = TMP + NC, *LOG = RF + N,
          *PR = LOG + N * V;
    float *emb = tr_llama_param(m, "model.embed_tokens.weight", NULL);
    float *W = c->tied ? emb : tr_llama_param(m, "lm_head.weight", NULL);
    float *gW =
        c->tied ? tr_llama_grad(m, "model.embed_tokens.weight", NULL) : tr_llama_grad(m, "lm_head.weight", NULL);
    for (size_t n = 0; n < N; n++) memcpy(XIN(&P, 0) + n * C, emb + (size_t)inputs[n] * C, (size_t)C * sizeof *emb);
    for (int l = 0; l < L; l++) CK(layer_forward(&P, l, l + 1 < L ? XIN(&P, l + 1) : XL, TMP));
    CK(kn_rmsnorm_forward_ref(HF, RF, XL, tr_llama_param(m, "model.norm.weight", NULL), (int)N, C, c->norm_eps));
    CK(kn_matmul_forward_ref(LOG, HF, W, NULL, (int)N, C, V));
    if (logits_out) memcpy(logits_out, LOG, N * (size_t)V * sizeof *LOG);
    CK(kn_softmax_xent_forward_ref(losses, PR, LOG, targets, (int)N, V, V));
    double sum = 0;
    size_t cnt = 0;
    for (size_t n = 0; n < N; n++)
        if (targets[n] >= 0) sum += losses[n], cnt++;
    *loss_out = mean ? (cnt ? sum / (double)cnt : 0) : sum;
    if (n_targets) *n_targets = cnt;
    if (!cnt || (!mean && grad_scale == 0.0f)) goto done;
    /* ---- backward ---- */
    float *dlog = PR, *dx = P.S, *dh = P.S + NC;
    float *dqkv = XL; /* XL's (N,C) is done with; dqkv needs 3NC: XL, HF, TMP */
    CK(kn_softmax_xent_backward_ref(dlog, PR, targets, NULL, mean ? 1.0f / (float)cnt : grad_scale, (int)N, V, V));
    CK(kn_matmul_backward_ref(dh, gW, NULL, dlog, HF, W, (int)N, C, V));
    memset(dx, 0, NC * sizeof *dx);
    CK(kn_rmsnorm_backward_ref(dx, tr_llama_grad(m, "model.norm.weight", NULL), dh, XL,
                               tr_llama_param(m, "model.norm.weight", NULL), RF, (int)N, C));
    for (int l = L - 1; l >= 0; l--) CK(layer_backward(&P, l, dx, dqkv));
    float *gemb = tr_llama_grad(m, "model.embed_tokens.weight", NULL);
    for (size_t n = 0; n < N; n++) /* in row order: deterministic */
        for (int e = 0; e < C; e++) gemb[(size_t)inputs[n] * C + e] += dx[n * C + e];
    rc = 0;
done:
    free(P.A);
    free(P.S);
    free(P.ps);
    free(losses);
    return rc;
}

int tr_llama_fwd_bwd(tr_llama *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                     const int32_t *doc, float *logits_out, double *loss) {
    return fwd_bwd(m, B, T, inputs, targets, pos, doc, logits_out, 1, 0.0f, loss, NULL);
}

int tr_llama_fwd_bwd_sum(tr_llama *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                         const int32_t *doc, float grad_scale, float *logits_out, double *loss_sum,
                         uint64_t *n_targets) {
    return fwd_bwd(m, B, T, inputs, targets, pos, doc, logits_out, 0, grad_scale, loss_sum, n_targets);
}

float *tr_llama_params(tr_llama *m) { return m ? m->p : NULL; }
float *tr_llama_grads(tr_llama *m) { return m ? m->g : NULL; }
size_t tr_llama_tensor_size(const tr_llama *m, int i) { return m && i >= 0 && i < m->n ? m->len[i] : 0; }
