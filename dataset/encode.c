/* encode.c - ds_encode: documents -> token ids in input order (see ds.h).
 * The pipeline of pipeline.c: a reader thread fills batches while the
 * calling thread encodes the previous one on `threads` threads, and a writer
 * thread hands the ids of the batch before that to the caller's sink, so
 * reading, encoding and writing overlap. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline_internal.h"
#include "tk.h"

void ds_encode_opts_init(ds_encode_opts *o) {
    memset(o, 0, sizeof *o);
    o->doc_sep = DS_SEP_FILE;
    o->batch_docs = 4096;
    o->batch_bytes = 0; /* per thread count: encode_batch_bytes */
    o->bos_id = o->eos_id = -1;
    o->format = DS_FMT_TEXT;
    o->loss_on = DS_LOSS_DEFAULT; /* assistant for chat, completion for prompt-completion */
}

/* Text per batch when the caller leaves it 0. Small enough that reading,
 * encoding and writing overlap; with one encoding thread smaller still, as
 * every batch's text, ids and output are memory touched for the first time
 * until the two batches' buffers are reused: page faults were 22% of the CPU
 * time of a 2 MB encode on a VM (~3.5 us each), and 256 KiB batches are 7%
 * faster on the whole bench corpus (o200k, 33.6 MB). More threads need the
 * bigger batch to share out: 256 KiB made 2 threads 12% slower in wall time. */
static uint64_t encode_batch_bytes(int threads) { return threads <= 1 ? 256ull << 10 : 2ull << 20; }

/* Append one id to v (tk_ids grows by doubling). */
static int ids_push(tk_ids *v, uint32_t id) {
    if (v->len == v->cap) {
        size_t nc = v->cap ? 2 * v->cap : 64;
        uint32_t *p = realloc(v->ids, nc * sizeof *p);
        if (!p) return -1;
        v->ids = p;
        v->cap = nc;
    }
    v->ids[v->len++] = id;
    return 0;
}

/* ---- encoding on the workers, one status per document: a document the
 * tokenizer refuses (tk_err_is_document) is skipped, any other failure
 * stops the run */
/* Chat records (ds_chat.h): per worker thread the parsed record, its
 * rendering and ids; per document of a set its mask, and why a refused
 * record was refused. */
typedef struct {
    ds_chat c;
    ds_chat_rendered r;
    ds_chat_ids v;
} chat_worker;
typedef struct {
    uint8_t *m;
    size_t cap;
} doc_mask;
#define CHAT_WHY 200
#define CHAT_REFUSED 1 /* rcs[i] of a record the chat parser or template refused (not a TK_ status) */

typedef struct {
    const ds_encode_opts *o;
    const tk_span *docs;
    tk_ids *outs;
    int *rcs;
    atomic_int rc;   /* the first failure of the run */
    chat_worker *cw; /* chat formats: one per thread */
    doc_mask *masks; /* chat formats: per document of this set */
    char *whys;      /* chat formats: CHAT_WHY bytes per document */
    const ds_chat_render_opts *ro;
} encode_job;

/* One chat record: parse, render, encode; ids appended to out, the mask
 * into *dm. CHAT_REFUSED (why set) for a record the parser or template
 * refuses, a tokenizer's refusal as its TK_ERR_DOC_* (why set), else TK_OK
 * or the run's failure. */
static int encode_chat(const ds_encode_opts *o, const ds_chat_render_opts *ro, chat_worker *w, const tk_span *doc,
                       tk_ids *out, doc_mask *dm, char *why) {
    ds_chat_parse_opts po = {.format = o->format, .messages_field = o->messages_field, .text_field = o->field};
    int rc = ds_chat_parse(doc->text, doc->len, &po, &w->c, why, CHAT_WHY);
    if (rc == DS_CHAT_OK) rc = ds_chat_render(o->chat_template, &w->c, ro, &w->r, why, CHAT_WHY);
    if (rc == DS_ERR_NOMEM) return TK_ERR_NOMEM;
    if (rc != DS_CHAT_OK) return CHAT_REFUSED;
    w->v.len = 0;
    rc = ds_chat_encode(o->tok, &w->r, &w->v, why, CHAT_WHY);
    if (rc == DS_ERR_ARG) return CHAT_REFUSED; /* a template special token the tokenizer lacks */
    if (rc == DS_ERR_NOMEM) return TK_ERR_NOMEM;
    if (rc != DS_OK) return rc;
    size_t need = out->len + w->v.len;
    if (need > out->cap) {
        uint32_t *p = realloc(out->ids, need * sizeof *p);
        if (!p) return TK_ERR_NOMEM;
        out->ids = p;
        out->cap = need;
    }
    memcpy(out->ids + out->len, w->v.ids, w->v.len * sizeof *w->v.ids);
    /* the mask covers the whole document: a BOS framing id before it is never a target */
    size_t off = out->len;
    out->len = need;
    if (need > dm->cap) {
        uint8_t *m = realloc(dm->m, need);
        if (!m) return TK_ERR_NOMEM;
        dm->m = m;
        dm->cap = need;
    }
    memset(dm->m, 0, off);
    memcpy(dm->m + off, w->v.mask, w->v.len);
    return TK_OK;
}

static void encode_doc(void *ctx, int t, size_t i) {
    encode_job *j = ctx;
    const ds_encode_opts *o = j->o;
    if (j->cw) {
        int rc = encode_chat(o, j->ro, &j->cw[t], &j->docs[i], &j->outs[i], &j->masks[i], j->whys + i * CHAT_WHY);
        j->rcs[i] = rc;
        if (rc != TK_OK && rc != CHAT_REFUSED && !tk_err_is_document(rc)) atomic_store(&j->rc, rc);
        return;
    }
    int rc = o->use_special
                 ? tk_encode_special(o->tok, j->docs[i].text, j->docs[i].len, o->allowed, o->n_allowed, &j->outs[i])
                 : tk_encode(o->tok, j->docs[i].text, j->docs[i].len, &j->outs[i]);
    j->rcs[i] = rc;
    if (rc != TK_OK && !tk_err_is_document(rc)) atomic_store(&j->rc, rc);
}

static int encode_batch(const ds_encode_opts *o, int threads, const tk_span *docs, size_t n, tk_ids *outs, int *rcs,
                        chat_worker *cw, doc_mask *masks, char *whys, const ds_chat_render_opts *ro) {
    encode_job j = {.o = o, .docs = docs, .outs = outs, .rcs = rcs, .cw = cw, .masks = masks, .whys = whys, .ro = ro};
    atomic_init(&j.rc, TK_OK);
    ds_parallel_for(n, threads > (int)n ? (int)n : threads, encode_doc, &j, &j.rc);
    return atomic_load(&j.rc);
}

/* ---- writer thread: hands set k to the sink while set k+1 is encoded */
typedef struct {
    const ds_encode_opts *o;
    tk_ids *set[2];
    doc_mask *mset[2]; /* chat formats: the masks of each set */
    size_t n[2];
    int last[2];
    ds_handoff h; /* set full: encoded, waiting to be written; free: for the encoder */
    int failed;   /* the sink failed; set before the writer stops */
    pthread_t thread;
    int started, inited;
} writer;

static void *writer_main(void *arg) {
    writer *w = arg;
    for (unsigned k = 0;; k ^= 1) {
        if (ds_handoff_wait_full(&w->h, k)) return NULL; /* stopped while idle */
        int failed = 0;
        for (size_t i = 0; i < w->n[k]; i++) {
            tk_ids *v = &w->set[k][i];
            if (!failed && w->mset[k] && w->o->sink_mask && w->o->sink_mask(w->mset[k][i].m, v->len, w->o->user))
                failed = 1;
            if (!failed && w->o->sink && w->o->sink(v->ids, v->len, w->o->user)) failed = 1;
            /* do not keep a huge id array around after one giant document */
            if (v->cap > (16u << 20)) {
                tk_ids_free(v);
                memset(v, 0, sizeof *v);
            }
        }
        if (failed) {
            w->failed = 1;
            ds_handoff_stop(&w->h); /* wakes the encoder waiting for this set */
            return NULL;
        }
        int last = w->last[k];
        ds_handoff_release(&w->h, k);
        if (last) return NULL;
    }
}

typedef struct {
    const ds_encode_opts *o;
    ds_encode_result *res;
    char *err;
    size_t errlen;
    int threads;
    uint64_t batch_bytes; /* opts->batch_bytes, or encode_batch_bytes */
    ds_reader *rd;
    ds_pipeline pl;
    writer wr;
    tk_span *spans;
    int *rcs;              /* per document of a batch: tk_encode's status */
    uint64_t refused;      /* documents the tokenizer refused so far */
    uint64_t chat_refused; /* chat records the parser or template refused so far */
    tk_ids *ids;
    size_t used[2];   /* most documents a set has held: entries past it were never touched */
    int64_t bos, eos; /* framing in force, -1: none */
    chat_worker *cw;  /* chat formats: per thread */
    doc_mask *masks;  /* chat formats: 2 x batch_docs */
    char *whys;       /* chat formats: batch_docs x CHAT_WHY */
    ds_chat_render_opts ro;
    char bos_tok[256], eos_tok[256];
} encoder;

static void on_bad(const ds_record *rec, void *user) {
    const ds_encode_opts *o = user;
    if (o->skipped) o->skipped(rec, o->user);
}

static int enc_fail(encoder *e, int rc, const char *msg) {
    snprintf(e->err, e->errlen, "%s", msg);
    return rc;
}

/* One batch: encode, count, hand to the writer. 1 after the last batch. */
static int encode_one(encoder *e, const ds_batch *b, unsigned k, double (*clock)(void)) {
    if (b->fatal) return enc_fail(e, DS_ERR_IO, b->errmsg);
    /* the id set of this parity must have been written out */
    if (ds_handoff_wait_free(&e->wr.h, k) || e->wr.failed) return enc_fail(e, DS_ERR_IO, "the output sink failed");
    tk_ids *set = e->wr.set[k];
    size_t nb = b->n;
    if (nb > e->used[k]) e->used[k] = nb;
    for (size_t i = 0; i < nb; i++) {
        e->spans[i].text = b->arena + b->recs[i].off;
        e->spans[i].len = b->recs[i].len;
        set[i].len = 0;
        /* the encoders append after it */
        if (e->bos >= 0 && ids_push(&set[i], (uint32_t)e->bos)) return enc_fail(e, DS_ERR_NOMEM, "out of memory");
    }
    double te = clock();
    doc_mask *masks = e->masks ? e->masks + (size_t)k * e->o->batch_docs : NULL;
    int erc = nb ? encode_batch(e->o, e->threads, e->spans, nb, set, e->rcs, e->cw, masks, e->whys, &e->ro) : TK_OK;
    e->res->encode_seconds += clock() - te;
    if (erc != TK_OK) {
        snprintf(e->err, e->errlen, "encoding failed: %s", tk_strerror(erc));
        return DS_ERR_INTERNAL;
    }
    /* documents the tokenizer refused: reported (file:line, why) and left
     * out, the others moved up in input order (their id arrays swapped, not
     * copied), so the output is what it would be without them */
    size_t kept = 0;
    for (size_t i = 0; i < nb; i++) {
        if (e->rcs[i] != TK_OK) {
            const ds_batch_rec *br = &b->recs[i];
            ds_record rec = {.text = e->spans[i].text,
                             .len = e->spans[i].len,
                             .status = e->rcs[i] == CHAT_REFUSED ? DS_REC_CHAT : DS_REC_TOKENIZER,
                             .record_bytes = br->record_bytes,
                             .file = br->file,
                             .line = br->line,
                             .offset = br->offset,
                             .index = br->index,
                             .flags = br->flags,
                             .detail =
                                 e->whys && e->whys[i * CHAT_WHY] ? e->whys + i * CHAT_WHY : tk_strerror(e->rcs[i])};
            if (e->rcs[i] == CHAT_REFUSED) e->chat_refused++;
            else e->refused++;
            if (e->o->skipped) e->o->skipped(&rec, e->o->user);
            continue;
        }
        if (kept != i) {
            tk_ids t = set[kept];
            set[kept] = set[i];
            set[i] = t;
            if (masks) {
                doc_mask m = masks[kept];
                masks[kept] = masks[i];
                masks[i] = m;
            }
        }
        kept++;
    }
    for (size_t i = 0; i < kept && e->eos >= 0; i++)
        if (ids_push(&set[i], (uint32_t)e->eos)) return enc_fail(e, DS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < kept; i++) e->res->tokens += set[i].len;
    e->res->docs += kept;
    e->res->bytes += b->used;
    e->wr.n[k] = kept;
    e->wr.last[k] = b->eof;
    ds_handoff_publish(&e->wr.h, k);
    return b->eof;
}

static int encode_run(encoder *e) {
    const ds_encode_opts *o = e->o;
    size_t nd = o->batch_docs;
    e->spans = malloc(nd * sizeof *e->spans);
    e->rcs = malloc(nd * sizeof *e->rcs);
    e->ids = calloc(2 * nd, sizeof *e->ids); /* two sets: one encoded, one being written */
    if (!e->spans || !e->rcs || !e->ids) return enc_fail(e, DS_ERR_NOMEM, "out of memory");
    /* time inside the encode calls: CPU time of this thread when it encodes
     * alone (the reader and writer threads may share its core), else wall */
    double (*clock)(void) = e->threads == 1 ? ds_thread_cpu : ds_now;
    e->pl.rd = e->rd;
    e->pl.max_docs = nd;
    e->pl.max_bytes = e->batch_bytes;
    e->pl.take_text_min = (size_t)256 << 10;
    e->pl.on_bad = on_bad;
    e->pl.user = (void *)o;
    if (ds_pipeline_start(&e->pl) != DS_OK) return enc_fail(e, DS_ERR_INTERNAL, "cannot start the reader thread");
    e->wr.o = o;
    e->wr.set[0] = e->ids;
    e->wr.set[1] = e->ids + nd;
    if (e->masks) {
        e->wr.mset[0] = e->masks;
        e->wr.mset[1] = e->masks + nd;
    }
    ds_handoff_init(&e->wr.h);
    e->wr.inited = 1;
    if (pthread_create(&e->wr.thread, NULL, writer_main, &e->wr) != 0)
        return enc_fail(e, DS_ERR_INTERNAL, "cannot start the writer thread");
    e->wr.started = 1;
    for (unsigned k = 0;; k ^= 1) {
        int rc = encode_one(e, ds_pipeline_next(&e->pl), k, clock);
        if (rc < 0) return rc;
        /* the text is no longer needed: the reader may refill this slot */
        ds_pipeline_release(&e->pl);
        if (rc == 1) break;
    }
    ds_pipeline_end(&e->pl);
    pthread_join(e->wr.thread, NULL);
    e->wr.started = 0;
    e->res->skipped = e->pl.skipped + e->refused + e->chat_refused;
    e->res->refused = e->refused;
    if (e->wr.failed) return enc_fail(e, DS_ERR_IO, "the output sink failed");
    return DS_OK;
}

int ds_encode(const ds_encode_opts *opts, ds_encode_result *res, char *err, size_t errlen) {
    char dummy_err[8];
    ds_encode_result dummy_res;
    if (!err || !errlen) err = dummy_err, errlen = sizeof dummy_err;
    if (!res) res = &dummy_res;
    memset(res, 0, sizeof *res);
    err[0] = 0;
    if (!opts || !opts->tok || (opts->n_inputs && !opts->inputs) || !opts->batch_docs) {
        snprintf(err, errlen, "ds_encode: tok, inputs and batch_docs are required");
        return DS_ERR_ARG;
    }
    encoder e;
    memset(&e, 0, sizeof e);
    e.o = opts;
    e.res = res;
    e.err = err;
    e.errlen = errlen;
    e.threads = opts->threads > 0 ? opts->threads : ds_ncpus();
    e.batch_bytes = opts->batch_bytes ? opts->batch_bytes : encode_batch_bytes(e.threads);
    e.bos = opts->bos_id;
    e.eos = opts->eos_id;
    if (e.bos == DS_FRAME_DEFAULT || e.eos == DS_FRAME_DEFAULT) {
        tk_framing fr;
        if (tk_default_framing(opts->tok, &fr, err, errlen) != TK_OK) return DS_ERR_FORMAT;
        if (e.bos == DS_FRAME_DEFAULT) e.bos = fr.bos;
        if (e.eos == DS_FRAME_DEFAULT) e.eos = fr.eos;
    }
    if (e.bos < -1 || e.eos < -1 || e.bos >= (int64_t)tk_vocab_size(opts->tok) ||
        e.eos >= (int64_t)tk_vocab_size(opts->tok)) {
        snprintf(err, errlen, "ds_encode: bos_id / eos_id must be -1, DS_FRAME_DEFAULT or an id of the vocabulary");
        return DS_ERR_ARG;
    }
    ds_reader_opts ro;
    ds_reader_opts_init(&ro);
    if (opts->field) ro.field = opts->field;
    if (opts->format != DS_FMT_TEXT) {
        if (!opts->chat_template || !ds_format_name(opts->format) || !ds_loss_on_name(opts->loss_on)) {
            snprintf(err, errlen, "ds_encode: a chat format needs chat_template, and format / loss_on in range");
            return DS_ERR_ARG;
        }
        /* the template frames the record (its bos_token); no framing around it */
        e.bos = e.eos = -1;
        ds_chat_framing_tokens(opts->tok, e.bos_tok, sizeof e.bos_tok, e.eos_tok, sizeof e.eos_tok);
        e.ro.bos_token = e.bos_tok;
        e.ro.eos_token = e.eos_tok;
        e.ro.loss_on = opts->loss_on;
        ro.defer_json = 1; /* each line whole, parsed on the workers */
        /* a Parquet / Arrow IPC row: a JSON object of the format's fields */
        ro.row_format = opts->format;
        ro.messages_field = opts->messages_field;
        e.cw = calloc((size_t)e.threads, sizeof *e.cw);
        e.masks = calloc(2 * opts->batch_docs, sizeof *e.masks);
        e.whys = calloc(opts->batch_docs, CHAT_WHY);
        if (!e.cw || !e.masks || !e.whys) {
            free(e.cw);
            free(e.masks);
            free(e.whys);
            snprintf(err, errlen, "out of memory");
            return DS_ERR_NOMEM;
        }
    }
    ro.doc_sep = opts->doc_sep;
    int rc = ds_reader_open(opts->inputs, opts->n_inputs, &ro, &e.rd, err, errlen);
    if (rc != DS_OK) {
        if (!err[0]) snprintf(err, errlen, "%s", ds_strerror(rc));
        return rc == DS_ERR_ARG ? DS_ERR_IO : rc;
    }
    if (opts->begin && opts->begin(opts->user)) rc = enc_fail(&e, DS_ERR_IO, "the output could not be created");
    if (rc == DS_OK) rc = encode_run(&e);
    if (e.wr.started) { /* error path: stop the writer and wait for it */
        ds_handoff_stop(&e.wr.h);
        pthread_join(e.wr.thread, NULL);
    }
    if (e.wr.inited) ds_handoff_destroy(&e.wr.h);
    ds_pipeline_end(&e.pl);
    /* only the entries a batch used: reading the rest (calloc's zero pages)
     * to free nothing would fault every page of the two sets in, twice */
    if (e.ids)
        for (unsigned k = 0; k < 2; k++)
            for (size_t i = 0; i < e.used[k]; i++) tk_ids_free(&e.ids[k * opts->batch_docs + i]);
    free(e.ids);
    free(e.spans);
    free(e.rcs);
    if (e.cw)
        for (int t = 0; t < e.threads; t++) {
            ds_chat_free(&e.cw[t].c);
            ds_chat_rendered_free(&e.cw[t].r);
            ds_chat_ids_free(&e.cw[t].v);
        }
    if (e.masks)
        for (size_t i = 0; i < 2 * opts->batch_docs; i++) free(e.masks[i].m);
    free(e.cw);
    free(e.masks);
    free(e.whys);
    ds_reader_free(e.rd);
    return rc;
}
