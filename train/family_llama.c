/* family_llama.c - the Llama family (Llama, Qwen2, Mistral shapes) as a
 * model family of the trainer (train/family.h), over train/llama_model.h.
 *
 * The tensor table is llama_model.c's tensor order, recomputed here from the
 * configuration alone (the planner, the optimizer and ZeRO-1 need it before
 * or without an instance); create checks that the instance it builds lays
 * out exactly the same table, so the two cannot drift apart silently.
 * One readiness group: the reference backward is a single call, so the
 * whole gradient is ready at once (data parallel reduces after it). */
#include "family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_llama.h"
#include "kn_cpu_size.h"
#include "optim.h"
#include "tr.h"
#if defined(TR_HAVE_CUDA) && !defined(TR_FAMILY_LAYOUT_ONLY)
#include "gpu_family.h"
#endif

/* A shape small enough for tests and quick trials (2 layers, GQA 4/2). */
static const tr_llama_config tiny = {2, 4, 2, 64, 128, 0, 0, 10000.f, 1e-5f, {0, 0, 0, 0}, 1, 0};

static void mirror(tr_model_config *c, const tr_llama_config *l, int arch) {
    memset(c, 0, sizeof *c);
    c->family = TR_FAMILY_LLAMA;
    c->llama_arch = arch;
    c->llama = *l;
    c->n_layer = l->n_layer, c->n_head = l->n_head, c->d_model = l->d_model, c->max_seq = l->max_seq;
    c->vocab = l->vocab, c->vocab_padded = l->vocab;
}

static int ll_preset(const char *name, int vocab, int max_seq, tr_model_config *out) {
    tr_llama_config l;
    if (name && !strcmp(name, "llama-tiny")) {
        l = tiny;
        l.vocab = vocab, l.max_seq = max_seq;
        if (tr_llama_config_check(&l)) return TR_ERR_ARG;
    } else if (tr_llama_config_preset(name, vocab, max_seq, &l)) return TR_ERR_ARG;
    /* the presets' published models: Qwen2 is the one with q/k/v biases */
    mirror(out, &l, l.qkv_bias ? TR_LLAMA_QWEN2 : TR_LLAMA_LLAMA);
    return TR_OK;
}

static const char *ll_preset_name(int i) { return i == 0 ? "llama-tiny" : tr_llama_preset_name(i - 1); }

static int ll_from_json(const char *text, size_t len, int vocab, int max_seq, tr_model_config *out, char *err,
                        size_t errlen) {
    tr_llama_config l;
    tr_llama_arch arch;
    int window = 0;
    int rc = tr_llama_config_from_json(text, len, &l, &arch, &window, err, errlen);
    if (rc) return rc;
    if (l.vocab < vocab) {
        snprintf(err, errlen, "config.json: vocab_size %d is smaller than the shards' vocabulary %d", l.vocab, vocab);
        return TR_ERR_DATA;
    }
    if (max_seq > l.max_seq) {
        snprintf(err, errlen, "--seq-len %d is over config.json's max_position_embeddings %d", max_seq, l.max_seq);
        return TR_ERR_ARG;
    }
    if (window && max_seq > window) {
        snprintf(err, errlen, "--seq-len %d is over config.json's sliding_window %d (full attention only)", max_seq,
                 window);
        return TR_ERR_DATA;
    }
    l.max_seq = max_seq; /* the rows the run trains on, as for the presets */
    mirror(out, &l, (int)arch);
    return TR_OK;
}

static int ll_check(const tr_model_config *c) {
    const tr_llama_config *l = &c->llama;
    if (c->family != TR_FAMILY_LLAMA || tr_llama_config_check(l) || c->n_layer != l->n_layer ||
        c->n_head != l->n_head || c->d_model != l->d_model || c->max_seq != l->max_seq || c->vocab != l->vocab ||
        c->vocab_padded != l->vocab)
        return TR_MODEL_EINVAL;
    return TR_MODEL_OK;
}

static size_t ll_param_count(const tr_model_config *c) { return tr_llama_param_count(&c->llama); }

static int per_layer(const tr_llama_config *l) { return 9 + 3 * (l->qkv_bias != 0); }

static int ll_n_tensors(const tr_model_config *c) {
    const tr_llama_config *l = &c->llama;
    return 1 + l->n_layer * per_layer(l) + 1 + !l->tied;
}

/* Tensor i in llama_model.c's order: the embedding; per layer q[, bias],
 * k[, bias], v[, bias], o, gate, up, down, input and post-attention norms;
 * the final norm; lm_head when untied. */
static void ll_tensor(const tr_model_config *c, int i, tr_tensor_info *t) {
    const tr_llama_config *l = &c->llama;
    size_t C = (size_t)l->d_model, KVd = (size_t)l->n_kv_head * (C / (size_t)l->n_head), F = (size_t)l->d_ff,
           V = (size_t)l->vocab;
    int pl = per_layer(l), last = 1 + l->n_layer * pl;
    t->layers = 1;
    t->decay = 1;
    if (i == 0 || i == last + 1) {
        snprintf(t->name, sizeof t->name, i ? "lm_head.weight" : "model.embed_tokens.weight");
        t->size = V * C;
        return;
    }
    if (i == last) {
        snprintf(t->name, sizeof t->name, "model.norm.weight");
        t->size = C, t->decay = 0;
        return;
    }
    int layer = (i - 1) / pl, k = (i - 1) % pl;
    static const char *const plain[] = {
        "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
        "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
        "mlp.down_proj.weight",    "input_layernorm.weight",  "post_attention_layernorm.weight"};
    static const char *const biased[] = {
        "self_attn.q_proj.weight", "self_attn.q_proj.bias",   "self_attn.k_proj.weight",
        "self_attn.k_proj.bias",   "self_attn.v_proj.weight", "self_attn.v_proj.bias",
        "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
        "mlp.down_proj.weight",    "input_layernorm.weight",  "post_attention_layernorm.weight"};
    const char *s = l->qkv_bias ? biased[k] : plain[k];
    snprintf(t->name, sizeof t->name, "model.layers.%d.%s", layer, s);
    size_t n = strlen(s);
    int bias = n > 5 && !strcmp(s + n - 5, ".bias"), norm = strstr(s, "layernorm") != NULL;
    t->decay = !bias && !norm;
    if (!strcmp(s, "self_attn.q_proj.weight") || !strcmp(s, "self_attn.o_proj.weight")) t->size = C * C;
    else if (!strcmp(s, "self_attn.k_proj.weight") || !strcmp(s, "self_attn.v_proj.weight")) t->size = KVd * C;
    else if (!strcmp(s, "self_attn.k_proj.bias") || !strcmp(s, "self_attn.v_proj.bias")) t->size = KVd;
    else if (strstr(s, "mlp.")) t->size = F * C;
    else t->size = C; /* q_proj.bias, the norms */
}

static int ll_grad_groups(const tr_model_config *c) {
    (void)c;
    return 1;
}
static int ll_grad_group_of(const tr_model_config *c, int i, int l) {
    (void)l;
    return i >= 0 && i < ll_n_tensors(c) ? 0 : -1;
}

/* llama_model.h's exact figures (tr_llama_memory: the activations and the
 * scratch tr_llama_reserve allocates as one block) plus the optimizer rows
 * the trainer adds like GPT-2's (adam: AdamW's two moments; plan.c counts
 * the run's optimizer itself). */
static int ll_memory(const tr_model_config *c, int B, int T, tr_model_mem *out) {
    tr_llama_mem lm;
    if (tr_llama_memory(&c->llama, B, T, &lm)) return TR_MODEL_EINVAL;
    out->params = lm.params;
    out->grads = lm.grads;
    out->adam = 2 * lm.params;
    out->acts = lm.acts;
    out->grad_acts = lm.scratch;
    out->total = out->params + out->grads + out->adam + out->acts + out->grad_acts;
    out->kernel_ws = kn_cpu_matmul_workspace_bytes() +
                     kn_cpu_gqa_attention_workspace_bytes((size_t)T, (size_t)(c->llama.d_model / c->llama.n_head));
    return TR_MODEL_OK;
}

/* The GPU model's device rows (gpu_llama_plan.c: the same formulas as
 * gpu_llama.cu's carve, held equal by tests/test_llama_gpu_plan.c). */
static int ll_gpu_plan(const tr_model_config *c, int B, int T, tr_precision p, int r, const tr_optim_ops *opt,
                       tr_gpu_plan_row *rows, int max, char *why, size_t whylen) {
    tr_llama_gpu_row lr[TR_LLAMA_GPU_ROWS];
    if (r != 0) {
        snprintf(why, whylen, "the GPU Llama model stores every activation: use --recompute 0");
        return 0;
    }
    int n = tr_llama_gpu_plan_rows(&c->llama, B, T, p == TR_FP32 ? 4 : 2, opt, lr);
    if (!n || n > max) {
        int hd = c->llama.n_head > 0 ? c->llama.d_model / c->llama.n_head : 0;
        snprintf(why, whylen, "the GPU Llama model cannot run this shape (head size %d: it takes 16, 32, 64 or 128)",
                 hd);
        return 0;
    }
    for (int i = 0; i < n; i++) rows[i] = (tr_gpu_plan_row){lr[i].name, lr[i].fixed, lr[i].per_row};
    return n;
}

/* ---- an instance (tr only: tr_plan has the layout alone) ----------------------- */
#ifndef TR_FAMILY_LAYOUT_ONLY
typedef struct {
    tr_llama *m;
    float *logits; /* the last forward's (B, T, V), for sampling */
    size_t logits_cap;
    int have_logits;
} ll_inst;

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* normal(0, std) by Box-Muller, as model.c initialises GPT-2 */
static void fill_normal(float *p, size_t n, float std, uint64_t *s) {
    for (size_t i = 0; i < n; i += 2) {
        double u1 = ((splitmix64(s) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
        double u2 = (splitmix64(s) >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
        p[i] = (float)(std * r * cos(th));
        if (i + 1 < n) p[i + 1] = (float)(std * r * sin(th));
    }
}

static void ll_destroy(void *impl) {
    ll_inst *x = impl;
    if (!x) return;
    tr_llama_free(x->m);
    free(x->logits);
    free(x);
}

/* transformers' init for these models (initializer_range 0.02): matrices and
 * the embedding normal(0, 0.02), RMSNorm weights 1, biases 0. */
static int ll_create(const tr_model_config *c, uint64_t seed, void **impl, float **params, float **grads) {
    ll_inst *x = calloc(1, sizeof *x);
    if (!x) return TR_MODEL_ENOMEM;
    if (tr_llama_create(&c->llama, &x->m)) {
        free(x);
        return TR_MODEL_ENOMEM; /* the configuration was checked: what fails is memory */
    }
    int n = ll_n_tensors(c);
    float *p = tr_llama_params(x->m);
    uint64_t s = seed;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        tr_tensor_info t;
        ll_tensor(c, i, &t);
        if (tr_llama_n_tensors(x->m) != n || strcmp(tr_llama_tensor_name(x->m, i), t.name) ||
            tr_llama_tensor_size(x->m, i) != t.size) {
            ll_destroy(x);
            return TR_MODEL_EINVAL; /* llama_model.c's layout changed: the table above must follow */
        }
        if (strstr(t.name, "norm"))
            for (size_t j = 0; j < t.size; j++) p[off + j] = 1.0f;
        else if (t.decay) fill_normal(p + off, t.size, 0.02f, &s);
        off += t.size; /* biases: tr_llama_create zeroed them */
    }
    *impl = x;
    *params = p;
    *grads = tr_llama_grads(x->m);
    return TR_MODEL_OK;
}

static int ll_reserve(void *impl, int B, int T) {
    ll_inst *x = impl;
    return tr_llama_reserve(x->m, B, T) ? TR_MODEL_ENOMEM : TR_MODEL_OK;
}

static int ll_fwd_bwd(void *impl, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                      const int32_t *doc, float grad_scale, double *loss_sum, uint64_t *n_targets) {
    ll_inst *x = impl;
    double ls = 0;
    uint64_t nt = 0;
    int rc = tr_llama_fwd_bwd_sum(x->m, B, T, inputs, targets, pos, doc, grad_scale, NULL, &ls, &nt);
    x->have_logits = 0;
    if (loss_sum) *loss_sum = rc ? 0 : ls;
    if (n_targets) *n_targets = rc ? 0 : nt;
    return rc ? TR_MODEL_EINVAL : TR_MODEL_OK;
}

/* Forward only: grad_scale 0 leaves the gradients alone. Without targets
 * (sampling) the logits are kept; with them (validation) they are not. */
static int ll_forward(void *impl, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                      const int32_t *doc, double *loss_sum, uint64_t *n_targets) {
    ll_inst *x = impl;
    size_t N = (size_t)B * (size_t)T, V = (size_t)tr_llama_get_config(x->m)->vocab;
    if (loss_sum) *loss_sum = 0;
    if (n_targets) *n_targets = 0;
    if (B <= 0 || T <= 0) return TR_MODEL_EINVAL;
    int32_t *none = NULL;
    float *lg = NULL;
    if (!targets) {
        if (N * V > x->logits_cap) {
            free(x->logits);
            x->logits_cap = 0;
            if (!(x->logits = malloc(N * V * sizeof *x->logits))) return TR_MODEL_ENOMEM;
            x->logits_cap = N * V;
        }
        if (!(none = malloc(N * sizeof *none))) return TR_MODEL_ENOMEM;
        for (size_t i = 0; i < N; i++) none[i] = -1;
        lg = x->logits;
    }
    double ls = 0;
    uint64_t nt = 0;
    int rc = tr_llama_fwd_bwd_sum(x->m, B, T, inputs, targets ? targets : none, pos, doc, 0.0f, lg, &ls, &nt);
    free(none);
    x->have_logits = !rc && lg;
    if (rc) return TR_MODEL_EINVAL;
    if (loss_sum) *loss_sum = ls;
    if (n_targets) *n_targets = nt;
    return TR_MODEL_OK;
}

static const float *ll_logits(const void *impl) {
    const ll_inst *x = impl;
    return x->have_logits ? x->logits : NULL;
}

#endif /* TR_FAMILY_LAYOUT_ONLY */

const tr_family_ops tr_family_llama = {
    .name = "llama",
    .id = TR_FAMILY_LLAMA,
    .preset = ll_preset,
    .preset_name = ll_preset_name,
    .from_json = ll_from_json,
    .check = ll_check,
    .param_count = ll_param_count,
    .n_tensors = ll_n_tensors,
    .tensor = ll_tensor,
    .grad_groups = ll_grad_groups,
    .grad_group_of = ll_grad_group_of,
    .memory = ll_memory,
    .gpu_plan = ll_gpu_plan,
#if defined(TR_HAVE_CUDA) && !defined(TR_FAMILY_LAYOUT_ONLY)
    .gpu = &tr_gpu_model_llama,
#endif
#ifndef TR_FAMILY_LAYOUT_ONLY
    .create = ll_create,
    .destroy = ll_destroy,
    .reserve = ll_reserve,
    .fwd_bwd = ll_fwd_bwd,
    .forward = ll_forward,
    .logits = ll_logits,
#endif
};
