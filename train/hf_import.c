/* hf_import.c - a run starting from a Hugging Face folder (hf_import.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "hf_import.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ds.h"
#include "safetensors.h"
#include "tk.h"

#define CONFIG_MAX (1u << 20)

static json_t *load_json(const char *dir, const char *name, int required, char *err, size_t errlen, int *rc) {
    char p[4200], e[512] = "", esc[300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    *rc = TR_OK;
    if (!required && access(p, F_OK)) return NULL;
    tk_escape_text(p, strlen(p), esc, sizeof esc);
    int fd = ds_open_regular(p, e, sizeof e);
    struct stat st;
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s", e);
        *rc = TR_ERR_IO;
        return NULL;
    }
    if (fstat(fd, &st) || st.st_size > CONFIG_MAX) {
        snprintf(err, errlen, "%s is over %u bytes", esc, CONFIG_MAX);
        close(fd);
        *rc = TR_ERR_CORRUPT;
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    json_error_t je;
    json_t *j = f ? json_loadf(f, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (f) fclose(f);
    else close(fd);
    if (!json_is_object(j)) {
        snprintf(err, errlen, "%s: %s", esc, j ? "not a JSON object" : je.text);
        json_decref(j);
        *rc = TR_ERR_CORRUPT;
        return NULL;
    }
    return j;
}

/* An integer field in [lo, hi]; absent: def (def < 0: required). */
static int int_field(json_t *c, const char *dir, const char *key, long long lo, long long hi, long long def, int *out,
                     char *err, size_t errlen) {
    json_t *v = json_object_get(c, key);
    if (!v && def >= 0) {
        *out = (int)def;
        return TR_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(err, errlen, "%s/config.json: \"%s\" %s (want an integer %lld..%lld)", dir, key,
                 v ? "out of range" : "missing", lo, hi);
        return TR_ERR_CORRUPT;
    }
    *out = (int)json_integer_value(v);
    return TR_OK;
}

static void hex8(const uint8_t *fp, char *out) {
    for (int i = 0; i < 8; i++) sprintf(out + 2 * i, "%02x", fp[i]);
}

static int hex_eq(const char *s, const uint8_t fp[32]) {
    char h[65];
    for (int i = 0; i < 32; i++) sprintf(h + 2 * i, "%02x", fp[i]);
    return s && !strcmp(s, h);
}

int tr_hf_import_shape(const char *dir, const tr_rows *rows, int T, int *n_layer, int *n_head, int *n_embd, char *err,
                       size_t errlen) {
    int rc;
    json_t *c = load_json(dir, "config.json", 1, err, errlen, &rc);
    if (!c) return rc;
    const char *mt = json_string_value(json_object_get(c, "model_type"));
    const char *act = json_string_value(json_object_get(c, "activation_function"));
    json_t *eps = json_object_get(c, "layer_norm_epsilon"), *inner = json_object_get(c, "n_inner");
    int L, NH, C, npos, V;
    rc = TR_ERR_CORRUPT;
    if (!mt || strcmp(mt, "gpt2")) {
        char m[64];
        snprintf(err, errlen, "%s/config.json: model_type \"%s\" is not supported (the GPT-2 family: \"gpt2\")", dir,
                 mt ? tk_escape_text(mt, strlen(mt), m, sizeof m) : "(none)");
        rc = TR_ERR_DATA;
        goto out;
    }
    if (int_field(c, dir, "n_layer", 1, 1024, -1, &L, err, errlen) ||
        int_field(c, dir, "n_head", 1, 1024, -1, &NH, err, errlen) ||
        int_field(c, dir, "n_embd", 1, 65536, -1, &C, err, errlen) ||
        int_field(c, dir, "n_positions", 1, TR_MAX_ROW_LEN, -1, &npos, err, errlen) ||
        int_field(c, dir, "vocab_size", 1, TR_MAX_VOCAB, -1, &V, err, errlen))
        goto out;
    if (C % NH) {
        snprintf(err, errlen, "%s/config.json: n_embd %d is not a multiple of n_head %d", dir, C, NH);
        goto out;
    }
    /* what our GPT-2 computes; anything else would load and train another model */
    const char *why = NULL;
    if (act && strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh"))
        why = "activation_function is not GELU tanh (gelu_new, gelu_pytorch_tanh)";
    else if (eps && (!json_is_number(eps) || fabs(json_number_value(eps) - 1e-5) > 1e-12))
        why = "layer_norm_epsilon is not 1e-5";
    else if (inner && !json_is_null(inner) && json_integer_value(inner) != 4 * (json_int_t)C)
        why = "n_inner is not 4 x n_embd";
    else if (json_is_false(json_object_get(c, "scale_attn_weights"))) why = "scale_attn_weights is false";
    else if (json_is_true(json_object_get(c, "scale_attn_by_inverse_layer_idx")))
        why = "scale_attn_by_inverse_layer_idx is true";
    else if (json_is_false(json_object_get(c, "tie_word_embeddings")))
        why = "tie_word_embeddings is false (our GPT-2 ties the output to wte)";
    if (why) {
        snprintf(err, errlen, "%s/config.json: %s: not supported", dir, why);
        rc = TR_ERR_DATA;
        goto out;
    }
    if ((uint32_t)V != rows->vocab_size) {
        snprintf(err, errlen, "%s/config.json: vocab_size %d, but %s has a vocabulary of %u", dir, V, rows->desc,
                 rows->vocab_size);
        rc = TR_ERR_FINGERPRINT;
        goto out;
    }
    if (npos < T) {
        snprintf(err, errlen, "%s/config.json: n_positions %d is shorter than --seq-len %d", dir, npos, T);
        rc = TR_ERR_ARG;
        goto out;
    }
    if ((rc = tr_hf_import_check_tokenizer(dir, rows, err, errlen))) goto out;
    *n_layer = L, *n_head = NH, *n_embd = C;
    rc = TR_OK;
out:
    json_decref(c);
    return rc;
}

int tr_hf_import_check_tokenizer(const char *dir, const tr_rows *rows, char *err, size_t errlen) {
    /* the tokenizer: the shards' fingerprint */
    char tp[4200];
    snprintf(tp, sizeof tp, "%s/tokenizer.json", dir);
    tk_tokenizer *tok = NULL;
    char e[512] = "";
    if (tk_load(tp, TK_PAT_NONE, &tok, e, sizeof e)) {
        snprintf(err, errlen, "%s has no tokenizer the trainer can check against the shards' (%s)", dir, e);
        return TR_ERR_FINGERPRINT;
    }
    uint8_t fp[32];
    tk_fingerprint(tok, fp);
    tk_free(tok);
    if (memcmp(fp, rows->fingerprint, 32)) {
        /* an llmtrain export: the record of its source and of the file it wrote */
        int trc;
        json_t *tc = load_json(dir, "tokenizer_config.json", 0, err, errlen, &trc);
        json_t *rec = tc ? json_object_get(tc, "llmtrain") : NULL;
        int ok = rec && hex_eq(json_string_value(json_object_get(rec, "tokenizer_fingerprint")), rows->fingerprint) &&
                 hex_eq(json_string_value(json_object_get(rec, "tokenizer_json_fingerprint")), fp);
        json_decref(tc);
        if (!ok) {
            char a[17], b[17];
            hex8(fp, a);
            hex8(rows->fingerprint, b);
            snprintf(err, errlen,
                     "the tokenizer of %s (fingerprint %s...) is not the one %s was built with (%s...): "
                     "build the shards with %s/tokenizer.json",
                     dir, a, rows->desc, b, dir);
            return TR_ERR_FINGERPRINT;
        }
    }
    return TR_OK;
}

/* The tensor NAME (with or without the "transformer." prefix). */
static const tr_st_tensor *find(const tr_st_set *s, const char *name, const tr_st_file **f, char *used_name,
                                size_t ulen) {
    char p[160];
    snprintf(p, sizeof p, "transformer.%s", name);
    const tr_st_tensor *t = tr_st_set_find(s, p, f);
    if (!t) t = tr_st_set_find(s, name, f);
    if (t) snprintf(used_name, ulen, "%s", t->name);
    return t;
}

/* Read NAME of shape (d0[, d1]) as fp32 into dst. */
static int read_t(const tr_st_set *s, const char *dir, const char *name, int rank, uint64_t d0, uint64_t d1, float *dst,
                  size_t *n_used, char *err, size_t errlen) {
    const tr_st_file *f;
    char used[200];
    const tr_st_tensor *t = find(s, name, &f, used, sizeof used);
    if (!t) {
        snprintf(err, errlen, "%s: no tensor %s (or transformer.%s) in the safetensors", dir, name, name);
        return TR_ERR_CORRUPT;
    }
    if (t->rank != rank || t->shape[0] != d0 || (rank == 2 && t->shape[1] != d1)) {
        snprintf(err, errlen, "%s: tensor %s has shape [%llu%s%llu], config.json implies [%llu%s%llu]", dir, used,
                 (unsigned long long)t->shape[0], t->rank > 1 ? ", " : "",
                 t->rank > 1 ? (unsigned long long)t->shape[1] : 0ull, (unsigned long long)d0, rank > 1 ? ", " : "",
                 rank > 1 ? (unsigned long long)d1 : 0ull);
        return TR_ERR_CORRUPT;
    }
    (*n_used)++;
    return tr_st_read_f32(f, t, dst, t->numel, err, errlen);
}

int tr_hf_import_weights(const char *dir, tr_model *m, char *err, size_t errlen) {
    const tr_model_config *c = tr_model_get_config(m);
    size_t L = (size_t)c->n_layer, C = (size_t)c->d_model, V = (size_t)c->vocab, T = (size_t)c->max_seq;
    json_t *cfg;
    int rc;
    if (!(cfg = load_json(dir, "config.json", 1, err, errlen, &rc))) return rc;
    size_t npos = (size_t)json_integer_value(json_object_get(cfg, "n_positions"));
    json_decref(cfg);
    tr_st_set s;
    if ((rc = tr_st_set_open(dir, &s, err, errlen))) return rc;
    size_t used = 0, big = (npos > V ? npos : V) * C, m4 = 4 * C * C;
    float *tmp = malloc((big > m4 ? big : m4) * sizeof *tmp);
    if (!tmp) {
        tr_st_set_close(&s);
        snprintf(err, errlen, "out of memory");
        return TR_ERR_NOMEM;
    }
    float *wte = tr_model_param_tensor(m, TR_P_WTE);
    memset(wte, 0, (size_t)c->vocab_padded * C * sizeof *wte); /* padded rows 0 */
    if ((rc = read_t(&s, dir, "wte.weight", 2, V, C, wte, &used, err, errlen))) goto out;
    if ((rc = read_t(&s, dir, "wpe.weight", 2, npos, C, tmp, &used, err, errlen))) goto out;
    memcpy(tr_model_param_tensor(m, TR_P_WPE), tmp, T * C * sizeof *tmp); /* the first T positions */
    for (size_t l = 0; l < L && !rc; l++) {
        char nm[128];
        struct {
            const char *suffix;
            int tensor;
            size_t out, in; /* matrices: ours (out, in), HF Conv1D (in, out); vectors: in == 0 */
        } map[] = {
            {"ln_1.weight", TR_P_LN1W, C, 0},
            {"ln_1.bias", TR_P_LN1B, C, 0},
            {"attn.c_attn.weight", TR_P_QKVW, 3 * C, C},
            {"attn.c_attn.bias", TR_P_QKVB, 3 * C, 0},
            {"attn.c_proj.weight", TR_P_ATTPROJW, C, C},
            {"attn.c_proj.bias", TR_P_ATTPROJB, C, 0},
            {"ln_2.weight", TR_P_LN2W, C, 0},
            {"ln_2.bias", TR_P_LN2B, C, 0},
            {"mlp.c_fc.weight", TR_P_FCW, 4 * C, C},
            {"mlp.c_fc.bias", TR_P_FCB, 4 * C, 0},
            {"mlp.c_proj.weight", TR_P_FCPROJW, C, 4 * C},
            {"mlp.c_proj.bias", TR_P_FCPROJB, C, 0},
        };
        for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
            snprintf(nm, sizeof nm, "h.%zu.%s", l, map[k].suffix);
            size_t n = map[k].in ? map[k].out * map[k].in : map[k].out;
            float *dst = tr_model_param_tensor(m, map[k].tensor) + l * n;
            if (!map[k].in) {
                if ((rc = read_t(&s, dir, nm, 1, map[k].out, 0, dst, &used, err, errlen))) goto out;
                continue;
            }
            if ((rc = read_t(&s, dir, nm, 2, map[k].in, map[k].out, tmp, &used, err, errlen))) goto out;
            for (size_t i = 0; i < map[k].in; i++) /* (in, out) -> (out, in) */
                for (size_t o = 0; o < map[k].out; o++) dst[o * map[k].in + i] = tmp[i * map[k].out + o];
        }
        /* the causal-mask buffers some checkpoints carry: not parameters */
        const char *bufs[2] = {"attn.bias", "attn.masked_bias"};
        for (int b = 0; b < 2; b++) {
            char u[200];
            const tr_st_file *f;
            snprintf(nm, sizeof nm, "h.%zu.%s", l, bufs[b]);
            if (find(&s, nm, &f, u, sizeof u)) used++;
        }
    }
    if ((rc = read_t(&s, dir, "ln_f.weight", 1, C, 0, tr_model_param_tensor(m, TR_P_LNFW), &used, err, errlen)) ||
        (rc = read_t(&s, dir, "ln_f.bias", 1, C, 0, tr_model_param_tensor(m, TR_P_LNFB), &used, err, errlen)))
        goto out;
    {
        const tr_st_file *f;
        const tr_st_tensor *lm = tr_st_set_find(&s, "lm_head.weight", &f);
        if (lm) { /* tied: must be wte */
            if (lm->rank != 2 || lm->shape[0] != V || lm->shape[1] != C) {
                snprintf(err, errlen, "%s: lm_head.weight's shape is not wte's", dir);
                rc = TR_ERR_CORRUPT;
                goto out;
            }
            if ((rc = tr_st_read_f32(f, lm, tmp, lm->numel, err, errlen))) goto out;
            if (memcmp(tmp, wte, V * C * sizeof *tmp)) {
                snprintf(err, errlen, "%s: lm_head.weight differs from wte (untied output): not supported", dir);
                rc = TR_ERR_DATA;
                goto out;
            }
            used++;
        }
    }
    if (used != tr_st_set_count(&s)) {
        snprintf(err, errlen, "%s: the safetensors hold %zu tensors, %zu of them GPT-2's: tensors of another model",
                 dir, tr_st_set_count(&s), used);
        rc = TR_ERR_CORRUPT;
    }
out:
    free(tmp);
    tr_st_set_close(&s);
    return rc;
}
