/* family.c - the table of model families (train/family.h), the tr_model_*
 * functions that serve every family (model.h: config check, parameter count,
 * tensor table, readiness groups, memory) dispatched through it, --model's
 * name-or-config.json lookup, and a configuration as checkpoint text. */
#include "family.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ds.h"
#include "mks_common.h"
#include "tr.h"

extern const tr_family_ops tr_family_gpt2, tr_family_llama;

/* A family = its file + one line here. */
const tr_family_ops *const tr_family_table[] = {&tr_family_gpt2, &tr_family_llama, NULL};

const tr_family_ops *tr_family_of(const tr_model_config *c) {
    for (int i = 0; c && tr_family_table[i]; i++)
        if (tr_family_table[i]->id == c->family) return tr_family_table[i];
    return NULL;
}

/* ---- the tr_model_* functions that serve any family (model.h) ------------
 * Each asks the configuration's family; GPT-2's entry (family_gpt2.c) is
 * model_config.c's tr_gpt2_* functions, so a family is its own file plus its
 * line in the table above and nothing here names one. */

int tr_model_config_check(const tr_model_config *c) {
    const tr_family_ops *f = tr_family_of(c);
    return f ? f->check(c) : TR_MODEL_EINVAL;
}

size_t tr_model_param_count(const tr_model_config *c) {
    return tr_model_config_check(c) ? 0 : tr_family_of(c)->param_count(c);
}

int tr_model_n_tensors(const tr_model_config *c) {
    const tr_family_ops *f = tr_family_of(c);
    return f ? f->n_tensors(c) : 0;
}

/* tensor i of the table (zeroed when i is out of range or the family unknown) */
static tr_tensor_info tensor_of(const tr_model_config *c, int i) {
    tr_tensor_info t;
    memset(&t, 0, sizeof t);
    if (i >= 0 && i < tr_model_n_tensors(c)) tr_family_of(c)->tensor(c, i, &t);
    return t;
}

size_t tr_model_tensor_size(const tr_model_config *c, int i) { return tensor_of(c, i).size; }
int tr_model_tensor_decay(const tr_model_config *c, int i) { return tensor_of(c, i).decay; }
int tr_model_param_layers(const tr_model_config *c, int i) { return tensor_of(c, i).layers; }

int tr_model_grad_groups(const tr_model_config *c) {
    const tr_family_ops *f = tr_family_of(c);
    return f ? f->grad_groups(c) : 0;
}

int tr_model_grad_group_of(const tr_model_config *c, int i, int l) {
    const tr_family_ops *f = tr_family_of(c);
    return f ? f->grad_group_of(c, i, l) : -1;
}

int tr_model_memory(const tr_model_config *c, int B, int T, tr_model_mem *out) {
    if (!out || tr_model_config_check(c) || B <= 0 || T <= 0) return TR_MODEL_EINVAL;
    return tr_family_of(c)->memory(c, B, T, out);
}

#define CONFIG_MAX (1u << 20) /* a config.json is a few KiB; bound what an input may cost */

static int read_small(const char *path, char **text, size_t *len, char *err, size_t errlen) {
    char e[512] = "";
    int fd = ds_open_regular(path, e, sizeof e);
    struct stat st;
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s", e);
        return TR_ERR_IO;
    }
    if (fstat(fd, &st) || st.st_size > CONFIG_MAX) {
        snprintf(err, errlen, "%s is over %u bytes", path, CONFIG_MAX);
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
        snprintf(err, errlen, b ? "cannot read %s" : "out of memory", path);
        free(b);
        return b ? TR_ERR_IO : TR_ERR_NOMEM;
    }
    b[got] = 0;
    *text = b;
    *len = got;
    return TR_OK;
}

int tr_family_model(const char *spec, int vocab, int max_seq, tr_model_config *out, char *err, size_t errlen) {
    if (!spec || !out) return TR_ERR_ARG;
    size_t n = strlen(spec);
    if (n > 5 && !strcmp(spec + n - 5, ".json")) {
        char *text = NULL;
        size_t len = 0;
        int rc = read_small(spec, &text, &len, err, errlen);
        if (rc) return rc;
        rc = TR_ERR_DATA;
        snprintf(err, errlen, "--model %s: no model family reads this config.json", spec);
        for (int i = 0; tr_family_table[i]; i++) {
            if (!tr_family_table[i]->from_json) continue;
            rc = tr_family_table[i]->from_json(text, len, vocab, max_seq, out, err, errlen);
            if (rc != TR_ERR_ARG) break;
        }
        free(text);
        return rc;
    }
    for (int i = 0; tr_family_table[i]; i++)
        if (tr_family_table[i]->preset(spec, vocab, max_seq, out) == TR_OK) return TR_OK;
    size_t at = (size_t)snprintf(err, errlen, "unknown --model '%s' (", spec);
    for (int i = 0; tr_family_table[i]; i++)
        for (int k = 0; tr_family_table[i]->preset_name(k) && at < errlen; k++)
            at +=
                (size_t)snprintf(err + at, errlen - at, "%s%s", i || k ? ", " : "", tr_family_table[i]->preset_name(k));
    if (at < errlen) snprintf(err + at, errlen - at, ", or a config.json path)");
    return TR_ERR_ARG;
}

int tr_family_plan_in(const char *spec, int vocab, int max_seq, tr_plan_in *pi, char *err, size_t errlen) {
    tr_model_config c;
    int rc = tr_family_model(spec, vocab, max_seq, &c, err, errlen);
    if (rc) return rc;
    pi->n_layer = c.n_layer, pi->n_head = c.n_head, pi->n_embd = c.d_model;
    pi->model_family = c.family;
    memset(pi->model_cfg, 0, sizeof pi->model_cfg);
    if (c.family != TR_FAMILY_GPT2) memcpy(pi->model_cfg, &c, sizeof c);
    return TR_OK;
}

/* The fields, in this order, as "key value" lines; floats in %a (exact). */
size_t tr_family_config_to_text(const tr_model_config *c, char *buf, size_t cap) {
    const tr_llama_config *l = &c->llama;
    int n = snprintf(buf, cap,
                     "family %d\narch %d\nn_layer %d\nn_head %d\nn_kv_head %d\nd_model %d\nd_ff %d\nvocab %d\n"
                     "max_seq %d\nrope_theta %a\nnorm_eps %a\nrope_factor %a\nrope_low %a\nrope_high %a\n"
                     "rope_orig_max %d\ntied %d\nqkv_bias %d\n",
                     c->family, c->llama_arch, l->n_layer, l->n_head, l->n_kv_head, l->d_model, l->d_ff, l->vocab,
                     l->max_seq, (double)l->rope_theta, (double)l->norm_eps, (double)l->rope_scaling.factor,
                     (double)l->rope_scaling.low_freq_factor, (double)l->rope_scaling.high_freq_factor,
                     l->rope_scaling.original_max_position_embeddings, l->tied, l->qkv_bias);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

int tr_family_config_from_text(const char *text, size_t len, tr_model_config *out) {
    char buf[1024];
    if (!text || len >= sizeof buf) return TR_ERR_CORRUPT;
    memcpy(buf, text, len);
    buf[len] = 0;
    int fam, arch, L, H, KV, C, F, V, T, orig, tied, qb;
    double theta, eps, fac, lo, hi;
    if (sscanf(buf,
               "family %d\narch %d\nn_layer %d\nn_head %d\nn_kv_head %d\nd_model %d\nd_ff %d\nvocab %d\n"
               "max_seq %d\nrope_theta %la\nnorm_eps %la\nrope_factor %la\nrope_low %la\nrope_high %la\n"
               "rope_orig_max %d\ntied %d\nqkv_bias %d",
               &fam, &arch, &L, &H, &KV, &C, &F, &V, &T, &theta, &eps, &fac, &lo, &hi, &orig, &tied, &qb) != 17)
        return TR_ERR_CORRUPT;
    tr_model_config c;
    memset(&c, 0, sizeof c);
    c.family = fam;
    c.llama_arch = arch;
    tr_llama_config *l = &c.llama;
    *l = (tr_llama_config){L,    H, KV, C, F, V, T, (float)theta, (float)eps, {(float)fac, (float)lo, (float)hi, orig},
                           tied, qb};
    c.n_layer = L, c.n_head = H, c.d_model = C, c.max_seq = T, c.vocab = V, c.vocab_padded = V;
    if (fam == TR_FAMILY_GPT2 || !tr_family_of(&c) || arch < 0 || arch > TR_LLAMA_MISTRAL || tr_model_config_check(&c))
        return TR_ERR_CORRUPT;
    *out = c;
    return TR_OK;
}

int tr_family_ckpt_write(const char *dir, const tr_model_config *c, char *err, size_t errlen) {
    char text[1024], path[4200], tmp[4220];
    size_t n = tr_family_config_to_text(c, text, sizeof text);
    if (!n) {
        snprintf(err, errlen, "model configuration does not fit its record");
        return TR_ERR_INTERNAL;
    }
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    for (char *p = d + 1; *p; p++) /* the folder, as tr_ckpt_save makes it */
        if (*p == '/') {
            *p = 0;
            mkdir(d, 0777);
            *p = '/';
        }
    mkdir(d, 0777);
    snprintf(path, sizeof path, "%s/model.txt", dir);
    snprintf(tmp, sizeof tmp, "%s/model.txt.tmp", dir);
    const void *part[1] = {text};
    return mc_atomic_write(path, tmp, 0644, part, &n, 1, err, errlen) == MC_OK ? TR_OK : TR_ERR_IO;
}

int tr_family_ckpt_read(const char *dir, tr_model_config *out, int *present, char *err, size_t errlen) {
    char path[4200], e[512] = "", text[1024];
    *present = 0;
    snprintf(path, sizeof path, "%s/model.txt", dir);
    if (access(path, F_OK)) return TR_OK;
    *present = 1;
    int fd = ds_open_regular(path, e, sizeof e);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s", e);
        return TR_ERR_IO;
    }
    ssize_t n = read(fd, text, sizeof text); /* a record is < 1 KiB: more is not one */
    close(fd);
    if (n < 0 || (size_t)n >= sizeof text || tr_family_config_from_text(text, (size_t)n, out)) {
        snprintf(err, errlen, "%s: not a model configuration record", path);
        return TR_ERR_CORRUPT;
    }
    return TR_OK;
}
