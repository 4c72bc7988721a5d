/* test_llama_import.c - tr_llama_import_hf (train/llama_hf.c) on folders
 * written by transformers' save_pretrained (tests/data/hf/llama_import,
 * tests/hf/make_llama_import_fixture.py): a Llama with GQA, an untied
 * lm_head and llama3 rope scaling in one model.safetensors, and a Qwen2
 * with q/k/v biases, tied, in 6 shards with an index. The loss of the
 * imported model on fixed rows equals transformers' to 1e-5 relative; a
 * --seq-len over max_position_embeddings, a folder without weights and a
 * set holding a tensor of another model are refused. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llama_model.h"
#include "safetensors.h"
#include "test_check.h"
#include "tr.h"

#define DIR MKS_TEST_DATA "/hf/llama_import"

static void run_case(const char *name, json_t *r, tr_llama_arch want) {
    char dir[512], err[1024];
    err[0] = 0;
    snprintf(dir, sizeof dir, DIR "/%s", name);
    tr_llama *m = NULL;
    tr_llama_arch a;
    int rc = tr_llama_import_hf(dir, 12, &m, &a, err, sizeof err);
    CHECK(rc == TR_OK && m, "%s: rc %d: %s", name, rc, err);
    if (!m) return;
    CHECK(a == want, "%s", name);
    json_t *in = json_object_get(r, "inputs"), *tg = json_object_get(r, "targets");
    int B = (int)json_array_size(in), T = (int)json_array_size(json_array_get(in, 0));
    uint32_t *x = malloc((size_t)B * T * sizeof *x);
    int32_t *y = malloc((size_t)B * T * sizeof *y);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            x[b * T + t] = (uint32_t)json_integer_value(json_array_get(json_array_get(in, b), t));
            y[b * T + t] = (int32_t)json_integer_value(json_array_get(json_array_get(tg, b), t));
        }
    double loss = 0, ref = json_number_value(json_object_get(r, "loss"));
    CHECK(!tr_llama_fwd_bwd(m, B, T, x, y, NULL, NULL, NULL, &loss));
    CHECK(fabs(loss - ref) <= 1e-5 * fabs(ref), "%s: loss %.9g, transformers %.9g", name, loss, ref);
    printf("%s: loss %.9g transformers %.9g (rel %.2g)\n", name, loss, ref, fabs(loss - ref) / fabs(ref));
    /* export (fp32) and import again: every parameter bit-identical */
    char out[] = "/tmp/test_llama_export.XXXXXX", f1[600], f2[600];
    CHECK(mkdtemp(out) != NULL);
    CHECK(!tr_llama_export_hf(out, m, a, 0, err, sizeof err), "%s", err);
    tr_llama *m2 = NULL;
    tr_llama_arch a2;
    CHECK(!tr_llama_import_hf(out, 12, &m2, &a2, err, sizeof err), "%s: %s", name, err);
    if (m2) {
        CHECK(a2 == a && tr_llama_n_tensors(m2) == tr_llama_n_tensors(m));
        size_t diff = 0;
        for (int i = 0; i < tr_llama_n_tensors(m); i++) {
            size_t n1, n2;
            const char *tn = tr_llama_tensor_name(m, i);
            float *p1 = tr_llama_param(m, tn, &n1), *p2 = tr_llama_param(m2, tn, &n2);
            diff += !p2 || n1 != n2 || memcmp(p1, p2, n1 * sizeof *p1);
        }
        CHECK(diff == 0, "%s: %zu tensors differ after export + import", name, diff);
        tr_llama_free(m2);
    }
    /* bf16: the nearest-even rounding of each value */
    CHECK(!tr_llama_export_hf(out, m, a, 1, err, sizeof err), "%s", err);
    CHECK(!tr_llama_import_hf(out, 12, &m2, &a2, err, sizeof err), "%s: %s", name, err);
    if (m2) {
        size_t n1, bad = 0;
        float *p1 = tr_llama_param(m, "model.norm.weight", &n1), *p2 = tr_llama_param(m2, "model.norm.weight", &n1);
        for (size_t k = 0; k < n1; k++) bad += fabsf(p1[k] - p2[k]) > fabsf(p1[k]) / 256;
        CHECK(bad == 0 && memcmp(p1, p2, n1 * sizeof *p1), "%s: bf16 values", name);
        tr_llama_free(m2);
    }
    snprintf(f1, sizeof f1, "%s/config.json", out);
    snprintf(f2, sizeof f2, "%s/model.safetensors", out);
    unlink(f1);
    unlink(f2);
    rmdir(out);
    free(x);
    free(y);
    tr_llama_free(m);
}

int main(void) {
    json_error_t je;
    json_t *fx = json_load_file(DIR "/rows.json", 0, &je);
    CHECK(fx != NULL, "%s", je.text);
    if (!fx) return 1;
    run_case("llama_gqa_llama3", json_object_get(fx, "llama_gqa_llama3"), TR_LLAMA_LLAMA);
    run_case("qwen2_bias_sharded", json_object_get(fx, "qwen2_bias_sharded"), TR_LLAMA_QWEN2);
    json_decref(fx);

    tr_llama *m = NULL;
    tr_llama_arch a;
    char err[1024];
    CHECK(tr_llama_import_hf(DIR "/llama_gqa_llama3", 65, &m, &a, err, sizeof err) == TR_ERR_ARG &&
              strstr(err, "max_position_embeddings"),
          "%s", err);
    CHECK(tr_llama_import_hf(DIR, 12, &m, &a, err, sizeof err) == TR_ERR_IO, "%s", err); /* no config.json */

    /* a folder with the Llama's config.json and weights plus one extra tensor */
    char tmp[] = "/tmp/test_llama_import.XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    char p[600], q[600];
    snprintf(p, sizeof p, "%s/config.json", tmp);
    FILE *src = fopen(DIR "/llama_gqa_llama3/config.json", "rb"), *dst = fopen(p, "wb");
    int ch;
    while (src && dst && (ch = fgetc(src)) != EOF) fputc(ch, dst);
    if (src) fclose(src);
    if (dst) fclose(dst);
    tr_st_file f;
    CHECK(!tr_st_open(DIR "/llama_gqa_llama3/model.safetensors", &f, err, sizeof err), "%s", err);
    size_t n = f.n;
    tr_st_out *o = calloc(n + 1, sizeof *o);
    float **bufs = calloc(n + 1, sizeof *bufs);
    for (size_t i = 0; i < n; i++) {
        o[i].name = f.t[i].name;
        o[i].dtype = TR_ST_F32;
        o[i].rank = f.t[i].rank;
        memcpy(o[i].shape, f.t[i].shape, sizeof o[i].shape);
        bufs[i] = malloc(f.t[i].numel * sizeof(float));
        CHECK(!tr_st_read_f32(&f, &f.t[i], bufs[i], f.t[i].numel, err, sizeof err));
        o[i].data = bufs[i];
    }
    float extra[4] = {1, 2, 3, 4};
    o[n] = (tr_st_out){"model.layers.0.self_attn.o_proj.bias", TR_ST_F32, 1, {4}, extra, NULL, 0};
    snprintf(q, sizeof q, "%s/model.safetensors", tmp);
    CHECK(!tr_st_write(q, o, n + 1, NULL, NULL, 0, err, sizeof err), "%s", err);
    CHECK(tr_llama_import_hf(tmp, 12, &m, &a, err, sizeof err) == TR_ERR_CORRUPT && strstr(err, "another model"), "%s",
          err);
    /* the same without the extra tensor loads; with q_proj of another shape it does not */
    CHECK(!tr_st_write(q, o, n, NULL, NULL, 0, err, sizeof err), "%s", err);
    CHECK(tr_llama_import_hf(tmp, 12, &m, &a, err, sizeof err) == TR_OK, "%s", err);
    tr_llama_free(m);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(o[i].name, "model.layers.1.self_attn.k_proj.weight")) o[i].shape[0] = 16, o[i].shape[1] = 8;
    CHECK(!tr_st_write(q, o, n, NULL, NULL, 0, err, sizeof err), "%s", err);
    CHECK(tr_llama_import_hf(tmp, 12, &m, &a, err, sizeof err) == TR_ERR_CORRUPT && strstr(err, "k_proj") &&
              strstr(err, "shape"),
          "%s", err);
    /* a config.json claiming 99 layers over 2 layers' weights: refused before allocating */
    FILE *cf = fopen(p, "rb");
    char cfg[4096] = "";
    size_t cl = cf ? fread(cfg, 1, sizeof cfg - 1, cf) : 0;
    if (cf) fclose(cf);
    cfg[cl] = 0;
    char *at = strstr(cfg, "\"num_hidden_layers\": 2,");
    CHECK(at != NULL);
    if (at) {
        memcpy(at, "\"num_hidden_layers\":99,", 23);
        cf = fopen(p, "wb");
        if (cf) fputs(cfg, cf), fclose(cf);
        CHECK(tr_llama_import_hf(tmp, 12, &m, &a, err, sizeof err) == TR_ERR_CORRUPT && strstr(err, "parameters"), "%s",
              err);
    }
    for (size_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    free(o);
    tr_st_close(&f);
    unlink(p);
    unlink(q);
    rmdir(tmp);

    printf("test_llama_import: %d failures\n", failures);
    return failures != 0;
}
