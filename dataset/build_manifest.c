/* build_manifest.c - what a build records about itself: the configuration
 * and accounting as JSON (written and read back strictly), manifest.json,
 * reject reason names, cleaning stale files, and the UTF-8 check records
 * are validated with (see build_internal.h). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_internal.h"
#include "mks_common.h"

static const char *const k_reasons[DS_REJ_COUNT] = {
    "zstd-corrupt", "json-malformed", "field-missing",   "field-not-string", "record-too-large", "utf8-invalid",
    "nul-byte",     "over-long",      "tokenizer-limit", "chat-invalid",     "no-loss-tokens"};
/* A reason added after manifests were first written: present only when it
 * counted something, so manifests without it keep their bytes (and read). */
static int reason_optional(int r) { return r == DS_REJ_TOKENIZER || r == DS_REJ_CHAT || r == DS_REJ_NO_LOSS; }
const char *ds_reject_reason_name(int r) { return r >= 0 && r < DS_REJ_COUNT ? k_reasons[r] : "?"; }

void ds_build_config_free(ds_build_config *c) {
    for (size_t i = 0; i < c->n_inputs; i++) free(c->inputs[i]);
    for (size_t i = 0; i < c->n_files; i++) free(c->files[i]);
    free(c->inputs);
    free(c->files);
    free(c->file_bytes);
    c->inputs = c->files = NULL;
    c->file_bytes = NULL;
    c->n_inputs = c->n_files = 0;
}

uint64_t ds_build_rows_per_shard(const ds_build_config *c) {
    uint64_t r = c->shard_tokens / c->seq_len;
    if (r == 0) r = 1;
    uint64_t max = ((1ull << 32) - 1) / c->seq_len;
    return r > max ? max : r;
}

json_t *ds_build_config_json(const ds_build_config *c) {
    char fp[65];
    ds_shard_hex(c->fingerprint, 32, fp);
    json_t *in = json_array(), *files = json_array();
    for (size_t i = 0; i < c->n_inputs; i++) json_array_append_new(in, json_string(c->inputs[i]));
    for (size_t i = 0; i < c->n_files; i++) {
        json_t *f = json_object();
        json_object_set_new(f, "path", json_string(c->files[i]));
        json_object_set_new(f, "bytes", json_integer((json_int_t)c->file_bytes[i]));
        json_array_append_new(files, f);
    }
    json_t *part = json_array();
    json_array_append_new(part, json_integer(c->part_k));
    json_array_append_new(part, json_integer(c->part_n));
    json_t *j = json_object();
    json_object_set_new(j, "tokenizer", json_string(c->tokenizer_spec));
    if (c->tokenizer_regex[0]) json_object_set_new(j, "pattern", json_string(c->tokenizer_regex));
    if (c->tokenizer_normalize[0]) json_object_set_new(j, "normalize", json_string(c->tokenizer_normalize));
    json_object_set_new(j, "seq_len", json_integer(c->seq_len));
    json_object_set_new(j, "pack", json_string(ds_pack_name(c->pack)));
    json_object_set_new(j, "over_long", json_string(ds_over_long_name(c->over_long)));
    json_object_set_new(j, "bfd_window_rows", json_integer((json_int_t)c->bfd_window));
    json_object_set_new(j, "val_fraction", json_real(c->val_fraction));
    /* jansson's integers are int64: a seed of 2^63 or more is written as its
     * decimal string, so the manifest records the seed exactly (it was -1 for
     * 2^64 - 1) and JSON readers without 64-bit unsigned ints still parse it */
    if (c->seed > (uint64_t)INT64_MAX) {
        char sd[24];
        snprintf(sd, sizeof sd, "%" PRIu64, c->seed);
        json_object_set_new(j, "seed", json_string(sd));
    } else {
        json_object_set_new(j, "seed", json_integer((json_int_t)c->seed));
    }
    json_object_set_new(j, "shuffle", json_boolean(c->shuffle));
    json_object_set_new(j, "shard_tokens", json_integer((json_int_t)c->shard_tokens));
    json_object_set_new(j, "zstd_level", json_integer(c->zstd_level));
    json_object_set_new(j, "frame_rows", json_integer(c->frame_rows));
    json_object_set_new(j, "field", json_string(c->field));
    json_object_set_new(j, "doc_sep", json_string(c->doc_sep));
    json_object_set_new(j, "part", part);
    json_object_set_new(j, "inputs", in);
    json_object_set_new(j, "files", files);
    if (c->framed) { /* absent: the framing before it was configurable (no BOS, EOS = eot_id) */
        json_t *fr = json_object();
        for (int k = 0; k < 2; k++) {
            int64_t id = k ? c->eos_id : c->bos_id;
            const char *txt = k ? c->eos_text : c->bos_text;
            json_t *o = json_null();
            if (id >= 0) {
                o = json_object();
                json_object_set_new(o, "id", json_integer((json_int_t)id));
                json_object_set_new(o, "text", txt[0] ? json_string(txt) : json_null());
            }
            json_object_set_new(fr, k ? "eos" : "bos", o);
        }
        json_object_set_new(j, "framing", fr);
    }
    if (c->format != DS_FMT_TEXT) { /* absent: a text build (its manifests keep their bytes) */
        json_t *rec = json_object();
        json_object_set_new(rec, "format", json_string(ds_format_name(c->format)));
        json_object_set_new(rec, "chat_template", json_string(c->chat_template));
        json_object_set_new(rec, "messages_field", json_string(c->messages_field));
        json_object_set_new(rec, "loss_on", json_string(ds_loss_on_name(c->loss_on)));
        json_object_set_new(j, "records", rec);
    }
    return j;
}

/* config.framing.bos / .eos: null (none) or {"id": 0..2^24-1, "text": string|null}. */
static int cfg_frame_side(json_t *fr, const char *k, int64_t *id, char *txt, size_t cap, char *err, size_t errlen) {
    json_t *o = json_object_get(fr, k);
    *id = -1;
    txt[0] = 0;
    if (json_is_null(o)) return 0;
    json_t *i = json_object_get(o, "id"), *t = json_object_get(o, "text");
    if (!json_is_object(o) || !json_is_integer(i) || json_integer_value(i) < 0 ||
        json_integer_value(i) >= (json_int_t)DS_SHARD_MAX_VOCAB || !(json_is_null(t) || json_is_string(t)) ||
        (json_is_string(t) &&
         (json_string_length(t) >= cap || strlen(json_string_value(t)) != json_string_length(t)))) {
        snprintf(err, errlen,
                 "config.framing.%s must be null or {\"id\": integer below 2^24, \"text\": string of at "
                 "most %zu bytes or null}",
                 k, cap - 1);
        return -1;
    }
    *id = json_integer_value(i);
    if (json_is_string(t)) memcpy(txt, json_string_value(t), json_string_length(t) + 1);
    return 0;
}

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* Typed, range-checked field readers: a manifest is untrusted input, so a
 * missing field, a string where a number belongs, a negative or huge count
 * is an error naming the field, never a zero or a wrapped value. */
static int cfg_int(json_t *o, const char *k, json_int_t lo, json_int_t hi, json_int_t *out, char *err, size_t errlen) {
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(err, errlen, "config.%s must be an integer %lld..%lld", k, (long long)lo, (long long)hi);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

/* A string of at most cap-1 bytes without NUL, copied into out. */
static int cfg_str(json_t *o, const char *k, char *out, size_t cap, char *err, size_t errlen) {
    json_t *v = json_object_get(o, k);
    if (!json_is_string(v) || json_string_length(v) >= cap || strlen(json_string_value(v)) != json_string_length(v)) {
        snprintf(err, errlen, "config.%s must be a string of at most %zu bytes", k, cap - 1);
        return -1;
    }
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

/* An enum named by its table (ds_names.c): name(i) for i = 0, 1, ... until NULL. */
static int cfg_enum(json_t *o, const char *k, const char *(*name)(int), int *out, char *err, size_t errlen) {
    const char *v = json_string_value(json_object_get(o, k));
    for (int i = 0; v && name(i); i++)
        if (!strcmp(v, name(i))) {
            *out = i;
            return 0;
        }
    char names[128];
    snprintf(err, errlen, "config.%s must be %s", k, ds_names_list(name, names, sizeof names));
    return -1;
}

/* The manifest's config block back into a ds_build_config (for --resume,
 * --part merge checks and inspect). Long (~120 lines) but flat: one checked
 * read per key, in the order build_manifest writes them, no shared state. */
int ds_build_config_from_json(json_t *j, ds_build_config *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (!json_is_object(j)) {
        snprintf(err, errlen, "manifest has no config object");
        return -1;
    }
    json_int_t v;
    int e;
    if (cfg_str(j, "tokenizer", c->tokenizer_spec, sizeof c->tokenizer_spec, err, errlen)) return -1;
    /* a rank file's own regex / normalization: present only when given */
    if (json_object_get(j, "pattern") &&
        cfg_str(j, "pattern", c->tokenizer_regex, sizeof c->tokenizer_regex, err, errlen))
        return -1;
    if (json_object_get(j, "normalize") &&
        cfg_str(j, "normalize", c->tokenizer_normalize, sizeof c->tokenizer_normalize, err, errlen))
        return -1;
    if (cfg_int(j, "seq_len", 1, DS_SHARD_MAX_ROW_LEN, &v, err, errlen)) return -1;
    c->seq_len = (uint32_t)v;
    if (cfg_enum(j, "pack", ds_pack_name, &e, err, errlen)) return -1;
    c->pack = (ds_pack)e;
    if (cfg_enum(j, "over_long", ds_over_long_name, &e, err, errlen)) return -1;
    c->over_long = (ds_over_long)e;
    if (cfg_int(j, "bfd_window_rows", 1, 1 << 24, &v, err, errlen)) return -1;
    c->bfd_window = (uint64_t)v;
    json_t *vf = json_object_get(j, "val_fraction");
    if (!json_is_number(vf) || !(json_number_value(vf) >= 0.0 && json_number_value(vf) <= 1.0)) {
        snprintf(err, errlen, "config.val_fraction must be a number 0..1");
        return -1;
    }
    c->val_fraction = json_number_value(vf);
    /* a seed >= 2^63 is a decimal string (older manifests: its two's-complement
     * negative value, still read) */
    const char *sd = json_string_value(json_object_get(j, "seed"));
    if (sd) {
        char *end = NULL;
        errno = 0;
        unsigned long long u = sd[0] >= '0' && sd[0] <= '9' ? strtoull(sd, &end, 10) : 0;
        if (!end || *end || errno || u <= (unsigned long long)INT64_MAX) {
            snprintf(err, errlen, "config.seed must be an integer, or a decimal string 2^63..2^64-1");
            return -1;
        }
        c->seed = u;
    } else {
        if (cfg_int(j, "seed", INT64_MIN, INT64_MAX, &v, err, errlen)) return -1;
        c->seed = (uint64_t)v;
    }
    if (!json_is_boolean(json_object_get(j, "shuffle"))) {
        snprintf(err, errlen, "config.shuffle must be true or false");
        return -1;
    }
    c->shuffle = json_is_true(json_object_get(j, "shuffle"));
    if (cfg_int(j, "shard_tokens", 1, (json_int_t)1 << 40, &v, err, errlen)) return -1;
    c->shard_tokens = (uint64_t)v;
    if (cfg_int(j, "zstd_level", 0, 22, &v, err, errlen)) return -1;
    c->zstd_level = (int)v;
    if (cfg_int(j, "frame_rows", c->zstd_level ? 1 : 0, c->zstd_level ? 1 << 20 : 0, &v, err, errlen)) return -1;
    c->frame_rows = (uint32_t)v;
    if (cfg_str(j, "field", c->field, sizeof c->field, err, errlen)) return -1;
    if (cfg_str(j, "doc_sep", c->doc_sep, sizeof c->doc_sep, err, errlen)) return -1;
    json_t *part = json_object_get(j, "part");
    json_t *pk = json_array_get(part, 0), *pn = json_array_get(part, 1);
    if (!json_is_array(part) || json_array_size(part) != 2 || !json_is_integer(pk) || !json_is_integer(pn) ||
        json_integer_value(pn) < 1 || json_integer_value(pn) > DS_BUILD_MAX_PARTS || json_integer_value(pk) < 1 ||
        json_integer_value(pk) > json_integer_value(pn)) {
        snprintf(err, errlen, "config.part must be [K, N] with 1 <= K <= N <= %d", DS_BUILD_MAX_PARTS);
        return -1;
    }
    c->part_k = (uint32_t)json_integer_value(pk);
    c->part_n = (uint32_t)json_integer_value(pn);
    json_t *in = json_object_get(j, "inputs"), *files = json_object_get(j, "files");
    if (!json_is_array(in) || !json_is_array(files)) {
        snprintf(err, errlen, "config.inputs and config.files must be arrays");
        return -1;
    }
    size_t ni = json_array_size(in), nf = json_array_size(files);
    c->inputs = calloc(ni + 1, sizeof *c->inputs);
    c->files = calloc(nf + 1, sizeof *c->files);
    c->file_bytes = calloc(nf + 1, sizeof *c->file_bytes);
    if (!c->inputs || !c->files || !c->file_bytes) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < ni; i++) {
        json_t *x = json_array_get(in, i);
        if (!json_is_string(x)) {
            snprintf(err, errlen, "config.inputs[%zu] must be a string", i);
            return -1;
        }
        if (!(c->inputs[c->n_inputs] = strdup(json_string_value(x)))) return -1;
        c->n_inputs++;
    }
    for (size_t i = 0; i < nf; i++) {
        json_t *f = json_array_get(files, i), *b = json_object_get(f, "bytes");
        if (!json_is_string(json_object_get(f, "path")) || !json_is_integer(b) || json_integer_value(b) < 0) {
            snprintf(err, errlen, "config.files[%zu] must be {\"path\": string, \"bytes\": integer >= 0}", i);
            return -1;
        }
        if (!(c->files[c->n_files] = strdup(jstr(f, "path")))) return -1;
        c->file_bytes[c->n_files++] = (uint64_t)json_integer_value(b);
    }
    json_t *fr = json_object_get(j, "framing");
    c->bos_id = -1;
    c->eos_id = -1;
    if (fr) {
        if (!json_is_object(fr) || !json_object_get(fr, "bos") || !json_object_get(fr, "eos")) {
            snprintf(err, errlen, "config.framing must be an object with bos and eos");
            return -1;
        }
        if (cfg_frame_side(fr, "bos", &c->bos_id, c->bos_text, sizeof c->bos_text, err, errlen) ||
            cfg_frame_side(fr, "eos", &c->eos_id, c->eos_text, sizeof c->eos_text, err, errlen))
            return -1;
        c->framed = 1;
    }
    json_t *rec = json_object_get(j, "records");
    c->format = DS_FMT_TEXT;
    c->loss_on = DS_LOSS_DEFAULT;
    if (rec) {
        json_t *f = json_object_get(rec, "format"), *lo = json_object_get(rec, "loss_on");
        if (!json_is_object(rec) || !json_is_string(f) || ds_format_parse(json_string_value(f), &c->format) ||
            c->format == DS_FMT_TEXT || !json_is_string(lo) || ds_loss_on_parse(json_string_value(lo), &c->loss_on) ||
            cfg_str(rec, "chat_template", c->chat_template, sizeof c->chat_template, err, errlen) ||
            cfg_str(rec, "messages_field", c->messages_field, sizeof c->messages_field, err, errlen)) {
            snprintf(err, errlen,
                     "config.records must be {\"format\": chat|prompt-completion|auto, \"chat_template\": "
                     "string, \"messages_field\": string, \"loss_on\": assistant|completion|all|default}");
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------- accounting */
/* One field a line, kept out of clang-format: version 14 reflows an X-macro
 * list differently on each run. */
/* clang-format off */
#define ACC_FIELDS(X)       \
    X(records)              \
    X(bytes_in)             \
    X(docs_whole)           \
    X(docs_truncated)       \
    X(docs_chunked)         \
    X(docs_dropped)         \
    X(docs_rejected)        \
    X(tok_whole)            \
    X(tok_trunc_kept)       \
    X(tok_trunc_lost)       \
    X(tok_chunked)          \
    X(tok_dropped)          \
    X(eot)                  \
    X(pad)                  \
    X(pieces)               \
    X(rejected_bytes)
/* clang-format on */

json_t *ds_build_account_json(const ds_build_account *a, const ds_build_config *cfg) {
    json_t *j = json_object();
    uint64_t docs_in = a->docs_whole + a->docs_truncated + a->docs_chunked + a->docs_dropped + a->docs_rejected;
    json_t *d = json_object();
    json_object_set_new(d, "in", json_integer((json_int_t)docs_in));
    json_object_set_new(d, "whole", json_integer((json_int_t)a->docs_whole));
    json_object_set_new(d, "truncated", json_integer((json_int_t)a->docs_truncated));
    json_object_set_new(d, "chunked", json_integer((json_int_t)a->docs_chunked));
    json_object_set_new(d, "dropped", json_integer((json_int_t)a->docs_dropped));
    json_object_set_new(d, "rejected", json_integer((json_int_t)a->docs_rejected));
    json_object_set_new(d, "train", json_integer((json_int_t)a->docs_split[0]));
    json_object_set_new(d, "val", json_integer((json_int_t)a->docs_split[1]));
    if (cfg->format != DS_FMT_TEXT) json_object_set_new(d, "turns_dropped", json_integer((json_int_t)a->turns_dropped));
    json_object_set_new(j, "documents", d);
    uint64_t tin = a->tok_whole + a->tok_trunc_kept + a->tok_trunc_lost + a->tok_chunked + a->tok_dropped;
    uint64_t written = a->tok_whole + a->tok_trunc_kept + a->tok_chunked + a->eot + a->bos;
    json_t *t = json_object();
    json_object_set_new(t, "in", json_integer((json_int_t)tin));
    json_object_set_new(t, "whole", json_integer((json_int_t)a->tok_whole));
    json_object_set_new(t, "truncated_kept", json_integer((json_int_t)a->tok_trunc_kept));
    json_object_set_new(t, "truncated_lost", json_integer((json_int_t)a->tok_trunc_lost));
    json_object_set_new(t, "chunked", json_integer((json_int_t)a->tok_chunked));
    json_object_set_new(t, "dropped", json_integer((json_int_t)a->tok_dropped));
    json_object_set_new(t, "eot", json_integer((json_int_t)a->eot));
    if (cfg->framed) json_object_set_new(t, "bos", json_integer((json_int_t)a->bos));
    json_object_set_new(t, "written", json_integer((json_int_t)written));
    json_object_set_new(t, "pad", json_integer((json_int_t)a->pad));
    /* targets beside tokens: chat / prompt-completion builds */
    if (cfg->format != DS_FMT_TEXT) json_object_set_new(t, "loss", json_integer((json_int_t)a->loss_tokens));
    json_object_set_new(j, "tokens", t);
    json_t *r = json_object();
    for (int i = 0; i < DS_REJ_COUNT; i++)
        if (a->reasons[i] || !reason_optional(i))
            json_object_set_new(r, k_reasons[i], json_integer((json_int_t)a->reasons[i]));
    json_object_set_new(j, "reject_reasons", r);
    json_object_set_new(j, "records", json_integer((json_int_t)a->records));
    json_object_set_new(j, "bytes_in", json_integer((json_int_t)a->bytes_in));
    json_object_set_new(j, "rejected_bytes", json_integer((json_int_t)a->rejected_bytes));
    json_object_set_new(j, "pieces", json_integer((json_int_t)a->pieces));
    json_t *rows = json_object();
    json_object_set_new(rows, "train", json_integer((json_int_t)a->rows[0]));
    json_object_set_new(rows, "val", json_integer((json_int_t)a->rows[1]));
    json_object_set_new(j, "rows", rows);
    uint64_t cells = (a->rows[0] + a->rows[1]) * (uint64_t)cfg->seq_len;
    /* utilisation as a string with fixed digits: byte-identical everywhere */
    char u[32];
    snprintf(u, sizeof u, "%.6f", cells ? (double)written / (double)cells : 0.0);
    json_object_set_new(j, "utilisation", json_string(u));
    json_t *h = json_array();
    int last = 0;
    for (int i = 0; i < DS_BUILD_HIST_BINS; i++)
        if (a->hist[i]) last = i + 1;
    for (int i = 0; i < last; i++) json_array_append_new(h, json_integer((json_int_t)a->hist[i]));
    json_object_set_new(j, "doc_tokens_log2_hist", h);
    return j;
}

/* A counter: a non-negative integer (missing / mistyped / negative: error). */
static int jget(json_t *o, const char *grp, const char *k, uint64_t *out, char *err, size_t errlen) {
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        snprintf(err, errlen, "accounting.%s%s%s must be an integer >= 0", grp ? grp : "", grp ? "." : "", k);
        return -1;
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

int ds_build_account_from_json(json_t *j, ds_build_account *a, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    json_t *d = json_object_get(j, "documents"), *t = json_object_get(j, "tokens"),
           *r = json_object_get(j, "reject_reasons");
    json_t *rows = json_object_get(j, "rows"), *h = json_object_get(j, "doc_tokens_log2_hist");
    if (!json_is_object(j) || !json_is_object(d) || !json_is_object(t) || !json_is_object(r) || !json_is_object(rows) ||
        !json_is_array(h)) {
        snprintf(err, errlen,
                 "accounting (with documents, tokens, reject_reasons, rows, doc_tokens_log2_hist) "
                 "missing or mistyped");
        return -1;
    }
    struct {
        json_t *o;
        const char *grp, *k;
        uint64_t *dst;
    } f[] = {{j, NULL, "records", &a->records},
             {j, NULL, "bytes_in", &a->bytes_in},
             {j, NULL, "rejected_bytes", &a->rejected_bytes},
             {j, NULL, "pieces", &a->pieces},
             {d, "documents", "whole", &a->docs_whole},
             {d, "documents", "truncated", &a->docs_truncated},
             {d, "documents", "chunked", &a->docs_chunked},
             {d, "documents", "dropped", &a->docs_dropped},
             {d, "documents", "rejected", &a->docs_rejected},
             {d, "documents", "train", &a->docs_split[0]},
             {d, "documents", "val", &a->docs_split[1]},
             {t, "tokens", "whole", &a->tok_whole},
             {t, "tokens", "truncated_kept", &a->tok_trunc_kept},
             {t, "tokens", "truncated_lost", &a->tok_trunc_lost},
             {t, "tokens", "chunked", &a->tok_chunked},
             {t, "tokens", "dropped", &a->tok_dropped},
             {t, "tokens", "eot", &a->eot},
             {t, "tokens", "pad", &a->pad},
             {rows, "rows", "train", &a->rows[0]},
             {rows, "rows", "val", &a->rows[1]}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (jget(f[i].o, f[i].grp, f[i].k, f[i].dst, err, errlen)) return -1;
    if (json_object_get(t, "bos") && jget(t, "tokens", "bos", &a->bos, err, errlen)) return -1;
    if (json_object_get(t, "loss") && jget(t, "tokens", "loss", &a->loss_tokens, err, errlen)) return -1;
    if (json_object_get(d, "turns_dropped") && jget(d, "documents", "turns_dropped", &a->turns_dropped, err, errlen))
        return -1;
    for (int i = 0; i < DS_REJ_COUNT; i++)
        if ((json_object_get(r, k_reasons[i]) || !reason_optional(i)) &&
            jget(r, "reject_reasons", k_reasons[i], &a->reasons[i], err, errlen))
            return -1;
    if (json_array_size(h) > DS_BUILD_HIST_BINS) {
        snprintf(err, errlen, "accounting.doc_tokens_log2_hist has %zu entries, at most %d", json_array_size(h),
                 DS_BUILD_HIST_BINS);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(h); i++) {
        json_t *v = json_array_get(h, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            snprintf(err, errlen, "accounting.doc_tokens_log2_hist[%zu] must be an integer >= 0", i);
            return -1;
        }
        a->hist[i] = (uint64_t)json_integer_value(v);
    }
    return 0;
}

/* ---------------------------------------------------------- manifest */
int ds_manifest_write(const char *dir, const ds_build_config *cfg, const ds_build_account *acc,
                      const ds_shard_rec *recs, size_t n_recs, char *err, size_t errlen) {
    json_t *m = json_object();
    json_object_set_new(m, "format", json_string("mkshards-manifest"));
    json_object_set_new(m, "version", json_integer(1));
    json_object_set_new(m, "shard_format_version",
                        json_integer(cfg->loss_bits ? DS_SHARD_VERSION_LOSS : DS_SHARD_VERSION));
    json_object_set_new(m, "seq_len", json_integer(cfg->seq_len));
    json_object_set_new(m, "dtype", json_string(cfg->vocab_size <= 65536 ? "u16" : "u32"));
    json_t *tk = json_object();
    char fp[65];
    ds_shard_hex(cfg->fingerprint, 32, fp);
    json_object_set_new(tk, "name", json_string(cfg->tokenizer_name));
    json_object_set_new(tk, "fingerprint", json_string(fp));
    json_object_set_new(tk, "vocab_size", json_integer(cfg->vocab_size));
    json_object_set_new(tk, "eot_id", json_integer(cfg->eot_id));
    json_object_set_new(tk, "pad_id", json_integer(cfg->eot_id));
    if (cfg->framed) {
        json_object_set_new(tk, "bos_id", cfg->bos_id >= 0 ? json_integer((json_int_t)cfg->bos_id) : json_null());
        json_object_set_new(tk, "bos", cfg->bos_id >= 0 && cfg->bos_text[0] ? json_string(cfg->bos_text) : json_null());
        json_object_set_new(tk, "eos_id", cfg->eos_id >= 0 ? json_integer((json_int_t)cfg->eos_id) : json_null());
        json_object_set_new(tk, "eos", cfg->eos_id >= 0 && cfg->eos_text[0] ? json_string(cfg->eos_text) : json_null());
    }
    json_object_set_new(m, "tokenizer", tk);
    json_object_set_new(m, "config", ds_build_config_json(cfg));
    json_t *splits = json_object();
    for (int s = 0; s < 2; s++) {
        json_t *o = json_object();
        uint64_t shards = 0, rows = 0, toks = 0, loss = 0;
        for (size_t i = 0; i < n_recs; i++)
            if (recs[i].split == s) shards++, rows += recs[i].rows, toks += recs[i].tokens, loss += recs[i].loss_tokens;
        json_object_set_new(o, "shards", json_integer((json_int_t)shards));
        json_object_set_new(o, "rows", json_integer((json_int_t)rows));
        json_object_set_new(o, "tokens", json_integer((json_int_t)toks));
        /* targets beside tokens in version-2 sets (version 1: every token; the key stays out) */
        if (cfg->loss_bits) json_object_set_new(o, "loss_tokens", json_integer((json_int_t)loss));
        json_object_set_new(splits, s ? "val" : "train", o);
    }
    json_object_set_new(m, "splits", splits);
    json_t *sh = json_array();
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < n_recs; i++) {
            if (recs[i].split != s) continue;
            json_t *o = json_object();
            char hx[17];
            snprintf(hx, sizeof hx, "%016" PRIx64, recs[i].xxh3);
            json_object_set_new(o, "file", json_string(recs[i].file));
            json_object_set_new(o, "split", json_string(ds_split_name(s)));
            json_object_set_new(o, "rows", json_integer((json_int_t)recs[i].rows));
            json_object_set_new(o, "tokens", json_integer((json_int_t)recs[i].tokens));
            if (cfg->loss_bits) json_object_set_new(o, "loss_tokens", json_integer((json_int_t)recs[i].loss_tokens));
            json_object_set_new(o, "bytes", json_integer((json_int_t)recs[i].bytes));
            json_object_set_new(o, "xxh3", json_string(hx));
            json_array_append_new(sh, o);
        }
    json_object_set_new(m, "shards", sh);
    /* the accounting's targets are the shards' (counted by the writer per
     * shard; merge and resume carry the shard records, so they cannot drift) */
    ds_build_account acc_out = *acc;
    if (cfg->loss_bits) {
        acc_out.loss_tokens = 0;
        for (size_t i = 0; i < n_recs; i++) acc_out.loss_tokens += recs[i].loss_tokens;
    }
    json_object_set_new(m, "accounting", ds_build_account_json(&acc_out, cfg));
    json_object_set_new(m, "rejects", json_string("rejects.jsonl"));
    char *txt = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(m);
    if (!txt) {
        snprintf(err, errlen, "out of memory");
        return DS_ERR_NOMEM;
    }
    size_t n = strlen(txt);
    char *buf = malloc(n + 2);
    if (!buf) {
        free(txt);
        return DS_ERR_NOMEM;
    }
    memcpy(buf, txt, n);
    buf[n] = '\n';
    free(txt);
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    int rc = ds_write_file_atomic(path, buf, n + 1, NULL, err, errlen);
    free(buf);
    return rc;
}

json_t *ds_manifest_load_root(const char *dir, char *err, size_t errlen) {
    ds_manifest m;
    if (ds_manifest_load(dir, &m, err, errlen) != DS_OK) return NULL;
    json_t *root = json_incref(m.root);
    ds_manifest_free(&m);
    return root;
}

static int is_shard_name(const char *n) {
    size_t l = strlen(n);
    return l > 4 && !strcmp(n + l - 4, ".mks") && (!strncmp(n, "train-", 6) || !strncmp(n, "val-", 4));
}

void ds_build_clean_dir(const char *dir, const ds_shard_rec *keep, size_t n_keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4200];
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        size_t l = strlen(n);
        int del = 0;
        if (l > 4 && !strcmp(n + l - 4, ".tmp")) del = 1;
        else if (is_shard_name(n) && keep) {
            del = 1;
            for (size_t i = 0; i < n_keep; i++)
                if (!strcmp(keep[i].file, n)) del = 0;
        }
        if (del) {
            snprintf(path, sizeof path, "%s/%s", dir, n);
            unlink(path);
        }
    }
    closedir(d);
}

/* ---------------------------------------------------------- utf-8 */
size_t ds_utf8_invalid_at(const uint8_t *p, size_t n) { return mc_utf8_valid_prefix(p, n); }
