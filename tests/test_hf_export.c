/* test_hf_export.c - `llmtrain export`'s folder (train/export.c) against
 * transformers, without torch in CI.
 *
 * A deterministic GPT-2 (2 layers, 2 heads, d_model 32, 64 positions, the
 * GPT-2 vocabulary 50257 padded to 50304: the padded rows hold garbage, so
 * exporting them or not slicing wte shows) with every parameter perturbed
 * (biases and LayerNorm too) is exported; deterministic rows go through our
 * forward. Checked here:
 *   - every tensor of model.safetensors equals the parameter it comes from
 *     (Conv1D transposes, the unpadded wte, no lm_head), bf16 rounded to
 *     nearest even;
 *   - our loss equals the loss transformers computed on the same folder and
 *     rows (committed in tests/data/hf/export_gpt2.json by
 *     tests/hf/make_export_fixture.py) to 1e-4 relative for fp32 (the
 *     bf16 export's loss against transformers' on the bf16 folder, 1e-4);
 *   - the exported tokenizer's ids for a text, as transformers' AutoTokenizer
 *     gave them, equal tk_encode's.
 * `test_hf_export dump DIR` writes the folders (DIR/fp32, DIR/bf16) and
 * DIR/rows.json (rows, our losses) for the fixture script. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export.h"
#include "hf_import.h"
#include "model.h"
#include "safetensors.h"
#include "test_check.h"
#include "tk.h"
#include "tr.h"

#define B 3
#define T 24
static const char *TEXT = "Hello world! The exported tokenizer: 12345  caf\xc3\xa9 \xf0\x9f\x98\x80.";

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float unif(void) { return (float)((next() >> 11) * 0x1.0p-53) * 2.0f - 1.0f; }

typedef struct {
    tr_model *m;
    tr_model_config c;
    uint32_t rows[B][T + 1];
    double loss; /* mean over B*T */
} fixture;

static int make(fixture *f) {
    if (tr_model_config_make(2, 2, 32, 64, 50257, &f->c) || tr_model_create(&f->c, 7, &f->m)) return 1;
    size_t n = tr_model_param_count(&f->c);
    float *p = tr_model_params(f->m);
    for (size_t i = 0; i < n; i++) /* every parameter moves: biases, LayerNorm, padded rows */
        p[i] += 0.3f * unif();
    for (int b = 0; b < B; b++)
        for (int t = 0; t <= T; t++) f->rows[b][t] = (uint32_t)(next() % 50257);
    uint32_t in[B * T];
    int32_t tg[B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            in[b * T + t] = f->rows[b][t];
            tg[b * T + t] = (int32_t)f->rows[b][t + 1];
        }
    double sum;
    uint64_t nt;
    if (tr_model_forward(f->m, B, T, in, tg, NULL, NULL, &sum, &nt) || nt != B * T) return 1;
    f->loss = sum / (double)nt;
    return 0;
}

/* Each exported tensor against the parameter it comes from. */
static void check_tensors(const char *dir, fixture *f, int bf16) {
    char path[1024], err[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    tr_st_file sf;
    CHECK(tr_st_open(path, &sf, err, sizeof err) == TR_OK, "%s", err);
    if (sf.fd < 0) return;
    const tr_model_config *c = &f->c;
    size_t C = (size_t)c->d_model, L = (size_t)c->n_layer;
    CHECK(sf.n == 4 + 12 * L, "%zu tensors", sf.n);
    CHECK(!tr_st_find(&sf, "lm_head.weight"), "tied: no lm_head");
    CHECK(tr_st_meta(&sf, "format") && !strcmp(tr_st_meta(&sf, "format"), "pt"));
    struct {
        const char *name;
        int tensor, rows, cols, transposed, per_layer;
    } map[] = {
        {"transformer.wte.weight", TR_P_WTE, c->vocab, (int)C, 0, 0},
        {"transformer.wpe.weight", TR_P_WPE, c->max_seq, (int)C, 0, 0},
        {"ln_1.weight", TR_P_LN1W, 1, (int)C, 0, 1},
        {"ln_1.bias", TR_P_LN1B, 1, (int)C, 0, 1},
        {"attn.c_attn.weight", TR_P_QKVW, 3 * (int)C, (int)C, 1, 1},
        {"attn.c_attn.bias", TR_P_QKVB, 1, 3 * (int)C, 0, 1},
        {"attn.c_proj.weight", TR_P_ATTPROJW, (int)C, (int)C, 1, 1},
        {"attn.c_proj.bias", TR_P_ATTPROJB, 1, (int)C, 0, 1},
        {"ln_2.weight", TR_P_LN2W, 1, (int)C, 0, 1},
        {"ln_2.bias", TR_P_LN2B, 1, (int)C, 0, 1},
        {"mlp.c_fc.weight", TR_P_FCW, 4 * (int)C, (int)C, 1, 1},
        {"mlp.c_fc.bias", TR_P_FCB, 1, 4 * (int)C, 0, 1},
        {"mlp.c_proj.weight", TR_P_FCPROJW, (int)C, 4 * (int)C, 1, 1},
        {"mlp.c_proj.bias", TR_P_FCPROJB, 1, (int)C, 0, 1},
        {"transformer.ln_f.weight", TR_P_LNFW, 1, (int)C, 0, 0},
        {"transformer.ln_f.bias", TR_P_LNFB, 1, (int)C, 0, 0},
    };
    size_t bad = 0;
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
        for (size_t l = 0; l < (map[k].per_layer ? L : 1); l++) {
            char nm[128];
            if (map[k].per_layer) snprintf(nm, sizeof nm, "transformer.h.%zu.%s", l, map[k].name);
            else snprintf(nm, sizeof nm, "%s", map[k].name);
            const tr_st_tensor *t = tr_st_find(&sf, nm);
            size_t R = (size_t)map[k].rows, K = (size_t)map[k].cols, n = R * K;
            CHECK(t != NULL, "%s missing", nm);
            if (!t) continue;
            CHECK(t->dtype == (bf16 ? TR_ST_BF16 : TR_ST_F32) && t->numel == n, "%s: dtype/size", nm);
            /* shape: Conv1D weights (in, out), vectors 1-D */
            if (map[k].transposed) CHECK(t->rank == 2 && t->shape[0] == K && t->shape[1] == R, "%s: shape", nm);
            else if (R == 1) CHECK(t->rank == 1 && t->shape[0] == K, "%s: shape", nm);
            else CHECK(t->rank == 2 && t->shape[0] == R && t->shape[1] == K, "%s: shape", nm);
            float *v = malloc(n * sizeof *v);
            CHECK(tr_st_read_f32(&sf, t, v, n, err, sizeof err) == TR_OK, "%s", err);
            const float *src = tr_model_param_tensor(f->m, map[k].tensor) + l * n;
            for (size_t r = 0; r < R; r++)
                for (size_t q = 0; q < K; q++) {
                    float want = src[r * K + q], got = map[k].transposed ? v[q * R + r] : v[r * K + q];
                    if (bf16) { /* round to nearest even, as the writer */
                        uint32_t u;
                        memcpy(&u, &want, 4);
                        u = (u + 0x7fffu + (u >> 16 & 1)) & 0xffff0000u;
                        memcpy(&want, &u, 4);
                    }
                    bad += got != want;
                }
            free(v);
        }
    CHECK(bad == 0, "%zu values differ from the parameters (%s)", bad, bf16 ? "bf16" : "fp32");
    tr_st_close(&sf);
}

static int export_both(const char *dir, fixture *f, tk_tokenizer *tok, const char *spec) {
    char p[512], err[1024] = "";
    size_t n = tr_model_param_count(&f->c);
    for (int bf = 0; bf < 2; bf++) {
        snprintf(p, sizeof p, "%s/%s", dir, bf ? "bf16" : "fp32");
        int rc = tr_export_hf(p, &f->c, tr_model_params(f->m), bf, tok, spec, -1, 50256, err, sizeof err);
        CHECK(rc == TR_OK, "export: %s", err);
        if (rc) return 1;
        check_tensors(p, f, bf);
    }
    (void)n;
    return 0;
}

/* The loss of the model with its weights rounded to bf16 (the bf16 folder's
 * model as transformers runs it in fp32). */
static double bf16_loss(fixture *f) {
    size_t n = tr_model_param_count(&f->c);
    float *p = tr_model_params(f->m), *keep = malloc(n * sizeof *keep);
    memcpy(keep, p, n * sizeof *keep);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &p[i], 4);
        u = (u + 0x7fffu + (u >> 16 & 1)) & 0xffff0000u;
        memcpy(&p[i], &u, 4);
    }
    uint32_t in[B * T];
    int32_t tg[B * T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            in[b * T + t] = f->rows[b][t];
            tg[b * T + t] = (int32_t)f->rows[b][t + 1];
        }
    double sum = 0;
    uint64_t nt = 1;
    tr_model_forward(f->m, B, T, in, tg, NULL, NULL, &sum, &nt);
    memcpy(p, keep, n * sizeof *keep);
    free(keep);
    return sum / (double)nt;
}

/* `test_hf_export valrows SHARDS T N OUT`: the first N rows of the shard
 * set's validation split as llmtrain's validation feeds them (tr_fill_rows,
 * no --doc-mask): inputs and targets (-1: no loss) as JSON, for the
 * fixture script's run check. */
static int valrows(const char *dir, int split, int T_, int n, const char *out) {
    tr_rows rows;
    char err[512] = "";
    if (tr_rows_open_shards_ex(&rows, dir, 0, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    tr_batch b;
    uint32_t *st = malloc((size_t)rows.row_len * 4), *sp = malloc((size_t)rows.row_len * 4);
    uint8_t *sm = malloc((size_t)rows.row_len);
    if (tr_batch_alloc(&b, n, T_)) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    if (split == TR_SPLIT_VAL) {
        if (tr_fill_rows(&rows, TR_SPLIT_VAL, 0, n, T_, 0, &b, st, sp, sm)) {
            fprintf(stderr, "cannot read the validation rows\n");
            return 1;
        }
    } else { /* the first step's rows: loader positions 0..n-1 in llmtrain's order (seed 1337) */
        tr_batch one;
        if (tr_batch_alloc(&one, 1, T_)) return 1;
        for (int r = 0; r < n; r++) {
            uint64_t row = tr_row_at((uint64_t)r, rows.n_rows[TR_SPLIT_TRAIN], 1337, 1);
            if (tr_fill_rows(&rows, TR_SPLIT_TRAIN, row, 1, T_, 0, &one, st, sp, sm)) {
                fprintf(stderr, "cannot read train row %llu\n", (unsigned long long)row);
                return 1;
            }
            memcpy(b.inputs + (size_t)r * T_, one.inputs, (size_t)T_ * sizeof *one.inputs);
            memcpy(b.targets + (size_t)r * T_, one.targets, (size_t)T_ * sizeof *one.targets);
        }
        tr_batch_free(&one);
    }
    json_t *o = json_object(), *in = json_array(), *tg = json_array();
    for (int r = 0; r < n; r++) {
        json_t *a = json_array(), *c = json_array();
        for (int t = 0; t < T_; t++) {
            json_array_append_new(a, json_integer(b.inputs[r * T_ + t]));
            json_array_append_new(c, json_integer(b.targets[r * T_ + t]));
        }
        json_array_append_new(in, a);
        json_array_append_new(tg, c);
    }
    json_object_set_new(o, "inputs", in);
    json_object_set_new(o, "targets", tg);
    int rc = json_dump_file(o, out, 0) ? 1 : 0;
    json_decref(o);
    tr_batch_free(&b);
    free(st);
    free(sp);
    free(sm);
    tr_rows_close(&rows);
    return rc;
}

/* tests/data/hf/gpt2_tiny: a random-init GPT-2 transformers saved with
 * save_pretrained in two shards (index.json); its loss on the fixture's rows
 * must be transformers' to 1e-4 relative. Then the import's refusals. */
static void check_import(json_t *fx) {
    json_t *ti = json_object_get(fx, "import_gpt2_tiny"), *rows = json_object_get(ti, "rows");
    CHECK(json_array_size(rows) == 2, "fixture rows");
    if (json_array_size(rows) != 2) return;
    const char *dir = MKS_TEST_DATA "/hf/gpt2_tiny";
    char err[1024] = "";
    tr_model_config c;
    tr_model *m = NULL;
    tr_rows stub;
    memset(&stub, 0, sizeof stub);
    stub.vocab_size = 96;
    snprintf(stub.desc, sizeof stub.desc, "stub shards");
    int L = 0, NH = 0, C = 0;
    /* the folder has no tokenizer: the shape checks pass, the tokenizer's refuses */
    int rc = tr_hf_import_shape(dir, &stub, 16, &L, &NH, &C, err, sizeof err);
    CHECK(rc == TR_ERR_FINGERPRINT && strstr(err, "no tokenizer"), "no tokenizer: %d %s", rc, err);
    stub.vocab_size = 97;
    rc = tr_hf_import_shape(dir, &stub, 16, &L, &NH, &C, err, sizeof err);
    CHECK(rc == TR_ERR_FINGERPRINT && strstr(err, "vocab_size 96"), "vocabulary: %d %s", rc, err);
    stub.vocab_size = 96;
    rc = tr_hf_import_shape(dir, &stub, 17, &L, &NH, &C, err, sizeof err);
    CHECK(rc == TR_ERR_ARG && strstr(err, "n_positions 16"), "T > n_positions: %d %s", rc, err);
    if (tr_model_config_make(2, 2, 16, 16, 96, &c) || tr_model_create(&c, 1, &m)) return;
    rc = tr_hf_import_weights(dir, m, err, sizeof err);
    CHECK(rc == TR_OK, "import: %s", err);
    uint32_t in[2 * 16];
    int32_t tg[2 * 16];
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 16; t++) {
            in[b * 16 + t] = (uint32_t)json_integer_value(json_array_get(json_array_get(rows, b), t));
            tg[b * 16 + t] = (int32_t)json_integer_value(json_array_get(json_array_get(rows, b), t + 1));
        }
    double sum = 0;
    uint64_t nt = 0;
    CHECK(tr_model_forward(m, 2, 16, in, tg, NULL, NULL, &sum, &nt) == 0 && nt == 32);
    double ours = sum / 32, hf = json_real_value(json_object_get(ti, "hf_loss"));
    CHECK(fabs(ours - hf) <= 1e-4 * hf, "imported save_pretrained model: loss %.9g, transformers %.9g", ours, hf);
    printf("test_hf_export: save_pretrained GPT-2 imported: loss %.9g, transformers %.9g (rel %.2e)\n", ours, hf,
           fabs(ours - hf) / hf);
    /* refusals, on copies: a config of another family, a shard missing, a
     * shape that is not config.json's */
    char tmp[] = "/tmp/test_hf_import_XXXXXX", cmd[600];
    if (!mkdtemp(tmp)) {
        tr_model_free(m);
        return;
    }
    snprintf(cmd, sizeof cmd, "cp %s/* %s/ && chmod u+w %s/*", dir, tmp, tmp);
    CHECK(system(cmd) == 0);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", tmp);
    FILE *f = fopen(p, "w");
    fputs("{\"model_type\": \"llama\", \"n_layer\": 2}", f);
    fclose(f);
    rc = tr_hf_import_shape(tmp, &stub, 16, &L, &NH, &C, err, sizeof err);
    CHECK(rc == TR_ERR_DATA && strstr(err, "model_type \"llama\" is not supported"), "llama: %d %s", rc, err);
    f = fopen(p, "w");
    fputs("{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_layer\": 3}", f);
    fclose(f);
    rc = tr_hf_import_shape(tmp, &stub, 16, &L, &NH, &C, err, sizeof err);
    CHECK(rc == TR_ERR_CORRUPT && strstr(err, "duplicate"), "duplicate key: %d %s", rc, err);
    f = fopen(p, "w");
    fputs("{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 2, \"n_embd\": 16, \"n_positions\": 16, "
          "\"vocab_size\": 96, \"layer_norm_epsilon\": 1e-6}",
          f);
    fclose(f);
    rc = tr_hf_import_shape(tmp, &stub, 16, &L, &NH, &C, err, sizeof err);
    CHECK(rc == TR_ERR_DATA && strstr(err, "layer_norm_epsilon"), "eps: %d %s", rc, err);
    f = fopen(p, "w");
    fputs("{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 2, \"n_embd\": 16, \"n_positions\": 16, "
          "\"vocab_size\": 96}",
          f);
    fclose(f);
    tr_model *m3 = NULL;
    tr_model_config c3;
    if (!tr_model_config_make(3, 2, 16, 16, 96, &c3) && !tr_model_create(&c3, 1, &m3)) {
        rc = tr_hf_import_weights(tmp, m3, err, sizeof err);
        CHECK(rc == TR_ERR_CORRUPT && strstr(err, "no tensor h.2.ln_1.weight"), "3 layers: %d %s", rc, err);
        tr_model_free(m3);
    }
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", tmp);
    unlink(p);
    rc = tr_hf_import_weights(tmp, m, err, sizeof err);
    CHECK(rc == TR_ERR_IO && strstr(err, "model-00002-of-00002"), "missing shard: %d %s", rc, err);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) {}
    tr_model_free(m);
}

int main(int argc, char **argv) {
    if (argc == 6 && (!strcmp(argv[1], "valrows") || !strcmp(argv[1], "trainrows")))
        return valrows(argv[2], argv[1][0] == 'v' ? TR_SPLIT_VAL : TR_SPLIT_TRAIN, atoi(argv[3]), atoi(argv[4]),
                       argv[5]);
    const char *spec = MKS_SHARED_DIR "/vocab/gpt2.tiktoken";
    if (access(spec, R_OK)) {
        fprintf(stderr, "test_hf_export: %s not found: skipped\n", spec);
        return 77;
    }
    tk_tokenizer *tok = NULL;
    char err[1024] = "";
    if (tk_load(spec, TK_PAT_NONE, &tok, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    fixture f;
    if (make(&f)) {
        fprintf(stderr, "cannot build the model\n");
        return 1;
    }
    double lb = bf16_loss(&f);
    char dir[256];
    int dump = argc > 2 && !strcmp(argv[1], "dump");
    if (dump) {
        snprintf(dir, sizeof dir, "%s", argv[2]);
    } else {
        snprintf(dir, sizeof dir, "/tmp/test_hf_export_XXXXXX");
        if (!mkdtemp(dir)) return 1;
    }
    if (export_both(dir, &f, tok, spec) == 0) {
        /* the exported tokenizer.json and config */
        char p[512];
        json_error_t je;
        snprintf(p, sizeof p, "%s/fp32/config.json", dir);
        json_t *cfg = json_load_file(p, 0, &je);
        CHECK(cfg && json_integer_value(json_object_get(cfg, "vocab_size")) == 50257 &&
                  json_integer_value(json_object_get(cfg, "n_positions")) == 64 &&
                  json_integer_value(json_object_get(cfg, "eos_token_id")) == 50256 &&
                  json_is_true(json_object_get(cfg, "tie_word_embeddings")),
              "config.json");
        json_decref(cfg);
        snprintf(p, sizeof p, "%s/fp32/tokenizer_config.json", dir);
        json_t *tc = json_load_file(p, 0, &je);
        CHECK(tc && !strcmp(json_string_value(json_object_get(tc, "eos_token")), "<|endoftext|>") &&
                  json_is_null(json_object_get(tc, "bos_token")),
              "tokenizer_config.json: EOS <|endoftext|>, no BOS (the GPT-2 framing)");
        json_decref(tc);
    }
    tk_ids ids = {0};
    CHECK(tk_encode(tok, (const uint8_t *)TEXT, strlen(TEXT), &ids) == 0);
    if (dump) {
        json_t *o = json_object(), *rows = json_array(), *enc = json_array();
        for (int b = 0; b < B; b++) {
            json_t *r = json_array();
            for (int t = 0; t <= T; t++) json_array_append_new(r, json_integer(f.rows[b][t]));
            json_array_append_new(rows, r);
        }
        for (size_t i = 0; i < ids.len; i++) json_array_append_new(enc, json_integer(ids.ids[i]));
        json_object_set_new(o, "rows", rows);
        json_object_set_new(o, "text", json_string(TEXT));
        json_object_set_new(o, "llmtrain_loss_fp32", json_real(f.loss));
        json_object_set_new(o, "llmtrain_loss_bf16", json_real(lb));
        json_object_set_new(o, "tk_ids", enc);
        char p[512];
        snprintf(p, sizeof p, "%s/rows.json", dir);
        json_dump_file(o, p, JSON_INDENT(1));
        json_decref(o);
        printf("dumped to %s: loss fp32 %.9g bf16 %.9g\n", dir, f.loss, lb);
    } else {
        json_error_t je;
        json_t *fx = json_load_file(MKS_TEST_DATA "/hf/export_gpt2.json", 0, &je);
        CHECK(fx != NULL, "fixture: %s", je.text);
        if (fx) {
            double h32 = json_real_value(json_object_get(fx, "hf_loss_fp32"));
            double h16 = json_real_value(json_object_get(fx, "hf_loss_bf16"));
            CHECK(fabs(f.loss - h32) <= 1e-4 * fabs(h32), "fp32 loss %.9g, transformers %.9g", f.loss, h32);
            CHECK(fabs(lb - h16) <= 1e-4 * fabs(h16), "bf16 loss %.9g, transformers %.9g", lb, h16);
            json_t *hid = json_object_get(fx, "hf_ids");
            CHECK(json_array_size(hid) == ids.len, "transformers' tokenizer gave %zu ids, tk %zu", json_array_size(hid),
                  ids.len);
            for (size_t i = 0; i < ids.len && i < json_array_size(hid); i++)
                CHECK(json_integer_value(json_array_get(hid, i)) == ids.ids[i], "id %zu", i);
            check_import(fx);
            printf("test_hf_export: loss fp32 %.9g (transformers %.9g, rel %.2e), bf16 %.9g (transformers %.9g)\n",
                   f.loss, h32, fabs(f.loss - h32) / h32, lb, h16);
            json_decref(fx);
        }
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd)) {}
    }
    tk_ids_free(&ids);
    tr_model_free(f.m);
    tk_free(tok);
    return failures ? 1 : 0;
}
