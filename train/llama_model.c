/* llama_model.c - the Llama-family model on the CPU kernels (llama_model.h):
 * the GPT-2 model's blocked, threaded matmul (kernels/matmul_ref.c) with the
 * adjacent q/k/v and gate/up weights as one matmul each, and the Llama ops
 * of kernels/llama_cpu_ref.c on packed rows. Activations and scratch live in
 * one block (tr_llama_reserve / tr_llama_memory), reused across calls. */
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
    float *buf; /* activations + scratch (tr_llama_reserve) */
    size_t buf_cap;
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
    free(m->names), free(m->off), free(m->len), free(m->p), free(m->g), free(m->inv_freq), free(m->buf);
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

/* The tensors of layer l, by their index in the layout above. */
enum { LT_Q, LT_K, LT_V, LT_O, LT_GATE, LT_UP, LT_DOWN, LT_NORM1, LT_NORM2 };
static size_t tix(const tr_llama *m, int l, int which, int bias) {
    int b = m->c.qkv_bias, nt = 9 + 3 * b;
    int at[] = {0, 1 + b, 2 + 2 * b, 3 + 3 * b, 4 + 3 * b, 5 + 3 * b, 6 + 3 * b, 7 + 3 * b, 8 + 3 * b};
    return (size_t)(1 + l * nt + at[which] + bias); /* bias: the q/k/v bias right after its weight */
}
#define PW(m, l, w) ((m)->p + (m)->off[tix(m, l, w, 0)])
#define GW(m, l, w) ((m)->g + (m)->off[tix(m, l, w, 0)])
#define PB(m, l, w) ((m)->p + (m)->off[tix(m, l, w, 1)])
#define GB(m, l, w) ((m)->g + (m)->off[tix(m, l, w, 1)])

int tr_llama_reserve(tr_llama *m, int B, int T) {
    tr_llama_mem mem;
    if (!m || tr_llama_memory(&m->c, B, T, &mem) != TR_OK) return -1;
    size_t need = (mem.acts + mem.scratch) / sizeof(float);
    if (need > m->buf_cap) {
        free(m->buf);
        m->buf_cap = 0;
        /* not zeroed: every activation is written before it is read */
        m->buf = malloc(need * sizeof(float));
        if (!m->buf) return -1;
        m->buf_cap = need;
    }
    return 0;
}

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        if ((x) != KN_OK) {                                                                                            \
            rc = -1;                                                                                                   \
            goto done;                                                                                                 \
        }                                                                                                              \
    } while (0)

/* One forward/backward pass: the shapes and the reserved block carved as
 * tr_llama_memory describes: activations kept for the backward (one block
 * of `per` floats per layer, then the head's) and the scratch S. */
typedef struct {
    tr_llama *m;
    const tr_llama_config *c;
    int B, T, L, H, KV, C, hd, KVd, Q, F, V;
    size_t N, NC, NQ, NF, NA, per;
    float *A, *S;
    float *dx, *dh, *dqkv, *dgu, *dtmp, *split; /* in S */
    float *cs;                                  /* RoPE cos/sin of the batch's positions (N, hd) */
    const int32_t *doc;                         /* document ids (NULL: one document per row) */
} llama_pass;

#define LAY(P, l, k) ((P)->A + (size_t)(l) * (P)->per + (k))
#define XIN(P, l) LAY(P, l, 0)
#define H1(P, l) LAY(P, l, (P)->NC)
#define QKV(P, l) LAY(P, l, 2 * (P)->NC)
#define AO(P, l) LAY(P, l, 2 * (P)->NC + (P)->NQ)
#define XMID(P, l) LAY(P, l, 3 * (P)->NC + (P)->NQ)
#define H2(P, l) LAY(P, l, 4 * (P)->NC + (P)->NQ)
#define GU(P, l) LAY(P, l, 5 * (P)->NC + (P)->NQ)
#define ACT(P, l) LAY(P, l, 5 * (P)->NC + (P)->NQ + 2 * (P)->NF)
#define ATT(P, l) LAY(P, l, 5 * (P)->NC + (P)->NQ + 3 * (P)->NF)
#define R1(P, l) LAY(P, l, 5 * (P)->NC + (P)->NQ + 3 * (P)->NF + (P)->NA)
#define R2(P, l) LAY(P, l, 5 * (P)->NC + (P)->NQ + 3 * (P)->NF + (P)->NA + (P)->N)

/* Layer l forward: xin -> xout (the next layer's input, or the final norm's). */
static int layer_forward(const llama_pass *P, int l, float *xout) {
    tr_llama *m = P->m;
    const tr_llama_config *c = P->c;
    const int N = (int)P->N, C = P->C, H = P->H, KV = P->KV, hd = P->hd, KVd = P->KVd, Q = P->Q, F = P->F;
    float *xin = XIN(P, l), *qkv = QKV(P, l);
    int rc = 0;
    CK(kn_rmsnorm_forward_ref(H1(P, l), R1(P, l), xin, PW(m, l, LT_NORM1), N, C, c->norm_eps));
    if (!c->qkv_bias) { /* q_proj, k_proj, v_proj are adjacent: one (Q, C) matmul gives the packed row */
        CK(kn_matmul_forward_ref(qkv, H1(P, l), PW(m, l, LT_Q), NULL, N, C, Q));
    } else { /* Qwen2: weights and biases interleave; three matmuls, then pack */
        float *q = P->split, *k = q + P->NC, *v = k + P->N * (size_t)KVd;
        CK(kn_matmul_forward_ref(q, H1(P, l), PW(m, l, LT_Q), PB(m, l, LT_Q), N, C, C));
        CK(kn_matmul_forward_ref(k, H1(P, l), PW(m, l, LT_K), PB(m, l, LT_K), N, C, KVd));
        CK(kn_matmul_forward_ref(v, H1(P, l), PW(m, l, LT_V), PB(m, l, LT_V), N, C, KVd));
        for (size_t n = 0; n < P->N; n++) {
            memcpy(qkv + n * Q, q + n * C, (size_t)C * sizeof *q);
            memcpy(qkv + n * Q + C, k + n * KVd, (size_t)KVd * sizeof *k);
            memcpy(qkv + n * Q + C + KVd, v + n * KVd, (size_t)KVd * sizeof *v);
        }
    }
    /* q's H heads and k's KV heads are adjacent in the packed row: one pass */
    CK(kn_rope_rows_cpu(qkv, (size_t)Q, P->cs, N, H + KV, hd, 0));
    CK(kn_gqa_attention_forward_cpu(AO(P, l), ATT(P, l), qkv, P->doc, P->B, P->T, H, KV, hd));
    CK(kn_matmul_forward_ref(XMID(P, l), AO(P, l), PW(m, l, LT_O), NULL, N, C, C));
    CK(kn_residual_forward_ref(XMID(P, l), XMID(P, l), xin, P->NC));
    CK(kn_rmsnorm_forward_ref(H2(P, l), R2(P, l), XMID(P, l), PW(m, l, LT_NORM2), N, C, c->norm_eps));
    /* gate_proj and up_proj are adjacent: one (2F, C) matmul, rows [gate | up] */
    CK(kn_matmul_forward_ref(GU(P, l), H2(P, l), PW(m, l, LT_GATE), NULL, N, C, 2 * F));
    CK(kn_swiglu_packed_forward_cpu(ACT(P, l), GU(P, l), N, F));
    CK(kn_matmul_forward_ref(xout, ACT(P, l), PW(m, l, LT_DOWN), NULL, N, F, C));
    CK(kn_residual_forward_ref(xout, xout, XMID(P, l), P->NC));
done:
    return rc;
}

/* Layer l backward: P->dx holds the gradient of the layer's output on entry
 * and of its input on return. */
static int layer_backward(const llama_pass *P, int l) {
    tr_llama *m = P->m;
    const tr_llama_config *c = P->c;
    const int N = (int)P->N, C = P->C, H = P->H, KV = P->KV, hd = P->hd, KVd = P->KVd, Q = P->Q, F = P->F;
    float *dx = P->dx, *dh = P->dh, *dqkv = P->dqkv, *dgu = P->dgu, *dtmp = P->dtmp;
    int rc = 0;
    /* dx: the gradient of the layer's output x = xmid + down(act) */
    CK(kn_matmul_backward_ref(dtmp, GW(m, l, LT_DOWN), NULL, dx, ACT(P, l), PW(m, l, LT_DOWN), N, F, C));
    CK(kn_swiglu_packed_backward_cpu(dgu, dtmp, GU(P, l), N, F));
    CK(kn_matmul_backward_ref(dh, GW(m, l, LT_GATE), NULL, dgu, H2(P, l), PW(m, l, LT_GATE), N, C, 2 * F));
    CK(kn_rmsnorm_backward_cpu(dx, GW(m, l, LT_NORM2), dh, XMID(P, l), PW(m, l, LT_NORM2), R2(P, l), N, C));
    /* dx: the gradient of xmid = xin + o_proj(ao) */
    CK(kn_matmul_backward_ref(dtmp, GW(m, l, LT_O), NULL, dx, AO(P, l), PW(m, l, LT_O), N, C, C));
    CK(kn_gqa_attention_backward_cpu(dqkv, dtmp, AO(P, l), QKV(P, l), ATT(P, l), P->doc, P->B, P->T, H, KV, hd));
    CK(kn_rope_rows_cpu(dqkv, (size_t)Q, P->cs, N, H + KV, hd, 1));
    if (!c->qkv_bias) {
        CK(kn_matmul_backward_ref(dh, GW(m, l, LT_Q), NULL, dqkv, H1(P, l), PW(m, l, LT_Q), N, C, Q));
    } else {
        float *dq = P->split, *dk = dq + P->NC, *dv = dk + P->N * (size_t)KVd;
        for (size_t n = 0; n < P->N; n++) {
            memcpy(dq + n * C, dqkv + n * Q, (size_t)C * sizeof *dq);
            memcpy(dk + n * KVd, dqkv + n * Q + C, (size_t)KVd * sizeof *dk);
            memcpy(dv + n * KVd, dqkv + n * Q + C + KVd, (size_t)KVd * sizeof *dv);
        }
        CK(kn_matmul_backward_ref(dh, GW(m, l, LT_Q), GB(m, l, LT_Q), dq, H1(P, l), PW(m, l, LT_Q), N, C, C));
        CK(kn_matmul_backward_ref(dtmp, GW(m, l, LT_K), GB(m, l, LT_K), dk, H1(P, l), PW(m, l, LT_K), N, C, KVd));
        CK(kn_residual_forward_ref(dh, dh, dtmp, P->NC));
        CK(kn_matmul_backward_ref(dtmp, GW(m, l, LT_V), GB(m, l, LT_V), dv, H1(P, l), PW(m, l, LT_V), N, C, KVd));
        CK(kn_residual_forward_ref(dh, dh, dtmp, P->NC));
    }
    CK(kn_rmsnorm_backward_cpu(dx, GW(m, l, LT_NORM1), dh, XIN(P, l), PW(m, l, LT_NORM1), R1(P, l), N, C));
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
    P.Q = P.C + 2 * P.KVd;
    const int L = P.L, C = P.C, V = P.V;
    const size_t N = P.N = (size_t)B * T;
    for (size_t n = 0; n < N; n++)
        if (inputs[n] >= (uint32_t)V || targets[n] >= V || (pos && (pos[n] < 0 || pos[n] >= c->max_seq))) return -1;
    if (tr_llama_reserve(m, B, T)) return -1;
    int rc = 0;
    const size_t NC = P.NC = N * C;
    P.NQ = N * (size_t)P.Q;
    P.NF = N * (size_t)P.F;
    P.NA = (size_t)B * P.H * T * T;
    P.per = 5 * NC + P.NQ + 3 * P.NF + P.NA + 2 * N;
    /* the block, in tr_llama_memory's order */
    P.A = m->buf;
    float *XL = P.A + P.per * (size_t)L, *HF = XL + NC, *RF = HF + NC, *LOG = RF + N, *losses = LOG + N * V;
    int32_t *ps = (int32_t *)(losses + N); /* int32 in float-sized slots */
    P.cs = (float *)(ps + N);
    P.S = P.cs + N * (size_t)P.hd;
    P.dx = P.S;
    P.dh = P.dx + NC;
    P.dqkv = P.dh + NC;
    P.dgu = P.dqkv + P.NQ;
    P.dtmp = P.dgu + 2 * P.NF;
    P.split = P.dtmp + (P.NF > NC ? P.NF : NC);
    for (size_t n = 0; n < N; n++) ps[n] = pos ? pos[n] : (int32_t)(n % (size_t)T);
    CK(kn_rope_cos_sin_cpu(P.cs, ps, m->inv_freq, (int)N, P.hd));
    float *emb = m->p + m->off[0];
    size_t ih = tix(m, L - 1, LT_NORM2, 0) + 1; /* model.norm.weight, then lm_head when untied */
    float *W = c->tied ? emb : m->p + m->off[ih + 1];
    float *gW = c->tied ? m->g + m->off[0] : m->g + m->off[ih + 1];
    for (size_t n = 0; n < N; n++) memcpy(XIN(&P, 0) + n * C, emb + (size_t)inputs[n] * C, (size_t)C * sizeof *emb);
    for (int l = 0; l < L; l++) CK(layer_forward(&P, l, l + 1 < L ? XIN(&P, l + 1) : XL));
    CK(kn_rmsnorm_forward_ref(HF, RF, XL, m->p + m->off[ih], (int)N, C, c->norm_eps));
    CK(kn_matmul_forward_ref(LOG, HF, W, NULL, (int)N, C, V));
    if (logits_out) memcpy(logits_out, LOG, N * (size_t)V * sizeof *LOG);
    CK(kn_softmax_xent_forward_cpu(losses, LOG, LOG, targets, (int)N, V)); /* probabilities in place */
    double sum = 0;
    size_t cnt = 0;
    for (size_t n = 0; n < N; n++)
        if (targets[n] >= 0) sum += losses[n], cnt++;
    *loss_out = mean ? (cnt ? sum / (double)cnt : 0) : sum;
    if (n_targets) *n_targets = cnt;
    if (!cnt || (!mean && grad_scale == 0.0f)) goto done;
    /* ---- backward ---- */
    CK(kn_softmax_xent_backward_ref(LOG, LOG, targets, NULL, mean ? 1.0f / (float)cnt : grad_scale, (int)N, V, V));
    CK(kn_matmul_backward_ref(P.dh, gW, NULL, LOG, HF, W, (int)N, C, V));
    memset(P.dx, 0, NC * sizeof *P.dx);
    CK(kn_rmsnorm_backward_cpu(P.dx, m->g + m->off[ih], P.dh, XL, m->p + m->off[ih], RF, (int)N, C));
    for (int l = L - 1; l >= 0; l--) CK(layer_backward(&P, l));
    float *gemb = m->g + m->off[0];
    for (size_t n = 0; n < N; n++) /* in row order: deterministic */
        for (int e = 0; e < C; e++) gemb[(size_t)inputs[n] * C + e] += P.dx[n * C + e];
    rc = 0;
done:
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
