/* gpu_model.cu - the GPU model: GPT-2 forward/backward and the optimizer
 * step on the device, op for op the CUDA twin of train/model.c's
 * tr_model_fwd_bwd (see gpu_model.h). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "gpu_family.h"
#include "gpu_model.h"
}
#include "gpu_common.cuh" /* the parameter block, carver, error macros and step every GPU model shares */
#include "gpu_lmhead.cuh" /* the lm head + softmax-xent, whole or in row chunks (MKS_LMHEAD_CHUNK) */

struct tr_cuda_model {
    tr_model_config c;
    int Bmax, Tmax;
    int attn_tc;     /* 1: tensor-core attention (bf16, hs 64 or 128; not with MKS_CUDA_ATTENTION=simt) */
    int attn_cudnn;  /* TR_GPU_CUDNN_*: cuDNN's attention for Bmax x Tmax rows without a document mask; 0: own */
    int gelu_epi;    /* 1: GELU in the fc matmul's epilogue (GELU_AUX; not with MKS_GELU_UNFUSED=1) */
    int dgelu_epi;   /* 1: GELU backward in the fc projection's dinp matmul (DGELU; same switch) */
    int recompute;   /* 0, or 1: fchg is one layer's buffer, refilled from fch in backward */
    size_t lm_rows;  /* rows of the logits buffer (gpu_lmhead.h): Bmax*Tmax, or the chunk's */
    tr_gpu_params p; /* P, dtype, stream, optimizer, master/grads/state/compute copy, scratch, step buffers */
    kn_cuda_ctx *ctx;
    size_t sizes[TR_NUM_PARAM_TENSORS], offs[TR_NUM_PARAM_TENSORS];
    /* activations: per layer, [L][...] */
    void *ln1, *qkv, *atty, *res2, *ln2, *fch, *fchg, *res3;
    float *ln1m, *ln1r, *ln2m, *ln2r, *lse;
    void *encoded, *proj, *lnf, *logits, *dres, *dbuf, *dbig;
    float *lnfm, *lnfr, *losses;
    void *cublas_ws;
    tr_model_grad_hook hook; /* gradient readiness (tr_cuda_model_set_grad_hook) */
    void *hook_ctx;
};

typedef tr_gpu_carver carver;

static void carve(tr_cuda_model *m, carver *cv) {
    const tr_model_config *c = &m->c;
    size_t N = (size_t)m->Bmax * m->Tmax, C = (size_t)c->d_model, L = (size_t)c->n_layer, e = m->p.esz;
    tr_gpu_params_carve(&m->p, cv);
    m->ln1 = cv->take(L * N * C * e, "ln1");
    m->qkv = cv->take(L * N * 3 * C * e, "qkv");
    m->atty = cv->take(L * N * C * e, "attention out");
    m->res2 = cv->take(L * N * C * e, "residual2");
    m->ln2 = cv->take(L * N * C * e, "ln2");
    m->fch = cv->take(L * N * 4 * C * e, "fc");
    m->fchg =
        cv->take((m->recompute ? 1 : L) * N * 4 * C * e, m->recompute ? "fc gelu (one layer: recompute 1)" : "fc gelu");
    m->res3 = cv->take(L * N * C * e, "residual3");
    m->ln1m = (float *)cv->take(L * N * 4, "ln1 mean");
    m->ln1r = (float *)cv->take(L * N * 4, "ln1 rstd");
    m->ln2m = (float *)cv->take(L * N * 4, "ln2 mean");
    m->ln2r = (float *)cv->take(L * N * 4, "ln2 rstd");
    m->lse = (float *)cv->take(L * N * (size_t)c->n_head * 4, "attention lse");
    m->encoded = cv->take(N * C * e, "encoded");
    m->proj = cv->take(N * C * e, "projection");
    m->lnf = cv->take(N * C * e, "lnf");
    m->lnfm = (float *)cv->take(N * 4, "lnf mean");
    m->lnfr = (float *)cv->take(N * 4, "lnf rstd");
    m->logits = cv->take(m->lm_rows * (size_t)c->vocab_padded * e, "logits / dlogits");
    m->losses = (float *)cv->take(N * 4, "losses");
    m->dres = cv->take(N * C * e, "dresidual");
    m->dbuf = cv->take(N * C * e, "dln");
    m->dbig = cv->take(N * 4 * C * e, "d4C");
    /* one piece for every backward op, the size the planner prints (the
     * kernels' own size functions; no bias gradient over the vocabulary:
     * the tied lm head has none, so no Vp-wide partials, 25 MiB at d12,
     * 32 x 1024 tokens) */
    m->p.scratch_bytes = tr_model_gpu_scratch_bytes(c, (size_t)m->Bmax, (size_t)m->Tmax);
    tr_gpu_params_carve_tail(&m->p, cv, &m->cublas_ws);
}

static int init_shape(tr_cuda_model *m, const tr_model_config *c, int B, int T, kn_dtype dt, int recompute,
                      const tr_optim_ops *opt) {
    if (tr_gpu_params_init(&m->p, dt, opt) != TR_OK) return TR_ERR_ARG;
    if (!c || B <= 0 || T <= 0 || T > c->max_seq) return TR_ERR_ARG;
    if (recompute < 0 || recompute > TR_GPU_RECOMPUTE_MAX) return TR_ERR_ARG;
    m->recompute = recompute;
    if (tr_model_config_check(c) != TR_MODEL_OK) return TR_ERR_ARG;
    m->c = *c;
    m->Bmax = B;
    m->Tmax = T;
    /* MKS_LMHEAD_CHUNK, read once here: arena_bytes and create carve alike */
    m->lm_rows = tr_lmhead_chunk_rows(tr_lmhead_chunk_request(), (size_t)B * T, (size_t)c->d_model);
    tr_model_param_sizes(c, m->sizes);
    size_t off = 0;
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
        m->offs[i] = off;
        off += m->sizes[i];
    }
    m->p.P = off;
    m->p.nt = TR_NUM_PARAM_TENSORS; /* the optimizer's tensor table (gpu_common.cuh) */
    return TR_OK;
}

extern "C" size_t tr_cuda_model_arena_bytes(const tr_model_config *c, int B, int T, kn_dtype dt, int recompute,
                                            const tr_optim_ops *opt) {
    tr_cuda_model m;
    memset(&m, 0, sizeof m);
    if (init_shape(&m, c, B, T, dt, recompute, opt) != TR_OK) return 0;
    carver cv = {nullptr, 0, 0};
    carve(&m, &cv);
    return cv.total;
}

extern "C" int tr_cuda_model_create(tr_cuda_model **out, const tr_model_config *c, int B, int T, kn_dtype dt,
                                    tr_cuda_arena *a, tr_cuda_stream s, int recompute, const tr_optim_ops *opt) {
    if (!out || !a) return TR_ERR_ARG;
    tr_cuda_model *m = (tr_cuda_model *)calloc(1, sizeof *m);
    if (!m) return TR_ERR_NOMEM;
    int rc = init_shape(m, c, B, T, dt, recompute, opt);
    if (rc == TR_OK && !m->p.opt->step_cuda) {
        kn_cuda_set_error("optimizer %s has no GPU step in this build", m->p.opt->name);
        rc = TR_ERR_ARG;
    }
    if (rc != TR_OK) {
        free(m);
        return rc;
    }
    carver cv = {a, 0, 0};
    carve(m, &cv);
    if (cv.failed) {
        free(m);
        return TR_ERR_NOMEM; /* a->last_error names the piece */
    }
    m->p.s = (cudaStream_t)s;
    {
        /* bf16 with heads of 64: the tensor-core attention (mma.sync), 6.6x the SIMT kernels' forward
         * and 5.5x their backward at d12 B16 T1024 on the H200 (docs/gpu-results.md, 2026-12-04),
         * in its pipelined variant another 2.5x / 3.3x (kernels/kn_attention_tc.cu picks the variant,
         * MKS_ATTN_TC); MKS_CUDA_ATTENTION=simt keeps the SIMT kernels (tr_gpu_attention_tc). */
        m->attn_tc = tr_gpu_attention_tc(dt, c->d_model / c->n_head) && c->d_model % 8 == 0;
        m->attn_cudnn = tr_gpu_attention_cudnn_setup(m->Bmax, m->Tmax, c->n_head, c->n_head, c->d_model / c->n_head, dt,
                                                     m->p.scratch_bytes);
        /* GELU fused into cuBLASLt's epilogues, 16-bit runs: the fc forward's GELU_AUX (the
         * pre-activation written beside the output for the backward) and the fc projection's
         * DGELU backward replace the two GELU passes: 0.30 -> 0.19 ms forward and 0.46 ->
         * 0.35 ms backward per layer at d12 B16 on the H200, whose kernel rows passed (bf16
         * 2e-3 / 4e-3, fp16 3e-4).  Not in fp32 runs, which exist to be checked against the
         * CPU reference (cuBLASLt's GELU need not be tanhf: 9e-6 against a 1e-5 bar there).
         * MKS_GELU_UNFUSED=1 keeps the separate GELU kernels. */
        const char *gu = getenv("MKS_GELU_UNFUSED");
        m->dgelu_epi = dt != KN_F32 && !(gu && gu[0] == '1');
        /* recompute 1: the forward's GELU is the kernel the backward recomputes it with
         * (cuBLASLt's need not give the same bits), so both passes see one fchg */
        m->gelu_epi = m->dgelu_epi && m->recompute == 0;
    }
    if (kn_cuda_ctx_create(&m->ctx, s, m->cublas_ws, KN_CUBLASLT_WORKSPACE) != KN_OK) {
        free(m);
        return TR_ERR_NODEVICE;
    }
    *out = m;
    return TR_OK;
}

extern "C" void tr_cuda_model_destroy(tr_cuda_model *m) {
    if (!m) return;
    kn_cuda_ctx_destroy(m->ctx);
    free(m); /* the arena owns the memory */
}

/* CU, KC, LAUNCHED: gpu_common.cuh */

extern "C" int tr_cuda_model_zero_grad(tr_cuda_model *m) {
    if (!m) return TR_ERR_ARG;
    return tr_gpu_params_zero_grad(&m->p);
}

extern "C" int tr_cuda_model_set_params(tr_cuda_model *m, const float *host_params) {
    if (!m || !host_params) return TR_ERR_ARG;
    CU(cudaMemcpyAsync(m->p.master, host_params, m->p.P * 4, cudaMemcpyHostToDevice, m->p.s));
    return tr_gpu_params_reset(&m->p);
}

extern "C" int tr_cuda_model_init_random(tr_cuda_model *m, uint64_t seed) {
    if (!m) return TR_ERR_ARG;
    const float a = 0.0346f; /* uniform(-a, a): std 0.02 */
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
        if (!m->sizes[i]) continue;
        int ln_w = i == TR_P_LN1W || i == TR_P_LN2W || i == TR_P_LNFW;
        int decay = tr_model_param_decay(i);
        float *p = m->p.master + m->offs[i];
        if (ln_w) tr_gpu_fill_kernel<<<1024, 256, 0, m->p.s>>>(p, m->sizes[i], 0, 1.0f, 1.0f, 1);
        else if (!decay) tr_gpu_fill_kernel<<<1024, 256, 0, m->p.s>>>(p, m->sizes[i], 0, 0.0f, 0.0f, 1);
        else tr_gpu_fill_kernel<<<1024, 256, 0, m->p.s>>>(p, m->sizes[i], seed + (uint64_t)i, -a, a, 0);
        LAUNCHED("init_fill");
    }
    return tr_gpu_params_reset(&m->p);
}

extern "C" int tr_cuda_model_set_state(tr_cuda_model *m, const float *params, void *const state[]) {
    int rc = tr_cuda_model_set_params(m, params);
    if (rc != TR_OK) return rc;
    for (int k = 0; state && k < m->p.opt->n_state; k++)
        if (state[k])
            CU(cudaMemcpyAsync(m->p.state[k], state[k], m->p.P * (size_t)m->p.opt->state_bytes, cudaMemcpyHostToDevice,
                               m->p.s));
    CU(cudaStreamSynchronize(m->p.s));
    return TR_OK;
}

extern "C" void tr_cuda_model_set_grad_hook(tr_cuda_model *m, tr_model_grad_hook fn, void *ctx) {
    m->hook = fn;
    m->hook_ctx = fn ? ctx : NULL;
}

extern "C" float *tr_cuda_model_grads(tr_cuda_model *m, size_t *n) {
    if (n) *n = m->p.P;
    return m->p.grads;
}

extern "C" int tr_cuda_model_get(tr_cuda_model *m, float *params, float *grads, void *const state[]) {
    if (!m) return TR_ERR_ARG;
    if (params) CU(cudaMemcpyAsync(params, m->p.master, m->p.P * 4, cudaMemcpyDeviceToHost, m->p.s));
    if (grads) CU(cudaMemcpyAsync(grads, m->p.grads, m->p.P * 4, cudaMemcpyDeviceToHost, m->p.s));
    for (int k = 0; state && k < m->p.opt->n_state; k++)
        if (state[k])
            CU(cudaMemcpyAsync(state[k], m->p.state[k], m->p.P * (size_t)m->p.opt->state_bytes, cudaMemcpyDeviceToHost,
                               m->p.s));
    CU(cudaStreamSynchronize(m->p.s));
    return TR_OK;
}

/* pointer helper */
#define ep tr_gpu_ep

/* One forward + backward's shapes, the parameter pointers and the batch. */
typedef struct {
    int B, T, L, C, NH, N, V, Vp;
    size_t BTC, e, C2, cap; /* cap: activation stride, the capacity Bmax*Tmax*C, so the carve is fixed */
    kn_dtype dt;
    cudaStream_t s;
    void *W[TR_NUM_PARAM_TENSORS];
    float *G[TR_NUM_PARAM_TENSORS];
    const float *Wf[TR_NUM_PARAM_TENSORS]; /* fp32 master: LayerNorm weights are fp32 in the kernels */
    const uint32_t *inputs;
    const int32_t *targets, *pos, *doc;
    float grad_scale;
    int fwd_only; /* grad_scale 0: evaluation, no backward */
    int chunked;  /* the head runs in chunks of m->lm_rows < N rows, each chunk's backward in the forward's tail */
} fb_ctx;

/* Layer l's stored activations (slices of the arena at capacity stride). */
typedef struct {
    void *ln1, *qkv, *atty, *res2, *ln2, *fch, *fchg;
    const void *res; /* the layer's input: encoded, or residual3[l-1] */
    float *l1m, *l1r, *l2m, *l2r, *lse;
} layer_acts;

#define LAYER(buf, l, width) ep(m->buf, (size_t)(l)*x->cap *(width), x->e)

static layer_acts acts_of(const tr_cuda_model *m, const fb_ctx *x, int l) {
    size_t bt = (size_t)m->Bmax * m->Tmax;
    layer_acts a;
    a.ln1 = LAYER(ln1, l, 1);
    a.qkv = LAYER(qkv, l, 3);
    a.atty = LAYER(atty, l, 1);
    a.res2 = LAYER(res2, l, 1);
    a.ln2 = LAYER(ln2, l, 1);
    a.fch = LAYER(fch, l, 4);
    a.fchg = m->recompute ? m->fchg : LAYER(fchg, l, 4); /* recompute 1: one layer's buffer */
    a.res = l == 0 ? m->encoded : LAYER(res3, l - 1, 1);
    a.l1m = m->ln1m + (size_t)l * bt;
    a.l1r = m->ln1r + (size_t)l * bt;
    a.l2m = m->ln2m + (size_t)l * bt;
    a.l2r = m->ln2r + (size_t)l * bt;
    a.lse = m->lse + (size_t)l * bt * x->NH;
    return a;
}

/* Forward through lnf and the logits, then the loss and dlogits in place;
 * with the head in chunks (x->chunked, training) also its backward, into
 * dbuf and wte's gradient (gpu_lmhead.cuh). */
static int forward_pass(tr_cuda_model *m, const fb_ctx *x) {
    const tr_model_config *c = &m->c;
    int B = x->B, T = x->T, L = x->L, C = x->C, NH = x->NH, N = x->N, V = x->V, Vp = x->Vp;
    size_t BTC = x->BTC, e = x->e, C2 = x->C2;
    kn_dtype dt = x->dt;
    cudaStream_t s = x->s;
    void *const *W = x->W;
    const float *const *Wf = x->Wf;
    const bool cudnn_att = tr_gpu_cudnn_call(m->attn_cudnn, x->doc, B, T, m->Bmax, m->Tmax);
    KC(kn_encoder_forward_cuda(m->encoded, x->inputs, x->pos, W[TR_P_WTE], W[TR_P_WPE], B, T, C, V, c->max_seq, dt, s));
    for (int l = 0; l < L; l++) {
        layer_acts a = acts_of(m, x, l);
        if (l == 0) {
            KC(kn_layernorm_forward_cuda(a.ln1, a.l1m, a.l1r, nullptr, m->encoded, nullptr, Wf[TR_P_LN1W],
                                         Wf[TR_P_LN1B], N, C, dt, s));
        } else { /* residual3[l-1] = residual2[l-1] + proj, fused into ln1 */
            KC(kn_layernorm_forward_cuda(a.ln1, a.l1m, a.l1r, LAYER(res3, l - 1, 1), LAYER(res2, l - 1, 1), m->proj,
                                         Wf[TR_P_LN1W] + (size_t)l * C, Wf[TR_P_LN1B] + (size_t)l * C, N, C, dt, s));
        }
        KC(kn_matmul_forward_cuda(m->ctx, a.qkv, nullptr, a.ln1, ep(W[TR_P_QKVW], (size_t)l * 3 * C2, e),
                                  ep(W[TR_P_QKVB], (size_t)l * 3 * C, e), N, C, 3 * C, dt));
        if (cudnn_att)
            KC(kn_cudnn_attention_forward(a.atty, a.lse, a.qkv, B, T, NH, NH, C / NH, m->p.scratch, m->p.scratch_bytes,
                                          dt, s));
        else if (m->attn_tc) KC(kn_attention_forward_tc_cuda(a.atty, a.lse, a.qkv, x->doc, B, T, C, NH, dt, s));
        else KC(kn_attention_forward_cuda(a.atty, a.lse, a.qkv, x->doc, B, T, C, NH, dt, s));
        KC(kn_matmul_forward_cuda(m->ctx, m->proj, nullptr, a.atty, ep(W[TR_P_ATTPROJW], (size_t)l * C2, e),
                                  ep(W[TR_P_ATTPROJB], (size_t)l * C, e), N, C, C, dt));
        KC(kn_layernorm_forward_cuda(a.ln2, a.l2m, a.l2r, a.res2, a.res, m->proj, Wf[TR_P_LN2W] + (size_t)l * C,
                                     Wf[TR_P_LN2B] + (size_t)l * C, N, C, dt, s));
        if (m->gelu_epi) { /* fchg = gelu(pre), fch = pre */
            KC(kn_matmul_forward_cuda(m->ctx, a.fchg, a.fch, a.ln2, ep(W[TR_P_FCW], (size_t)l * 4 * C2, e),
                                      ep(W[TR_P_FCB], (size_t)l * 4 * C, e), N, C, 4 * C, dt));
        } else {
            KC(kn_matmul_forward_cuda(m->ctx, a.fch, nullptr, a.ln2, ep(W[TR_P_FCW], (size_t)l * 4 * C2, e),
                                      ep(W[TR_P_FCB], (size_t)l * 4 * C, e), N, C, 4 * C, dt));
            KC(kn_gelu_forward_cuda(a.fchg, a.fch, BTC * 4, dt, s));
        }
        KC(kn_matmul_forward_cuda(m->ctx, m->proj, nullptr, a.fchg, ep(W[TR_P_FCPROJW], (size_t)l * 4 * C2, e),
                                  ep(W[TR_P_FCPROJB], (size_t)l * C, e), N, 4 * C, C, dt));
    }
    /* residual3[L-1] = residual2[L-1] + proj, fused into lnf */
    KC(kn_layernorm_forward_cuda(m->lnf, m->lnfm, m->lnfr, LAYER(res3, L - 1, 1), LAYER(res2, L - 1, 1), m->proj,
                                 Wf[TR_P_LNFW], Wf[TR_P_LNFB], N, C, dt, s));
    /* the logits, the loss and dlogits in place (no probability tensor): whole, the dlogits left for
     * backward_pass; or in chunks, each chunk's dwte += dlogits^T lnf and dbuf rows = dlogits wte at once
     * (wte's gradient is completed by the encoder backward, where the hook hears it) */
    tr_lmhead h;
    h.ctx = m->ctx, h.s = s, h.dt = dt;
    h.x = m->lnf, h.w = W[TR_P_WTE], h.dw = x->G[TR_P_WTE], h.dx = m->dbuf;
    h.logits = m->logits, h.rows = m->lm_rows, h.losses = m->losses, h.targets = x->targets;
    h.dloss = x->grad_scale, h.N = N, h.C = C, h.V = V, h.Vp = Vp;
    h.scratch = m->p.scratch, h.scratch_bytes = m->p.scratch_bytes;
    KC(tr_lmhead_pass(&h, x->chunked && !x->fwd_only ? TR_LMHEAD_FUSED : TR_LMHEAD_FORWARD));
    return tr_gpu_params_loss_sum(&m->p, m->losses, x->targets, N);
}

/* Backward from dlogits to the embeddings; m->hook hears each group of the
 * gradient as its kernels are enqueued (lnf, layers L-1 .. 0, wte/wpe). */
static int backward_pass(tr_cuda_model *m, const fb_ctx *x) {
    const tr_model_config *c = &m->c;
    int B = x->B, T = x->T, L = x->L, C = x->C, NH = x->NH, N = x->N, V = x->V, Vp = x->Vp;
    size_t BTC = x->BTC, e = x->e, C2 = x->C2;
    kn_dtype dt = x->dt;
    cudaStream_t s = x->s;
    void *const *W = x->W;
    float *const *G = x->G;
    const float *const *Wf = x->Wf;
    const bool cudnn_att = tr_gpu_cudnn_call(m->attn_cudnn, x->doc, B, T, m->Bmax, m->Tmax);
    if (!x->chunked) /* whole: the head's backward from the dlogits the forward left (chunked: dbuf is done) */
        KC(kn_matmul_backward_cuda(m->ctx, m->dbuf, G[TR_P_WTE], nullptr, m->logits, m->lnf, W[TR_P_WTE], N, C, Vp,
                                   m->p.scratch, m->p.scratch_bytes, dt));
    CU(cudaMemsetAsync(m->dres, 0, BTC * e, s));
    KC(kn_layernorm_backward_cuda(m->dres, G[TR_P_LNFW], G[TR_P_LNFB], m->dbuf, LAYER(res3, L - 1, 1), Wf[TR_P_LNFW],
                                  m->lnfm, m->lnfr, N, C, m->p.scratch, m->p.scratch_bytes, dt, s));
    if (m->hook) m->hook(m->hook_ctx, 0); /* lnf: enqueued */
    for (int l = L - 1; l >= 0; l--) {
        layer_acts a = acts_of(m, x, l);
        /* dres holds d(residual3[l]) */
        if (m->recompute) /* fchg = gelu(fch) again: the fc projection's weight gradient reads it */
            KC(kn_gelu_forward_cuda(a.fchg, a.fch, BTC * 4, dt, s));
        if (m->dgelu_epi) { /* dbig = d(fch) directly */
            KC(kn_matmul_backward_dgelu_cuda(
                m->ctx, m->dbig, G[TR_P_FCPROJW] + (size_t)l * 4 * C2, G[TR_P_FCPROJB] + (size_t)l * C, m->dres, a.fchg,
                ep(W[TR_P_FCPROJW], (size_t)l * 4 * C2, e), a.fch, N, 4 * C, C, m->p.scratch, m->p.scratch_bytes, dt));
        } else {
            KC(kn_matmul_backward_cuda(
                m->ctx, m->dbig, G[TR_P_FCPROJW] + (size_t)l * 4 * C2, G[TR_P_FCPROJB] + (size_t)l * C, m->dres, a.fchg,
                ep(W[TR_P_FCPROJW], (size_t)l * 4 * C2, e), N, 4 * C, C, m->p.scratch, m->p.scratch_bytes, dt));
            KC(kn_gelu_backward_cuda(m->dbig, a.fch, m->dbig, BTC * 4, dt, s));
        }
        KC(kn_matmul_backward_cuda(m->ctx, m->dbuf, G[TR_P_FCW] + (size_t)l * 4 * C2, G[TR_P_FCB] + (size_t)l * 4 * C,
                                   m->dbig, a.ln2, ep(W[TR_P_FCW], (size_t)l * 4 * C2, e), N, C, 4 * C, m->p.scratch,
                                   m->p.scratch_bytes, dt));
        KC(kn_layernorm_backward_cuda(m->dres, G[TR_P_LN2W] + (size_t)l * C, G[TR_P_LN2B] + (size_t)l * C, m->dbuf,
                                      a.res2, Wf[TR_P_LN2W] + (size_t)l * C, a.l2m, a.l2r, N, C, m->p.scratch,
                                      m->p.scratch_bytes, dt, s));
        /* dres holds d(residual2[l]) */
        KC(kn_matmul_backward_cuda(m->ctx, m->dbuf, G[TR_P_ATTPROJW] + (size_t)l * C2, G[TR_P_ATTPROJB] + (size_t)l * C,
                                   m->dres, a.atty, ep(W[TR_P_ATTPROJW], (size_t)l * C2, e), N, C, C, m->p.scratch,
                                   m->p.scratch_bytes, dt));
        if (cudnn_att)
            KC(kn_cudnn_attention_backward(m->dbig, m->dbuf, a.qkv, a.atty, a.lse, B, T, NH, NH, C / NH, m->p.scratch,
                                           m->p.scratch_bytes, m->attn_cudnn == TR_GPU_CUDNN_DETERMINISTIC, dt, s));
        else if (m->attn_tc)
            KC(kn_attention_backward_tc_cuda(m->dbig, m->dbuf, a.qkv, a.atty, a.lse, x->doc, B, T, C, NH, m->p.scratch,
                                             m->p.scratch_bytes, dt, s));
        else
            KC(kn_attention_backward_cuda(m->dbig, m->dbuf, a.qkv, a.atty, a.lse, x->doc, B, T, C, NH, m->p.scratch,
                                          m->p.scratch_bytes, dt, s));
        KC(kn_matmul_backward_cuda(m->ctx, m->dbuf, G[TR_P_QKVW] + (size_t)l * 3 * C2, G[TR_P_QKVB] + (size_t)l * 3 * C,
                                   m->dbig, a.ln1, ep(W[TR_P_QKVW], (size_t)l * 3 * C2, e), N, C, 3 * C, m->p.scratch,
                                   m->p.scratch_bytes, dt));
        KC(kn_layernorm_backward_cuda(m->dres, G[TR_P_LN1W] + (size_t)l * C, G[TR_P_LN1B] + (size_t)l * C, m->dbuf,
                                      a.res, Wf[TR_P_LN1W] + (size_t)l * C, a.l1m, a.l1r, N, C, m->p.scratch,
                                      m->p.scratch_bytes, dt, s));
        /* dres holds d(residual3[l-1]) (or d(encoded)) */
        if (m->hook) m->hook(m->hook_ctx, 1 + (L - 1 - l)); /* layer l: enqueued */
    }
    KC(kn_encoder_backward_cuda(G[TR_P_WTE], G[TR_P_WPE], m->dres, x->inputs, x->pos, B, T, C, V, c->max_seq,
                                m->p.scratch, m->p.scratch_bytes, dt, s));
    if (m->hook) m->hook(m->hook_ctx, L + 1); /* wte, wpe: enqueued */
    return TR_OK;
}
#undef LAYER

extern "C" int tr_cuda_model_fwd_bwd(tr_cuda_model *m, int B, int T, const uint32_t *inputs, const int32_t *targets,
                                     const int32_t *pos, const int32_t *doc, float grad_scale, double *loss_sum,
                                     uint64_t *n_targets) {
    if (loss_sum) *loss_sum = 0;
    if (n_targets) *n_targets = 0;
    if (!m || !inputs || !targets || B <= 0 || T <= 0 || B * T > m->Bmax * m->Tmax || T > m->Tmax) return TR_ERR_ARG;
    const tr_model_config *c = &m->c;
    fb_ctx x;
    x.B = B;
    x.T = T;
    x.L = c->n_layer;
    x.C = c->d_model;
    x.NH = c->n_head;
    x.N = B * T;
    x.V = c->vocab;
    x.Vp = c->vocab_padded;
    x.BTC = (size_t)x.N * x.C;
    x.e = m->p.esz;
    x.C2 = (size_t)x.C * x.C;
    x.cap = (size_t)m->Bmax * m->Tmax * x.C;
    x.dt = m->p.dt;
    x.s = m->p.s;
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) {
        x.W[i] = ep(m->p.wc, m->offs[i], x.e);
        x.G[i] = m->p.grads + m->offs[i];
        x.Wf[i] = m->p.master + m->offs[i];
    }
    x.inputs = inputs;
    x.targets = targets;
    x.pos = pos;
    x.doc = doc;
    x.grad_scale = grad_scale;
    x.fwd_only = grad_scale == 0.0f;
    x.chunked = m->lm_rows < (size_t)x.N;
    int rc = forward_pass(m, &x);
    if (rc == TR_OK && !x.fwd_only) rc = backward_pass(m, &x); /* evaluation: gradients untouched */
    if (rc != TR_OK) return rc;
    return tr_gpu_params_read_loss(&m->p, loss_sum, n_targets);
}

/* tr_loss_scaler: inline in gpu_model.h (plain C, emulated by tests/test_fp16_scale.c) */

/* The optimizer's GPU step over every tensor (train/optim.h): where each
 * lives and its decay flag */
static void model_tensor(const tr_cuda_model *m, int i, size_t *off, size_t *n, int *decay) {
    *off = m->offs[i];
    *n = m->sizes[i];
    *decay = tr_model_param_decay(i);
}

extern "C" int tr_cuda_model_step_scaled(tr_cuda_model *m, const tr_optim_hparams *h, int t, float max_norm,
                                         float loss_scale, float *norm_out, int *skipped) {
    if (!m) return TR_ERR_ARG;
    return tr_gpu_params_step_scaled(&m->p, h, t, max_norm, loss_scale, norm_out, skipped, TR_NUM_PARAM_TENSORS,
                                     [m](int i, size_t *o, size_t *n, int *d) { model_tensor(m, i, o, n, d); });
}

extern "C" int tr_cuda_model_step(tr_cuda_model *m, const tr_optim_hparams *h, int t, float max_norm, float *norm_out) {
    if (!m) return TR_ERR_ARG;
    return tr_gpu_params_step(&m->p, h, t, max_norm, norm_out, TR_NUM_PARAM_TENSORS,
                              [m](int i, size_t *o, size_t *n, int *d) { model_tensor(m, i, o, n, d); });
}

/* ---- GPT-2's entry in the GPU model table (gpu_family.h) ---------------------------------- */
static size_t g2_arena_bytes(const tr_model_config *c, int B, int T, kn_dtype dt, int recompute,
                             const tr_optim_ops *opt) {
    return tr_cuda_model_arena_bytes(c, B, T, dt, recompute, opt);
}
static int g2_create(void **out, const tr_model_config *c, int B, int T, kn_dtype dt, tr_cuda_arena *a,
                     tr_cuda_stream s, int recompute, const tr_optim_ops *opt) {
    return tr_cuda_model_create((tr_cuda_model **)out, c, B, T, dt, a, s, recompute, opt);
}
static void g2_destroy(void *m) { tr_cuda_model_destroy((tr_cuda_model *)m); }
static int g2_set_state(void *m, const float *params, void *const state[]) {
    return tr_cuda_model_set_state((tr_cuda_model *)m, params, state);
}
static int g2_get(void *m, float *params, float *grads, void *const state[]) {
    return tr_cuda_model_get((tr_cuda_model *)m, params, grads, state);
}
static int g2_zero_grad(void *m) { return tr_cuda_model_zero_grad((tr_cuda_model *)m); }
static float *g2_grads(void *m, size_t *n) { return tr_cuda_model_grads((tr_cuda_model *)m, n); }
static void g2_set_grad_hook(void *m, tr_model_grad_hook fn, void *ctx) {
    tr_cuda_model_set_grad_hook((tr_cuda_model *)m, fn, ctx);
}
static int g2_fwd_bwd(void *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                      const int32_t *doc, float grad_scale, double *loss_sum, uint64_t *n_targets) {
    return tr_cuda_model_fwd_bwd((tr_cuda_model *)m, B, T, inputs, targets, pos, doc, grad_scale, loss_sum, n_targets);
}
static int g2_step_scaled(void *m, const tr_optim_hparams *h, int t, float max_norm, float loss_scale, float *norm_out,
                          int *skipped) {
    return tr_cuda_model_step_scaled((tr_cuda_model *)m, h, t, max_norm, loss_scale, norm_out, skipped);
}

static int g2_step_loss(void *m, double *loss_sum, uint64_t *n_targets) {
    return tr_gpu_params_read_step_loss(&((tr_cuda_model *)m)->p, loss_sum, n_targets);
}

extern "C" const tr_gpu_model_ops tr_gpu_model_gpt2 = {
    "gpt2",   TR_GPU_RECOMPUTE_MAX, g2_arena_bytes, g2_create,      g2_destroy,   g2_set_state, g2_get, g2_zero_grad,
    g2_grads, g2_set_grad_hook,     g2_fwd_bwd,     g2_step_scaled, g2_step_loss,
};
