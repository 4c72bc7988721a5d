/* pipeline_internal.h - the thread pipeline ds_build and ds_encode share
 * (not public API):
 *
 *   reader thread --batch--> caller: workers (ds_parallel_for) --> in order
 *
 * A reader thread fills two batches in turn (double buffering through a
 * handoff) while the caller processes the other one; the caller runs the
 * per-document work of a batch on `threads` threads and then consumes the
 * results in input order (packing + writing for build, handing ids to a
 * writer thread for encode), so the output never depends on the thread
 * count. */
#ifndef DS_PIPELINE_INTERNAL_H
#define DS_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ds.h"

/* ---- handoff: two slots passed between a producer and a consumer thread.
 * Slot k is "full" when the producer filled it and the consumer has not yet
 * released it. */
typedef struct {
    int full[2];
    int stop; /* the other side gave up: waits return at once */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} ds_handoff;

void ds_handoff_init(ds_handoff *h);
void ds_handoff_destroy(ds_handoff *h);
/* Producer: wait until slot k is free. 0 = go ahead, -1 = stopped. */
int ds_handoff_wait_free(ds_handoff *h, unsigned k);
/* Producer: slot k is filled. */
void ds_handoff_publish(ds_handoff *h, unsigned k);
/* Consumer: wait until slot k is filled. 0 = filled, -1 = stopped first. */
int ds_handoff_wait_full(ds_handoff *h, unsigned k);
/* Consumer: slot k may be refilled. */
void ds_handoff_release(ds_handoff *h, unsigned k);
/* Either side: make every wait return (error paths). */
void ds_handoff_stop(ds_handoff *h);

/* ---- batches of records */
typedef struct {
    size_t off, len; /* text in the batch arena (len 0 when has_text is 0) */
    uint64_t line, offset, index, record_bytes;
    const char *file;
    int status; /* ds_rec_status */
    uint32_t flags;
    int has_text;      /* the reader delivered text for it */
    size_t detail_off; /* keep_bad: the reader's detail, NUL-terminated in the arena; (size_t)-1: none */
} ds_batch_rec;

typedef struct {
    uint8_t *arena;
    size_t cap, used;
    ds_batch_rec *recs;
    size_t n, cap_recs;
    uint64_t raw_bytes;
    int eof;   /* no batch after this one */
    int fatal; /* reader error: message in errmsg, status in rc, contents invalid */
    int rc;
    char errmsg[512];
} ds_batch;

typedef struct {
    /* set by the caller before ds_pipeline_start */
    ds_reader *rd;         /* NULL (and no src): one empty, final batch */
    const ds_source *src;  /* instead of rd: records from a callback (source.c; take_text_min does not apply) */
    size_t src_max_record; /* src: the reader's max_record_bytes (0: its default) */
    uint64_t max_bytes;    /* text per batch */
    size_t max_docs;       /* records per batch */
    uint64_t skip;         /* records read and dropped before the first batch (resume) */
    int keep_bad;          /* 1: records with a bad status are kept (without their text unless
                             keep_bad_text); 0: skipped, see on_bad */
    int keep_bad_text;     /* keep_bad: keep the text the reader delivered for a bad record too */
    size_t take_text_min;  /* > 0: a document of at least this many bytes first in a batch swaps
                             buffers with the reader instead of being copied */
    void (*on_bad)(const ds_record *rec, void *user); /* keep_bad 0: on the reader thread */
    void *user;
    uint64_t skipped; /* keep_bad 0: records skipped */
    /* internal */
    ds_batch slot[2];
    ds_handoff h;
    pthread_t thread;
    int started, inited;
    unsigned k;
    uint64_t src_index; /* src: items pulled so far */
    unsigned n_filled;  /* batches filled so far (batch_cap) */
} ds_pipeline;

/* Start the reader thread. DS_OK or DS_ERR_INTERNAL ("cannot start the reader thread"). */
int ds_pipeline_start(ds_pipeline *pl);
/* The next batch in input order (the reader always delivers one, eof or
 * fatal included). Valid until ds_pipeline_release. */
ds_batch *ds_pipeline_next(ds_pipeline *pl);
/* The batch from ds_pipeline_next may be refilled. */
void ds_pipeline_release(ds_pipeline *pl);
/* Stop the reader (if running), wait for it, free the batches. */
void ds_pipeline_end(ds_pipeline *pl);

/* The next record of a ds_source (source.c), as ds_reader_next: 1, 0 at the
 * end, <0 (err set) when the source stops. *index counts the items. */
int ds_source_next_record(const ds_source *s, uint64_t *index, size_t max_record_bytes, ds_record *rec, char *err,
                          size_t errlen);

/* ---- workers: fn(ctx, t, i) for i in [0, n) on `threads` threads (the
 * caller is thread 0); stops early once *stop (if given) is nonzero. */
void ds_parallel_for(size_t n, int threads, void (*fn)(void *ctx, int t, size_t i), void *ctx, atomic_int *stop);
/* Online CPUs (>= 1). */
int ds_ncpus(void);
/* Monotonic seconds; CPU seconds of the calling thread. */
double ds_now(void);
double ds_thread_cpu(void);

#endif
