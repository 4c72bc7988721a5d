/* gpu_llama.cu - the Llama-family model on the GPU, op for op the CUDA twin
 * of train/llama_model.c's tr_llama_fwd_bwd (see gpu_llama.h), laid out as
 * train/gpu_model.cu lays out GPT-2. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "gpu_family.h"
#include "gpu_llama.h"
}
#include "gpu_common.cuh" /* the parameter block, carver, error macros and step every GPU model shares */
#include "gpu_lmhead.cuh" /* the lm head + softmax-xent, whole or in row chunks (MKS_LMHEAD_CHUNK) */

#define LL_NAME 96

typedef struct {
    char name[LL_NAME];
    size_t cpu_off, dev_off, n;
    int decay;
} ll_tensor;

/* The device's per-layer tensors (dev_off into the buffers), by role. */
enum { LW_QKV, LW_QKVB, LW_O, LW_GATE, LW_UP, LW_DOWN, LW_N1, LW_N2, LW_COUNT };

struct tr_cuda_llama {
    tr_llama_config c;
    int Bmax, Tmax, C, H, KV, hd, KVd, RS, F, V, L;
    size_t lm_rows;  /* rows of the logits buffer (gpu_lmhead.h): Bmax*Tmax, or the chunk's */
    tr_gpu_params p; /* P, dtype, stream, optimizer, master/grads/state/compute copy, scratch, step buffers */
    kn_cuda_ctx *ctx;
    int nt;
    ll_tensor *t; /* the tensor table (host) */
    size_t *lay;  /* [L][LW_COUNT] device offsets (LW_QKVB: (size_t)-1 without biases) */
    size_t off_embed, off_norm, off_head;
    /* activations, per layer [L][...] at capacity stride */
    void *xin, *h1, *qkv, *ao, *xmid, *h2, *gate, *up, *act;
    float *r1, *r2, *lse;
    void *xl, *hf, *proj, *logits; /* the final norm's input and output, a (N,C) temporary, logits/dlogits */
    float *rf, *losses;
    void *dres, *dbuf, *dbuf2, *df1, *df2, *dqkv;
    float *rope; /* (max_seq, hd/2, 2) cos/sin */
    float *inv_freq;
    void *cublas_ws;
    int attn_tc;    /* 1: the tensor-core GQA attention (bf16, heads of 64 or 128; not with MKS_CUDA_ATTENTION=simt) */
    int attn_cudnn; /* TR_GPU_CUDNN_*: cuDNN's attention for Bmax x Tmax rows without a document mask; 0: own */
};

typedef tr_gpu_carver ll_carver;

/* The table: tr_llama's order (cpu_off) and the device's (dev_off), where a
 * layer's q, k, v weights are one stacked matrix and its biases one vector. */
static int build_table(tr_cuda_llama *m) {
    const tr_llama_config *c = &m->c;
    size_t C = (size_t)m->C, KVd = (size_t)m->KVd, F = (size_t)m->F, V = (size_t)m->V, RS = (size_t)m->RS;
    size_t cpu = 0, dev = 0;
    int k = 0;
    m->lay = (size_t *)calloc((size_t)m->L * LW_COUNT, sizeof *m->lay);
    m->t = (ll_tensor *)calloc((size_t)(3 + 12 * m->L), sizeof *m->t);
    if (!m->lay || !m->t) return TR_ERR_NOMEM;
#define T_ADD(n_, dec_, devoff_, ...)                                                                                  \
    do {                                                                                                               \
        ll_tensor *t_ = &m->t[k++];                                                                                    \
        snprintf(t_->name, LL_NAME, __VA_ARGS__);                                                                      \
        t_->n = (n_);                                                                                                  \
        t_->decay = (dec_);                                                                                            \
        t_->cpu_off = cpu;                                                                                             \
        t_->dev_off = (devoff_);                                                                                       \
        cpu += (n_);                                                                                                   \
    } while (0)
    m->off_embed = dev;
    T_ADD(V * C, 1, dev, "model.embed_tokens.weight");
    dev += V * C;
    for (int l = 0; l < m->L; l++) {
        size_t *ly = m->lay + (size_t)l * LW_COUNT;
        ly[LW_QKV] = dev;
        ly[LW_QKVB] = c->qkv_bias ? dev + RS * C : (size_t)-1;
        size_t bq = ly[LW_QKVB];
        T_ADD(C * C, 1, dev, "model.layers.%d.self_attn.q_proj.weight", l);
        if (c->qkv_bias) T_ADD(C, 0, bq, "model.layers.%d.self_attn.q_proj.bias", l);
        T_ADD(KVd * C, 1, dev + C * C, "model.layers.%d.self_attn.k_proj.weight", l);
        if (c->qkv_bias) T_ADD(KVd, 0, bq + C, "model.layers.%d.self_attn.k_proj.bias", l);
        T_ADD(KVd * C, 1, dev + (C + KVd) * C, "model.layers.%d.self_attn.v_proj.weight", l);
        if (c->qkv_bias) T_ADD(KVd, 0, bq + C + KVd, "model.layers.%d.self_attn.v_proj.bias", l);
        dev += RS * C + (c->qkv_bias ? RS : 0);
        ly[LW_O] = dev;
        T_ADD(C * C, 1, dev, "model.layers.%d.self_attn.o_proj.weight", l);
        dev += C * C;
        ly[LW_GATE] = dev;
        T_ADD(F * C, 1, dev, "model.layers.%d.mlp.gate_proj.weight", l);
        dev += F * C;
        ly[LW_UP] = dev;
        T_ADD(F * C, 1, dev, "model.layers.%d.mlp.up_proj.weight", l);
        dev += F * C;
        ly[LW_DOWN] = dev;
        T_ADD(C * F, 1, dev, "model.layers.%d.mlp.down_proj.weight", l);
        dev += C * F;
        ly[LW_N1] = dev;
        T_ADD(C, 0, dev, "model.layers.%d.input_layernorm.weight", l);
        dev += C;
        ly[LW_N2] = dev;
        T_ADD(C, 0, dev, "model.layers.%d.post_attention_layernorm.weight", l);
        dev += C;
    }
    m->off_norm = dev;
    T_ADD(C, 0, dev, "model.norm.weight");
    dev += C;
    m->off_head = m->off_embed;
    if (!c->tied) {
        m->off_head = dev;
        T_ADD(V * C, 1, dev, "lm_head.weight");
        dev += V * C;
    }
#undef T_ADD
    m->nt = k;
    m->p.nt = k; /* the optimizer's tensor table (gpu_common.cuh) */
    m->p.P = dev;
    return cpu == dev ? TR_OK : TR_ERR_ARG; /* the same parameters in either order */
}

static void carve(tr_cuda_llama *m, ll_carver *cv) {
    size_t N = (size_t)m->Bmax * m->Tmax, C = (size_t)m->C, L = (size_t)m->L, e = m->p.esz, F = (size_t)m->F,
           RS = (size_t)m->RS, V = (size_t)m->V;
    tr_gpu_params_carve(&m->p, cv);
    m->xin = cv->take(L * N * C * e, "layer input (residual)");
    m->h1 = cv->take(L * N * C * e, "input rmsnorm");
    m->qkv = cv->take(L * N * RS * e, "qkv (rotated)");
    m->ao = cv->take(L * N * C * e, "attention out");
    m->xmid = cv->take(L * N * C * e, "residual mid");
    m->h2 = cv->take(L * N * C * e, "post-attention rmsnorm");
    m->gate = cv->take(L * N * F * e, "gate");
    m->up = cv->take(L * N * F * e, "up");
    m->act = cv->take(L * N * F * e, "swiglu");
    m->r1 = (float *)cv->take(L * N * 4, "rmsnorm1 rstd");
    m->r2 = (float *)cv->take(L * N * 4, "rmsnorm2 rstd");
    m->lse = (float *)cv->take(L * N * (size_t)m->H * 4, "attention lse");
    m->xl = cv->take(N * C * e, "final norm input");
    m->hf = cv->take(N * C * e, "final norm");
    m->rf = (float *)cv->take(N * 4, "final rstd");
    m->proj = cv->take(N * C * e, "projection");
    m->logits = cv->take(m->lm_rows * V * e, "logits / dlogits");
    m->losses = (float *)cv->take(N * 4, "losses");
    m->dres = cv->take(N * C * e, "dresidual");
    m->dbuf = cv->take(N * C * e, "dnorm");
    m->dbuf2 = cv->take(N * C * e, "dnorm (second branch)");
    m->df1 = cv->take(N * F * e, "dgate");
    m->df2 = cv->take(N * F * e, "dup");
    m->dqkv = cv->take(N * RS * e, "dqkv");
    m->rope = (float *)cv->take((size_t)m->c.max_seq * (size_t)m->hd * 4, "rotary cos/sin table");
    m->inv_freq = (float *)cv->take((size_t)m->hd / 2 * 4, "rotary inverse frequencies");
    /* one piece for every backward op: the planner's figure (gpu_llama_plan.c) */
    m->p.scratch_bytes = tr_llama_gpu_scratch_bytes(&m->c, (size_t)m->Bmax, (size_t)m->Tmax);
    tr_gpu_params_carve_tail(&m->p, cv, &m->cublas_ws);
}

static int init_shape(tr_cuda_llama *m, const tr_llama_config *c, int B, int T, kn_dtype dt, const tr_optim_ops *opt) {
    if (tr_gpu_params_init(&m->p, dt, opt) != TR_OK) return TR_ERR_ARG;
    if (!c || B <= 0 || T <= 0 || T > c->max_seq) return TR_ERR_ARG;
    if (c->n_layer <= 0 || c->n_layer > 1024 || c->n_head <= 0 || c->n_kv_head <= 0 || c->n_head % c->n_kv_head ||
        c->d_model <= 0 || c->d_model % c->n_head || c->d_ff <= 0 || c->vocab <= 0 || !(c->norm_eps > 0))
        return TR_ERR_ARG;
    int hd = c->d_model / c->n_head;
    if (hd != 16 && hd != 32 && hd != 64 && hd != 128) {
        kn_cuda_set_error("the GPU Llama model takes head size 16, 32, 64 or 128 (the GQA kernels'), not %d", hd);
        return TR_ERR_ARG;
    }
    /* every row width below is an int for the kernels; B*T*width products are size_t */
    if ((size_t)B * T > (size_t)INT32_MAX / 8 || (size_t)c->d_model + 2 * (size_t)c->n_kv_head * hd > 1u << 20)
        return TR_ERR_ARG;
    m->c = *c;
    m->Bmax = B, m->Tmax = T;
    m->C = c->d_model, m->H = c->n_head, m->KV = c->n_kv_head, m->hd = hd, m->KVd = m->KV * hd;
    m->RS = m->C + 2 * m->KVd, m->F = c->d_ff, m->V = c->vocab, m->L = c->n_layer;
    /* MKS_LMHEAD_CHUNK, read once here: arena_bytes and create carve alike (and the planner's rows) */
    m->lm_rows = tr_lmhead_chunk_rows(tr_lmhead_chunk_request(), (size_t)B * T, (size_t)m->C);
    return build_table(m);
}

static void free_host(tr_cuda_llama *m) {
    free(m->t);
    free(m->lay);
    free(m);
}

extern "C" size_t tr_cuda_llama_arena_bytes(const tr_llama_config *c, int B, int T, kn_dtype dt,
                                            const tr_optim_ops *opt) {
    tr_cuda_llama *m = (tr_cuda_llama *)calloc(1, sizeof *m);
    if (!m) return 0;
    size_t total = 0;
    if (init_shape(m, c, B, T, dt, opt) == TR_OK) {
        ll_carver cv = {nullptr, 0, 0};
        carve(m, &cv);
        total = cv.total;
    }
    free_host(m);
    return total;
}

/* CU, KC, LAUNCHED: gpu_common.cuh */

/* the rotary table: inv_freq on the host (kn_rope_inv_freq_ref: torch's fp32
 * formula and Llama 3's scaling), the cos/sin table on the device, once */
static int build_rope(tr_cuda_llama *m) {
    int h2 = m->hd / 2;
    float *inv = (float *)malloc((size_t)h2 * sizeof *inv);
    if (!inv) return TR_ERR_NOMEM;
    if (kn_rope_inv_freq_ref(inv, m->hd, m->c.rope_theta, &m->c.rope_scaling) != KN_OK) {
        free(inv);
        kn_cuda_set_error("rope: bad theta %g or rope_scaling", (double)m->c.rope_theta);
        return TR_ERR_ARG;
    }
    cudaError_t e = cudaMemcpyAsync(m->inv_freq, inv, (size_t)h2 * sizeof *inv, cudaMemcpyHostToDevice, m->p.s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(m->p.s);
    free(inv);
    CU(e);
    KC(kn_rope_table_cuda(m->rope, m->inv_freq, m->c.max_seq, m->hd, m->p.s));
    return TR_OK;
}

extern "C" int tr_cuda_llama_create(tr_cuda_llama **out, const tr_llama_config *c, int B, int T, kn_dtype dt,
                                    tr_cuda_arena *a, tr_cuda_stream s, const tr_optim_ops *opt) {
    if (!out || !a) return TR_ERR_ARG;
    *out = nullptr;
    tr_cuda_llama *m = (tr_cuda_llama *)calloc(1, sizeof *m);
    if (!m) return TR_ERR_NOMEM;
    int rc = init_shape(m, c, B, T, dt, opt);
    if (rc == TR_OK && !m->p.opt->step_cuda) {
        kn_cuda_set_error("optimizer %s has no GPU step in this build", m->p.opt->name);
        rc = TR_ERR_ARG;
    }
    if (rc != TR_OK) {
        free_host(m);
        return rc;
    }
    ll_carver cv = {a, 0, 0};
    carve(m, &cv);
    if (cv.failed) {
        free_host(m);
        return TR_ERR_NOMEM; /* a->last_error names the piece */
    }
    m->p.s = (cudaStream_t)s;
    /* bf16 with heads of 64 (Llama 3.2 1B, SmolLM, TinyLlama, Qwen2 0.5B): GPT-2's pipelined
     * tensor-core kernels on the grouped-query row, chosen as GPT-2 chooses them */
    m->attn_tc = tr_gpu_attention_tc(dt, m->hd);
    m->attn_cudnn = tr_gpu_attention_cudnn_setup(m->Bmax, m->Tmax, m->H, m->KV, m->hd, dt, m->p.scratch_bytes);
    if (kn_cuda_ctx_create(&m->ctx, s, m->cublas_ws, KN_CUBLASLT_WORKSPACE) != KN_OK) {
        free_host(m);
        return TR_ERR_NODEVICE;
    }
    rc = build_rope(m);
    if (rc != TR_OK) {
        tr_cuda_llama_destroy(m);
        return rc;
    }
    *out = m;
    return TR_OK;
}

extern "C" void tr_cuda_llama_destroy(tr_cuda_llama *m) {
    if (!m) return;
    kn_cuda_ctx_destroy(m->ctx);
    free_host(m); /* the arena owns the device memory */
}

extern "C" size_t tr_cuda_llama_num_params(const tr_cuda_llama *m) { return m ? m->p.P : 0; }
extern "C" int tr_cuda_llama_n_tensors(const tr_cuda_llama *m) { return m ? m->nt : 0; }
extern "C" const char *tr_cuda_llama_tensor(const tr_cuda_llama *m, int i, size_t *cpu_off, size_t *dev_off, size_t *n,
                                            int *decay) {
    if (!m || i < 0 || i >= m->nt) return NULL;
    const ll_tensor *t = &m->t[i];
    if (cpu_off) *cpu_off = t->cpu_off;
    if (dev_off) *dev_off = t->dev_off;
    if (n) *n = t->n;
    if (decay) *decay = t->decay;
    return t->name;
}

extern "C" int tr_cuda_llama_zero_grad(tr_cuda_llama *m) {
    if (!m) return TR_ERR_ARG;
    return tr_gpu_params_zero_grad(&m->p);
}

/* Host <-> device tensor by tensor: the host side in tr_llama's order, the
 * device's with q/k/v(+bias) stacked; esz bytes an element (4: params and
 * grads; the optimizer's state_bytes for its state). */
static int copy_tensors(tr_cuda_llama *m, void *dev, void *host, size_t esz, cudaMemcpyKind kind) {
    for (int i = 0; i < m->nt; i++) {
        char *d = (char *)dev + m->t[i].dev_off * esz, *h = (char *)host + m->t[i].cpu_off * esz;
        if (kind == cudaMemcpyHostToDevice) CU(cudaMemcpyAsync(d, h, m->t[i].n * esz, kind, m->p.s));
        else CU(cudaMemcpyAsync(h, d, m->t[i].n * esz, kind, m->p.s));
    }
    return TR_OK;
}

extern "C" int tr_cuda_llama_set_params(tr_cuda_llama *m, const float *host) {
    return tr_cuda_llama_set_state(m, host, NULL);
}

extern "C" int tr_cuda_llama_set_state(tr_cuda_llama *m, const float *host, void *const state[]) {
    if (!m || !host) return TR_ERR_ARG;
    int rc = copy_tensors(m, m->p.master, (void *)host, 4, cudaMemcpyHostToDevice);
    if (rc == TR_OK) rc = tr_gpu_params_reset(&m->p); /* compute copy; zero grads and state */
    for (int k = 0; rc == TR_OK && state && k < m->p.opt->n_state; k++)
        if (state[k])
            rc = copy_tensors(m, m->p.state[k], state[k], (size_t)m->p.opt->state_bytes, cudaMemcpyHostToDevice);
    if (rc != TR_OK) return rc;
    CU(cudaStreamSynchronize(m->p.s));
    return TR_OK;
}

extern "C" int tr_cuda_llama_init_random(tr_cuda_llama *m, uint64_t seed) {
    if (!m) return TR_ERR_ARG;
    const float a = 0.0346f; /* uniform(-a, a): std 0.02 */
    for (int i = 0; i < m->nt; i++) {
        const ll_tensor *t = &m->t[i];
        float *p = m->p.master + t->dev_off;
        int norm = strstr(t->name, "norm") != NULL;
        if (t->decay) tr_gpu_fill_kernel<<<1024, 256, 0, m->p.s>>>(p, t->n, seed + (uint64_t)i, -a, a, 0);
        else tr_gpu_fill_kernel<<<1024, 256, 0, m->p.s>>>(p, t->n, 0, norm ? 1.0f : 0.0f, 0.0f, 1);
        LAUNCHED("ll_fill");
    }
    return tr_gpu_params_reset(&m->p);
}

extern "C" int tr_cuda_llama_get_state(tr_cuda_llama *m, float *params, float *grads, void *const state[]) {
    if (!m) return TR_ERR_ARG;
    int rc = TR_OK;
    if (params) rc = copy_tensors(m, m->p.master, params, 4, cudaMemcpyDeviceToHost);
    if (rc == TR_OK && grads) rc = copy_tensors(m, m->p.grads, grads, 4, cudaMemcpyDeviceToHost);
    for (int k = 0; rc == TR_OK && state && k < m->p.opt->n_state; k++)
        if (state[k])
            rc = copy_tensors(m, m->p.state[k], state[k], (size_t)m->p.opt->state_bytes, cudaMemcpyDeviceToHost);
    if (rc != TR_OK) return rc;
    CU(cudaStreamSynchronize(m->p.s));
    return TR_OK;
}

extern "C" int tr_cuda_llama_get(tr_cuda_llama *m, float *params, float *grads) {
    return tr_cuda_llama_get_state(m, params, grads, NULL);
}

/* The token embedding (no position table in this family). */
template <typename T> __global__ void ll_embed_kernel(T *out, const uint32_t *inp, const T *wte, size_t N, int C) {
    size_t total = N * (size_t)C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)C;
        out[i] = wte[(size_t)inp[n] * C + i % C];
    }
}

static int embed_forward(void *out, const uint32_t *inp, const void *wte, size_t N, int C, kn_dtype dt,
                         cudaStream_t s) {
    unsigned g = (unsigned)((N * (size_t)C + 255) / 256 > 65535u * 16u ? 65535u * 16u : (N * (size_t)C + 255) / 256);
    if (dt == KN_F32) ll_embed_kernel<float><<<g, 256, 0, s>>>((float *)out, inp, (const float *)wte, N, C);
    else ll_embed_kernel<uint16_t><<<g, 256, 0, s>>>((uint16_t *)out, inp, (const uint16_t *)wte, N, C);
    LAUNCHED("llama embedding");
    return TR_OK;
}

#define ep tr_gpu_ep

typedef struct {
    int B, T, N;
    size_t cap; /* Bmax * Tmax: rows of capacity, the activation stride */
    const uint32_t *inputs;
    const int32_t *targets, *pos, *doc;
    float grad_scale;
    int fwd_only; /* grad_scale 0: evaluation, no backward */
    int chunked;  /* the head runs in chunks of m->lm_rows < N rows, each chunk's backward in the forward's tail */
} ll_batch;

/* layer l's slice of a per-layer activation of `width` elements a row */
#define ACT(buf, l, width) ep(m->buf, (size_t)(l)*x->cap *(size_t)(width), m->p.esz)
#define W(off) ep(m->p.wc, (off), m->p.esz)
#define G(off) (m->p.grads + (off))
#define WF(off) (m->p.master + (off))

static int forward_pass(tr_cuda_llama *m, const ll_batch *x) {
    const int B = x->B, T = x->T, N = x->N, C = m->C, H = m->H, KV = m->KV, hd = m->hd, RS = m->RS, F = m->F, V = m->V;
    const bool cudnn_att = tr_gpu_cudnn_call(m->attn_cudnn, x->doc, B, T, m->Bmax, m->Tmax);
    const size_t NF = (size_t)N * F;
    const kn_dtype dt = m->p.dt;
    cudaStream_t s = m->p.s;
    const float eps = m->c.norm_eps;
    int rc = embed_forward(m->xin, x->inputs, W(m->off_embed), (size_t)N, C, dt, s);
    if (rc != TR_OK) return rc;
    for (int l = 0; l < m->L; l++) {
        const size_t *ly = m->lay + (size_t)l * LW_COUNT;
        void *xin = ACT(xin, l, C), *h1 = ACT(h1, l, C), *qkv = ACT(qkv, l, RS), *ao = ACT(ao, l, C),
             *xmid = ACT(xmid, l, C), *h2 = ACT(h2, l, C), *gt = ACT(gate, l, F), *up = ACT(up, l, F),
             *act = ACT(act, l, F);
        float *r1 = m->r1 + (size_t)l * x->cap, *r2 = m->r2 + (size_t)l * x->cap,
              *lse = m->lse + (size_t)l * x->cap * H;
        if (l == 0) {
            KC(kn_rmsnorm_forward_cuda(h1, r1, nullptr, xin, nullptr, WF(ly[LW_N1]), N, C, eps, dt, s));
        } else { /* xin[l] = xmid[l-1] + down(act[l-1]), fused into the norm */
            KC(kn_rmsnorm_forward_cuda(h1, r1, xin, ACT(xmid, l - 1, C), m->proj, WF(ly[LW_N1]), N, C, eps, dt, s));
        }
        KC(kn_matmul_forward_cuda(m->ctx, qkv, nullptr, h1, W(ly[LW_QKV]),
                                  ly[LW_QKVB] == (size_t)-1 ? nullptr : W(ly[LW_QKVB]), N, C, RS, dt));
        /* q and k heads of each packed row, in place: the attention and its backward see the rotated q, k */
        KC(kn_rope_forward_cuda(qkv, qkv, x->pos, m->rope, N, T, H + KV, hd, RS, m->c.max_seq, dt, s));
        if (cudnn_att)
            KC(kn_cudnn_attention_forward(ao, lse, qkv, B, T, H, KV, hd, m->p.scratch, m->p.scratch_bytes, dt, s));
        else if (m->attn_tc) KC(kn_gqa_attention_forward_tc_cuda(ao, lse, qkv, x->doc, B, T, H, KV, hd, dt, s));
        else KC(kn_gqa_attention_forward_cuda(ao, lse, qkv, x->doc, B, T, H, KV, hd, dt, s));
        KC(kn_matmul_forward_cuda(m->ctx, m->proj, nullptr, ao, W(ly[LW_O]), nullptr, N, C, C, dt));
        KC(kn_rmsnorm_forward_cuda(h2, r2, xmid, xin, m->proj, WF(ly[LW_N2]), N, C, eps, dt, s));
        KC(kn_matmul_forward_cuda(m->ctx, gt, nullptr, h2, W(ly[LW_GATE]), nullptr, N, C, F, dt));
        KC(kn_matmul_forward_cuda(m->ctx, up, nullptr, h2, W(ly[LW_UP]), nullptr, N, C, F, dt));
        KC(kn_swiglu_forward_cuda(act, gt, up, NF, dt, s));
        KC(kn_matmul_forward_cuda(m->ctx, m->proj, nullptr, act, W(ly[LW_DOWN]), nullptr, N, F, C, dt));
    }
    KC(kn_rmsnorm_forward_cuda(m->hf, m->rf, m->xl, ACT(xmid, m->L - 1, C), m->proj, WF(m->off_norm), N, C, eps, dt,
                               s));
    /* the logits, the loss and dlogits in place: whole, the dlogits left for backward_pass; or in
     * chunks, each chunk's dW_head += dlogits^T hf and dbuf rows = dlogits W_head at once (tied: the
     * embedding's gradient, completed by the embedding backward) */
    tr_lmhead h;
    h.ctx = m->ctx, h.s = s, h.dt = dt;
    h.x = m->hf, h.w = W(m->off_head), h.dw = G(m->off_head), h.dx = m->dbuf;
    h.logits = m->logits, h.rows = m->lm_rows, h.losses = m->losses, h.targets = x->targets;
    h.dloss = x->grad_scale, h.N = N, h.C = C, h.V = V, h.Vp = V;
    h.scratch = m->p.scratch, h.scratch_bytes = m->p.scratch_bytes;
    KC(tr_lmhead_pass(&h, x->chunked && !x->fwd_only ? TR_LMHEAD_FUSED : TR_LMHEAD_FORWARD));
    return tr_gpu_params_loss_sum(&m->p, m->losses, x->targets, N);
}

static int backward_pass(tr_cuda_llama *m, const ll_batch *x) {
    const int B = x->B, T = x->T, N = x->N, C = m->C, H = m->H, KV = m->KV, hd = m->hd, RS = m->RS, F = m->F, V = m->V;
    const bool cudnn_att = tr_gpu_cudnn_call(m->attn_cudnn, x->doc, B, T, m->Bmax, m->Tmax);
    const size_t NC = (size_t)N * C, NF = (size_t)N * F;
    const kn_dtype dt = m->p.dt;
    cudaStream_t s = m->p.s;
    void *sc = m->p.scratch;
    size_t sb = m->p.scratch_bytes;
    /* the head: dhf = dlogits @ W, dW += dlogits^T hf (the embedding when tied); chunked: done in the
     * forward's tail (gpu_lmhead.cuh), dbuf holds dhf */
    if (!x->chunked)
        KC(kn_matmul_backward_cuda(m->ctx, m->dbuf, G(m->off_head), nullptr, m->logits, m->hf, W(m->off_head), N, C, V,
                                   sc, sb, dt));
    CU(cudaMemsetAsync(m->dres, 0, NC * m->p.esz, s));
    KC(kn_rmsnorm_backward_cuda(m->dres, G(m->off_norm), m->dbuf, m->xl, WF(m->off_norm), m->rf, N, C, sc, sb, dt, s));
    for (int l = m->L - 1; l >= 0; l--) {
        const size_t *ly = m->lay + (size_t)l * LW_COUNT;
        void *xin = ACT(xin, l, C), *h1 = ACT(h1, l, C), *qkv = ACT(qkv, l, RS), *ao = ACT(ao, l, C),
             *xmid = ACT(xmid, l, C), *h2 = ACT(h2, l, C), *gt = ACT(gate, l, F), *up = ACT(up, l, F),
             *act = ACT(act, l, F);
        float *r1 = m->r1 + (size_t)l * x->cap, *r2 = m->r2 + (size_t)l * x->cap,
              *lse = m->lse + (size_t)l * x->cap * H;
        /* dres: d(layer output) = d(xmid + down(act)) */
        KC(kn_matmul_backward_cuda(m->ctx, m->df1, G(ly[LW_DOWN]), nullptr, m->dres, act, W(ly[LW_DOWN]), N, F, C, sc,
                                   sb, dt)); /* df1 = dact */
        KC(kn_swiglu_backward_cuda(m->df1, m->df2, m->df1, gt, up, NF, dt, s));
        KC(kn_matmul_backward_cuda(m->ctx, m->dbuf, G(ly[LW_GATE]), nullptr, m->df1, h2, W(ly[LW_GATE]), N, C, F, sc,
                                   sb, dt));
        KC(kn_matmul_backward_cuda(m->ctx, m->dbuf2, G(ly[LW_UP]), nullptr, m->df2, h2, W(ly[LW_UP]), N, C, F, sc, sb,
                                   dt));
        KC(kn_residual_forward_cuda(m->dbuf, m->dbuf, m->dbuf2, NC, dt, s));
        KC(kn_rmsnorm_backward_cuda(m->dres, G(ly[LW_N2]), m->dbuf, xmid, WF(ly[LW_N2]), r2, N, C, sc, sb, dt, s));
        /* dres: d(xmid) = d(xin + o_proj(ao)) */
        KC(kn_matmul_backward_cuda(m->ctx, m->dbuf, G(ly[LW_O]), nullptr, m->dres, ao, W(ly[LW_O]), N, C, C, sc, sb,
                                   dt)); /* dbuf = dao */
        if (cudnn_att)
            KC(kn_cudnn_attention_backward(m->dqkv, m->dbuf, qkv, ao, lse, B, T, H, KV, hd, sc, sb,
                                           m->attn_cudnn == TR_GPU_CUDNN_DETERMINISTIC, dt, s));
        else if (m->attn_tc)
            KC(kn_gqa_attention_backward_tc_cuda(m->dqkv, m->dbuf, qkv, ao, lse, x->doc, B, T, H, KV, hd, sc, sb, dt,
                                                 s));
        else KC(kn_gqa_attention_backward_cuda(m->dqkv, m->dbuf, qkv, ao, lse, x->doc, B, T, H, KV, hd, sc, sb, dt, s));
        KC(kn_rope_backward_cuda(m->dqkv, m->dqkv, x->pos, m->rope, N, T, H + KV, hd, RS, m->c.max_seq, dt, s));
        KC(kn_matmul_backward_cuda(m->ctx, m->dbuf, G(ly[LW_QKV]), ly[LW_QKVB] == (size_t)-1 ? nullptr : G(ly[LW_QKVB]),
                                   m->dqkv, h1, W(ly[LW_QKV]), N, C, RS, sc, sb, dt));
        KC(kn_rmsnorm_backward_cuda(m->dres, G(ly[LW_N1]), m->dbuf, xin, WF(ly[LW_N1]), r1, N, C, sc, sb, dt, s));
        /* dres: d(xin) */
    }
    /* the embedding rows: deterministic (ids sorted, each row summed in order) */
    KC(kn_encoder_backward_cuda(G(m->off_embed), nullptr, m->dres, x->inputs, nullptr, B, T, C, V, m->c.max_seq, sc, sb,
                                dt, s));
    return TR_OK;
}
#undef ACT
#undef W
#undef G
#undef WF

extern "C" int tr_cuda_llama_fwd_bwd(tr_cuda_llama *m, int B, int T, const uint32_t *inputs, const int32_t *targets,
                                     const int32_t *pos, const int32_t *doc, float grad_scale, double *loss_sum,
                                     uint64_t *n_targets) {
    if (loss_sum) *loss_sum = 0;
    if (n_targets) *n_targets = 0;
    if (!m || !inputs || !targets || B <= 0 || T <= 0 || T > m->Tmax || (size_t)B * T > (size_t)m->Bmax * m->Tmax)
        return TR_ERR_ARG;
    ll_batch x = {B, T, B * T, (size_t)m->Bmax * m->Tmax, inputs, targets, pos, doc, grad_scale, grad_scale == 0.0f, 0};
    x.chunked = m->lm_rows < (size_t)x.N;
    int rc = forward_pass(m, &x);
    if (rc == TR_OK && !x.fwd_only) rc = backward_pass(m, &x); /* evaluation: gradients untouched */
    if (rc != TR_OK) return rc;
    return tr_gpu_params_read_loss(&m->p, loss_sum, n_targets);
}

/* where tensor i lives in the device buffer (stacked q/k/v: each its own flag) */
static void llama_tensor(const tr_cuda_llama *m, int i, size_t *off, size_t *n, int *decay) {
    *off = m->t[i].dev_off;
    *n = m->t[i].n;
    *decay = m->t[i].decay;
}

extern "C" int tr_cuda_llama_step(tr_cuda_llama *m, const tr_optim_hparams *h, int t, float max_norm, float *norm_out) {
    if (!m) return TR_ERR_ARG;
    return tr_gpu_params_step(&m->p, h, t, max_norm, norm_out, m->nt,
                              [m](int i, size_t *o, size_t *n, int *d) { llama_tensor(m, i, o, n, d); });
}

extern "C" int tr_cuda_llama_step_scaled(tr_cuda_llama *m, const tr_optim_hparams *h, int t, float max_norm,
                                         float loss_scale, float *norm_out, int *skipped) {
    if (!m) return TR_ERR_ARG;
    return tr_gpu_params_step_scaled(&m->p, h, t, max_norm, loss_scale, norm_out, skipped, m->nt,
                                     [m](int i, size_t *o, size_t *n, int *d) { llama_tensor(m, i, o, n, d); });
}

extern "C" float *tr_cuda_llama_grads(tr_cuda_llama *m, size_t *n) {
    if (n) *n = m->p.P;
    return m->p.grads;
}

/* ---- the Llama family's entry in the GPU model table (gpu_family.h) ----------------------- */
static size_t ll_arena_bytes(const tr_model_config *c, int B, int T, kn_dtype dt, int recompute,
                             const tr_optim_ops *opt) {
    return recompute ? 0 : tr_cuda_llama_arena_bytes(&c->llama, B, T, dt, opt);
}
static int ll_create(void **out, const tr_model_config *c, int B, int T, kn_dtype dt, tr_cuda_arena *a,
                     tr_cuda_stream s, int recompute, const tr_optim_ops *opt) {
    if (recompute) {
        kn_cuda_set_error("the GPU Llama model stores every activation (--recompute 0)");
        return TR_ERR_ARG;
    }
    return tr_cuda_llama_create((tr_cuda_llama **)out, &c->llama, B, T, dt, a, s, opt);
}
static void ll_destroy(void *m) { tr_cuda_llama_destroy((tr_cuda_llama *)m); }
static int ll_set_state(void *m, const float *params, void *const state[]) {
    return tr_cuda_llama_set_state((tr_cuda_llama *)m, params, state);
}
static int ll_get(void *m, float *params, float *grads, void *const state[]) {
    return tr_cuda_llama_get_state((tr_cuda_llama *)m, params, grads, state);
}
static int ll_zero_grad(void *m) { return tr_cuda_llama_zero_grad((tr_cuda_llama *)m); }
static float *ll_grads(void *m, size_t *n) { return tr_cuda_llama_grads((tr_cuda_llama *)m, n); }
static int ll_fwd_bwd(void *m, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                      const int32_t *doc, float grad_scale, double *loss_sum, uint64_t *n_targets) {
    return tr_cuda_llama_fwd_bwd((tr_cuda_llama *)m, B, T, inputs, targets, pos, doc, grad_scale, loss_sum, n_targets);
}
static int ll_step_scaled(void *m, const tr_optim_hparams *h, int t, float max_norm, float loss_scale, float *norm_out,
                          int *skipped) {
    return tr_cuda_llama_step_scaled((tr_cuda_llama *)m, h, t, max_norm, loss_scale, norm_out, skipped);
}

static int ll_step_loss(void *m, double *loss_sum, uint64_t *n_targets) {
    return tr_gpu_params_read_step_loss(&((tr_cuda_llama *)m)->p, loss_sum, n_targets);
}

/* one readiness group (family_llama.c): no hook, the reduce waits for the backward */
extern "C" const tr_gpu_model_ops tr_gpu_model_llama = {
    "llama",      0,        ll_arena_bytes, ll_create,  ll_destroy,     ll_set_state, ll_get,
    ll_zero_grad, ll_grads, NULL,           ll_fwd_bwd, ll_step_scaled, ll_step_loss,
};
