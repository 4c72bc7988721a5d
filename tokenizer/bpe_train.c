/* bpe_train.c - byte-level BPE training (see tk_train.h, docs/bpe-training.md). */
#include "tk_train.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mks_common.h"

#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

/* ------------------------------------------------------------------ utils */

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return TK_OK;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return TK_ERR_NOMEM;
    *p = np;
    *cap = nc;
    return TK_OK;
}

/* --------------------------------------------------------- piece hash map */

typedef struct {
    uint64_t h;     /* full hash */
    uint64_t count; /* 0: empty slot */
    uint64_t off;   /* into arena */
    uint32_t len;
} pent;

typedef struct {
    pent *t;
    size_t cap, n; /* cap is a power of two */
    uint8_t *arena;
    size_t alen, acap;
} pmap;

static void pmap_free(pmap *m) {
    free(m->t);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

static void pmap_clear(pmap *m) {
    if (m->t) memset(m->t, 0, m->cap * sizeof *m->t);
    m->n = 0;
    m->alen = 0;
}

static int pmap_rehash(pmap *m, size_t ncap) {
    pent *nt = calloc(ncap, sizeof *nt);
    if (!nt) return TK_ERR_NOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->t[i].count) continue;
        size_t j = (size_t)m->t[i].h & (ncap - 1);
        while (nt[j].count) j = (j + 1) & (ncap - 1);
        nt[j] = m->t[i];
    }
    free(m->t);
    m->t = nt;
    m->cap = ncap;
    return TK_OK;
}

static int pmap_add_h(pmap *m, const uint8_t *s, uint32_t len, uint64_t h, uint64_t count) {
    if ((m->n + 1) * 4 >= m->cap * 3) {
        int rc = pmap_rehash(m, m->cap ? m->cap * 2 : 1024);
        if (rc) return rc;
    }
    size_t j = (size_t)h & (m->cap - 1);
    for (;;) {
        pent *e = &m->t[j];
        if (!e->count) break;
        if (e->h == h && e->len == len && memcmp(m->arena + e->off, s, len) == 0) {
            e->count += count;
            return TK_OK;
        }
        j = (j + 1) & (m->cap - 1);
    }
    int rc = grow((void **)&m->arena, &m->acap, m->alen + len, 1);
    if (rc) return rc;
    memcpy(m->arena + m->alen, s, len);
    pent *e = &m->t[j];
    e->h = h;
    e->count = count;
    e->off = m->alen;
    e->len = len;
    m->alen += len;
    m->n++;
    return TK_OK;
}

static int pmap_add(pmap *m, const uint8_t *s, uint32_t len, uint64_t count) {
    return pmap_add_h(m, s, len, XXH3_64bits(s, len), count);
}

/* ---------------------------------------------------------- piece counts */

struct tk_piece_counts {
    tk_train_opts o;
    pmap global;
    uint64_t total_bytes;
    int threads;
    pmap *local; /* one per thread, reused between batches */
};

void tk_train_opts_init(tk_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->pattern = TK_PAT_O200K;
    o->max_piece_bytes = TK_TRAIN_DEFAULT_MAX_PIECE;
}

int tk_piece_counts_create(const tk_train_opts *o, tk_piece_counts **out) {
    if (!o || !out) return TK_ERR_ARG;
    *out = NULL;
    tk_piece_counts *pc = calloc(1, sizeof *pc);
    if (!pc) return TK_ERR_NOMEM;
    pc->o = *o;
    if (pc->o.pattern == TK_PAT_NONE) pc->o.pattern = TK_PAT_O200K;
    if (!pc->o.max_piece_bytes) pc->o.max_piece_bytes = TK_TRAIN_DEFAULT_MAX_PIECE;
    int t = o->threads;
    if (t <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        t = n > 0 ? (int)n : 1;
    }
    if (t > 256) t = 256;
    pc->threads = t;
    pc->local = calloc((size_t)t, sizeof *pc->local);
    if (!pc->local) {
        free(pc);
        return TK_ERR_NOMEM;
    }
    *out = pc;
    return TK_OK;
}

void tk_piece_counts_free(tk_piece_counts *pc) {
    if (!pc) return;
    pmap_free(&pc->global);
    for (int i = 0; i < pc->threads; i++) pmap_free(&pc->local[i]);
    free(pc->local);
    free(pc);
}

/* Add a piece, cut into chunks of at most maxp bytes at UTF-8 boundaries. */
static int add_piece_chunked(pmap *m, uint32_t maxp, const uint8_t *p, size_t len, uint64_t count) {
    while (len > maxp) {
        size_t cut = maxp;
        /* back off over continuation bytes (at most 3) so chunks keep characters whole */
        size_t k = cut;
        while (k > 0 && cut - k < 3 && (p[k] & 0xC0) == 0x80) k--;
        if (k > 0 && (p[k] & 0xC0) != 0x80) cut = k;
        int rc = pmap_add(m, p, (uint32_t)cut, count);
        if (rc) return rc;
        p += cut;
        len -= cut;
    }
    if (!len) return TK_OK;
    return pmap_add(m, p, (uint32_t)len, count);
}

int tk_piece_counts_add_piece(tk_piece_counts *pc, const uint8_t *piece, size_t len, uint64_t count) {
    if (!pc || (!piece && len)) return TK_ERR_ARG;
    if (!len || !count) return TK_OK;
    pc->total_bytes += (uint64_t)len * count;
    return add_piece_chunked(&pc->global, pc->o.max_piece_bytes, piece, len, count);
}

size_t tk_piece_counts_distinct(const tk_piece_counts *pc) { return pc ? pc->global.n : 0; }
uint64_t tk_piece_counts_total_bytes(const tk_piece_counts *pc) { return pc ? pc->total_bytes : 0; }

typedef struct {
    tk_piece_counts *pc;
    pmap *m;
    const tk_span *docs;
    size_t lo, hi;
    int rc;
} count_job;

static int count_piece_cb(void *user, const uint8_t *piece, size_t len) {
    count_job *j = user;
    return add_piece_chunked(j->m, j->pc->o.max_piece_bytes, piece, len, 1);
}

static void *count_thread(void *arg) {
    count_job *j = arg;
    for (size_t i = j->lo; i < j->hi && !j->rc; i++) {
        if (!j->docs[i].len) continue;
        j->rc = tk_pretokenize(j->pc->o.pattern, j->docs[i].text, j->docs[i].len, count_piece_cb, j);
    }
    return NULL;
}

static int merge_into_global(tk_piece_counts *pc, pmap *m) {
    for (size_t i = 0; i < m->cap; i++) {
        const pent *e = &m->t[i];
        if (!e->count) continue;
        int rc = pmap_add_h(&pc->global, m->arena + e->off, e->len, e->h, e->count);
        if (rc) return rc;
    }
    return TK_OK;
}

int tk_piece_counts_add_docs(tk_piece_counts *pc, const tk_span *docs, size_t n) {
    if (!pc || (!docs && n)) return TK_ERR_ARG;
    if (!n) return TK_OK;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += docs[i].len;
    pc->total_bytes += total;
    int t = pc->threads;
    if ((size_t)t > n) t = (int)n;
    if (total < (1u << 16)) t = 1;
    if (t == 1) { /* count straight into the global map */
        count_job j = {pc, &pc->global, docs, 0, n, 0};
        count_thread(&j);
        return j.rc;
    }
    count_job jobs[256];
    pthread_t tids[256];
    /* contiguous ranges balanced by bytes */
    size_t lo = 0;
    uint64_t acc = 0;
    for (int k = 0; k < t; k++) {
        uint64_t goal = total * (uint64_t)(k + 1) / (uint64_t)t;
        size_t hi = lo;
        while (hi < n && (acc < goal || k == t - 1)) acc += docs[hi++].len;
        /* thread 0 counts straight into the global map; the others into
         * their own maps, added in afterwards (sums: order-independent) */
        if (k) pmap_clear(&pc->local[k]);
        jobs[k] = (count_job){pc, k ? &pc->local[k] : &pc->global, docs, lo, hi, 0};
        lo = hi;
    }
    int started = 0, rc = TK_OK;
    for (int k = 1; k < t; k++) {
        if (pthread_create(&tids[k], NULL, count_thread, &jobs[k]) != 0) {
            rc = TK_ERR_THREAD;
            break;
        }
        started = k;
    }
    count_thread(&jobs[0]);
    for (int k = 1; k <= started; k++) pthread_join(tids[k], NULL);
    if (rc) return rc;
    for (int k = 0; k < t; k++) {
        if (jobs[k].rc) return jobs[k].rc;
    }
    /* merge in thread order (sums: the result does not depend on it anyway) */
    for (int k = 1; k < t; k++) {
        rc = merge_into_global(pc, &pc->local[k]);
        if (rc) return rc;
        if (pc->local[k].cap > (1u << 22)) pmap_free(&pc->local[k]); /* bound memory */
    }
    return TK_OK;
}

/* ------------------------------------------------------------ merge state */

typedef struct {
    uint64_t key;
    uint32_t idx; /* UINT32_MAX: empty */
} pslot;

typedef struct {
    uint32_t *w;
    uint32_t n, cap;
} wlist;

typedef struct {
    uint64_t count;
    uint32_t pair;
} hent;

typedef struct {
    uint32_t a, b;
    uint32_t stamp;
    wlist w;
    int64_t cnt;
} prec; /* one pair: 40 bytes, one cache line with its neighbours */

typedef struct {
    int64_t dec, inc;
    uint32_t stamp, pid;
} nbacc; /* per-merge deltas for one neighbour symbol */

typedef struct {
    uint32_t nb; /* neighbour symbol, top bit: right side */
    uint32_t w;
} nbev;

/* Neighbour accumulators of one scanning thread, indexed by symbol id. */
typedef struct {
    nbacc *left, *right;
    uint32_t *lx, *ry;
    size_t nlx, nry;
    nbev *ev;
    size_t nev, evcap;
    int rc;
} scanctx;

typedef struct {
    uint64_t off; /* into syms */
    uint64_t cnt;
    uint32_t len;
} wrec;

typedef struct {
    const tk_train_opts *o;
    /* tokens (symbol id == rank) */
    uint8_t *tarena;
    size_t talen, tacap;
    uint64_t *toff;
    uint32_t *tlen;
    size_t ntok, ntokcap;
    pmap tokmap; /* bytes -> rank (count field = rank + 1) */
    /* words */
    uint32_t *syms;
    wrec *words;
    size_t nwords;
    /* pairs */
    pslot *ptab;
    size_t pcap, npairs, pairscap;
    prec *pr;
    /* heap */
    hent *heap;
    size_t hn, hcap;
    /* touched pairs of the current merge */
    uint32_t *touched;
    size_t ntouched, touchedcap;
    uint32_t stamp;
    uint64_t max_tok;
    /* per-thread scan contexts (sc[0]: the calling thread) */
    scanctx *sc;
    int nsc;
    /* worker pool for merges whose word list is long */
    pthread_t *tid;
    int nthreads; /* workers started */
    pthread_mutex_t mu;
    pthread_cond_t cv_go, cv_done;
    uint64_t gen;
    int pending, quit;
    const uint32_t *job_w;
    uint32_t job_n, job_A, job_B, job_C;
} trainer;

static inline uint64_t pkey(uint32_t a, uint32_t b) { return ((uint64_t)a << 32) | b; }
static inline size_t phash(uint64_t k, size_t cap) { return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1); }

static int ptab_rehash(trainer *T, size_t ncap) {
    pslot *nt = malloc(ncap * sizeof *nt);
    if (!nt) return TK_ERR_NOMEM;
    for (size_t i = 0; i < ncap; i++) nt[i].idx = UINT32_MAX;
    for (size_t i = 0; i < T->pcap; i++) {
        if (T->ptab[i].idx == UINT32_MAX) continue;
        size_t j = phash(T->ptab[i].key, ncap);
        while (nt[j].idx != UINT32_MAX) j = (j + 1) & (ncap - 1);
        nt[j] = T->ptab[i];
    }
    free(T->ptab);
    T->ptab = nt;
    T->pcap = ncap;
    return TK_OK;
}

/* Find or create the pair (a,b); *idx receives its index. */
static int pair_get(trainer *T, uint32_t a, uint32_t b, uint32_t *idx) {
    if ((T->npairs + 1) * 4 >= T->pcap * 3) {
        int rc = ptab_rehash(T, T->pcap ? T->pcap * 2 : 4096);
        if (rc) return rc;
    }
    uint64_t k = pkey(a, b);
    size_t j = phash(k, T->pcap);
    while (T->ptab[j].idx != UINT32_MAX) {
        if (T->ptab[j].key == k) {
            *idx = T->ptab[j].idx;
            return TK_OK;
        }
        j = (j + 1) & (T->pcap - 1);
    }
    if (T->npairs >= UINT32_MAX - 1) return TK_ERR_NOMEM;
    if (T->npairs == T->pairscap) {
        size_t nc = T->pairscap ? T->pairscap * 2 : 4096;
        prec *np = realloc(T->pr, nc * sizeof *np);
        if (!np) return TK_ERR_NOMEM;
        T->pr = np;
        T->pairscap = nc;
    }
    uint32_t i = (uint32_t)T->npairs++;
    T->pr[i] = (prec){a, b, 0, {NULL, 0, 0}, 0};
    T->ptab[j].key = k;
    T->ptab[j].idx = i;
    *idx = i;
    return TK_OK;
}

static int pair_find(const trainer *T, uint32_t a, uint32_t b, uint32_t *idx) {
    if (!T->pcap) return 0;
    uint64_t k = pkey(a, b);
    size_t j = phash(k, T->pcap);
    while (T->ptab[j].idx != UINT32_MAX) {
        if (T->ptab[j].key == k) {
            *idx = T->ptab[j].idx;
            return 1;
        }
        j = (j + 1) & (T->pcap - 1);
    }
    return 0;
}

static inline int pair_eligible(const trainer *T, uint32_t a, uint32_t b) {
    return !T->max_tok || (uint64_t)T->tlen[a] + T->tlen[b] <= T->max_tok;
}

static int wlist_push(wlist *l, uint32_t w) {
    if (l->n && l->w[l->n - 1] == w) return TK_OK;
    if (l->n == l->cap) {
        uint32_t nc = l->cap ? l->cap * 2 : 2;
        if (nc < l->cap) return TK_ERR_NOMEM;
        uint32_t *nw = realloc(l->w, (size_t)nc * sizeof *nw);
        if (!nw) return TK_ERR_NOMEM;
        l->w = nw;
        l->cap = nc;
    }
    l->w[l->n++] = w;
    return TK_OK;
}

/* Tie-break: lexicographically smaller (left bytes, right bytes) first. */
static int bytes_cmp(const trainer *T, uint32_t x, uint32_t y) {
    if (x == y) return 0;
    uint32_t lx = T->tlen[x], ly = T->tlen[y];
    int c = memcmp(T->tarena + T->toff[x], T->tarena + T->toff[y], lx < ly ? lx : ly);
    if (c) return c;
    return lx < ly ? -1 : lx > ly ? 1 : 0;
}

/* 1 if entry x should be merged before entry y. */
static int hbetter(const trainer *T, const hent *x, const hent *y) {
    if (x->count != y->count) return x->count > y->count;
    if (x->pair == y->pair) return 0;
    int c = bytes_cmp(T, T->pr[x->pair].a, T->pr[y->pair].a);
    if (!c) c = bytes_cmp(T, T->pr[x->pair].b, T->pr[y->pair].b);
    return c < 0;
}

static void heap_down(trainer *T, size_t i) {
    hent *h = T->heap;
    size_t n = T->hn;
    hent v = h[i];
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t b = l;
        if (l + 1 < n && hbetter(T, &h[l + 1], &h[l])) b = l + 1;
        if (!hbetter(T, &h[b], &v)) break;
        h[i] = h[b];
        i = b;
    }
    h[i] = v;
}

static int heap_push(trainer *T, uint64_t count, uint32_t pair) {
    int rc = grow((void **)&T->heap, &T->hcap, T->hn + 1, sizeof *T->heap);
    if (rc) return rc;
    hent v = {count, pair};
    size_t i = T->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hbetter(T, &v, &T->heap[p])) break;
        T->heap[i] = T->heap[p];
        i = p;
    }
    T->heap[i] = v;
    return TK_OK;
}

static hent heap_pop(trainer *T) {
    hent top = T->heap[0];
    T->heap[0] = T->heap[--T->hn];
    if (T->hn) heap_down(T, 0);
    return top;
}

static int tok_add(trainer *T, const uint8_t *s, uint32_t len, uint32_t *rank) {
    uint64_t h = XXH3_64bits(s, len);
    /* lookup */
    if (T->tokmap.cap) {
        size_t j = (size_t)h & (T->tokmap.cap - 1);
        while (T->tokmap.t[j].count) {
            const pent *e = &T->tokmap.t[j];
            if (e->h == h && e->len == len && memcmp(T->tokmap.arena + e->off, s, len) == 0) {
                *rank = (uint32_t)(e->count - 1);
                return TK_OK;
            }
            j = (j + 1) & (T->tokmap.cap - 1);
        }
    }
    int rc = pmap_add_h(&T->tokmap, s, len, h, T->ntok + 1);
    if (rc) return rc;
    rc = grow((void **)&T->toff, &T->ntokcap, T->ntok + 1, sizeof *T->toff);
    if (rc) return rc;
    uint32_t *nl = realloc(T->tlen, T->ntokcap * sizeof *nl);
    if (!nl) return TK_ERR_NOMEM;
    T->tlen = nl;
    rc = grow((void **)&T->tarena, &T->tacap, T->talen + len, 1);
    if (rc) return rc;
    memcpy(T->tarena + T->talen, s, len);
    T->toff[T->ntok] = T->talen;
    T->tlen[T->ntok] = len;
    T->talen += len;
    *rank = (uint32_t)T->ntok++;
    return TK_OK;
}

static void pool_stop(trainer *T);

static void trainer_free(trainer *T) {
    pool_stop(T);
    free(T->tarena);
    free(T->toff);
    free(T->tlen);
    pmap_free(&T->tokmap);
    free(T->syms);
    free(T->words);
    free(T->ptab);
    if (T->pr)
        for (size_t i = 0; i < T->npairs; i++) free(T->pr[i].w.w);
    free(T->pr);
    free(T->heap);
    free(T->touched);
    if (T->sc)
        for (int k = 0; k < T->nsc; k++) {
            free(T->sc[k].left);
            free(T->sc[k].right);
            free(T->sc[k].lx);
            free(T->sc[k].ry);
            free(T->sc[k].ev);
        }
    free(T->sc);
}

static void touch(trainer *T, uint32_t p) {
    if (T->pr[p].stamp == T->stamp) return;
    T->pr[p].stamp = T->stamp;
    T->touched[T->ntouched++] = p; /* capacity ensured per merge */
}

/* Rewrite words lw[lo..hi) replacing (A,B) by C; gather neighbour deltas and
 * new-pair events in S (appended; S->nlx etc. are not reset here). */
static int scan_words(trainer *T, scanctx *S, const uint32_t *lw, uint32_t lo, uint32_t hi, uint32_t A, uint32_t B,
                      uint32_t C) {
    const uint32_t stamp = T->stamp;
    for (uint32_t li = lo; li < hi; li++) {
        uint32_t w = lw[li];
        if (li + 16 < hi) __builtin_prefetch(&T->words[lw[li + 16]]);
        if (li + 4 < hi) __builtin_prefetch(T->syms + T->words[lw[li + 4]].off);
        uint32_t *s = T->syms + T->words[w].off;
        uint32_t n = T->words[w].len;
        int64_t c = (int64_t)T->words[w].cnt;
        if (S->evcap < S->nev + (size_t)n + 2) {
            int rc = grow((void **)&S->ev, &S->evcap, S->nev + (size_t)n + 2, sizeof *S->ev);
            if (rc) return rc;
        }
        uint32_t i = 0, j = 0;
        while (i < n) {
            if (i + 1 < n && s[i] == A && s[i + 1] == B) {
                if (j > 0) {
                    uint32_t x = s[j - 1];
                    nbacc *e = &S->left[x];
                    if (e->stamp != stamp) {
                        *e = (nbacc){0, 0, stamp, UINT32_MAX};
                        S->lx[S->nlx++] = x;
                    }
                    e->dec -= c;
                    e->inc += c;
                    S->ev[S->nev++] = (nbev){x, w};
                }
                if (i + 2 < n) {
                    uint32_t y = s[i + 2];
                    nbacc *e = &S->right[y];
                    if (e->stamp != stamp) {
                        *e = (nbacc){0, 0, stamp, UINT32_MAX};
                        S->ry[S->nry++] = y;
                    }
                    e->dec -= c;
                    e->inc += c;
                    S->ev[S->nev++] = (nbev){y | 0x80000000u, w};
                }
                s[j++] = C;
                i += 2;
            } else {
                s[j++] = s[i++];
            }
        }
        T->words[w].len = j;
    }
    return TK_OK;
}

static void job_range(const trainer *T, int k, uint32_t *lo, uint32_t *hi) {
    uint64_t n = T->job_n, P = (uint64_t)T->nsc;
    *lo = (uint32_t)(n * (uint64_t)k / P);
    *hi = (uint32_t)(n * (uint64_t)(k + 1) / P);
}

typedef struct {
    trainer *T;
    int k;
} wargs;

static void *merge_worker(void *arg) {
    wargs *a = arg;
    trainer *T = a->T;
    int k = a->k;
    free(a);
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&T->mu);
        while (!T->quit && T->gen == seen) pthread_cond_wait(&T->cv_go, &T->mu);
        if (T->quit) {
            pthread_mutex_unlock(&T->mu);
            return NULL;
        }
        seen = T->gen;
        pthread_mutex_unlock(&T->mu);
        scanctx *S = &T->sc[k];
        uint32_t lo, hi;
        job_range(T, k, &lo, &hi);
        S->nlx = S->nry = S->nev = 0;
        S->rc = scan_words(T, S, T->job_w, lo, hi, T->job_A, T->job_B, T->job_C);
        pthread_mutex_lock(&T->mu);
        if (--T->pending == 0) pthread_cond_signal(&T->cv_done);
        pthread_mutex_unlock(&T->mu);
    }
}

static void pool_stop(trainer *T) {
    if (!T->tid) return;
    pthread_mutex_lock(&T->mu);
    T->quit = 1;
    pthread_cond_broadcast(&T->cv_go);
    pthread_mutex_unlock(&T->mu);
    for (int k = 0; k < T->nthreads; k++) pthread_join(T->tid[k], NULL);
    free(T->tid);
    T->tid = NULL;
    T->nthreads = 0;
    pthread_mutex_destroy(&T->mu);
    pthread_cond_destroy(&T->cv_go);
    pthread_cond_destroy(&T->cv_done);
}

/* Start nsc-1 workers; on failure run single-threaded (nthreads stays 0). */
static int pool_start(trainer *T) {
    T->tid = calloc((size_t)T->nsc, sizeof *T->tid);
    if (!T->tid) return TK_ERR_NOMEM;
    pthread_mutex_init(&T->mu, NULL);
    pthread_cond_init(&T->cv_go, NULL);
    pthread_cond_init(&T->cv_done, NULL);
    for (int k = 1; k < T->nsc; k++) {
        wargs *a = malloc(sizeof *a);
        if (!a) break;
        *a = (wargs){T, k};
        if (pthread_create(&T->tid[T->nthreads], NULL, merge_worker, a) != 0) {
            free(a);
            break;
        }
        T->nthreads++;
    }
    if (T->nthreads != T->nsc - 1) { /* partial pool: give up on parallel merges */
        pool_stop(T);
        return TK_OK;
    }
    return TK_OK;
}

/* Scan list w[0..n) on all threads, then fold contexts 1.. into context 0 in
 * thread order (so events stay in word-list order). */
static int pool_run(trainer *T, const uint32_t *w, uint32_t n, uint32_t A, uint32_t B, uint32_t C) {
    pthread_mutex_lock(&T->mu);
    T->job_w = w;
    T->job_n = n;
    T->job_A = A;
    T->job_B = B;
    T->job_C = C;
    T->pending = T->nthreads;
    T->gen++;
    pthread_cond_broadcast(&T->cv_go);
    pthread_mutex_unlock(&T->mu);
    scanctx *S0 = &T->sc[0];
    uint32_t lo, hi;
    job_range(T, 0, &lo, &hi);
    S0->nlx = S0->nry = S0->nev = 0;
    int rc = scan_words(T, S0, w, lo, hi, A, B, C);
    pthread_mutex_lock(&T->mu);
    while (T->pending > 0) pthread_cond_wait(&T->cv_done, &T->mu);
    pthread_mutex_unlock(&T->mu);
    const uint32_t stamp = T->stamp;
    for (int k = 1; k < T->nsc && !rc; k++) {
        scanctx *S = &T->sc[k];
        if (S->rc) {
            rc = S->rc;
            break;
        }
        for (size_t i = 0; i < S->nlx; i++) {
            uint32_t x = S->lx[i];
            nbacc *e = &S0->left[x];
            if (e->stamp != stamp) {
                *e = (nbacc){0, 0, stamp, UINT32_MAX};
                S0->lx[S0->nlx++] = x;
            }
            e->dec += S->left[x].dec;
            e->inc += S->left[x].inc;
        }
        for (size_t i = 0; i < S->nry; i++) {
            uint32_t y = S->ry[i];
            nbacc *e = &S0->right[y];
            if (e->stamp != stamp) {
                *e = (nbacc){0, 0, stamp, UINT32_MAX};
                S0->ry[S0->nry++] = y;
            }
            e->dec += S->right[y].dec;
            e->inc += S->right[y].inc;
        }
        if (S->nev) {
            rc = grow((void **)&S0->ev, &S0->evcap, S0->nev + S->nev, sizeof *S0->ev);
            if (rc) break;
            memcpy(S0->ev + S0->nev, S->ev, S->nev * sizeof *S->ev);
            S0->nev += S->nev;
        }
    }
    return rc;
}

static void progress_line(const tk_train_opts *o, const char *phase, uint64_t done, uint64_t total, double t0) {
    if (!o->progress) return;
    double dt = mc_now_s() - t0;
    fprintf(stderr, "\r[train] %s: %llu/%llu merges, %.0f merges/s   ", phase, (unsigned long long)done,
            (unsigned long long)total, dt > 0 ? (double)done / dt : 0.0);
    fflush(stderr);
}

/* argument checks, before anything is allocated */
static int train_check_args(const tk_piece_counts *pc, const tk_train_opts *o, char *err, size_t errlen) {
    if ((uint64_t)o->vocab_size < 256 + (uint64_t)o->n_specials) {
        if (err)
            snprintf(err, errlen, "vocabulary size %u is below 256 byte tokens + %zu special tokens", o->vocab_size,
                     o->n_specials);
        return TK_ERR_ARG;
    }
    for (size_t i = 0; i < o->n_specials; i++) {
        if (!o->specials[i] || !o->specials[i][0]) {
            if (err) snprintf(err, errlen, "empty special token");
            return TK_ERR_ARG;
        }
        for (size_t k = 0; k < i; k++)
            if (!strcmp(o->specials[i], o->specials[k])) {
                if (err) snprintf(err, errlen, "special token '%s' given twice", o->specials[i]);
                return TK_ERR_ARG;
            }
    }
    if (pc->global.n == 0) {
        if (err) snprintf(err, errlen, "empty corpus: no text to train on");
        return TK_ERR_ARG;
    }
    return TK_OK;
}

/* the 256 byte tokens, then the words (distinct pieces with >= 2 bytes) as
 * symbol runs; *nsym_out: the total number of symbols */
static int train_load_words(trainer *T, const tk_piece_counts *pc, uint64_t *nsym_out) {
    int rc = TK_OK;
    for (int b = 0; b < 256 && !rc; b++) {
        uint8_t c = (uint8_t)b;
        uint32_t r;
        rc = tok_add(T, &c, 1, &r);
    }
    size_t nw = 0;
    uint64_t nsym = 0;
    for (size_t i = 0; i < pc->global.cap; i++) {
        const pent *e = &pc->global.t[i];
        if (e->count && e->len >= 2) {
            nw++;
            nsym += e->len;
        }
    }
    *nsym_out = nsym;
    if (nw >= UINT32_MAX) rc = TK_ERR_NOMEM;
    if (!rc) {
        T->syms = malloc((nsym ? nsym : 1) * sizeof *T->syms);
        T->words = malloc((nw ? nw : 1) * sizeof *T->words);
        if (!T->syms || !T->words) rc = TK_ERR_NOMEM;
    }
    if (!rc) {
        uint64_t off = 0;
        for (size_t i = 0; i < pc->global.cap; i++) {
            const pent *e = &pc->global.t[i];
            if (!e->count || e->len < 2) continue;
            const uint8_t *s = pc->global.arena + e->off;
            T->words[T->nwords] = (wrec){off, e->count, e->len};
            for (uint32_t k = 0; k < e->len; k++) T->syms[off + k] = s[k];
            off += e->len;
            T->nwords++;
        }
    }
    return rc;
}

static uint32_t train_par_min(const tk_train_opts *o) {
    uint32_t par_min = o->par_min_words ? o->par_min_words : TK_TRAIN_DEFAULT_PAR_MIN;
    return par_min < 2 ? 2 : par_min;
}

/* the per-thread scan contexts (neighbour tables indexed by symbol id) and
 * the worker pool */
static int train_alloc_scan(trainer *T, const tk_train_opts *o, uint32_t target, uint64_t nsym, uint32_t par_min) {
    int rc = TK_OK;
    /* symbol ids stay below min(target, 256 + merges possible); every merge
     * removes at least one symbol, so at most nsym - nwords merges happen */
    size_t nsymcap = target;
    if (256 + nsym - T->nwords + 1 < nsymcap) nsymcap = (size_t)(256 + nsym - T->nwords + 1);
    int nthr = o->threads;
    if (nthr <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        nthr = nc > 0 ? (int)nc : 1;
    }
    if (nthr > 64) nthr = 64;
    if (T->nwords < par_min) nthr = 1;
    T->sc = calloc((size_t)nthr, sizeof *T->sc);
    if (!T->sc) rc = TK_ERR_NOMEM;
    else T->nsc = nthr;
    for (int k = 0; k < T->nsc && !rc; k++) {
        scanctx *S = &T->sc[k];
        S->left = calloc(nsymcap, sizeof *S->left);
        S->right = calloc(nsymcap, sizeof *S->right);
        S->lx = malloc(nsymcap * sizeof *S->lx);
        S->ry = malloc(nsymcap * sizeof *S->ry);
        if (!S->left || !S->right || !S->lx || !S->ry) rc = TK_ERR_NOMEM;
    }
    if (!rc && T->nsc > 1) rc = pool_start(T);
    return rc;
}

/* initial pair counts, the word index of every pair and the heap of all pairs */
static int train_index(trainer *T) {
    int rc = TK_OK;
    T->stamp = 1;
    for (size_t w = 0; w < T->nwords && !rc; w++) {
        const uint32_t *s = T->syms + T->words[w].off;
        for (uint32_t k = 0; k + 1 < T->words[w].len && !rc; k++) {
            if (!pair_eligible(T, s[k], s[k + 1])) continue;
            uint32_t p;
            rc = pair_get(T, s[k], s[k + 1], &p);
            if (rc) break;
            T->pr[p].cnt += (int64_t)T->words[w].cnt;
            rc = wlist_push(&T->pr[p].w, (uint32_t)w);
        }
    }
    /* heap of all pairs (heapify) */
    if (!rc) rc = grow((void **)&T->heap, &T->hcap, T->npairs + 1, sizeof *T->heap);
    if (!rc) {
        for (size_t p = 0; p < T->npairs; p++) T->heap[p] = (hent){(uint64_t)T->pr[p].cnt, (uint32_t)p};
        T->hn = T->npairs;
        for (size_t i = T->hn / 2; i-- > 0;) heap_down(T, i);
    }
    return rc;
}

/* state of the merge loop */
typedef struct {
    trainer *T;
    const tk_train_opts *o;
    tk_train_result *res;
    uint32_t target, want, par_min;
    uint64_t minf;
    size_t mcap;  /* capacity of res->merges */
    uint8_t *buf; /* bytes of the new token */
    size_t bufcap;
    double tlast, tm0;
} mergectx;

/* token C = A ++ B, recorded as the next merge */
static inline int merge_new_token(mergectx *M, uint32_t A, uint32_t B, uint32_t *C) {
    trainer *T = M->T;
    uint32_t la = T->tlen[A], lb = T->tlen[B];
    int rc = grow((void **)&M->buf, &M->bufcap, (size_t)la + lb, 1);
    if (rc) return rc;
    memcpy(M->buf, T->tarena + T->toff[A], la);
    memcpy(M->buf + la, T->tarena + T->toff[B], lb);
    rc = tok_add(T, M->buf, la + lb, C);
    if (rc) return rc;
    rc = grow((void **)&M->res->merges, &M->mcap, (size_t)M->res->n_merges + 1, sizeof *M->res->merges);
    if (rc) return rc;
    M->res->merges[M->res->n_merges++] = (tk_merge){A, B, *C};
    return TK_OK;
}

/* apply pair p = (A,B) -> C to every word holding it. Neighbour deltas are
 * gathered per neighbour symbol (left x: pairs (x,A)/(x,C); right y:
 * (B,y)/(C,y)) into context 0; the pair's word list is consumed. */
static inline int merge_scan(mergectx *M, uint32_t p, uint32_t A, uint32_t B, uint32_t C) {
    trainer *T = M->T;
    int rc;
    T->stamp++;
    T->ntouched = 0;
    wlist L = T->pr[p].w;
    T->pr[p].w = (wlist){NULL, 0, 0};
    scanctx *S0 = &T->sc[0];
    if (T->nthreads > 0 && L.n >= M->par_min) {
        rc = pool_run(T, L.w, L.n, A, B, C);
    } else {
        S0->nlx = S0->nry = S0->nev = 0;
        rc = scan_words(T, S0, L.w, 0, L.n, A, B, C);
    }
    free(L.w);
    T->pr[p].cnt = 0;
    return rc;
}

/* apply the gathered deltas once per neighbour: increments first (a
 * decrement may hit a pair such as (C,A) that this very merge created), then
 * the word lists of the new pairs and the heap entries of touched pairs */
static inline int merge_update_counts(trainer *T, uint32_t A, uint32_t B, uint32_t C) {
    scanctx *S0 = &T->sc[0];
    int rc = grow((void **)&T->touched, &T->touchedcap, S0->nlx + S0->nry + 1, sizeof *T->touched);
    /* increments: (x,C) and (C,y) */
    for (size_t k = 0; k < S0->nlx && !rc; k++) {
        uint32_t x = S0->lx[k];
        if (!pair_eligible(T, x, C)) continue;
        rc = pair_get(T, x, C, &S0->left[x].pid);
        if (!rc) {
            T->pr[S0->left[x].pid].cnt += S0->left[x].inc;
            touch(T, S0->left[x].pid);
        }
    }
    for (size_t k = 0; k < S0->nry && !rc; k++) {
        uint32_t y = S0->ry[k];
        if (!pair_eligible(T, C, y)) continue;
        rc = pair_get(T, C, y, &S0->right[y].pid);
        if (!rc) {
            T->pr[S0->right[y].pid].cnt += S0->right[y].inc;
            touch(T, S0->right[y].pid);
        }
    }
    /* decrements: (x,A) and (B,y) */
    for (size_t k = 0; k < S0->nlx && !rc; k++) {
        uint32_t x = S0->lx[k], q;
        if (pair_eligible(T, x, A) && pair_find(T, x, A, &q)) T->pr[q].cnt += S0->left[x].dec;
    }
    for (size_t k = 0; k < S0->nry && !rc; k++) {
        uint32_t y = S0->ry[k], q;
        if (pair_eligible(T, B, y) && pair_find(T, B, y, &q)) T->pr[q].cnt += S0->right[y].dec;
    }
    /* word lists of the new pairs (in word order; wlist_push drops repeats) */
    for (size_t k = 0; k < S0->nev && !rc; k++) {
        uint32_t v = S0->ev[k].nb;
        uint32_t pid = (v & 0x80000000u) ? S0->right[v & 0x7fffffffu].pid : S0->left[v].pid;
        if (pid != UINT32_MAX) rc = wlist_push(&T->pr[pid].w, S0->ev[k].w);
    }
    for (size_t k = 0; k < T->ntouched && !rc; k++) {
        uint32_t q = T->touched[k];
        if (T->pr[q].cnt > 0) rc = heap_push(T, (uint64_t)T->pr[q].cnt, q);
    }
    return rc;
}

static inline void merge_progress(mergectx *M) {
    double tn = mc_now_s();
    if (M->o->progress && tn - M->tlast > 0.25) {
        M->tlast = tn;
        progress_line(M->o, "merging", M->res->n_merges, M->want, M->tm0);
    }
}

/* merge the most frequent pair until the vocabulary is full, no pair is left
 * or the best count is below min_frequency (the last two set hit_limit) */
static int train_merge_loop(mergectx *M) {
    trainer *T = M->T;
    int rc = TK_OK;
    while (!rc && T->ntok < M->target) {
        if (!T->hn) {
            M->res->hit_limit = 1;
            break;
        }
        hent top = heap_pop(T);
        uint32_t p = top.pair;
        if ((int64_t)top.count != T->pr[p].cnt) { /* stale entry: requeue with the current count */
            if (T->pr[p].cnt > 0) rc = heap_push(T, (uint64_t)T->pr[p].cnt, p);
            continue;
        }
        if (top.count < M->minf || top.count == 0) {
            M->res->hit_limit = 1;
            break;
        }
        uint32_t A = T->pr[p].a, B = T->pr[p].b, C;
        rc = merge_new_token(M, A, B, &C);
        if (rc) break;
        rc = merge_scan(M, p, A, B, C);
        if (!rc) rc = merge_update_counts(T, A, B, C);
        merge_progress(M);
    }
    free(M->buf);
    M->buf = NULL;
    return rc;
}

/* the ranks' bytes into res */
static int train_build_result(const trainer *T, tk_train_result *res) {
    int rc = TK_OK;
    res->n_ranks = (uint32_t)T->ntok;
    res->tokens = calloc(T->ntok, sizeof *res->tokens);
    res->lens = calloc(T->ntok, sizeof *res->lens);
    if (!res->tokens || !res->lens) rc = TK_ERR_NOMEM;
    for (size_t r = 0; r < T->ntok && !rc; r++) {
        res->lens[r] = T->tlen[r];
        res->tokens[r] = malloc(T->tlen[r] ? T->tlen[r] : 1);
        if (!res->tokens[r]) {
            rc = TK_ERR_NOMEM;
            break;
        }
        memcpy(res->tokens[r], T->tarena + T->toff[r], T->tlen[r]);
    }
    return rc;
}

int tk_train_merges(const tk_piece_counts *pc, const tk_train_opts *o, tk_train_result *res, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!pc || !o || !res) return TK_ERR_ARG;
    memset(res, 0, sizeof *res);
    int rc = train_check_args(pc, o, err, errlen);
    if (rc) return rc;
    uint32_t target = o->vocab_size - (uint32_t)o->n_specials;
    trainer T;
    memset(&T, 0, sizeof T);
    T.o = o;
    /* never a token the vocabulary files cannot hold (the loaders' limit) */
    T.max_tok = o->max_token_bytes && o->max_token_bytes < TK_MAX_TOKEN_BYTES ? o->max_token_bytes : TK_MAX_TOKEN_BYTES;
    double t0 = mc_now_s();
    uint64_t nsym = 0;
    uint32_t par_min = train_par_min(o);
    rc = train_load_words(&T, pc, &nsym);
    if (!rc) rc = train_alloc_scan(&T, o, target, nsym, par_min);
    if (!rc) rc = train_index(&T);
    if (o->progress && !rc)
        fprintf(stderr, "[train] index: %zu words, %zu pairs in %.2fs\n", T.nwords, T.npairs, mc_now_s() - t0);
    mergectx M = {.T = &T,
                  .o = o,
                  .res = res,
                  .target = target,
                  .want = target - 256,
                  .par_min = par_min,
                  .minf = o->min_frequency ? o->min_frequency : 1};
    M.tlast = M.tm0 = mc_now_s();
    if (!rc) rc = train_merge_loop(&M);
    if (o->progress && !rc) {
        progress_line(o, "merging", res->n_merges, M.want, M.tm0);
        fprintf(stderr, "\n[train] %u merges, %zu ranks in %.2fs (%zu words, %zu pairs)\n", res->n_merges, T.ntok,
                mc_now_s() - t0, T.nwords, T.npairs);
    }
    if (!rc) rc = train_build_result(&T, res);
    trainer_free(&T);
    if (rc) {
        tk_train_result_free(res);
        if (err && !err[0]) snprintf(err, errlen, "training failed: %s", tk_strerror(rc));
    }
    return rc;
}

void tk_train_result_free(tk_train_result *res) {
    if (!res) return;
    if (res->tokens)
        for (uint32_t r = 0; r < res->n_ranks; r++) free(res->tokens[r]);
    free(res->tokens);
    free(res->lens);
    free(res->merges);
    memset(res, 0, sizeof *res);
}

int tk_train_result_tokenizer(const tk_train_result *res, const tk_train_opts *o, tk_tokenizer **out) {
    if (!res || !o || !out || !res->n_ranks) return TK_ERR_ARG;
    tk_special *sp = NULL;
    if (o->n_specials) {
        sp = calloc(o->n_specials, sizeof *sp);
        if (!sp) return TK_ERR_NOMEM;
        for (size_t i = 0; i < o->n_specials; i++) {
            sp[i].text = o->specials[i];
            sp[i].id = res->n_ranks + (uint32_t)i;
        }
    }
    tk_pattern pat = o->pattern == TK_PAT_NONE ? TK_PAT_O200K : o->pattern;
    int rc = tk_create((const uint8_t *const *)res->tokens, res->lens, res->n_ranks, pat, sp, o->n_specials, out);
    free(sp);
    return rc;
}

int tk_train(const tk_span *docs, size_t n, const tk_train_opts *o, tk_train_result *res, char *err, size_t errlen) {
    if (!o || !res) return TK_ERR_ARG;
    tk_piece_counts *pc = NULL;
    int rc = tk_piece_counts_create(o, &pc);
    if (!rc) rc = tk_piece_counts_add_docs(pc, docs, n);
    if (!rc) rc = tk_train_merges(pc, o, res, err, errlen);
    else if (err && errlen) snprintf(err, errlen, "piece counting failed: %s", tk_strerror(rc));
    tk_piece_counts_free(pc);
    return rc;
}
