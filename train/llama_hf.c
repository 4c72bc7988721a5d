/* llama_hf.c - a Llama-family model (llama_model.h) from a Hugging Face
 * folder: config.json (llama_config.c) and model.safetensors or a sharded
 * set with model.safetensors.index.json (safetensors.c). Every tensor must
 * have the shape config.json implies and every tensor of the files must be
 * used (a folder of another model is refused, not half loaded). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ds.h"
#include "family.h"
#include "llama_model.h"
#include "safetensors.h"
#include "tk.h"
#include "tr.h"

#define CONFIG_MAX (1u << 20)

static int read_config(const char *dir, char **text, size_t *len, char *err, size_t errlen) {
    char p[4200], e[512] = "";
    snprintf(p, sizeof p, "%s/config.json", dir);
    int fd = ds_open_regular(p, e, sizeof e);
    struct stat st;
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s", e);
        return TR_ERR_IO;
    }
    if (fstat(fd, &st) || st.st_size > CONFIG_MAX) {
        snprintf(err, errlen, "config.json is over %u bytes", CONFIG_MAX);
        close(fd);
        return TR_ERR_CORRUPT;
    }
    char *b = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (b && got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!b || got != (size_t)st.st_size) {
        free(b);
        snprintf(err, errlen, b ? "cannot read config.json" : "out of memory");
        return b ? TR_ERR_IO : TR_ERR_NOMEM;
    }
    *text = b;
    *len = got;
    return TR_OK;
}

/* The (out, in) shape of tensor name (nn.Linear layout), in == 0 for vectors. */
static void shape_of(const tr_llama_config *c, const char *name, uint64_t *out, uint64_t *in) {
    uint64_t C = (uint64_t)c->d_model, KV = (uint64_t)c->n_kv_head * (C / (uint64_t)c->n_head), F = (uint64_t)c->d_ff,
             V = (uint64_t)c->vocab;
    size_t n = strlen(name);
#define ENDS(s) (n >= strlen(s) && !strcmp(name + n - strlen(s), s))
    *in = 0;
    if (ENDS("embed_tokens.weight") || ENDS("lm_head.weight")) *out = V, *in = C;
    else if (ENDS("k_proj.weight") || ENDS("v_proj.weight")) *out = KV, *in = C;
    else if (ENDS("k_proj.bias") || ENDS("v_proj.bias")) *out = KV;
    else if (ENDS("q_proj.weight") || ENDS("o_proj.weight")) *out = C, *in = C;
    else if (ENDS("gate_proj.weight") || ENDS("up_proj.weight")) *out = F, *in = C;
    else if (ENDS("down_proj.weight")) *out = C, *in = F;
    else *out = C; /* q_proj.bias, the norms */
#undef ENDS
}

int tr_llama_import_hf(const char *dir, int max_seq, tr_llama **out, tr_llama_arch *arch, char *err, size_t errlen) {
    if (!dir || !out || !arch || !err || !errlen || max_seq <= 0) return TR_ERR_ARG;
    *out = NULL;
    char *text = NULL, esc[300];
    size_t len;
    tk_escape_text(dir, strlen(dir), esc, sizeof esc);
    int rc = read_config(dir, &text, &len, err, errlen), sw;
    if (rc) return rc;
    tr_llama_config c;
    char e[400];
    rc = tr_llama_config_from_json(text, len, &c, arch, &sw, e, sizeof e);
    free(text);
    if (rc) {
        snprintf(err, errlen, "%s/%s", esc, e);
        return rc;
    }
    if (max_seq > c.max_seq) {
        snprintf(err, errlen, "%s/config.json: max_position_embeddings %d is shorter than --seq-len %d", esc, c.max_seq,
                 max_seq);
        return TR_ERR_ARG;
    }
    if (sw && max_seq > sw) {
        snprintf(err, errlen,
                 "%s/config.json: sliding_window %d is shorter than --seq-len %d (windowed attention: not supported)",
                 esc, sw, max_seq);
        return TR_ERR_DATA;
    }
    /* the model keeps max_position_embeddings: an export writes it back unchanged */
    tr_st_set s;
    if ((rc = tr_st_set_open(dir, &s, err, errlen))) return rc;
    /* memory bounded by the files: the shapes config.json claims must be
     * there before the model they imply is allocated */
    uint64_t held = 0;
    for (size_t k = 0; k < s.n_files; k++)
        for (size_t j = 0; j < s.files[k].n; j++) held += s.files[k].t[j].numel;
    if (tr_llama_param_count(&c) > held) {
        snprintf(err, errlen, "%s: config.json implies %zu parameters, the safetensors hold %llu values", esc,
                 tr_llama_param_count(&c), (unsigned long long)held);
        tr_st_set_close(&s);
        return TR_ERR_CORRUPT;
    }
    tr_llama *m = NULL;
    if (tr_llama_create(&c, &m)) {
        snprintf(err, errlen, "out of memory for the model of %s", esc);
        tr_st_set_close(&s);
        return TR_ERR_NOMEM;
    }
    size_t used = 0;
    for (int i = 0; i < tr_llama_n_tensors(m) && !rc; i++) {
        const char *name = tr_llama_tensor_name(m, i);
        size_t n;
        float *dst = tr_llama_param(m, name, &n);
        uint64_t d0, d1;
        shape_of(&c, name, &d0, &d1);
        const tr_st_file *f;
        const tr_st_tensor *t = tr_st_set_find(&s, name, &f);
        if (!t) {
            snprintf(err, errlen, "%s: no tensor %s in the safetensors", esc, name);
            rc = TR_ERR_CORRUPT;
        } else if (t->rank != (d1 ? 2 : 1) || t->shape[0] != d0 || (d1 && t->shape[1] != d1) ||
                   (d1 ? d0 * d1 : d0) != n) {
            snprintf(err, errlen, "%s: tensor %s has shape [%llu%s%llu], config.json implies [%llu%s%llu]", esc, name,
                     (unsigned long long)t->shape[0], t->rank > 1 ? ", " : "",
                     t->rank > 1 ? (unsigned long long)t->shape[1] : 0ull, (unsigned long long)d0, d1 ? ", " : "",
                     (unsigned long long)d1);
            rc = TR_ERR_CORRUPT;
        } else {
            rc = tr_st_read_f32(f, t, dst, n, err, errlen);
            used++;
        }
    }
    if (!rc && c.tied) { /* a tied model may still carry lm_head.weight: it must be the embedding */
        const tr_st_file *f;
        const tr_st_tensor *lm = tr_st_set_find(&s, "lm_head.weight", &f);
        size_t n;
        float *emb = tr_llama_param(m, "model.embed_tokens.weight", &n);
        if (lm) {
            float *tmp = lm->rank == 2 && lm->numel == n ? malloc(n * sizeof *tmp) : NULL;
            if (!tmp || (rc = tr_st_read_f32(f, lm, tmp, n, err, errlen)) || memcmp(tmp, emb, n * sizeof *tmp)) {
                if (!rc)
                    snprintf(err, errlen, "%s: lm_head.weight is not the embedding but config.json ties them", esc);
                rc = rc ? rc : TR_ERR_CORRUPT;
            }
            free(tmp);
            used++;
        }
    }
    /* rotary inverse-frequency buffers some older checkpoints carry: not parameters */
    for (size_t k = 0; !rc && k < s.n_files; k++)
        for (size_t j = 0; j < s.files[k].n; j++) {
            const char *nm = s.files[k].t[j].name;
            size_t ln = strlen(nm);
            if (ln >= 19 && !strcmp(nm + ln - 19, "rotary_emb.inv_freq")) used++;
        }
    if (!rc && used != tr_st_set_count(&s)) {
        snprintf(err, errlen, "%s: the safetensors hold %zu tensors, %zu of them this %s's: tensors of another model",
                 esc, tr_st_set_count(&s), used, tr_llama_arch_name(*arch));
        rc = TR_ERR_CORRUPT;
    }
    tr_st_set_close(&s);
    if (rc) tr_llama_free(m);
    else *out = m;
    return rc;
}

/* fp32 -> bf16, round to nearest even; NaN stays a quiet NaN (as export.c). */
int tr_llama_export_hf(const char *out_dir, tr_llama *m, tr_llama_arch arch, int bf16, char *err, size_t errlen) {
    if (!m) return TR_ERR_ARG;
    return tr_llama_export_hf_params(out_dir, tr_llama_get_config(m), tr_llama_params(m), arch, bf16, err, errlen);
}

int tr_llama_export_hf_params(const char *out_dir, const tr_llama_config *c, const float *params, tr_llama_arch arch,
                              int bf16, char *err, size_t errlen) {
    if (!out_dir || !c || !params || !err || !errlen || !tr_llama_arch_name(arch)) return TR_ERR_ARG;
    char esc[300], p[4200];
    tk_escape_text(out_dir, strlen(out_dir), esc, sizeof esc);
    if ((arch == TR_LLAMA_QWEN2) != (c->qkv_bias != 0)) {
        snprintf(err, errlen, "%s: q/k/v biases are Qwen2's alone", tr_llama_arch_name(arch));
        return TR_ERR_ARG;
    }
    if (mkdir(out_dir, 0755) && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", esc, strerror(errno));
        return TR_ERR_IO;
    }
    json_t *j = json_object(), *rs = json_null();
    if (c->rope_scaling.factor > 0) {
        rs = json_object();
        json_object_set_new(rs, "rope_type", json_string("llama3"));
        json_object_set_new(rs, "factor", json_real(c->rope_scaling.factor));
        json_object_set_new(rs, "low_freq_factor", json_real(c->rope_scaling.low_freq_factor));
        json_object_set_new(rs, "high_freq_factor", json_real(c->rope_scaling.high_freq_factor));
        json_object_set_new(rs, "original_max_position_embeddings",
                            json_integer(c->rope_scaling.original_max_position_embeddings));
    }
    json_t *archs = json_array();
    json_array_append_new(archs, json_string(tr_llama_arch_name(arch)));
    json_object_set_new(j, "architectures", archs);
    json_object_set_new(j, "model_type", json_string(tr_llama_model_type(arch)));
    json_object_set_new(j, "hidden_size", json_integer(c->d_model));
    json_object_set_new(j, "intermediate_size", json_integer(c->d_ff));
    json_object_set_new(j, "num_hidden_layers", json_integer(c->n_layer));
    json_object_set_new(j, "num_attention_heads", json_integer(c->n_head));
    json_object_set_new(j, "num_key_value_heads", json_integer(c->n_kv_head));
    json_object_set_new(j, "head_dim", json_integer(c->d_model / c->n_head));
    json_object_set_new(j, "vocab_size", json_integer(c->vocab));
    json_object_set_new(j, "max_position_embeddings", json_integer(c->max_seq));
    json_object_set_new(j, "rms_norm_eps", json_real(c->norm_eps));
    /* transformers 4.x's spelling; 5.x converts it to rope_parameters */
    json_object_set_new(j, "rope_theta", json_real(c->rope_theta));
    json_object_set_new(j, "rope_scaling", rs);
    json_object_set_new(j, "tie_word_embeddings", json_boolean(c->tied));
    json_object_set_new(j, "hidden_act", json_string("silu"));
    if (arch == TR_LLAMA_LLAMA) {
        json_object_set_new(j, "attention_bias", json_false());
        json_object_set_new(j, "mlp_bias", json_false());
    }
    if (arch == TR_LLAMA_QWEN2) json_object_set_new(j, "use_sliding_window", json_false());
    if (arch == TR_LLAMA_MISTRAL) json_object_set_new(j, "sliding_window", json_null());
    json_object_set_new(j, "torch_dtype", json_string(bf16 ? "bfloat16" : "float32"));
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return TR_ERR_NOMEM;
    }
    snprintf(p, sizeof p, "%s/config.json", out_dir);
    size_t tl = strlen(text);
    const void *part = text;
    int rc = tr_st_write_atomic(p, &part, &tl, 1, err, errlen);
    free(text);
    if (rc) return rc;

    /* the tensor table from the configuration (the family's, train/family.h: tr_llama's order, which
     * family_llama.c's create checks); each tensor points into params, converted to bf16 by the writer a
     * bounded chunk at a time (safetensors.h tr_st_out.src): no second copy of the weights */
    tr_model_config mc;
    memset(&mc, 0, sizeof mc);
    mc.family = TR_FAMILY_LLAMA;
    mc.llama = *c;
    const tr_family_ops *f = tr_family_of(&mc);
    int n = f->n_tensors(&mc);
    tr_st_out *t = calloc((size_t)n, sizeof *t);
    tr_tensor_info *ti = calloc((size_t)n, sizeof *ti);
    rc = t && ti ? TR_OK : TR_ERR_NOMEM;
    size_t off = 0;
    for (int i = 0; i < n && !rc; i++) {
        f->tensor(&mc, i, &ti[i]);
        uint64_t d0, d1;
        shape_of(c, ti[i].name, &d0, &d1);
        if (d0 * (d1 ? d1 : 1) != ti[i].size) {
            snprintf(err, errlen, "%s: the tensor table and the shapes disagree", ti[i].name);
            rc = TR_ERR_INTERNAL;
            break;
        }
        t[i] = (tr_st_out){ti[i].name, bf16 ? TR_ST_BF16 : TR_ST_F32, d1 ? 2 : 1, {d0, d1}, NULL, params + off, 0};
        off += ti[i].size;
    }
    if (rc == TR_ERR_NOMEM) snprintf(err, errlen, "out of memory");
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    snprintf(p, sizeof p, "%s/model.safetensors", out_dir);
    if (!rc) rc = tr_st_write(p, t, (size_t)n, mk, mv, 1, err, errlen);
    free(ti);
    free(t);
    return rc;
}
