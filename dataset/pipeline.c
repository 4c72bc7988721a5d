/* pipeline.c - the reader -> workers -> in-order pipeline of ds_build and
 * ds_encode (see pipeline_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipeline_internal.h"
#include "ds_columnar.h"
#include "mks_common.h"

/* ------------------------------------------------------------ handoff */
void ds_handoff_init(ds_handoff *h) {
    memset(h->full, 0, sizeof h->full);
    h->stop = 0;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
}

void ds_handoff_destroy(ds_handoff *h) {
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
}

static void set_full(ds_handoff *h, unsigned k, int v) {
    pthread_mutex_lock(&h->mu);
    h->full[k] = v;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

int ds_handoff_wait_free(ds_handoff *h, unsigned k) {
    pthread_mutex_lock(&h->mu);
    while (h->full[k] && !h->stop) pthread_cond_wait(&h->cv, &h->mu);
    int rc = h->stop ? -1 : 0;
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int ds_handoff_wait_full(ds_handoff *h, unsigned k) {
    pthread_mutex_lock(&h->mu);
    while (!h->full[k] && !h->stop) pthread_cond_wait(&h->cv, &h->mu);
    int rc = h->full[k] ? 0 : -1;
    pthread_mutex_unlock(&h->mu);
    return rc;
}

void ds_handoff_publish(ds_handoff *h, unsigned k) { set_full(h, k, 1); }
void ds_handoff_release(ds_handoff *h, unsigned k) { set_full(h, k, 0); }

void ds_handoff_stop(ds_handoff *h) {
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* ------------------------------------------------------------ reader */
/* Append n bytes at *used (growing *arena by doubling from 1 MiB). */
static int arena_append(uint8_t **arena, size_t *cap, size_t *used, const void *p, size_t n) {
    if (*used + n > *cap) {
        size_t nc = *cap ? *cap : (size_t)1 << 20;
        while (nc < *used + n) nc *= 2;
        uint8_t *na = realloc(*arena, nc);
        if (!na) return -1;
        *arena = na;
        *cap = nc;
    }
    if (n) memcpy(*arena + *used, p, n);
    *used += n;
    return 0;
}

static ds_batch_rec *push_rec(ds_batch *b) {
    if (b->n == b->cap_recs) {
        size_t nc = b->cap_recs ? 2 * b->cap_recs : 1024;
        ds_batch_rec *nr = realloc(b->recs, nc * sizeof *nr);
        if (!nr) return NULL;
        b->recs = nr;
        b->cap_recs = nc;
    }
    return &b->recs[b->n++];
}

/* The file reader's next record, or the source's (pl->src). */
static int next_record(ds_pipeline *pl, ds_record *rec, char *err, size_t errlen) {
    if (pl->src) return ds_source_next_record(pl->src, &pl->src_index, pl->src_max_record, rec, err, errlen);
    return ds_reader_next(pl->rd, rec, err, errlen);
}

static int skip_records(ds_pipeline *pl, ds_batch *b) {
    while (pl->skip) {
        ds_record rec;
        int r = next_record(pl, &rec, b->errmsg, sizeof b->errmsg);
        if (r <= 0) {
            if (r == 0)
                snprintf(b->errmsg, sizeof b->errmsg,
                         "the inputs have fewer records than the checkpoint "
                         "says were processed; they changed: delete the output folder and build again");
            else if (!b->errmsg[0]) snprintf(b->errmsg, sizeof b->errmsg, "%s", ds_strerror(r));
            b->fatal = b->eof = 1;
            b->rc = r == 0 ? DS_ERR_IO : r;
            return -1;
        }
        pl->skip--;
    }
    return 0;
}

/* The text bytes batch number pl->n_filled may hold. Parquet / Arrow IPC
 * input fills its first four batches smaller (2, 4, 8, 16 MiB, then
 * max_bytes): such a reader decodes a whole page or record batch at once,
 * and a file's first pages can hold tens of MB, so a full first batch kept
 * every worker idle while the reader alone decoded ~32 MB (0.1 s of CPU on
 * the shared corpus, 0.3 s of wall on a loaded machine; docs/reader.md,
 * Speed). Output never depends on where batches end. */
static uint64_t batch_cap(ds_pipeline *pl) {
    uint64_t cap = pl->max_bytes;
    if (pl->n_filled < 4 && pl->rd && ds_reader_columnar(pl->rd)) {
        uint64_t ramp = ((uint64_t)2 << 20) << pl->n_filled;
        if (ramp < cap) cap = ramp;
    }
    pl->n_filled++;
    return cap;
}

static void fill_batch(ds_pipeline *pl, ds_batch *b) {
    b->n = 0;
    b->used = 0;
    b->eof = 0;
    b->fatal = 0;
    b->rc = DS_OK;
    b->raw_bytes = 0;
    if (!pl->rd && !pl->src) {
        b->eof = 1;
        return;
    }
    if (skip_records(pl, b)) return;
    uint64_t cap = batch_cap(pl);
    while (b->n < pl->max_docs && b->used < cap) {
        ds_record rec;
        b->errmsg[0] = 0;
        int r = next_record(pl, &rec, b->errmsg, sizeof b->errmsg);
        if (r <= 0) {
            b->eof = 1;
            b->fatal = r < 0;
            b->rc = r;
            if (r < 0 && !b->errmsg[0]) snprintf(b->errmsg, sizeof b->errmsg, "%s", ds_strerror(r));
            return;
        }
        if (rec.status != DS_REC_OK && !pl->keep_bad) {
            pl->skipped++;
            if (pl->on_bad) pl->on_bad(&rec, pl->user);
            continue;
        }
        int keep_text = rec.text && (rec.status == DS_REC_OK || pl->keep_bad_text);
        size_t len = keep_text ? rec.len : 0, off = b->used; /* by default never a bad record's payload */
        ds_batch_rec *br = push_rec(b);
        if (!br) goto oom;
        if (b->used == 0 && pl->take_text_min && len >= pl->take_text_min && pl->rd) {
            /* a large document first in the batch: swap buffers with the
             * reader rather than copy it into fresh pages */
            long long at = ds_reader_take_text(pl->rd, &rec, &b->arena, &b->cap);
            if (at >= 0) {
                off = (size_t)at;
                b->used = (size_t)at + len;
            } else if (arena_append(&b->arena, &b->cap, &b->used, rec.text, len)) {
                goto oom;
            }
        } else if (arena_append(&b->arena, &b->cap, &b->used, rec.text, len)) {
            goto oom;
        }
        br->off = off;
        br->len = len;
        br->has_text = keep_text;
        br->line = rec.line;
        br->offset = rec.offset;
        br->index = rec.index;
        br->record_bytes = rec.record_bytes;
        br->file = rec.file;
        br->status = rec.status;
        br->flags = rec.flags;
        br->detail_off = (size_t)-1;
        if (pl->keep_bad && rec.detail) {
            size_t at = b->used;
            if (arena_append(&b->arena, &b->cap, &b->used, rec.detail, strlen(rec.detail) + 1)) goto oom;
            br->detail_off = at;
        }
        b->raw_bytes += rec.record_bytes;
        continue;
    oom:
        if (pl->keep_bad) snprintf(b->errmsg, sizeof b->errmsg, "out of memory");
        else snprintf(b->errmsg, sizeof b->errmsg, "out of memory (document of %zu bytes)", len);
        b->fatal = b->eof = 1;
        b->rc = DS_ERR_NOMEM;
        return;
    }
}

static void *reader_main(void *arg) {
    ds_pipeline *pl = arg;
    for (unsigned k = 0;; k ^= 1) {
        if (ds_handoff_wait_free(&pl->h, k)) return NULL; /* the consumer gave up */
        fill_batch(pl, &pl->slot[k]);
        int last = pl->slot[k].eof;
        ds_handoff_publish(&pl->h, k);
        if (last) return NULL;
    }
}

int ds_pipeline_start(ds_pipeline *pl) {
    ds_handoff_init(&pl->h);
    pl->inited = 1;
    pl->k = 0;
    if (pthread_create(&pl->thread, NULL, reader_main, pl) != 0) return DS_ERR_INTERNAL;
    pl->started = 1;
    return DS_OK;
}

ds_batch *ds_pipeline_next(ds_pipeline *pl) {
    ds_handoff_wait_full(&pl->h, pl->k); /* the reader always publishes, eof included */
    return &pl->slot[pl->k];
}

void ds_pipeline_release(ds_pipeline *pl) {
    ds_handoff_release(&pl->h, pl->k);
    pl->k ^= 1;
}

void ds_pipeline_end(ds_pipeline *pl) {
    if (pl->started) {
        ds_handoff_stop(&pl->h); /* after the last batch the reader has returned: stop is harmless */
        pthread_join(pl->thread, NULL);
        pl->started = 0;
    }
    if (pl->inited) ds_handoff_destroy(&pl->h);
    pl->inited = 0;
    for (int k = 0; k < 2; k++) {
        free(pl->slot[k].arena);
        free(pl->slot[k].recs);
        pl->slot[k].arena = NULL;
        pl->slot[k].recs = NULL;
    }
}

/* ------------------------------------------------------------ workers */
typedef struct {
    void (*fn)(void *ctx, int t, size_t i);
    void *ctx;
    size_t n;
    atomic_size_t next;
    atomic_int *stop;
} pfor;

typedef struct {
    pfor *p;
    int t;
} pfor_arg;

static void *pfor_main(void *arg) {
    pfor_arg *a = arg;
    pfor *p = a->p;
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n || (p->stop && atomic_load(p->stop))) break;
        p->fn(p->ctx, a->t, i);
    }
    return NULL;
}

void ds_parallel_for(size_t n, int threads, void (*fn)(void *ctx, int t, size_t i), void *ctx, atomic_int *stop) {
    pfor p = {.fn = fn, .ctx = ctx, .n = n, .stop = stop};
    atomic_init(&p.next, 0);
    pthread_t th[256];
    pfor_arg args[256];
    if (threads > 256) threads = 256;
    if (threads < 1) threads = 1;
    int started = 0;
    for (int t = 1; t < threads; t++) {
        args[t].p = &p;
        args[t].t = t;
        if (pthread_create(&th[t], NULL, pfor_main, &args[t]) != 0) break;
        started++;
    }
    args[0].p = &p;
    args[0].t = 0;
    pfor_main(&args[0]);
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
}

int ds_ncpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

double ds_now(void) { return mc_now_s(); }

double ds_thread_cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
