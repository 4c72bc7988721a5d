/* build.c - ds_build: raw documents in, fixed-length token rows out (see
 * ds.h). The stages live in their own files: the thread pipeline
 * (pipeline.c), the packers (pack.c), the shard writer (shard_writer.c),
 * resume checkpoints (build_resume.c), input expansion and --part
 * (build_inputs.c), the output folder's protocol (build_outdir.c) and the
 * manifest (build_manifest.c). This file validates and encodes documents on
 * the worker threads and drives the stages in order. Packing restarts at
 * every input file, which makes part K/N + ds_merge byte-identical to a
 * single build. Format: docs/shard-format.md. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "build_internal.h"
#include "mks_common.h"
#include "pipeline_internal.h"
#include "tk.h"

/* ------------------------------------------------------------ workers: parse, validate, encode one document */
typedef struct {
    tk_ids ids;
    int reason; /* -1: accepted */
    uint64_t hash;
    char detail[200];
    /* chat formats: the loss mask of ids, and what fitting did */
    uint8_t *loss;
    size_t loss_cap;
    int fate;        /* ds_chat_fate */
    uint64_t tokens; /* the whole conversation's tokens (before fitting) */
    uint64_t turns;  /* turns drop-turns removed */
} dres;

/* Chat formats: one parsed record, rendering and ids per worker thread. */
typedef struct {
    ds_chat c;
    ds_chat_rendered r;
    ds_chat_ids v;
} chat_worker;

typedef struct {
    const tk_tokenizer *tok;
    const ds_batch *b;
    dres *res;
    ds_json_ctx **jctx;
    atomic_int rc;
    /* chat formats (o->format not text) */
    const ds_build_opts *o;
    chat_worker *cw;
    const ds_chat_render_opts *ro;
    size_t budget; /* L less the build's framing */
} work;

static int status_reason(int st) {
    switch (st) {
    case DS_REC_BAD_JSON: return DS_REJ_JSON;
    case DS_REC_MISSING_FIELD: return DS_REJ_FIELD_MISSING;
    case DS_REC_NOT_STRING: return DS_REJ_FIELD_TYPE;
    case DS_REC_OVERLONG: return DS_REJ_TOO_LARGE;
    case DS_REC_ZSTD_ERROR: return DS_REJ_ZSTD;
    }
    return DS_REJ_JSON;
}

static ds_chat_fit_policy fit_policy(ds_over_long ol) {
    switch (ol) {
    case DS_OL_TRUNCATE: return DS_CHAT_FIT_TRUNCATE;
    case DS_OL_DROP: return DS_CHAT_FIT_DROP;
    case DS_OL_DROP_TURNS: return DS_CHAT_FIT_DROP_TURNS;
    case DS_OL_CHUNK: break;
    }
    return DS_CHAT_FIT_KEEP;
}

/* A chat / prompt-completion record (the raw JSONL line): parse, render,
 * encode and fit into the row (--over-long); r->ids / r->loss the result. */
static void do_chat(work *w, int t, const uint8_t *line, size_t len, dres *r) {
    chat_worker *cw = &w->cw[t];
    const ds_build_opts *o = w->o;
    r->hash = XXH3_64bits(line, len);
    ds_chat_parse_opts po = {.format = o->format, .messages_field = o->messages_field, .text_field = o->field};
    char why[sizeof r->detail - 40];
    int rc = ds_chat_parse(line, len, &po, &cw->c, why, sizeof why);
    if (rc == DS_CHAT_OK && cw->c.buf_len && memchr(cw->c.buf, 0, cw->c.buf_len)) {
        r->reason = DS_REJ_NUL; /* as a text build rejects it */
        snprintf(r->detail, sizeof r->detail, "NUL byte in the record's text");
        return;
    }
    ds_chat_fit_result fr;
    if (rc == DS_CHAT_OK)
        rc = ds_chat_fit(w->tok, o->chat_template, &cw->c, w->ro, fit_policy(o->over_long), w->budget, &cw->r, &cw->v,
                         &fr, why, sizeof why);
    if (rc == DS_ERR_NOMEM || rc == TK_ERR_NOMEM) {
        atomic_store(&w->rc, TK_ERR_NOMEM);
        return;
    }
    if (rc > 0) { /* a ds_chat_status: the parser or the template refuses the record */
        r->reason = DS_REJ_CHAT;
        snprintf(r->detail, sizeof r->detail, "%s: %s", ds_chat_status_name(rc), why);
        return;
    }
    if (rc == DS_ERR_ARG) { /* a template special token the tokenizer lacks */
        r->reason = DS_REJ_CHAT;
        snprintf(r->detail, sizeof r->detail, "%s: %s", ds_chat_status_name(DS_CHAT_TEMPLATE), why);
        return;
    }
    if (tk_err_is_document(rc)) {
        r->reason = DS_REJ_TOKENIZER;
        snprintf(r->detail, sizeof r->detail, "%s", tk_strerror(rc));
        return;
    }
    if (rc != DS_OK) {
        atomic_store(&w->rc, rc);
        return;
    }
    r->fate = (int)fr.fate;
    r->tokens = fr.tokens;
    r->turns = fr.turns_dropped;
    snprintf(r->detail, sizeof r->detail, "%s", why);
    size_t n = cw->v.len;
    if (n > r->ids.cap) {
        uint32_t *p = realloc(r->ids.ids, n * sizeof *p);
        if (!p) {
            atomic_store(&w->rc, TK_ERR_NOMEM);
            return;
        }
        r->ids.ids = p;
        r->ids.cap = n;
    }
    if (n > r->loss_cap) {
        uint8_t *m = realloc(r->loss, n);
        if (!m) {
            atomic_store(&w->rc, TK_ERR_NOMEM);
            return;
        }
        r->loss = m;
        r->loss_cap = n;
    }
    if (n) {
        memcpy(r->ids.ids, cw->v.ids, n * sizeof *cw->v.ids);
        memcpy(r->loss, cw->v.mask, n);
    }
    r->ids.len = n;
}

static void do_doc(void *ctx, int t, size_t i) {
    work *w = ctx;
    const ds_batch_rec *br = &w->b->recs[i];
    dres *r = &w->res[i];
    r->ids.len = 0;
    r->reason = -1;
    r->detail[0] = 0;
    r->fate = DS_CHAT_FATE_WHOLE;
    r->tokens = r->turns = 0;
    if (br->status != DS_REC_OK) {
        r->reason = status_reason(br->status);
        snprintf(r->detail, sizeof r->detail, "%s",
                 br->detail_off != (size_t)-1 ? (const char *)w->b->arena + br->detail_off : "");
        return;
    }
    const uint8_t *text = w->b->arena + br->off;
    size_t len = br->len;
    if (w->cw) {
        do_chat(w, t, text, len, r);
        return;
    }
    if (br->flags & DS_RECF_RAW_JSON) {
        ds_record rec = {0};
        if (ds_json_extract(w->jctx[t], text, len, &rec) != DS_OK) {
            atomic_store(&w->rc, TK_ERR_NOMEM);
            return;
        }
        if (rec.status != DS_REC_OK) {
            r->reason = status_reason(rec.status);
            snprintf(r->detail, sizeof r->detail, "%s", rec.detail ? rec.detail : "");
            size_t bad;
            if (rec.status == DS_REC_BAD_JSON && (bad = ds_utf8_invalid_at(text, len)) < len) {
                /* as lint reports it: the invalid byte is why the parser failed */
                r->reason = DS_REJ_UTF8;
                snprintf(r->detail, sizeof r->detail, "byte 0x%02X at line offset %zu (the JSON parser rejects it)",
                         text[bad], bad);
            }
            return;
        }
        text = rec.text;
        len = rec.text ? rec.len : 0;
    }
    const void *nul = len ? memchr(text, 0, len) : NULL;
    if (nul) {
        r->reason = DS_REJ_NUL;
        snprintf(r->detail, sizeof r->detail, "NUL byte at text offset %zu", (size_t)((const uint8_t *)nul - text));
        return;
    }
    size_t bad = ds_utf8_invalid_at(text, len);
    if (bad < len) {
        r->reason = DS_REJ_UTF8;
        snprintf(r->detail, sizeof r->detail, "invalid UTF-8 at text offset %zu", bad);
        return;
    }
    r->hash = XXH3_64bits(text, len);
    int rc = tk_encode(w->tok, text, len, &r->ids);
    if (tk_err_is_document(rc)) { /* over a per-document limit: a reject line, the build goes on */
        r->ids.len = 0;
        r->reason = DS_REJ_TOKENIZER;
        snprintf(r->detail, sizeof r->detail, "%s", tk_strerror(rc));
    } else if (rc != TK_OK) {
        atomic_store(&w->rc, rc); /* out of memory: the run stops */
    }
}

void ds_build_opts_init(ds_build_opts *o) {
    memset(o, 0, sizeof *o);
    o->pack = DS_PACK_CONCAT;
    o->over_long = DS_OL_TRUNCATE;
    o->bfd_window = 1024;
    o->shuffle = 1;
    o->shard_tokens = 32ull << 20;
    o->frame_rows = 64;
    o->doc_sep = DS_SEP_FILE;
    o->part_k = o->part_n = 1;
    o->batch_bytes = 32ull << 20;
    o->checkpoint_seconds = 0.5;
    o->bos_id = o->eos_id = DS_FRAME_DEFAULT;
    o->format = DS_FMT_TEXT;
    o->loss_on = DS_LOSS_DEFAULT;
}

/* ------------------------------------------------------------ one build */
typedef struct {
    const ds_build_opts *o;
    char *err;
    size_t errlen;
    ds_build_config cfg;
    json_t *cfgj;
    int lock_fd, threads, use_ckpt, resumed;
    ds_reader *rd;
    ds_reader_opts ro;
    ds_pipeline pl;
    ds_json_ctx **jctx;
    chat_worker *cw; /* chat formats: per thread */
    ds_chat_render_opts cro;
    char bos_tok[256], eos_tok[256];
    dres *res;
    size_t cap_res;
    ds_shard_writer wr[2];
    ds_packer pk[2];
    ds_build_account acc;
    ds_shard_rec *recs;
    size_t n_recs, cap_recs, ckpt_recs;
    FILE *rej;
    char rej_tmp[4200], rej_path[4200];
    char *resume_file;
    const char *cur_file;
    uint64_t toks_total, cfg_hash, est_total;
    double t0, last_ckpt;
} build;

static int fail(build *b, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(build *b, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, b->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static int emit_event(build *b, ds_build_event *ev) {
    if (!b->o->callback) return 0;
    ev->records = b->acc.records;
    ev->bytes_in = b->acc.bytes_in;
    ev->tokens = b->toks_total;
    ev->est_bytes = b->est_total;
    ev->seconds = b->t0 > 0 ? ds_now() - b->t0 : 0;
    return b->o->callback(ev, b->o->user);
}

/* The token's text for the manifest ("" when it is not UTF-8 or too long). */
static void token_text(const tk_tokenizer *tok, int64_t id, char *out, size_t cap) {
    const uint8_t *p;
    size_t n;
    out[0] = 0;
    if (id < 0 || tk_token_bytes(tok, (uint32_t)id, &p, &n) != TK_OK || n >= cap || ds_utf8_invalid_at(p, n) != n ||
        memchr(p, 0, n))
        return;
    memcpy(out, p, n);
    out[n] = 0;
}

/* BOS / EOS of every document: the options, else the tokenizer's default. */
static int set_framing(build *b) {
    const ds_build_opts *o = b->o;
    ds_build_config *c = &b->cfg;
    int64_t bos = o->bos_id, eos = o->eos_id, pad = -1;
    int chat = o->format != DS_FMT_TEXT;
    if (bos == DS_FRAME_DEFAULT || eos == DS_FRAME_DEFAULT || chat) {
        tk_framing fr;
        char msg[512];
        if (tk_default_framing(o->tok, &fr, msg, sizeof msg) != TK_OK) return fail(b, DS_ERR_FORMAT, "%s", msg);
        /* a chat template places its own BOS and end-of-turn tokens: no framing by default */
        if (bos == DS_FRAME_DEFAULT) bos = chat ? -1 : fr.bos;
        if (eos == DS_FRAME_DEFAULT) eos = chat ? -1 : fr.eos;
        pad = fr.eos >= 0 ? fr.eos : fr.bos;
    }
    uint32_t vs = tk_vocab_size(o->tok), eot;
    if (bos < -1 || eos < -1 || bos >= (int64_t)vs || eos >= (int64_t)vs)
        return fail(b, DS_ERR_ARG, "ds_build: bos_id / eos_id must be -1, DS_FRAME_DEFAULT or an id below %u", vs);
    c->bos_id = bos;
    c->eos_id = eos;
    /* the shard headers' EOT / pad id: the token that ends (else starts) a document */
    c->eot_id = eos >= 0 ? (uint32_t)eos : bos >= 0 ? (uint32_t)bos : pad >= 0 ? (uint32_t)pad : 0;
    c->framed = !(bos < 0 && eos >= 0 && tk_eot_id(o->tok, &eot) == TK_OK && eot == (uint32_t)eos);
    token_text(o->tok, bos, c->bos_text, sizeof c->bos_text);
    token_text(o->tok, eos, c->eos_text, sizeof c->eos_text);
    return DS_OK;
}

/* The manifest's config from the options and the tokenizer. */
static int make_config(build *b) {
    const ds_build_opts *o = b->o;
    ds_build_config *c = &b->cfg;
    if (!o->tok || !o->out_dir || !o->seq_len || o->seq_len > (1u << 24) || (o->n_inputs && !o->inputs) ||
        (o->source && (o->n_inputs || !o->source->next || !o->source->name || o->part_n != 1)))
        return fail(b, DS_ERR_ARG, "ds_build: tok, out_dir and seq_len 1..2^24 are required");
    if (!ds_pack_name(o->pack) || !ds_over_long_name(o->over_long) || !ds_doc_sep_name(o->doc_sep) ||
        o->zstd_level < 0 || o->zstd_level > 22 || o->part_n < 1 || o->part_n > DS_BUILD_MAX_PARTS || o->part_k < 1 ||
        o->part_k > o->part_n || !(o->val_fraction >= 0 && o->val_fraction < 1) || !o->bfd_window || !o->shard_tokens ||
        (o->zstd_level && !o->frame_rows) || !o->batch_bytes)
        return fail(b, DS_ERR_ARG, "ds_build: an option is out of its range (see ds_build_opts in ds.h)");
    if (o->bfd_window * (uint64_t)o->seq_len >= (1ull << 31))
        return fail(b, DS_ERR_ARG, "--bfd-window x --seq-len must stay below 2^31 tokens");
    if (o->format != DS_FMT_TEXT && (!o->chat_template || !ds_format_name(o->format) || !ds_loss_on_name(o->loss_on)))
        return fail(b, DS_ERR_ARG, "ds_build: a chat format needs chat_template and a valid loss_on");
    if (o->format == DS_FMT_TEXT && o->over_long == DS_OL_DROP_TURNS)
        return fail(b, DS_ERR_ARG, "--over-long drop-turns is for --format chat, prompt-completion or auto");
    int rc = set_framing(b);
    if (rc != DS_OK) return rc;
    snprintf(c->tokenizer_spec, sizeof c->tokenizer_spec, "%s",
             o->tokenizer_spec ? o->tokenizer_spec : tk_name(o->tok));
    snprintf(c->tokenizer_name, sizeof c->tokenizer_name, "%s", tk_name(o->tok));
    /* the pre-tokenizer and normalization a rank file was given (the fingerprint covers them too) */
    const char *rx = tk_get_regex(o->tok);
    if (rx && strlen(rx) >= sizeof c->tokenizer_regex)
        return fail(b, DS_ERR_ARG, "the tokenizer's pre-tokenizer regex is longer than a manifest records");
    snprintf(c->tokenizer_regex, sizeof c->tokenizer_regex, "%s", rx ? rx : "");
    snprintf(c->tokenizer_normalize, sizeof c->tokenizer_normalize, "%s",
             tk_get_norm(o->tok) != TK_NORM_NONE ? tk_norm_name(tk_get_norm(o->tok)) : "");
    tk_fingerprint(o->tok, c->fingerprint);
    c->vocab_size = tk_vocab_size(o->tok);
    c->seq_len = o->seq_len;
    c->pack = o->pack;
    c->over_long = o->over_long;
    c->bfd_window = o->bfd_window;
    c->val_fraction = o->val_fraction;
    c->seed = o->seed;
    c->shuffle = o->shuffle != 0;
    c->shard_tokens = o->shard_tokens;
    c->zstd_level = o->zstd_level;
    c->frame_rows = o->zstd_level ? o->frame_rows : 0;
    snprintf(c->field, sizeof c->field, "%s", o->field ? o->field : "text");
    snprintf(c->doc_sep, sizeof c->doc_sep, "%s", ds_doc_sep_name(o->doc_sep));
    c->part_k = o->part_k;
    c->part_n = o->part_n;
    c->format = o->format;
    c->loss_bits = o->format != DS_FMT_TEXT;
    if (c->loss_bits) {
        snprintf(c->chat_template, sizeof c->chat_template, "%s", ds_chat_template_name(o->chat_template));
        snprintf(c->messages_field, sizeof c->messages_field, "%s", o->messages_field ? o->messages_field : "messages");
        c->loss_on = o->loss_on;
    }
    c->inputs = calloc(o->n_inputs + 1, sizeof *c->inputs);
    if (!c->inputs) return fail(b, DS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < o->n_inputs; i++)
        if (!(c->inputs[c->n_inputs++] = strdup(o->inputs[i]))) return fail(b, DS_ERR_NOMEM, "out of memory");
    return DS_OK;
}

/* Select the files, lock and tidy the output folder, and see whether it
 * already holds this build. 1: up to date (nothing to do), DS_OK: build, <0. */
static int prepare_out(build *b, ds_build_result *res) {
    const char *out = b->o->out_dir;
    int rc = ds_build_select_files(&b->cfg, out, b->err, b->errlen);
    if (rc != DS_OK) return rc;
    if (!(b->cfgj = ds_build_config_json(&b->cfg))) return fail(b, DS_ERR_NOMEM, "out of memory");
    if (ds_mkdir_p(out)) return fail(b, DS_ERR_IO, "cannot create --out '%s': %s", out, strerror(errno));
    /* held until the end: resume, shard writes, manifest and cleanup */
    b->lock_fd = ds_lock_dir(out, "build or merge", b->err, b->errlen);
    if (b->lock_fd < 0) return b->lock_fd;
    if ((rc = ds_build_remove_special(out, b->err, b->errlen)) != DS_OK) return rc;
    int from_stdin = b->o->source != NULL; /* a source, like stdin, cannot be compared with an earlier run */
    for (size_t i = 0; i < b->cfg.n_files; i++) from_stdin |= !strcmp(b->cfg.files[i], "-");
    size_t n_checked = 0;
    char why[600];
    int ex = ds_build_check_existing(out, b->cfgj, b->cfg.fingerprint, b->o->force, &n_checked, why, sizeof why, b->err,
                                     b->errlen);
    if (ex == 0 && why[0]) {
        ds_build_event ev = {.kind = DS_BUILD_EV_REBUILD, .detail = why};
        emit_event(b, &ev);
    }
    if (ex == 1 && from_stdin) { /* stdin may differ each time: never "up to date" */
        char mp[4200];
        snprintf(mp, sizeof mp, "%s/manifest.json", out);
        unlink(mp);
        ex = 0;
    }
    if (ex < 0) return ex;
    if (ex == 1) {
        res->up_to_date = 1;
        res->n_checked = n_checked;
        return 1;
    }
    ds_build_clean_dir(out, NULL, 0); /* stale *.tmp from an interrupted run */
    return DS_OK;
}

/* The reader over this part's files, one JSON context per worker thread. */
static int open_inputs(build *b) {
    ds_reader_opts_init(&b->ro);
    if (b->o->field) b->ro.field = b->o->field;
    b->ro.doc_sep = b->o->doc_sep;
    b->ro.defer_json = 1;
    b->ro.row_format = b->o->format; /* chat formats: a Parquet / Arrow IPC row as a JSON object */
    b->ro.messages_field = b->o->messages_field;
    if (b->cfg.n_files) {
        int orc = ds_reader_open((const char *const *)b->cfg.files, b->cfg.n_files, &b->ro, &b->rd, b->err, b->errlen);
        if (orc != DS_OK) {
            if (!b->err[0]) snprintf(b->err, b->errlen, "%s", ds_strerror(orc));
            return orc == DS_ERR_ARG ? DS_ERR_IO : orc; /* a bad input, not a bad call */
        }
    }
    b->jctx = calloc((size_t)b->threads, sizeof *b->jctx);
    if (!b->jctx) return fail(b, DS_ERR_NOMEM, "out of memory");
    for (int t = 0; t < b->threads; t++)
        if (ds_json_ctx_new(&b->ro, &b->jctx[t]) != DS_OK)
            return fail(b, DS_ERR_ARG, "bad --field '%s'", b->o->field ? b->o->field : "text");
    if (b->o->format != DS_FMT_TEXT) {
        if (!(b->cw = calloc((size_t)b->threads, sizeof *b->cw))) return fail(b, DS_ERR_NOMEM, "out of memory");
        ds_chat_framing_tokens(b->o->tok, b->bos_tok, sizeof b->bos_tok, b->eos_tok, sizeof b->eos_tok);
        b->cro.bos_token = b->bos_tok;
        b->cro.eos_token = b->eos_tok;
        b->cro.loss_on = b->o->loss_on;
    }
    return DS_OK;
}

/* Packers and writers, restored from DIR/build.ckpt when it fits this build;
 * rejects.jsonl.part opened to match. */
static int setup_state(build *b) {
    const char *out = b->o->out_dir;
    for (int s = 0; s < 2; s++) {
        ds_shard_writer_init(&b->wr[s], &b->cfg, s, out, &b->recs, &b->n_recs, &b->cap_recs);
        if (ds_packer_init(&b->pk[s], &b->cfg, &b->wr[s], &b->acc) != DS_OK)
            return fail(b, DS_ERR_NOMEM, "out of memory");
    }
    b->cfg_hash = ds_build_config_hash(b->cfgj, b->cfg.fingerprint);
    uint64_t rej_len = 0;
    snprintf(b->rej_path, sizeof b->rej_path, "%s/rejects.jsonl", out);
    snprintf(b->rej_tmp, sizeof b->rej_tmp, "%s/rejects.jsonl.part", out);
    b->use_ckpt = !b->o->source; /* a source cannot be replayed */
    for (size_t i = 0; i < b->cfg.n_files; i++)
        if (!strcmp(b->cfg.files[i], "-")) b->use_ckpt = 0; /* stdin cannot be replayed */
    b->resumed = b->use_ckpt &&
                 ds_ckpt_load(out, b->cfg_hash, &b->acc, &b->toks_total, &b->resume_file, b->pk, b->wr, &b->recs,
                              &b->n_recs, &b->cap_recs, &rej_len) == 0 &&
                 (b->rej = ds_rejects_open(b->rej_tmp, 1, rej_len)) != NULL;
    if (b->resumed) {
        b->pl.skip = b->acc.records;
        ds_build_event ev = {.kind = DS_BUILD_EV_RESUME, .shards = b->n_recs};
        emit_event(b, &ev);
    } else { /* fresh start */
        memset(&b->acc, 0, sizeof b->acc);
        b->toks_total = 0;
        free(b->resume_file);
        b->resume_file = NULL;
        b->n_recs = 0;
        for (int s = 0; s < 2; s++) {
            ds_packer_reset(&b->pk[s]);
            b->wr[s].n_rows = b->wr[s].n_starts = 0;
            b->wr[s].shard_index = 0;
        }
        b->rej = ds_rejects_open(b->rej_tmp, 0, 0);
    }
    if (!b->rej) return fail(b, DS_ERR_IO, "cannot create '%s': %s", b->rej_tmp, strerror(errno));
    b->ckpt_recs = b->n_recs;
    b->cur_file = b->resume_file;
    return DS_OK;
}

/* One record of a batch, in input order: accounting, rejects, packing. */
static int consume_record(build *b, const ds_batch_rec *br, dres *r, int *rej_errno) {
    if (!b->cur_file || (br->file != b->cur_file && strcmp(br->file, b->cur_file) != 0)) {
        /* packing restarts at every input file */
        if (b->cur_file && (ds_packer_flush(&b->pk[0]) || ds_packer_flush(&b->pk[1]))) return -1;
    }
    b->cur_file = br->file;
    ds_build_account *acc = &b->acc;
    acc->records++;
    acc->bytes_in += br->record_bytes;
    if (r->reason >= 0) {
        acc->docs_rejected++;
        acc->rejected_bytes += br->record_bytes;
        acc->reasons[r->reason]++;
        if (ds_rejects_write(b->rej, br->file, br->line, br->offset, r->reason, r->detail, br->record_bytes)) {
            *rej_errno = errno ? errno : EIO;
            return -1;
        }
        return 0;
    }
    if (r->fate == DS_CHAT_FATE_DROPPED || r->fate == DS_CHAT_FATE_NO_LOSS) {
        /* a conversation --over-long cannot fit, or a sample without a target: dropped with its reason */
        int reason = r->fate == DS_CHAT_FATE_DROPPED ? DS_REJ_OVERLONG_DROP : DS_REJ_NO_LOSS;
        acc->docs_dropped++;
        acc->tok_dropped += r->tokens;
        acc->turns_dropped += r->turns;
        acc->reasons[reason]++;
        if (ds_rejects_write(b->rej, br->file, br->line, br->offset, reason, r->detail, br->record_bytes)) {
            *rej_errno = errno ? errno : EIO;
            return -1;
        }
        return 0;
    }
    uint64_t t = r->ids.len;
    int bin = 0;
    while (bin < DS_BUILD_HIST_BINS - 1 && t >= (1ull << bin)) bin++;
    acc->hist[bin]++;
    double vthr = b->cfg.val_fraction * 18446744073709551616.0; /* 2^64 */
    int split = b->cfg.val_fraction > 0 && (double)r->hash < vthr;
    acc->docs_split[split]++;
    b->toks_total += t;
    int dropped = 0, prc = b->cw ? ds_packer_add_loss(&b->pk[split], r->ids.ids, r->loss, r->ids.len, &dropped)
                                 : ds_packer_add(&b->pk[split], r->ids.ids, r->ids.len, &dropped);
    if (!prc && (r->fate == DS_CHAT_FATE_TRUNCATED || r->fate == DS_CHAT_FATE_TURNS_DROPPED)) {
        /* fitted to the row before packing, so the packer counted it whole: it was cut */
        acc->docs_whole--;
        acc->tok_whole -= t;
        acc->docs_truncated++;
        acc->tok_trunc_kept += t;
        acc->tok_trunc_lost += r->tokens - t;
        acc->turns_dropped += r->turns;
    }
    if (!prc && dropped) {
        char d[96];
        snprintf(d, sizeof d, "%" PRIu64 " tokens%s%s > seq-len %ld", t, b->cfg.bos_id >= 0 ? " + BOS" : "",
                 b->cfg.eos_id >= 0 ? " + EOT" : "", (long)b->cfg.seq_len);
        acc->reasons[DS_REJ_OVERLONG_DROP]++;
        if (ds_rejects_write(b->rej, br->file, br->line, br->offset, DS_REJ_OVERLONG_DROP, d, br->record_bytes)) {
            *rej_errno = errno ? errno : EIO;
            prc = -1;
        }
    }
    if (r->ids.cap > (16u << 20)) { /* do not keep a huge id array after one giant document */
        tk_ids_free(&r->ids);
        memset(&r->ids, 0, sizeof r->ids);
    }
    return prc;
}

/* Records so far are all packed: a consistent point to resume from. */
static int checkpoint(build *b) {
    if (fflush(b->rej) != 0 || fsync(fileno(b->rej)) != 0)
        return fail(b, DS_ERR_IO, "cannot write '%s': %s", b->rej_tmp, strerror(errno));
    long rl = ftell(b->rej);
    if (ds_ckpt_save(b->o->out_dir, b->cfg_hash, &b->acc, b->toks_total, b->cur_file, b->pk, b->wr, b->recs, b->n_recs,
                     (uint64_t)rl) != DS_OK) {
        ds_build_event ev = {.kind = DS_BUILD_EV_CKPT_FAILED};
        emit_event(b, &ev);
    }
    b->ckpt_recs = b->n_recs;
    return DS_OK;
}

/* One batch: encode on the workers, then consume in order. */
static int process_batch(build *b, const ds_batch *bt) {
    if (bt->fatal) return fail(b, DS_ERR_IO, "%s", bt->errmsg);
    if (bt->n > b->cap_res) {
        dres *nr = realloc(b->res, bt->n * sizeof *nr);
        if (!nr) return fail(b, DS_ERR_NOMEM, "out of memory");
        memset(nr + b->cap_res, 0, (bt->n - b->cap_res) * sizeof *nr);
        b->res = nr;
        b->cap_res = bt->n;
    }
    uint32_t framing = (b->cfg.bos_id >= 0) + (b->cfg.eos_id >= 0);
    work w = {.tok = b->o->tok,
              .b = bt,
              .res = b->res,
              .jctx = b->jctx,
              .o = b->o,
              .cw = b->cw,
              .ro = &b->cro,
              .budget = b->cfg.seq_len > framing ? b->cfg.seq_len - framing : 0};
    atomic_init(&w.rc, TK_OK);
    if (bt->n) ds_parallel_for(bt->n, b->threads, do_doc, &w, &w.rc);
    if (atomic_load(&w.rc) != TK_OK)
        return fail(b, DS_ERR_INTERNAL, "encoding failed: %s", tk_strerror(atomic_load(&w.rc)));
    int prc = 0, rej_errno = 0;
    for (size_t i = 0; i < bt->n && !prc; i++) prc = consume_record(b, &bt->recs[i], &b->res[i], &rej_errno);
    if (prc) {
        /* the rejects file and the shard writer fail separately: name the one that failed (a
         * DS_ERR_* of the writer must never read as a rejects.jsonl.part failure) */
        if (rej_errno) return fail(b, DS_ERR_IO, "cannot write '%s': %s", b->rej_tmp, strerror(rej_errno));
        return fail(b, DS_ERR_IO, "%s",
                    b->wr[0].err[0]   ? b->wr[0].err
                    : b->wr[1].err[0] ? b->wr[1].err
                                      : "out of memory");
    }
    double now = ds_now();
    if (b->use_ckpt && b->n_recs != b->ckpt_recs && now - b->last_ckpt >= b->o->checkpoint_seconds && !bt->eof) {
        int rc = checkpoint(b);
        if (rc != DS_OK) return rc;
        b->last_ckpt = now;
    }
    ds_build_event ev = {.kind = DS_BUILD_EV_PROGRESS, .last = bt->eof};
    if (emit_event(b, &ev)) return fail(b, DS_ERR_CANCELED, "canceled");
    return DS_OK;
}

static int run_pipeline(build *b) {
    for (size_t i = 0; i < b->cfg.n_files; i++)
        b->est_total += ds_build_estimate_bytes(b->cfg.files[i], b->cfg.file_bytes[i]);
    b->t0 = b->last_ckpt = ds_now();
    b->pl.rd = b->rd;
    b->pl.src = b->o->source;
    b->pl.max_bytes = b->o->batch_bytes;
    b->pl.max_docs = 1u << 18;
    b->pl.keep_bad = 1;
    if (ds_pipeline_start(&b->pl) != DS_OK) return fail(b, DS_ERR_INTERNAL, "cannot start the reader thread");
    for (;;) {
        const ds_batch *bt = ds_pipeline_next(&b->pl);
        int rc = process_batch(b, bt), last = bt->eof;
        if (rc != DS_OK) return rc;
        ds_pipeline_release(&b->pl);
        if (last) break;
    }
    ds_pipeline_end(&b->pl);
    return DS_OK;
}

/* Pending rows, rejects.jsonl and, last, the manifest. */
static int finish(build *b, ds_build_result *res) {
    const char *out = b->o->out_dir;
    for (int s = 0; s < 2; s++)
        if (ds_packer_flush(&b->pk[s]) || ds_shard_writer_finish(&b->wr[s], &b->acc))
            return fail(b, DS_ERR_IO, "%s", b->wr[s].err[0] ? b->wr[s].err : "out of memory");
    FILE *rej = b->rej;
    b->rej = NULL;
    /* the common layer's commit of a streamed temporary: fsync, rename,
     * fsync of the folder (rejects.jsonl.part is resumable until here) */
    int fd = dup(fileno(rej)), bad = fflush(rej) != 0 || fd < 0;
    int e = errno;
    if (fclose(rej) != 0) bad = 1;
    if (bad) {
        if (fd >= 0) close(fd);
        return fail(b, DS_ERR_IO, "cannot write '%s': %s", b->rej_tmp, strerror(e));
    }
    char why[600];
    if (mc_atomic_commit(fd, 0, b->rej_tmp, b->rej_path, why, sizeof why) != MC_OK)
        return fail(b, DS_ERR_IO, "%s", why);
    const ds_build_account *acc = &b->acc;
    if ((b->cfg.n_files || b->o->source) && acc->rows[0] + acc->rows[1] == 0) {
        /* a manifest without rows would make the next run report "up to date" */
        ds_ckpt_remove(out);
        if (acc->records == 0)
            return fail(b, DS_ERR_EMPTY, "no documents in the inputs: nothing to write (no manifest written)");
        return fail(b, DS_ERR_EMPTY,
                    "no row written: all %" PRIu64 " record(s) were rejected (%" PRIu64 ") or dropped (%" PRIu64
                    "); reasons in %s (no manifest written)",
                    acc->records, acc->docs_rejected, acc->docs_dropped, b->rej_path);
    }
    ds_build_clean_dir(out, b->recs, b->n_recs);
    int rc = ds_manifest_write(out, &b->cfg, acc, b->recs, b->n_recs, b->err, b->errlen);
    if (rc != DS_OK) return rc;
    ds_ckpt_remove(out);
    res->n_shards = b->n_recs;
    res->acc = *acc;
    if (b->cfg.loss_bits) { /* the targets are counted per shard, as the manifest sums them */
        res->acc.loss_tokens = 0;
        for (size_t i = 0; i < b->n_recs; i++) res->acc.loss_tokens += b->recs[i].loss_tokens;
    }
    res->seconds = ds_now() - b->t0;
    return DS_OK;
}

static void cleanup(build *b) {
    ds_pipeline_end(&b->pl);
    for (int k = 0; k < 2; k++) {
        ds_shard_writer_free(&b->wr[k]);
        ds_packer_free(&b->pk[k]);
    }
    if (b->rej) fclose(b->rej);
    for (size_t i = 0; i < b->cap_res; i++) {
        tk_ids_free(&b->res[i].ids);
        free(b->res[i].loss);
    }
    if (b->cw)
        for (int t = 0; t < b->threads; t++) {
            ds_chat_free(&b->cw[t].c);
            ds_chat_rendered_free(&b->cw[t].r);
            ds_chat_ids_free(&b->cw[t].v);
        }
    free(b->cw);
    free(b->res);
    if (b->jctx)
        for (int t = 0; t < b->threads; t++) ds_json_ctx_free(b->jctx[t]);
    free(b->jctx);
    if (b->rd) ds_reader_free(b->rd);
    json_decref(b->cfgj);
    free(b->resume_file);
    ds_build_config_free(&b->cfg);
    free(b->recs);
    ds_unlock_dir(b->o->out_dir, b->lock_fd);
}

int ds_build(const ds_build_opts *opts, ds_build_result *res, char *err, size_t errlen) {
    char dummy_err[8];
    ds_build_result dummy_res;
    if (!err || !errlen) err = dummy_err, errlen = sizeof dummy_err;
    if (!res) res = &dummy_res;
    memset(res, 0, sizeof *res);
    err[0] = 0;
    if (!opts) return DS_ERR_ARG;
    build b;
    memset(&b, 0, sizeof b);
    b.o = opts;
    b.err = err;
    b.errlen = errlen;
    b.lock_fd = -1;
    b.threads = opts->threads > 0 ? opts->threads : ds_ncpus();
    int rc = make_config(&b);
    res->bos_id = b.cfg.bos_id;
    res->eos_id = b.cfg.eos_id;
    if (rc == DS_OK) rc = prepare_out(&b, res);
    if (rc == 1) rc = DS_OK; /* up to date */
    else if (rc == DS_OK && (rc = open_inputs(&b)) == DS_OK && (rc = setup_state(&b)) == DS_OK &&
             (rc = run_pipeline(&b)) == DS_OK)
        rc = finish(&b, res);
    res->resumed = b.resumed;
    cleanup(&b);
    return rc;
}
