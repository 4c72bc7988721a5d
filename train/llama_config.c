/* llama_config.c - the Llama family's configurations (llama_model.h): the
 * presets with the shapes of published small models, a Hugging Face
 * config.json (LlamaForCausalLM / Qwen2ForCausalLM / MistralForCausalLM)
 * read into a tr_llama_config, and the parameter count. A config.json is
 * untrusted input: every field is range-checked, and anything that would
 * make transformers compute another model than llama_model.c (biases on
 * o_proj or the MLP, another activation, head_dim != hidden/heads, an
 * unsupported rope_scaling) is refused by name rather than ignored. */
#include "llama_model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tk.h"
#include "tr.h"

int tr_llama_config_check(const tr_llama_config *c) {
    if (!c || c->n_layer <= 0 || c->n_layer > 1024 || c->n_head <= 0 || c->n_kv_head <= 0 || c->n_head % c->n_kv_head ||
        c->d_model <= 0 || c->d_model > 65536 || c->d_model % c->n_head || (c->d_model / c->n_head) % 2 ||
        c->d_ff <= 0 || c->d_ff > 1 << 20 || c->vocab <= 0 || (unsigned)c->vocab > TR_MAX_VOCAB || c->max_seq <= 0 ||
        (unsigned)c->max_seq > TR_MAX_ROW_LEN || !(c->norm_eps > 0) || !(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return TR_ERR_ARG;
    const kn_rope_scaling *s = &c->rope_scaling;
    if (s->factor != 0 && !(s->factor >= 1 && s->low_freq_factor > 0 && s->high_freq_factor > s->low_freq_factor &&
                            s->original_max_position_embeddings > 0))
        return TR_ERR_ARG;
    return TR_OK;
}

size_t tr_llama_param_count(const tr_llama_config *c) {
    if (tr_llama_config_check(c)) return 0;
    size_t L = (size_t)c->n_layer, C = (size_t)c->d_model, KV = (size_t)c->n_kv_head * (C / (size_t)c->n_head),
           F = (size_t)c->d_ff, V = (size_t)c->vocab;
    size_t layer = 2 * C * C + 2 * KV * C + 3 * C * F + 2 * C + (c->qkv_bias ? C + 2 * KV : 0);
    return V * C * (c->tied ? 1 : 2) + L * layer + C;
}

/* Shapes (and rope/norm settings) of published models; the vocabulary and
 * the context come from the run (the shards' tokenizer, --seq-len), as for
 * the GPT-2 presets. */
static const struct {
    const char *name;
    tr_llama_config c;
} presets[] = {
    /* HuggingFaceTB/SmolLM-135M (and SmolLM2-135M): 134,515,008 params with its 49152 vocab */
    {"smollm-135m", {30, 9, 3, 576, 1536, 0, 0, 10000.f, 1e-5f, {0, 0, 0, 0}, 1, 0}},
    /* HuggingFaceTB/SmolLM-360M: 361,821,120 params with its 49152 vocab */
    {"smollm-360m", {32, 15, 5, 960, 2560, 0, 0, 10000.f, 1e-5f, {0, 0, 0, 0}, 1, 0}},
    /* meta-llama/Llama-3.2-1B: 1,235,814,400 params with its 128256 vocab */
    {"llama-1b", {16, 32, 8, 2048, 8192, 0, 0, 500000.f, 1e-5f, {32.f, 1.f, 4.f, 8192}, 1, 0}},
    /* Qwen/Qwen2.5-0.5B: 494,032,768 params with its 151936 vocab (q/k/v biases) */
    {"qwen2.5-0.5b", {24, 14, 2, 896, 4864, 0, 0, 1000000.f, 1e-6f, {0, 0, 0, 0}, 1, 1}},
};

int tr_llama_config_preset(const char *name, int vocab, int max_seq, tr_llama_config *out) {
    if (!name || !out) return TR_ERR_ARG;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name)) {
            tr_llama_config c = presets[i].c;
            c.vocab = vocab;
            c.max_seq = max_seq;
            if (tr_llama_config_check(&c)) return TR_ERR_ARG;
            *out = c;
            return TR_OK;
        }
    return TR_ERR_ARG;
}

const char *tr_llama_preset_name(int i) {
    return i >= 0 && (size_t)i < sizeof presets / sizeof presets[0] ? presets[i].name : NULL;
}

static const char *const arch_names[] = {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"};
static const char *const model_types[] = {"llama", "qwen2", "mistral"};

const char *tr_llama_arch_name(tr_llama_arch a) { return a >= 0 && a <= TR_LLAMA_MISTRAL ? arch_names[a] : NULL; }
const char *tr_llama_model_type(tr_llama_arch a) { return a >= 0 && a <= TR_LLAMA_MISTRAL ? model_types[a] : NULL; }

/* An integer field in [lo, hi]; absent: def (def < 0: required). */
static int int_field(json_t *o, const char *key, long long lo, long long hi, long long def, int *out, char *err,
                     size_t errlen) {
    json_t *v = json_object_get(o, key);
    if ((!v || json_is_null(v)) && def >= 0) {
        *out = (int)def;
        return TR_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(err, errlen, "config.json: \"%s\" %s (want an integer %lld..%lld)", key,
                 v ? "out of range or not an integer" : "missing", lo, hi);
        return TR_ERR_CORRUPT;
    }
    *out = (int)json_integer_value(v);
    return TR_OK;
}

/* A positive finite number; absent: def (def <= 0: required). */
static int num_field(json_t *o, const char *key, double def, float *out, char *err, size_t errlen) {
    json_t *v = json_object_get(o, key);
    if ((!v || json_is_null(v)) && def > 0) {
        *out = (float)def;
        return TR_OK;
    }
    double x = json_is_number(v) ? json_number_value(v) : -1;
    if (!(x > 0) || !isfinite(x) || x > 1e30) {
        snprintf(err, errlen, "config.json: \"%s\" %s (want a positive number)", key, v ? "is not valid" : "missing");
        return TR_ERR_CORRUPT;
    }
    *out = (float)x;
    return TR_OK;
}

static int refuse(char *err, size_t errlen, const char *what) {
    snprintf(err, errlen, "config.json: %s: not supported", what);
    return TR_ERR_DATA;
}

/* A Hugging Face config.json of the Llama family. Long (~125 lines) but
 * flat: one bounded read and check per key, each refusal naming its key. */
int tr_llama_config_from_json(const char *text, size_t len, tr_llama_config *out, tr_llama_arch *arch,
                              int *sliding_window, char *err, size_t errlen) {
    if (!text || !out || !arch || !sliding_window || !err || !errlen) return TR_ERR_ARG;
    json_error_t je;
    json_t *c = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    int rc = TR_ERR_CORRUPT;
    if (!json_is_object(c)) {
        char esc[200];
        const char *m = c ? "not a JSON object" : tk_escape_text(je.text, strlen(je.text), esc, sizeof esc);
        snprintf(err, errlen, "config.json: %s", m);
        goto out;
    }
    const char *mt = json_string_value(json_object_get(c, "model_type"));
    int a = -1;
    for (int i = 0; mt && i <= TR_LLAMA_MISTRAL; i++)
        if (!strcmp(mt, model_types[i])) a = i;
    if (a < 0) {
        char m[64];
        snprintf(err, errlen,
                 "config.json: model_type \"%s\" is not supported (the Llama family: llama, qwen2, mistral)",
                 mt ? tk_escape_text(mt, strlen(mt), m, sizeof m) : "(none)");
        rc = TR_ERR_DATA;
        goto out;
    }
    json_t *archs = json_object_get(c, "architectures");
    const char *an = json_string_value(json_array_get(archs, 0));
    if (archs && (!json_is_array(archs) || json_array_size(archs) != 1 || !an || strcmp(an, arch_names[a]))) {
        rc = refuse(err, errlen,
                    "\"architectures\" is not [\"LlamaForCausalLM\"|\"Qwen2ForCausalLM\"|"
                    "\"MistralForCausalLM\"] matching model_type");
        goto out;
    }
    tr_llama_config k;
    memset(&k, 0, sizeof k);
    if (int_field(c, "num_hidden_layers", 1, 1024, -1, &k.n_layer, err, errlen) ||
        int_field(c, "num_attention_heads", 1, 1024, -1, &k.n_head, err, errlen) ||
        int_field(c, "num_key_value_heads", 1, 1024, k.n_head, &k.n_kv_head, err, errlen) ||
        int_field(c, "hidden_size", 2, 65536, -1, &k.d_model, err, errlen) ||
        int_field(c, "intermediate_size", 1, 1 << 20, -1, &k.d_ff, err, errlen) ||
        int_field(c, "vocab_size", 1, TR_MAX_VOCAB, -1, &k.vocab, err, errlen) ||
        int_field(c, "max_position_embeddings", 1, TR_MAX_ROW_LEN, -1, &k.max_seq, err, errlen) ||
        num_field(c, "rms_norm_eps", 0, &k.norm_eps, err, errlen))
        goto out;
    /* transformers 5 writes "rope_parameters" {rope_type, rope_theta, factor,
     * ...}; 4.x files carry "rope_theta" and "rope_scaling" {rope_type or
     * type, factor, ...} at the top level */
    json_t *rp = json_object_get(c, "rope_parameters");
    if (rp && !json_is_null(rp) && !json_is_object(rp)) {
        snprintf(err, errlen, "config.json: \"rope_parameters\" is not an object");
        goto out;
    }
    if (!json_is_object(rp)) rp = NULL;
    if (num_field(rp ? rp : c, "rope_theta", 10000, &k.rope_theta, err, errlen)) goto out;
    if (k.d_model % k.n_head || (k.d_model / k.n_head) % 2 || k.n_head % k.n_kv_head) {
        snprintf(err, errlen,
                 "config.json: hidden_size %d, num_attention_heads %d, num_key_value_heads %d: the heads must divide "
                 "hidden_size into an even head_dim and the KV heads the heads",
                 k.d_model, k.n_head, k.n_kv_head);
        goto out;
    }
    /* transformers' defaults: untied for all three (LlamaConfig, Qwen2Config, MistralConfig) */
    json_t *tie = json_object_get(c, "tie_word_embeddings");
    if (tie && !json_is_boolean(tie)) {
        snprintf(err, errlen, "config.json: \"tie_word_embeddings\" is not true/false");
        goto out;
    }
    k.tied = json_is_true(tie);
    k.qkv_bias = a == TR_LLAMA_QWEN2;
    const char *act = json_string_value(json_object_get(c, "hidden_act"));
    json_t *hd = json_object_get(c, "head_dim");
    if (act && strcmp(act, "silu")) {
        rc = refuse(err, errlen, "hidden_act is not \"silu\"");
        goto out;
    }
    if (hd && !json_is_null(hd) && (!json_is_integer(hd) || json_integer_value(hd) != k.d_model / k.n_head)) {
        rc = refuse(err, errlen, "head_dim is not hidden_size / num_attention_heads");
        goto out;
    }
    if (json_is_true(json_object_get(c, "attention_bias")) || json_is_true(json_object_get(c, "mlp_bias"))) {
        rc = refuse(err, errlen, "attention_bias / mlp_bias true (biases on every projection)");
        goto out;
    }
    json_t *pt = json_object_get(c, "pretraining_tp");
    if (pt && !json_is_null(pt) && json_integer_value(pt) != 1) {
        rc = refuse(err, errlen, "pretraining_tp is not 1");
        goto out;
    }
    /* Mistral's (and Qwen2's use_sliding_window) windowed attention equals
     * full attention on rows no longer than the window: the caller checks
     * --seq-len against *sliding_window (0: none). */
    *sliding_window = 0;
    json_t *sw = json_object_get(c, "sliding_window");
    int windowed =
        a == TR_LLAMA_MISTRAL || (a == TR_LLAMA_QWEN2 && json_is_true(json_object_get(c, "use_sliding_window")));
    if (windowed && sw && !json_is_null(sw) &&
        int_field(c, "sliding_window", 1, TR_MAX_ROW_LEN, -1, sliding_window, err, errlen))
        goto out;
    json_t *rs = rp ? rp : json_object_get(c, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        const char *t = json_string_value(json_object_get(rs, "rope_type"));
        if (!t) t = json_string_value(json_object_get(rs, "type"));
        if (!json_is_object(rs) || !t || (strcmp(t, "llama3") && strcmp(t, "default"))) {
            rc = refuse(err, errlen, "rope_scaling other than type \"llama3\"");
            goto out;
        }
        if (!strcmp(t, "llama3") &&
            (num_field(rs, "factor", 0, &k.rope_scaling.factor, err, errlen) ||
             num_field(rs, "low_freq_factor", 0, &k.rope_scaling.low_freq_factor, err, errlen) ||
             num_field(rs, "high_freq_factor", 0, &k.rope_scaling.high_freq_factor, err, errlen) ||
             int_field(rs, "original_max_position_embeddings", 1, TR_MAX_ROW_LEN, -1,
                       &k.rope_scaling.original_max_position_embeddings, err, errlen)))
            goto out;
    }
    if (tr_llama_config_check(&k)) {
        snprintf(err, errlen,
                 "config.json: rope_scaling llama3 needs factor >= 1 and high_freq_factor > "
                 "low_freq_factor > 0");
        goto out;
    }
    *out = k;
    *arch = (tr_llama_arch)a;
    rc = TR_OK;
out:
    json_decref(c);
    return rc;
}
