/* test_llama_model.c - the CPU reference Llama-family model
 * (train/llama_model.c) against transformers fp32: logits, loss and every
 * parameter's gradient on fixed rows (one target ignored) for Llama with
 * GQA and an untied lm_head, Llama 3.1's rope_scaling, and Qwen2 with q/k/v
 * biases, and with --doc-mask (document ids, positions restarting; transformers
 * runs each document as its own sequence) (tests/data/hf/llama_model.json,
 * tests/hf/make_llama_model_fixture.py).
 * Criterion (as test_model_ref): |a - r| <= 1e-5 * max(|a|, |r|, 0.1 * max|r|
 * of the tensor); the loss to 1e-5 relative. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_model.h"
#include "test_check.h"

static double worst;

/* number of elements over the criterion */
static size_t over(const float *a, json_t *r, size_t n) {
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(json_number_value(json_array_get(r, i))));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double b = json_number_value(json_array_get(r, i)), d = fabs(a[i] - b);
        double s = fmax(fmax(fabs(a[i]), fabs(b)), 0.1 * mx);
        if (s > 0) worst = fmax(worst, d / s);
        bad += d > 1e-5 * s;
    }
    return bad;
}

static void run_case(const char *name, json_t *o) {
    json_t *cj = json_object_get(o, "config");
    int ci = 0;
#define I(k) (int)json_integer_value(json_object_get(cj, k))
    tr_llama_config c = {I("num_hidden_layers"),
                         I("num_attention_heads"),
                         I("num_key_value_heads"),
                         I("hidden_size"),
                         I("intermediate_size"),
                         I("vocab_size"),
                         I("max_position_embeddings"),
                         (float)json_number_value(json_object_get(cj, "theta")),
                         (float)json_number_value(json_object_get(cj, "rms_norm_eps")),
                         {0, 0, 0, 0},
                         json_is_true(json_object_get(cj, "tied")),
                         json_is_true(json_object_get(cj, "qkv_bias"))};
    if (json_is_true(json_object_get(cj, "llama3"))) c.rope_scaling = (kn_rope_scaling){8.0f, 1.0f, 4.0f, 32};
    (void)ci;
    tr_llama *m = NULL;
    CHECK(tr_llama_create(&c, &m) == 0, "%s: create", name);
    if (!m) return;
    json_t *params = json_object_get(o, "params"), *grads = json_object_get(o, "grads");
    CHECK(json_object_size(params) == (size_t)tr_llama_n_tensors(m), "%s: %zu tensors in transformers, %d here", name,
          json_object_size(params), tr_llama_n_tensors(m));
    const char *key;
    json_t *val;
    json_object_foreach(params, key, val) {
        size_t n = 0;
        float *p = tr_llama_param(m, key, &n);
        CHECK(p && n == json_array_size(val), "%s: %s", name, key);
        for (size_t i = 0; p && i < n && i < json_array_size(val); i++)
            p[i] = (float)json_number_value(json_array_get(val, i));
    }
    json_t *in = json_object_get(o, "inputs"), *tg = json_object_get(o, "targets");
    int B = (int)json_array_size(in), T = (int)json_array_size(json_array_get(in, 0));
    uint32_t *x = calloc((size_t)B * T, 4);
    int32_t *y = calloc((size_t)B * T, 4);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            x[b * T + t] = (uint32_t)json_integer_value(json_array_get(json_array_get(in, b), t));
            y[b * T + t] = (int32_t)json_integer_value(json_array_get(json_array_get(tg, b), t));
        }
    float *logits = calloc((size_t)B * T * c.vocab, 4);
    double loss = 0;
    /* --doc-mask: document ids and positions restarting per document */
    json_t *dj = json_object_get(o, "doc"), *pj = json_object_get(o, "pos");
    int32_t *doc = dj ? calloc((size_t)B * T, 4) : NULL, *pos = pj ? calloc((size_t)B * T, 4) : NULL;
    for (int b = 0; dj && b < B; b++)
        for (int t = 0; t < T; t++) {
            doc[b * T + t] = (int32_t)json_integer_value(json_array_get(json_array_get(dj, b), t));
            pos[b * T + t] = (int32_t)json_integer_value(json_array_get(json_array_get(pj, b), t));
        }
    CHECK(tr_llama_fwd_bwd(m, B, T, x, y, pos, doc, logits, &loss) == 0, "%s: fwd_bwd", name);
    free(doc), free(pos);
    double hl = json_number_value(json_object_get(o, "loss"));
    CHECK(fabs(loss - hl) <= 1e-5 * hl, "%s: loss %.9g, transformers %.9g", name, loss, hl);
    worst = 0;
    size_t bad = over(logits, json_object_get(o, "logits"), (size_t)B * T * c.vocab);
    CHECK(bad == 0, "%s: %zu logits differ", name, bad);
    double wl = worst;
    worst = 0;
    json_object_foreach(grads, key, val) {
        size_t n = 0;
        float *g = tr_llama_grad(m, key, &n);
        if (!g) continue;
        size_t b = over(g, val, n);
        CHECK(b == 0, "%s: gradient %s: %zu of %zu elements differ", name, key, b, n);
    }
    printf("%s: loss %.9g (transformers %.9g, rel %.1e), logits worst %.1e, gradients worst %.1e\n", name, loss, hl,
           fabs(loss - hl) / hl, wl, worst);
    free(x), free(y), free(logits);
    tr_llama_free(m);
}

int main(void) {
    json_error_t je;
    json_t *fx = json_load_file(MKS_TEST_DATA "/hf/llama_model.json", 0, &je);
    if (!fx) {
        fprintf(stderr, "llama_model.json: %s\n", je.text);
        return 1;
    }
    run_case("llama_gqa_untied", json_object_get(fx, "llama_gqa_untied"));
    run_case("llama3_rope", json_object_get(fx, "llama3_rope"));
    run_case("qwen2_bias", json_object_get(fx, "qwen2_bias"));
    run_case("llama_doc_mask", json_object_get(fx, "llama_doc_mask"));
    json_decref(fx);
    return failures ? 1 : 0;
}
