/* loader.c - background micro-batch loader over a row source (see tr.h).
 *
 * One producer thread fills a ring of nbuf host buffers in stream order; the
 * consumer takes them in the same order. The stream is a pure function of
 * (seed, start_row, rows_per_step, micro_rows, seq_len): the row visited at
 * loader position p is tr_row_at(p, n_train, seed), a per-epoch keyed
 * permutation (train/row_order.c), so resuming at a saved position replays
 * exactly the rows an uninterrupted run would see. */
#include "mks_common.h"
#include "tr.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ batches */
static size_t al64(size_t x) { return (x + 63) & ~(size_t)63; }

size_t tr_loader_buffer_bytes(int micro_rows, int seq_len) {
    size_t n = (size_t)micro_rows * (size_t)seq_len;
    return 4 * al64(n * 4) + al64(n);
}

static void batch_carve(tr_batch *b, void *mem, int rows, int T) {
    size_t n = (size_t)rows * (size_t)T;
    char *p = mem;
    b->inputs = (uint32_t *)p;
    p += al64(n * 4);
    b->targets = (int32_t *)p;
    p += al64(n * 4);
    b->pos = (int32_t *)p;
    p += al64(n * 4);
    b->seg = (int32_t *)p;
    p += al64(n * 4);
    b->tmask = (uint8_t *)p;
    b->rows = rows;
    b->T = T;
}

int tr_batch_alloc(tr_batch *b, int rows, int T) {
    memset(b, 0, sizeof *b);
    void *m = aligned_alloc(64, tr_loader_buffer_bytes(rows, T));
    if (!m) return TR_ERR_NOMEM;
    batch_carve(b, m, rows, T);
    return TR_OK;
}

void tr_batch_free(tr_batch *b) {
    if (b && b->inputs) free(b->inputs);
    if (b) memset(b, 0, sizeof *b);
}

/* Fill row r of b from source row (tok/pos/mask of row_len entries). */
static void fill_one(tr_batch *b, int r, int T, int row_len, int doc_mask, int has_pos, const uint32_t *tok,
                     const uint32_t *pos, const uint8_t *mask) {
    size_t o = (size_t)r * (size_t)T;
    int32_t seg = 0, start = 0;
    for (int j = 0; j < T; j++) {
        b->inputs[o + j] = tok[j];
        int m = (j + 1 < row_len) ? (mask ? mask[j + 1] != 0 : 1) : 0;
        b->targets[o + j] = m ? (int32_t)tok[j + 1] : -1;
        b->tmask[o + j] = (uint8_t)m;
        b->n_targets += (uint64_t)m;
        if (doc_mask && has_pos && j > 0 && pos[j] == 0) {
            seg++;
            start = j;
        }
        b->pos[o + j] = j - start;
        b->seg[o + j] = seg;
    }
}

/* Read row i of a split and check what the model will index with it: every
 * id < vocab_size (the shard reader checks this and the row's metadata
 * against its header, as `mkshards verify` does; in-memory rows are checked
 * here). On failure src->read_err[split] names the file, the row and why. */
static int read_checked(tr_rows *src, int split, uint64_t i, uint32_t *st, uint32_t *sp, uint8_t *sm) {
    char where[384], why[400] = "";
    int rc = src->read_row(src->ctx, split, i, st, sp, sm, why, sizeof why);
    int bad = -1;
    if (rc == TR_OK)
        for (int j = 0; j < src->row_len && bad < 0; j++)
            if (st[j] >= src->vocab_size) bad = j;
    if (rc == TR_OK && bad < 0) return TR_OK;
    if (src->where) src->where(src->ctx, split, i, where, sizeof where);
    else snprintf(where, sizeof where, "%s row %llu", split == TR_SPLIT_VAL ? "val" : "train", (unsigned long long)i);
    if (bad >= 0) {
        snprintf(src->read_err[split], sizeof src->read_err[split],
                 "%s: token %d is id %u, outside the vocabulary of %u ids (corrupt or foreign shard)", where, bad,
                 st[bad], src->vocab_size);
        return TR_ERR_CORRUPT;
    }
    /* where (up to 383 bytes) and why (up to 399) may not both fit: the end
     * of why is cut, marked "..." */
    char *e = src->read_err[split];
    size_t cap = sizeof src->read_err[split];
    if (snprintf(e, cap, "%s: %s%s%s", where, tr_strerror(rc), why[0] ? ": " : "", why) >= (int)cap)
        memcpy(e + cap - 4, "...", 4);
    return rc;
}

int tr_fill_rows(tr_rows *src, int split, uint64_t first, int rows, int T, int doc_mask, tr_batch *b, uint32_t *st,
                 uint32_t *sp, uint8_t *sm) {
    if (split != TR_SPLIT_TRAIN && split != TR_SPLIT_VAL) return TR_ERR_ARG;
    uint64_t n = src->n_rows[split];
    if (n == 0 || T > src->row_len) return TR_ERR_DATA;
    b->rows = rows;
    b->T = T;
    b->n_targets = 0;
    for (int r = 0; r < rows; r++) {
        int rc = read_checked(src, split, (first + (uint64_t)r) % n, st, sp, sm);
        if (rc) return rc;
        fill_one(b, r, T, src->row_len, doc_mask, src->has_pos, st, sp, sm);
    }
    return TR_OK;
}

/* ------------------------------------------------------------ loader */
typedef struct {
    tr_batch b;
    void *mem;
} slot;

struct tr_loader {
    tr_rows *src;
    tr_loader_opts o;
    int nbuf;
    slot *slots;
    uint32_t *st, *sp;
    uint8_t *sm;
    pthread_t thr;
    int thr_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_prod, cv_cons;
    uint64_t head; /* batches produced */
    uint64_t tail; /* batches released */
    int holding;   /* consumer holds batch `tail` */
    int stop;
    int err;
    uint64_t pos; /* rows consumed by released batches */
};

void tr_loader_opts_init(tr_loader_opts *o) {
    memset(o, 0, sizeof *o);
    o->nbuf = 2;
    o->shuffle = 1;
}

static void *def_alloc(size_t n, void *u) {
    (void)u;
    return aligned_alloc(64, al64(n));
}
static void def_free(void *p, void *u) {
    (void)u;
    free(p);
}

/* Geometry of the k-th micro-batch since start: step, micro index, rows,
 * loader position of its first row. */
static void geometry(const tr_loader *l, uint64_t k, uint64_t *step, int *micro, int *n_micro, int *rows,
                     uint64_t *first) {
    int B = l->o.micro_rows, R = l->o.rows_per_step;
    int nm = (R + B - 1) / B;
    uint64_t s = k / (uint64_t)nm;
    int m = (int)(k % (uint64_t)nm);
    *step = l->o.start_row / (uint64_t)R + s;
    *micro = m;
    *n_micro = nm;
    *rows = (m == nm - 1) ? R - m * B : B;
    *first = l->o.start_row + s * (uint64_t)R + (uint64_t)m * (uint64_t)B;
}

static void *producer(void *arg) {
    tr_loader *l = arg;
    uint64_t n = l->src->n_rows[TR_SPLIT_TRAIN];
    for (uint64_t k = 0;; k++) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && l->head - l->tail >= (uint64_t)l->nbuf) pthread_cond_wait(&l->cv_prod, &l->mu);
        int stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop) break;
        slot *s = &l->slots[k % (uint64_t)l->nbuf];
        tr_batch *b = &s->b;
        int rows, micro, nm;
        uint64_t step, first;
        geometry(l, k, &step, &micro, &nm, &rows, &first);
        batch_carve(b, s->mem, rows, l->o.seq_len);
        b->n_targets = 0;
        b->step = step;
        b->micro = micro;
        b->n_micro = nm;
        b->first_row = first;
        int rc = TR_OK;
        for (int r = 0; r < rows && rc == TR_OK; r++) {
            uint64_t row = tr_row_at(first + (uint64_t)r, n, l->o.seed, l->o.shuffle);
            rc = read_checked(l->src, TR_SPLIT_TRAIN, row, l->st, l->sp, l->sm);
            if (rc == TR_OK)
                fill_one(b, r, l->o.seq_len, l->src->row_len, l->o.doc_mask, l->src->has_pos, l->st, l->sp, l->sm);
        }
        pthread_mutex_lock(&l->mu);
        if (rc) l->err = rc;
        else l->head++;
        pthread_cond_broadcast(&l->cv_cons);
        pthread_mutex_unlock(&l->mu);
        if (rc) break;
    }
    return NULL;
}

int tr_loader_open(tr_rows *rows, const tr_loader_opts *o, tr_loader **out) {
    *out = NULL;
    if (!rows || !o || o->seq_len < 1 || o->micro_rows < 1 || o->rows_per_step < 1) return TR_ERR_ARG;
    if (rows->n_rows[TR_SPLIT_TRAIN] == 0 || o->seq_len > rows->row_len) return TR_ERR_DATA;
    tr_loader *l = calloc(1, sizeof *l);
    if (!l) return TR_ERR_NOMEM;
    l->src = rows;
    l->o = *o;
    if (!l->o.alloc || !l->o.free) {
        l->o.alloc = def_alloc;
        l->o.free = def_free;
    }
    if (l->o.micro_rows > l->o.rows_per_step) l->o.micro_rows = l->o.rows_per_step;
    l->nbuf = o->nbuf >= 2 ? o->nbuf : 2;
    l->pos = o->start_row;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_prod, NULL);
    pthread_cond_init(&l->cv_cons, NULL);
    l->slots = calloc((size_t)l->nbuf, sizeof *l->slots);
    size_t rl = (size_t)rows->row_len;
    l->st = malloc(rl * 4);
    l->sp = malloc(rl * 4);
    l->sm = malloc(rl);
    if (!l->slots || !l->st || !l->sp || !l->sm) {
        tr_loader_close(l);
        return TR_ERR_NOMEM;
    }
    size_t bytes = tr_loader_buffer_bytes(l->o.micro_rows, l->o.seq_len);
    for (int i = 0; i < l->nbuf; i++) {
        l->slots[i].mem = l->o.alloc(bytes, l->o.alloc_user);
        if (!l->slots[i].mem) {
            tr_loader_close(l);
            return TR_ERR_NOMEM;
        }
    }
    if (pthread_create(&l->thr, NULL, producer, l)) {
        tr_loader_close(l);
        return TR_ERR_INTERNAL;
    }
    l->thr_started = 1;
    *out = l;
    return TR_OK;
}

int tr_loader_next(tr_loader *l, const tr_batch **b, double *wait_s) {
    *b = NULL;
    double t0 = mc_now_s(), w = 0;
    pthread_mutex_lock(&l->mu);
    if (l->holding) {
        pthread_mutex_unlock(&l->mu);
        return TR_ERR_ARG; /* release the previous batch first */
    }
    if (l->head == l->tail && !l->err) {
        while (l->head == l->tail && !l->err) pthread_cond_wait(&l->cv_cons, &l->mu);
        w = mc_now_s() - t0;
    }
    int rc = TR_OK;
    if (l->head == l->tail) rc = l->err;
    else {
        *b = &l->slots[l->tail % (uint64_t)l->nbuf].b;
        l->holding = 1;
    }
    pthread_mutex_unlock(&l->mu);
    if (wait_s) *wait_s = w;
    return rc;
}

void tr_loader_release(tr_loader *l) {
    pthread_mutex_lock(&l->mu);
    if (l->holding) {
        l->pos += (uint64_t)l->slots[l->tail % (uint64_t)l->nbuf].b.rows;
        l->tail++;
        l->holding = 0;
        pthread_cond_broadcast(&l->cv_prod);
    }
    pthread_mutex_unlock(&l->mu);
}

uint64_t tr_loader_position(const tr_loader *l) { return l->pos; }

void tr_loader_close(tr_loader *l) {
    if (!l) return;
    if (l->thr_started) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->cv_prod);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thr, NULL);
    }
    if (l->slots)
        for (int i = 0; i < l->nbuf; i++)
            if (l->slots[i].mem) l->o.free(l->slots[i].mem, l->o.alloc_user);
    free(l->slots);
    free(l->st);
    free(l->sp);
    free(l->sm);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_prod);
    pthread_cond_destroy(&l->cv_cons);
    free(l);
}
