/* test_llama_config.c - the Llama family's configurations
 * (train/llama_config.c): the presets have the published models' parameter
 * counts, Hugging Face config.json files of the three architectures read
 * into the shapes transformers builds, and configs of models we do not
 * compute or with fields out of range are refused with a message naming
 * the field. */
#include <stdio.h>
#include <string.h>

#include "llama_model.h"
#include "test_check.h"
#include "tr.h"

static int parse(const char *json, tr_llama_config *c, tr_llama_arch *a, int *sw, char *err, size_t errlen) {
    err[0] = 0;
    return tr_llama_config_from_json(json, strlen(json), c, a, sw, err, errlen);
}

int main(void) {
    tr_llama_config c;
    tr_llama_arch a;
    int sw;
    char err[512];

    /* the published counts (model cards / safetensors metadata) */
    CHECK(!tr_llama_config_preset("smollm-135m", 49152, 2048, &c));
    CHECK(tr_llama_param_count(&c) == 134515008u, "%zu", tr_llama_param_count(&c));
    CHECK(!tr_llama_config_preset("smollm-360m", 49152, 2048, &c));
    CHECK(tr_llama_param_count(&c) == 361821120u, "%zu", tr_llama_param_count(&c));
    CHECK(!tr_llama_config_preset("llama-1b", 128256, 2048, &c));
    CHECK(tr_llama_param_count(&c) == 1235814400u, "%zu", tr_llama_param_count(&c));
    CHECK(c.rope_scaling.factor == 32 && c.rope_theta == 500000 && c.n_kv_head == 8);
    CHECK(!tr_llama_config_preset("qwen2.5-0.5b", 151936, 2048, &c));
    CHECK(tr_llama_param_count(&c) == 494032768u, "%zu", tr_llama_param_count(&c));
    CHECK(tr_llama_config_preset("d12", 50257, 1024, &c) == TR_ERR_ARG);
    CHECK(tr_llama_config_preset("smollm-135m", 0, 2048, &c) == TR_ERR_ARG);
    int np = 0;
    while (tr_llama_preset_name(np)) np++;
    CHECK(np == 4);

    /* the count is what llama_model.c lays out: tied / untied, with and without biases */
    for (int v = 0; v < 4; v++) {
        tr_llama_config s = {3, 4, 2, 32, 48, 50, 16, 10000.f, 1e-6f, {0, 0, 0, 0}, v & 1, v >> 1};
        tr_llama *m = NULL;
        CHECK(!tr_llama_create(&s, &m));
        if (!m) continue;
        size_t sum = 0, n;
        for (int i = 0; i < tr_llama_n_tensors(m); i++)
            if (tr_llama_param(m, tr_llama_tensor_name(m, i), &n)) sum += n;
        CHECK(sum == tr_llama_param_count(&s), "variant %d: layout %zu, count %zu", v, sum, tr_llama_param_count(&s));
        tr_llama_free(m);
    }

    /* Llama-3.2-1B's config.json (the fields transformers reads) */
    const char *l32 =
        "{\"architectures\":[\"LlamaForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,"
        "\"bos_token_id\":128000,\"eos_token_id\":128001,\"head_dim\":64,\"hidden_act\":\"silu\",\"hidden_size\":2048,"
        "\"initializer_range\":0.02,\"intermediate_size\":8192,\"max_position_embeddings\":131072,\"mlp_bias\":false,"
        "\"model_type\":\"llama\",\"num_attention_heads\":32,\"num_hidden_layers\":16,\"num_key_value_heads\":8,"
        "\"pretraining_tp\":1,\"rms_norm_eps\":1e-05,\"rope_scaling\":{\"factor\":32.0,\"high_freq_factor\":4.0,"
        "\"low_freq_factor\":1.0,\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},"
        "\"rope_theta\":500000.0,\"tie_word_embeddings\":true,\"torch_dtype\":\"bfloat16\",\"use_cache\":true,"
        "\"vocab_size\":128256}";
    CHECK(!parse(l32, &c, &a, &sw, err, sizeof err), "%s", err);
    CHECK(a == TR_LLAMA_LLAMA && sw == 0 && c.tied && !c.qkv_bias && c.max_seq == 131072);
    CHECK(tr_llama_param_count(&c) == 1235814400u, "%zu", tr_llama_param_count(&c));
    CHECK(c.rope_scaling.factor == 32 && c.rope_scaling.low_freq_factor == 1 && c.rope_scaling.high_freq_factor == 4 &&
          c.rope_scaling.original_max_position_embeddings == 8192 && c.rope_theta == 500000 && c.norm_eps == 1e-5f);
    CHECK(!strcmp(tr_llama_arch_name(a), "LlamaForCausalLM") && !strcmp(tr_llama_model_type(a), "llama"));

    /* Qwen2.5-0.5B: q/k/v biases, tied, sliding window off */
    const char *qw = "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_act\":\"silu\",\"hidden_size\":896,"
                     "\"intermediate_size\":4864,\"max_position_embeddings\":32768,\"max_window_layers\":24,"
                     "\"model_type\":\"qwen2\",\"num_attention_heads\":14,\"num_hidden_layers\":24,"
                     "\"num_key_value_heads\":2,\"rms_norm_eps\":1e-06,\"rope_theta\":1000000.0,"
                     "\"sliding_window\":32768,\"tie_word_embeddings\":true,\"use_sliding_window\":false,"
                     "\"vocab_size\":151936}";
    CHECK(!parse(qw, &c, &a, &sw, err, sizeof err), "%s", err);
    CHECK(a == TR_LLAMA_QWEN2 && c.qkv_bias && c.tied && sw == 0 && c.norm_eps == 1e-6f);
    CHECK(tr_llama_param_count(&c) == 494032768u, "%zu", tr_llama_param_count(&c));

    /* Mistral-7B-v0.1: untied, window 4096; defaults for absent fields */
    const char *mi = "{\"architectures\":[\"MistralForCausalLM\"],\"hidden_act\":\"silu\",\"hidden_size\":4096,"
                     "\"intermediate_size\":14336,\"max_position_embeddings\":32768,\"model_type\":\"mistral\","
                     "\"num_attention_heads\":32,\"num_hidden_layers\":32,\"num_key_value_heads\":8,"
                     "\"rms_norm_eps\":1e-05,\"rope_theta\":10000.0,\"sliding_window\":4096,"
                     "\"tie_word_embeddings\":false,\"vocab_size\":32000}";
    CHECK(!parse(mi, &c, &a, &sw, err, sizeof err), "%s", err);
    CHECK(a == TR_LLAMA_MISTRAL && !c.tied && !c.qkv_bias && sw == 4096);
    CHECK(tr_llama_param_count(&c) == 7241732096u, "%zu", tr_llama_param_count(&c));

    /* transformers 5.25's save_pretrained: rope settings in "rope_parameters" */
    const char *t5 = "{\"architectures\":[\"LlamaForCausalLM\"],\"attention_bias\":false,\"head_dim\":4,"
                     "\"hidden_act\":\"silu\",\"hidden_size\":16,\"intermediate_size\":24,"
                     "\"max_position_embeddings\":64,\"mlp_bias\":false,\"model_type\":\"llama\","
                     "\"num_attention_heads\":4,\"num_hidden_layers\":2,\"num_key_value_heads\":2,"
                     "\"pad_token_id\":null,\"pretraining_tp\":1,\"rms_norm_eps\":1e-05,\"rope_parameters\":{"
                     "\"factor\":8.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
                     "\"original_max_position_embeddings\":32,\"rope_theta\":5000.0,\"rope_type\":\"llama3\"},"
                     "\"tie_word_embeddings\":false,\"transformers_version\":\"5.25.0\",\"vocab_size\":64}";
    CHECK(!parse(t5, &c, &a, &sw, err, sizeof err), "%s", err);
    CHECK(c.rope_theta == 5000 && c.rope_scaling.factor == 8 && c.rope_scaling.original_max_position_embeddings == 32 &&
              !c.tied && c.n_kv_head == 2,
          "theta %g factor %g", c.rope_theta, c.rope_scaling.factor);
    {
        char buf[1024];
        const char *at = strstr(t5, "\"rope_type\":\"llama3\"");
        snprintf(buf, sizeof buf, "%.*s\"rope_type\":\"linear\"%s", (int)(at - t5), t5, at + 20);
        CHECK(parse(buf, &c, &a, &sw, err, sizeof err) == TR_ERR_DATA && strstr(err, "rope_scaling"), "%s", err);
    }

    /* absent: num_key_value_heads = heads, rope_theta 10000, untied */
    CHECK(!parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"
                 "\"num_attention_heads\":4,\"vocab_size\":100,\"max_position_embeddings\":64,\"rms_norm_eps\":1e-6}",
                 &c, &a, &sw, err, sizeof err),
          "%s", err);
    CHECK(c.n_kv_head == 4 && c.rope_theta == 10000 && !c.tied && c.rope_scaling.factor == 0);

    /* refusals: (substring of the config to replace, replacement, rc, word the message names) */
    static const struct {
        const char *from, *to;
        int rc;
        const char *names;
    } bad[] = {
        {"\"model_type\":\"llama\"", "\"model_type\":\"gemma\"", TR_ERR_DATA, "gemma"},
        {"\"LlamaForCausalLM\"", "\"Qwen2ForCausalLM\"", TR_ERR_DATA, "architectures"},
        {"\"attention_bias\":false", "\"attention_bias\":true", TR_ERR_DATA, "attention_bias"},
        {"\"mlp_bias\":false", "\"mlp_bias\":true", TR_ERR_DATA, "mlp_bias"},
        {"\"hidden_act\":\"silu\"", "\"hidden_act\":\"gelu\"", TR_ERR_DATA, "hidden_act"},
        {"\"head_dim\":64", "\"head_dim\":128", TR_ERR_DATA, "head_dim"},
        {"\"pretraining_tp\":1", "\"pretraining_tp\":2", TR_ERR_DATA, "pretraining_tp"},
        {"\"rope_type\":\"llama3\"", "\"rope_type\":\"yarn\"", TR_ERR_DATA, "rope_scaling"},
        {"\"factor\":32.0", "\"factor\":0.5", TR_ERR_CORRUPT, "factor"},
        {"\"low_freq_factor\":1.0", "\"low_freq_factor\":-1", TR_ERR_CORRUPT, "low_freq_factor"},
        {"\"num_key_value_heads\":8", "\"num_key_value_heads\":5", TR_ERR_CORRUPT, "num_key_value_heads"},
        {"\"num_hidden_layers\":16", "\"num_hidden_layers\":0", TR_ERR_CORRUPT, "num_hidden_layers"},
        {"\"hidden_size\":2048", "\"hidden_size\":99999999999", TR_ERR_CORRUPT, "hidden_size"},
        {"\"vocab_size\":128256", "\"vocab_size\":1e9", TR_ERR_CORRUPT, "vocab_size"},
        {"\"rms_norm_eps\":1e-05", "\"rms_norm_eps\":0", TR_ERR_CORRUPT, "rms_norm_eps"},
        {"\"rope_theta\":500000.0", "\"rope_theta\":\"big\"", TR_ERR_CORRUPT, "rope_theta"},
        {"\"tie_word_embeddings\":true", "\"tie_word_embeddings\":1", TR_ERR_CORRUPT, "tie_word_embeddings"},
        {"\"use_cache\":true", "\"use_cache\":true,\"vocab_size\":1", TR_ERR_CORRUPT, "config.json"},
        {"{\"architectures\"", "[{\"architectures\"", TR_ERR_CORRUPT, "config.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[2048];
        const char *at = strstr(l32, bad[i].from);
        CHECK(at != NULL, "case %zu", i);
        if (!at) continue;
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - l32), l32, bad[i].to, at + strlen(bad[i].from));
        int rc = parse(buf, &c, &a, &sw, err, sizeof err);
        CHECK(rc == bad[i].rc && strstr(err, bad[i].names), "case %zu (%s): rc %d, %s", i, bad[i].to, rc, err);
    }
    /* not JSON, truncated, control bytes in the type echo escaped */
    CHECK(parse("{\"model_type\":", &c, &a, &sw, err, sizeof err) == TR_ERR_CORRUPT);
    CHECK(parse("{\"model_type\":\"x\\u001b[31m\"}", &c, &a, &sw, err, sizeof err) == TR_ERR_DATA && !strchr(err, 0x1b),
          "%s", err);
    CHECK(tr_llama_config_from_json(l32, strlen(l32) - 1, &c, &a, &sw, err, sizeof err) == TR_ERR_CORRUPT);

    printf("test_llama_config: %d failures\n", failures);
    return failures != 0;
}
