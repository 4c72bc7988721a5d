/* model_config.c - GPT-2's configuration, parameter layout and memory sizes
 * (see model.h): apart from model.c so that what only sizes a model (the
 * memory planner, `mkshards plan`) links neither the model's compute nor the
 * reference kernels and their OpenMP runtime. GPT-2 only: the tr_model_*
 * functions that serve any family dispatch in family.c, whose GPT-2 entry
 * (family_gpt2.c) calls the tr_gpt2_* ones here - nothing here calls back
 * into the dispatcher (lib_layering holds the three files out of a circle). */
#include "model.h"

#include "gpu_attention.h"

#include "kn.h"
#include "kn_cpu_size.h"
#include "kn_cuda_size.h"

#include <string.h>

/* ---- config ---------------------------------------------------------------- */

int tr_gpt2_config_check(const tr_model_config *c) {
    if (!c || c->family != TR_FAMILY_GPT2 || c->n_layer <= 0 || c->n_head <= 0 || c->d_model <= 0 || c->max_seq <= 0 ||
        c->vocab <= 0 || c->d_model % c->n_head)
        return TR_MODEL_EINVAL;
    if (c->vocab_padded != kn_pad_vocab(c->vocab)) return TR_MODEL_EINVAL;
    return TR_MODEL_OK;
}

int tr_model_config_make(int n_layer, int n_head, int d_model, int max_seq, int vocab, tr_model_config *out) {
    if (!out) return TR_MODEL_EINVAL;
    tr_model_config c;
    memset(&c, 0, sizeof c); /* family 0: GPT-2 */
    c.n_layer = n_layer, c.n_head = n_head, c.d_model = d_model, c.max_seq = max_seq, c.vocab = vocab;
    c.vocab_padded = vocab > 0 ? kn_pad_vocab(vocab) : 0;
    if (tr_gpt2_config_check(&c)) return TR_MODEL_EINVAL;
    *out = c;
    return TR_MODEL_OK;
}

int tr_model_config_preset(const char *name, int vocab, int max_seq, tr_model_config *out) {
    static const struct {
        const char *name;
        int L, NH, C;
    } presets[] = {
        {"tiny", 2, 2, 64}, {"d12", 12, 12, 768}, {"d24", 24, 16, 1024}, {"d36", 36, 20, 1280}, {"d48", 48, 25, 1600},
    };
    if (!name) return TR_MODEL_EINVAL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name))
            return tr_model_config_make(presets[i].L, presets[i].NH, presets[i].C, max_seq, vocab, out);
    return TR_MODEL_EINVAL;
}

/* ---- parameter layout ------------------------------------------------------ */

static const char *const param_names[TR_NUM_PARAM_TENSORS] = {"wte",      "wpe",      "ln1w", "ln1b", "qkvw", "qkvb",
                                                              "attprojw", "attprojb", "ln2w", "ln2b", "fcw",  "fcb",
                                                              "fcprojw",  "fcprojb",  "lnfw", "lnfb"};

void tr_model_param_sizes(const tr_model_config *c, size_t s[TR_NUM_PARAM_TENSORS]) {
    size_t L = (size_t)c->n_layer, C = (size_t)c->d_model;
    s[TR_P_WTE] = (size_t)c->vocab_padded * C;
    s[TR_P_WPE] = (size_t)c->max_seq * C;
    s[TR_P_LN1W] = L * C;
    s[TR_P_LN1B] = L * C;
    s[TR_P_QKVW] = L * 3 * C * C;
    s[TR_P_QKVB] = L * 3 * C;
    s[TR_P_ATTPROJW] = L * C * C;
    s[TR_P_ATTPROJB] = L * C;
    s[TR_P_LN2W] = L * C;
    s[TR_P_LN2B] = L * C;
    s[TR_P_FCW] = L * 4 * C * C;
    s[TR_P_FCB] = L * 4 * C;
    s[TR_P_FCPROJW] = L * C * 4 * C;
    s[TR_P_FCPROJB] = L * C;
    s[TR_P_LNFW] = C;
    s[TR_P_LNFB] = C;
}

const char *tr_model_param_name(int i) { return i >= 0 && i < TR_NUM_PARAM_TENSORS ? param_names[i] : NULL; }

int tr_model_param_decay(int i) {
    switch (i) {
    case TR_P_WTE:
    case TR_P_WPE:
    case TR_P_QKVW:
    case TR_P_ATTPROJW:
    case TR_P_FCW:
    case TR_P_FCPROJW: return 1;
    default: return 0;
    }
}

size_t tr_gpt2_param_count(const tr_model_config *c) {
    size_t s[TR_NUM_PARAM_TENSORS], n = 0;
    if (tr_gpt2_config_check(c)) return 0;
    tr_model_param_sizes(c, s);
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) n += s[i];
    return n;
}

/* ---- memory: the activation layout of model.c's carve(), in floats ---------- */

static size_t acts_floats(const tr_model_config *c, size_t B, size_t T) {
    size_t L = (size_t)c->n_layer, C = (size_t)c->d_model, BT = B * T;
    return BT * (C * (16 * L + 3) + 4 * L + 3 + (size_t)c->vocab_padded) + L * B * (size_t)c->n_head * T * T;
}

static size_t grad_acts_floats(const tr_model_config *c, size_t B, size_t T) { return B * T * 6 * (size_t)c->d_model; }

size_t tr_model_gpu_scratch_bytes(const tr_model_config *c, size_t B, size_t T) {
    if (tr_gpt2_config_check(c)) return 0;
    size_t N = B * T, C = (size_t)c->d_model;
    size_t s = kn_encoder_backward_scratch_bytes(N), x;
    if ((x = kn_layernorm_backward_scratch_bytes(N, C)) > s) s = x;
    /* bias gradients: qkv 3C, attention projection C, fc 4C, fc projection C */
    if ((x = kn_matmul_backward_scratch_bytes(N, 4 * C)) > s) s = x;
    /* + cuDNN's workspace when MKS_CUDA_ATTENTION=cudnn asks for it (gpu_attention.h) */
    if ((x = tr_gpu_attention_scratch_bytes(B, T, (size_t)c->n_head, C / (size_t)c->n_head)) > s) s = x;
    if ((x = kn_sumsq_scratch_bytes(tr_gpt2_param_count(c))) > s) s = x;
    return s;
}

int tr_gpt2_grad_groups(const tr_model_config *c) { return c ? c->n_layer + 2 : 0; }

int tr_gpt2_param_layers(const tr_model_config *c, int i) {
    if (!c || i < 0 || i >= TR_NUM_PARAM_TENSORS) return 0;
    return i >= TR_P_LN1W && i <= TR_P_FCPROJB ? c->n_layer : 1;
}

int tr_gpt2_grad_group_of(const tr_model_config *c, int i, int l) {
    if (!c || i < 0 || i >= TR_NUM_PARAM_TENSORS) return -1;
    if (i == TR_P_LNFW || i == TR_P_LNFB) return 0;
    if (i == TR_P_WTE || i == TR_P_WPE) return c->n_layer + 1;
    if (l < 0 || l >= c->n_layer) return -1;
    return c->n_layer - l;
}

int tr_gpt2_memory(const tr_model_config *c, int B, int T, tr_model_mem *out) {
    if (!out || tr_gpt2_config_check(c) || B <= 0 || T <= 0) return TR_MODEL_EINVAL;
    size_t P = tr_gpt2_param_count(c);
    out->params = 4 * P;
    out->grads = 4 * P;
    out->adam = 8 * P;
    out->acts = 4 * acts_floats(c, (size_t)B, (size_t)T);
    out->grad_acts = 4 * grad_acts_floats(c, (size_t)B, (size_t)T);
    out->total = out->params + out->grads + out->adam + out->acts + out->grad_acts;
    out->kernel_ws = kn_cpu_matmul_workspace_bytes() + kn_cpu_attention_workspace_bytes((size_t)T);
    return TR_MODEL_OK;
}
