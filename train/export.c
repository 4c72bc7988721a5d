/* export.c - a trained model as a Hugging Face model folder (export.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "export.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "ds.h"
#include "family.h"
#include "optim.h"
#include "safetensors.h"
#include "tr.h"

static int write_json(const char *dir, const char *name, json_t *j, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (!s) {
        snprintf(err, errlen, "out of memory writing %s", name);
        return TR_ERR_NOMEM;
    }
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        snprintf(err, errlen, "out of memory writing %s", name);
        return TR_ERR_NOMEM;
    }
    t[n++] = '\n';
    const void *part = t;
    int rc = tr_st_write_atomic(path, &part, &n, 1, err, errlen);
    free(t);
    return rc;
}

static int mkdir_p(const char *dir) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0777);
            *p = '/';
        }
    return mkdir(tmp, 0777) && errno != EEXIST ? -1 : 0;
}

/* The text of a special token (for tokenizer_config.json), NULL if none. */
static json_t *token_text(const tk_tokenizer *tok, int64_t id) {
    const uint8_t *b;
    size_t n;
    if (id < 0 || tk_token_bytes(tok, (uint32_t)id, &b, &n)) return json_null();
    json_t *s = json_stringn((const char *)b, n);
    return s ? s : json_null();
}

/* The tokenizer files. A tokenizer.json run through its own pipeline is
 * copied as it is (its post_processor already frames like the shards: the
 * shards' framing was read from it); a rank file / encoder.json / built-in
 * is written by tk_save_hf_json with, when the framing has a BOS, a
 * TemplateProcessing post_processor adding it. */
static int export_tokenizer(const char *dir, const tk_tokenizer *tok, const char *spec, int max_seq, int64_t bos,
                            int64_t eos, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int trc = tk_save_hf_json(tok, path);
    if (trc == TK_ERR_UNSUPPORTED) {
        /* an HF tokenizer.json: copy the file tk_load read */
        char src[DS_TK_SOURCES_MAX][DS_PATH_BYTES];
        size_t ns = ds_tokenizer_sources(spec, src, DS_TK_SOURCES_MAX), k;
        for (k = 0; k < ns; k++) {
            size_t l = strlen(src[k]);
            if (l >= 5 && !strcmp(src[k] + l - 5, ".json") && (l < 10 || strcmp(src[k] + l - 10, ".meta.json")) &&
                (l < 12 || strcmp(src[k] + l - 12, "encoder.json")))
                break;
        }
        json_error_t je;
        json_t *j = k < ns ? json_load_file(src[k], 0, &je) : NULL;
        if (!j) {
            snprintf(err, errlen,
                     "the tokenizer (%s) cannot be exported as tokenizer.json (a SentencePiece "
                     "model has no tokenizer.json form here); export it with transformers",
                     tk_name(tok));
            return TR_ERR_ARG;
        }
        int rc = write_json(dir, "tokenizer.json", j, err, errlen);
        json_decref(j);
        if (rc) return rc;
    } else if (trc) {
        snprintf(err, errlen, "cannot write %s: %s", path, tk_strerror(trc));
        return TR_ERR_IO;
    } else if (bos >= 0) {
        json_error_t je;
        json_t *j = json_load_file(path, 0, &je);
        json_t *bt = token_text(tok, bos);
        if (!j || !json_is_string(bt)) {
            json_decref(j);
            json_decref(bt);
            snprintf(err, errlen, "cannot add the BOS to %s", path);
            return TR_ERR_IO;
        }
        const char *b = json_string_value(bt);
        json_t *pp =
            json_pack("{s:s, s:[{s:{s:s,s:i}},{s:{s:s,s:i}}], s:[{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}},"
                      "{s:{s:s,s:i}}], s:{s:{s:s,s:[I],s:[s]}}}",
                      "type", "TemplateProcessing", "single", "SpecialToken", "id", b, "type_id", 0, "Sequence", "id",
                      "A", "type_id", 0, "pair", "SpecialToken", "id", b, "type_id", 0, "Sequence", "id", "A",
                      "type_id", 0, "SpecialToken", "id", b, "type_id", 1, "Sequence", "id", "B", "type_id", 1,
                      "special_tokens", b, "id", b, "ids", (json_int_t)bos, "tokens", b);
        json_object_set_new(j, "post_processor", pp);
        int rc = write_json(dir, "tokenizer.json", j, err, errlen);
        json_decref(j);
        json_decref(bt);
        if (rc) return rc;
    }
    /* The record --init-from reads (train/hf_import.h): a tokenizer.json
     * has its own fingerprint (its pipeline is part of it), so a run's rank
     * file and its export differ; the source's fingerprint and that of the
     * file written tell that this unchanged file is the run's tokenizer. */
    uint8_t fsrc[32], fjson[32];
    char hsrc[65], hjson[65];
    tk_tokenizer *back = NULL;
    if (tk_load(path, TK_PAT_NONE, &back, NULL, 0)) {
        snprintf(err, errlen, "cannot read back the tokenizer.json written to %s", dir);
        return TR_ERR_IO;
    }
    tk_fingerprint(tok, fsrc);
    tk_fingerprint(back, fjson);
    tk_free(back);
    for (int i = 0; i < 32; i++) {
        sprintf(hsrc + 2 * i, "%02x", fsrc[i]);
        sprintf(hjson + 2 * i, "%02x", fjson[i]);
    }
    json_t *tc = json_object();
    json_object_set_new(tc, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    json_object_set_new(tc, "bos_token", token_text(tok, bos));
    json_object_set_new(tc, "eos_token", token_text(tok, eos));
    json_object_set_new(tc, "model_max_length", json_integer(max_seq));
    json_object_set_new(tc, "clean_up_tokenization_spaces", json_false());
    json_object_set_new(tc, "llmtrain",
                        json_pack("{s:s, s:s}", "tokenizer_fingerprint", hsrc, "tokenizer_json_fingerprint", hjson));
    int rc = write_json(dir, "tokenizer_config.json", tc, err, errlen);
    json_decref(tc);
    return rc;
}

/* generation_config.json: generation starts from the BOS, else (GPT-2's
 * convention) the EOS */
static int write_generation_config(const char *out_dir, int64_t bos, int64_t eos, char *err, size_t errlen) {
    int64_t start = bos >= 0 ? bos : eos;
    json_t *gen = json_object();
    json_object_set_new(gen, "bos_token_id", start >= 0 ? json_integer(start) : json_null());
    json_object_set_new(gen, "eos_token_id", eos >= 0 ? json_integer(eos) : json_null());
    int rc = write_json(out_dir, "generation_config.json", gen, err, errlen);
    json_decref(gen);
    return rc;
}

/* The Llama family: llama_hf.c writes config.json (LlamaForCausalLM /
 * Qwen2ForCausalLM / MistralForCausalLM) and model.safetensors from the
 * parameters in the family's (tr_llama's) contiguous tensor order. */
static int export_llama(const char *out_dir, const tr_model_config *c, const float *params, int bf16,
                        const tk_tokenizer *tok, const char *tok_spec, int64_t bos, int64_t eos, char *err,
                        size_t errlen) {
    /* straight from params (the family's tensor order is tr_llama's): no model instance, no copy */
    int rc = tr_llama_export_hf_params(out_dir, &c->llama, params, (tr_llama_arch)c->llama_arch, bf16, err, errlen);
    if (!rc) rc = write_generation_config(out_dir, bos, eos, err, errlen);
    if (!rc && tok) rc = export_tokenizer(out_dir, tok, tok_spec, c->max_seq, bos, eos, err, errlen);
    return rc;
}

int tr_export_hf(const char *out_dir, const tr_model_config *c, const float *params, int bf16, const tk_tokenizer *tok,
                 const char *tok_spec, int64_t bos, int64_t eos, char *err, size_t errlen) {
    if (!out_dir || !c || !params || tr_model_config_check(c)) {
        snprintf(err, errlen, "tr_export_hf: bad arguments");
        return TR_ERR_ARG;
    }
    if (c->family == TR_FAMILY_LLAMA)
        return export_llama(out_dir, c, params, bf16, tok, tok_spec, bos, eos, err, errlen);
    if (mkdir_p(out_dir)) {
        snprintf(err, errlen, "cannot create %s: %s", out_dir, strerror(errno));
        return TR_ERR_IO;
    }
    size_t L = (size_t)c->n_layer, C = (size_t)c->d_model, V = (size_t)c->vocab, T = (size_t)c->max_seq;
    size_t sizes[TR_NUM_PARAM_TENSORS], off[TR_NUM_PARAM_TENSORS + 1] = {0};
    tr_model_param_sizes(c, sizes);
    for (int i = 0; i < TR_NUM_PARAM_TENSORS; i++) off[i + 1] = off[i] + sizes[i];
    /* the exported values: the parameters without wte's padding rows */
    size_t n_out = off[TR_NUM_PARAM_TENSORS] - ((size_t)c->vocab_padded - V) * C;
    size_t n_t = 4 + 12 * L;
    /* no copy of the weights: each tensor points into params and the writer
     * converts (bf16) and transposes (Conv1D) a bounded chunk at a time
     * (safetensors.h, tr_st_out.src) */
    tr_st_out *t = calloc(n_t, sizeof *t);
    char(*names)[64] = calloc(n_t, sizeof *names);
    int rc = TR_ERR_NOMEM;
    if (!t || !names) {
        snprintf(err, errlen, "out of memory exporting %zu parameters", n_out);
        goto done;
    }
    size_t at = 0, k = 0;
#define P(i) (params + off[i])
#define ADD(nm, rank_, d0, d1, src_, rows_)                                                                            \
    do {                                                                                                               \
        snprintf(names[k], sizeof names[k], "%s", nm);                                                                 \
        t[k] = (tr_st_out){names[k], bf16 ? TR_ST_BF16 : TR_ST_F32, rank_, {d0, d1}, NULL, src_, rows_};               \
        at += (size_t)(d0) * ((d1) != 0 ? (size_t)(d1) : 1);                                                           \
        k++;                                                                                                           \
    } while (0)
    ADD("transformer.wte.weight", 2, V, C, P(TR_P_WTE), 0); /* the first V rows: no padding rows */
    ADD("transformer.wpe.weight", 2, T, C, P(TR_P_WPE), 0);
    for (size_t l = 0; l < L; l++) {
        char nm[64];
#define VEC(suffix, tensor, width)                                                                                     \
    snprintf(nm, sizeof nm, "transformer.h.%zu.%s", l, suffix);                                                        \
    ADD(nm, 1, width, 0, P(tensor) + l * (width), 0)
#define MAT(suffix, tensor, out_, in_) /* ours (out, in) -> Conv1D (in, out): written transposed */                    \
    snprintf(nm, sizeof nm, "transformer.h.%zu.%s", l, suffix);                                                        \
    ADD(nm, 2, in_, out_, P(tensor) + l * (out_) * (in_), out_)
        VEC("ln_1.weight", TR_P_LN1W, C);
        VEC("ln_1.bias", TR_P_LN1B, C);
        MAT("attn.c_attn.weight", TR_P_QKVW, 3 * C, C);
        VEC("attn.c_attn.bias", TR_P_QKVB, 3 * C);
        MAT("attn.c_proj.weight", TR_P_ATTPROJW, C, C);
        VEC("attn.c_proj.bias", TR_P_ATTPROJB, C);
        VEC("ln_2.weight", TR_P_LN2W, C);
        VEC("ln_2.bias", TR_P_LN2B, C);
        MAT("mlp.c_fc.weight", TR_P_FCW, 4 * C, C);
        VEC("mlp.c_fc.bias", TR_P_FCB, 4 * C);
        MAT("mlp.c_proj.weight", TR_P_FCPROJW, C, 4 * C);
        VEC("mlp.c_proj.bias", TR_P_FCPROJB, C);
#undef VEC
#undef MAT
    }
    ADD("transformer.ln_f.weight", 1, C, 0, P(TR_P_LNFW), 0);
    ADD("transformer.ln_f.bias", 1, C, 0, P(TR_P_LNFB), 0);
#undef ADD
#undef P
    if (at != n_out || k != n_t) {
        snprintf(err, errlen, "tr_export_hf: internal layout error");
        rc = TR_ERR_INTERNAL;
        goto done;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    if ((rc = tr_st_write(path, t, n_t, mk, mv, 1, err, errlen))) goto done;
    /* generation starts from the BOS, else (GPT-2's convention) the EOS */
    int64_t start = bos >= 0 ? bos : eos;
    json_t *cfg = json_object();
    json_object_set_new(cfg, "architectures", json_pack("[s]", "GPT2LMHeadModel"));
    json_object_set_new(cfg, "model_type", json_string("gpt2"));
    json_object_set_new(cfg, "vocab_size", json_integer((json_int_t)V));
    json_object_set_new(cfg, "n_positions", json_integer((json_int_t)T));
    json_object_set_new(cfg, "n_embd", json_integer((json_int_t)C));
    json_object_set_new(cfg, "n_layer", json_integer((json_int_t)L));
    json_object_set_new(cfg, "n_head", json_integer(c->n_head));
    json_object_set_new(cfg, "n_inner", json_null());
    json_object_set_new(cfg, "activation_function", json_string("gelu_new"));
    json_object_set_new(cfg, "resid_pdrop", json_real(0));
    json_object_set_new(cfg, "embd_pdrop", json_real(0));
    json_object_set_new(cfg, "attn_pdrop", json_real(0));
    json_object_set_new(cfg, "layer_norm_epsilon", json_real(1e-5));
    json_object_set_new(cfg, "initializer_range", json_real(0.02));
    json_object_set_new(cfg, "scale_attn_weights", json_true());
    json_object_set_new(cfg, "scale_attn_by_inverse_layer_idx", json_false());
    json_object_set_new(cfg, "reorder_and_upcast_attn", json_false());
    json_object_set_new(cfg, "tie_word_embeddings", json_true());
    json_object_set_new(cfg, "use_cache", json_true());
    json_object_set_new(cfg, "bos_token_id", start >= 0 ? json_integer(start) : json_null());
    json_object_set_new(cfg, "eos_token_id", eos >= 0 ? json_integer(eos) : json_null());
    json_object_set_new(cfg, "torch_dtype", json_string(bf16 ? "bfloat16" : "float32"));
    rc = write_json(out_dir, "config.json", cfg, err, errlen);
    json_decref(cfg);
    if (rc) goto done;
    if ((rc = write_generation_config(out_dir, bos, eos, err, errlen))) goto done;
    if (tok) rc = export_tokenizer(out_dir, tok, tok_spec, (int)T, bos, eos, err, errlen);
done:
    free(t);
    free(names);
    return rc;
}

static void hex8(const uint8_t *fp, char *out) {
    for (int i = 0; i < 8; i++) sprintf(out + 2 * i, "%02x", fp[i]);
}

int tr_export_run(const tr_export_opts *o, char *err, size_t errlen) {
    tr_ckpt_meta m;
    int rc = tr_ckpt_load(o->ckpt_dir, &m, NULL, 0, err, errlen);
    if (rc) return rc;
    tr_model_config c;
    int fam = 0; /* another family than GPT-2 records its configuration in model.txt */
    if ((rc = tr_family_ckpt_read(o->ckpt_dir, &c, &fam, err, errlen))) return rc;
    if (fam ? c.n_layer != m.n_layer || c.n_head != m.n_head || c.d_model != m.n_embd || c.vocab != (int)m.vocab_size
            : tr_model_config_make(m.n_layer, m.n_head, m.n_embd, m.max_seq, (int)m.vocab_size, &c)) {
        snprintf(err, errlen, "checkpoint in %s has a model shape this build cannot make", o->ckpt_dir);
        return TR_ERR_CORRUPT;
    }
    /* outputs never over an input: the checkpoint, the shard set, the tokenizer */
    char ck[4200];
    snprintf(ck, sizeof ck, "%s/ckpt.bin", o->ckpt_dir);
    const char *ins[1] = {ck};
    const char *sets[1] = {o->data_dir};
    ds_read_paths in = {.inputs = ins,
                        .n_inputs = 1,
                        .in_what = "the checkpoint",
                        .tokenizer = o->tokenizer,
                        .sets = sets,
                        .n_sets = o->data_dir ? 1 : 0,
                        .set_what = "the data folder"};
    static const char *const files[] = {"",
                                        "/model.safetensors",
                                        "/config.json",
                                        "/generation_config.json",
                                        "/tokenizer.json",
                                        "/tokenizer_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s", o->out_dir, files[i]);
        if (ds_check_output("--out", p, &in, err, errlen)) return TR_ERR_ARG;
    }
    /* the tokenizer and the framing */
    tr_rows rows;
    int have_rows = 0;
    if (o->data_dir) {
        if ((rc = tr_rows_open_shards_ex(&rows, o->data_dir, 0, err, errlen))) return rc;
        have_rows = 1;
    }
    const char *spec = o->tokenizer;
    if (!spec && have_rows && rows.tokenizer[0] && strcmp(rows.tokenizer, "custom")) spec = rows.tokenizer;
    tk_tokenizer *tok = NULL;
    int64_t bos = -1, eos = -1;
    if (spec) {
        char e[512] = "";
        if (tk_load(spec, TK_PAT_NONE, &tok, e, sizeof e)) {
            snprintf(err, errlen, "cannot load tokenizer %s: %s%s", spec, e,
                     o->tokenizer ? "" : " (the one the shard set names; pass --tokenizer)");
            rc = TR_ERR_IO;
            goto out;
        }
        uint8_t fp[32], zero[32] = {0};
        tk_fingerprint(tok, fp);
        if (memcmp(m.fingerprint, zero, 32) && memcmp(fp, m.fingerprint, 32)) {
            char a[17], b[17];
            hex8(fp, a);
            hex8(m.fingerprint, b);
            snprintf(err, errlen,
                     "tokenizer %s (fingerprint %s...) is not the one the checkpoint in %s was "
                     "trained with (%s...): pass the run's --tokenizer",
                     spec, a, o->ckpt_dir, b);
            rc = TR_ERR_FINGERPRINT;
            goto out;
        }
        if (tk_vocab_size(tok) != m.vocab_size) {
            snprintf(err, errlen, "tokenizer %s has %u ids but the checkpoint's vocabulary is %u", spec,
                     tk_vocab_size(tok), m.vocab_size);
            rc = TR_ERR_FINGERPRINT;
            goto out;
        }
        if (have_rows && rows.frame_known) {
            bos = rows.bos_id, eos = rows.eos_id;
        } else {
            tk_framing fr;
            char e2[256];
            if (tk_default_framing(tok, &fr, e2, sizeof e2) == 0) bos = fr.bos, eos = fr.eos;
        }
    } else if (have_rows && rows.frame_known) {
        bos = rows.bos_id, eos = rows.eos_id;
    }
    /* the parameters: the "params" section, the optimizer's read past */
    size_t P = tr_model_param_count(&c);
    float *params = malloc(P * sizeof *params);
    if (!params) {
        snprintf(err, errlen, "out of memory for %zu parameters", P);
        rc = TR_ERR_NOMEM;
        goto out;
    }
    rc = TR_ERR_CORRUPT;
    for (const tr_optim_ops *const *op = tr_optim_table; *op && rc; op++)
        for (int extra = 0; extra < 2 && rc; extra++) {
            tr_ckpt_section sec[TR_OPTIM_MAX_SECTIONS];
            uint64_t words[TR_BACKEND_EXTRA];
            int ns = tr_optim_ckpt_sections(*op, NULL, P, words, sizeof words, extra, sec);
            if ((uint64_t)ns != m.n_sections) continue;
            sec[0].data = params;
            if (extra) sec[ns - 1].data = NULL;
            rc = tr_ckpt_load(o->ckpt_dir, &m, sec, ns, err, errlen);
        }
    if (rc) {
        if (!err[0])
            snprintf(err, errlen, "checkpoint in %s has sections this build's optimizers do not write", o->ckpt_dir);
        free(params);
        goto out;
    }
    rc = tr_export_hf(o->out_dir, &c, params, o->bf16, tok, spec, bos, eos, err, errlen);
    free(params);
    if (!rc && o->out)
        fprintf(o->out, "exported step %llu of %s (%d layers, %d heads, d_model %d, vocab %d, %s) to %s%s\n",
                (unsigned long long)m.step, o->ckpt_dir, c.n_layer, c.n_head, c.d_model, c.vocab,
                o->bf16 ? "bf16" : "fp32", o->out_dir, tok ? "" : " (no tokenizer: pass --tokenizer or --data)");
out:
    tk_free(tok);
    if (have_rows) tr_rows_close(&rows);
    return rc;
}
