/* bpe.c - byte-pair merging of one pre-token piece, with tiktoken's rule:
 * repeatedly merge the adjacent pair whose concatenation has the lowest rank
 * (leftmost on ties) until no adjacent concatenation is a token.
 *
 * Short pieces use a flat array scan (fast for the common 2-20 byte case).
 * Long pieces (megabyte runs of letters, digits or spaces) use a bucket
 * queue indexed by rank over a linked list of parts: every merge costs O(1)
 * amortised plus two rank look-ups, so cost stays linear in the piece length
 * where the flat scan (and tiktoken) is quadratic.
 */
#include "tk_internal.h"

#include <pthread.h>
#include <stdlib.h>

#define SMALL_PIECE 96

static inline uint32_t rank_of_span(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank) {
    uint32_t r;
    if (n == 2)
        r = t->pair2[((uint32_t)p[0] << 8) | p[1]];
    else
        r = tk_map_get(t, p, n);
    return r < max_rank ? r : TK_NO_RANK;
}

int tk_ids_reserve(tk_ids *v, size_t extra) {
    if (v->len + extra <= v->cap) return TK_OK;
    size_t cap = v->cap ? v->cap : 256;
    while (cap < v->len + extra) cap *= 2;
    uint32_t *p = realloc(v->ids, cap * sizeof *p);
    if (!p) return TK_ERR_NOMEM;
    v->ids = p;
    v->cap = cap;
    return TK_OK;
}

static int bpe_small(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    /* start[k]: byte start of part k (start[m] = n); rk[k]: rank of part k + part k+1 */
    uint32_t start[SMALL_PIECE + 1], rk[SMALL_PIECE + 1];
    size_t m = n;
    for (size_t k = 0; k <= n; k++) start[k] = (uint32_t)k;
    for (size_t k = 0; k + 1 < n; k++) {
        uint32_t r = t->pair2[((uint32_t)p[k] << 8) | p[k + 1]];
        rk[k] = r < max_rank ? r : TK_NO_RANK;
    }
    rk[n - 1] = TK_NO_RANK;
    for (;;) {
        uint32_t best = TK_NO_RANK;
        size_t bi = 0;
        for (size_t k = 0; k + 1 < m; k++)
            if (rk[k] < best) {
                best = rk[k];
                bi = k;
            }
        if (best == TK_NO_RANK) break;
        /* merge part bi with bi+1 */
        memmove(start + bi + 1, start + bi + 2, (m - bi - 1) * sizeof start[0]);
        memmove(rk + bi + 1, rk + bi + 2, (m - bi - 2) * sizeof rk[0]);
        m--;
        if (bi + 1 < m)
            rk[bi] = rank_of_span(t, p + start[bi], start[bi + 2] - start[bi], max_rank);
        else
            rk[bi] = TK_NO_RANK;
        if (bi > 0) rk[bi - 1] = rank_of_span(t, p + start[bi - 1], start[bi + 1] - start[bi - 1], max_rank);
    }
    if (tk_ids_reserve(out, m)) return TK_ERR_NOMEM;
    for (size_t k = 0; k < m; k++) {
        size_t len = start[k + 1] - start[k];
        out->ids[out->len++] = len == 1 ? t->byte_rank[p[start[k]]] : tk_map_get(t, p + start[k], len);
    }
    return TK_OK;
}

/* ---- long pieces: bucket queue ---------------------------------------- */

typedef struct {
    uint32_t node, next;
} entry;

typedef struct {
    uint32_t n_ranks;
    uint32_t *head;       /* per rank: first entry + 1, 0 = empty bucket */
    entry *ent;
    size_t n_ent, cap_ent;
    uint32_t *heap;       /* min-heap of ranks whose bucket is non-empty */
    size_t n_heap, cap_heap;
    uint32_t *nxt, *prv, *tok, *pr; /* per node: next, prev, token rank, pair rank */
    uint32_t *batch;
    size_t cap_nodes;
} scratch;

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    scratch *s = p;
    if (!s) return;
    free(s->head);
    free(s->ent);
    free(s->heap);
    free(s->nxt);
    free(s->prv);
    free(s->tok);
    free(s->pr);
    free(s->batch);
    free(s);
}

static void make_key(void) { pthread_key_create(&g_key, scratch_free); }

static scratch *get_scratch(uint32_t n_ranks, size_t nodes) {
    pthread_once(&g_key_once, make_key);
    scratch *s = pthread_getspecific(g_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(g_key, s)) {
            free(s);
            return NULL;
        }
    }
    if (s->n_ranks < n_ranks) {
        free(s->head);
        s->head = calloc(n_ranks, sizeof *s->head);
        if (!s->head) {
            s->n_ranks = 0;
            return NULL;
        }
        s->n_ranks = n_ranks;
    }
    if (s->cap_nodes < nodes) {
        size_t c = nodes + nodes / 2;
        uint32_t *a = realloc(s->nxt, c * 4), *b = a ? realloc(s->prv, c * 4) : NULL;
        if (a) s->nxt = a;
        if (b) s->prv = b;
        uint32_t *d = b ? realloc(s->tok, c * 4) : NULL;
        if (d) s->tok = d;
        uint32_t *e = d ? realloc(s->pr, c * 4) : NULL;
        if (e) s->pr = e;
        uint32_t *f = e ? realloc(s->batch, c * 4) : NULL;
        if (f) s->batch = f;
        if (!f) return NULL;
        s->cap_nodes = c;
    }
    return s;
}

static int push_entry(scratch *s, uint32_t rank, uint32_t node) {
    if (s->n_ent == s->cap_ent) {
        size_t c = s->cap_ent ? s->cap_ent * 2 : 4096;
        entry *e = realloc(s->ent, c * sizeof *e);
        if (!e) return TK_ERR_NOMEM;
        s->ent = e;
        s->cap_ent = c;
    }
    if (!s->head[rank]) {
        /* bucket becomes non-empty: push its rank on the heap */
        if (s->n_heap == s->cap_heap) {
            size_t c = s->cap_heap ? s->cap_heap * 2 : 256;
            uint32_t *h = realloc(s->heap, c * sizeof *h);
            if (!h) return TK_ERR_NOMEM;
            s->heap = h;
            s->cap_heap = c;
        }
        size_t i = s->n_heap++;
        while (i && s->heap[(i - 1) / 2] > rank) {
            s->heap[i] = s->heap[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        s->heap[i] = rank;
    }
    s->ent[s->n_ent] = (entry){node, s->head[rank]};
    s->head[rank] = (uint32_t)++s->n_ent;
    return TK_OK;
}

static uint32_t pop_rank(scratch *s) {
    uint32_t top = s->heap[0], last = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && s->heap[c + 1] < s->heap[c]) c++;
        if (s->heap[c] >= last) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

#define NIL UINT32_MAX

static int bpe_long(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    if (n >= UINT32_MAX - 1) return TK_ERR_ARG;
    scratch *s = get_scratch(t->n_ranks, n);
    if (!s) return TK_ERR_NOMEM;
    uint32_t *nxt = s->nxt, *prv = s->prv, *tok = s->tok, *pr = s->pr;
    int rc = TK_OK;
    s->n_ent = 0;
    s->n_heap = 0;
    /* Node k starts at byte k; a node that was merged away is unreachable. */
    for (size_t k = 0; k < n; k++) {
        nxt[k] = k + 1 < n ? (uint32_t)(k + 1) : NIL;
        prv[k] = k ? (uint32_t)(k - 1) : NIL;
        tok[k] = t->byte_rank[p[k]];
        pr[k] = TK_NO_RANK;
    }
    for (size_t k = 0; k + 1 < n; k++) {
        uint32_t r = t->pair2[((uint32_t)p[k] << 8) | p[k + 1]];
        if (r < max_rank) {
            pr[k] = r;
            if ((rc = push_entry(s, r, (uint32_t)k))) goto fail;
        }
    }
    /* a node's end is the start of its successor (or n) */
#define END(k) (nxt[k] == NIL ? (uint32_t)n : nxt[k])
    while (s->n_heap) {
        uint32_t r = pop_rank(s);
        /* take the whole bucket, in ascending position (leftmost first) */
        size_t m = 0;
        for (uint32_t e = s->head[r]; e; e = s->ent[e - 1].next) s->batch[m++] = s->ent[e - 1].node;
        s->head[r] = 0;
        bool sorted = true;
        for (size_t a = 0, b = m - 1; a < b; a++, b--) {
            uint32_t x = s->batch[a];
            s->batch[a] = s->batch[b];
            s->batch[b] = x;
        }
        for (size_t a = 1; a < m && sorted; a++) sorted = s->batch[a - 1] < s->batch[a];
        if (!sorted) qsort(s->batch, m, sizeof *s->batch, cmp_u32);
        for (size_t a = 0; a < m; a++) {
            uint32_t k = s->batch[a];
            if (pr[k] != r || nxt[k] == NIL) continue; /* stale */
            uint32_t dead = nxt[k];
            nxt[k] = nxt[dead];
            if (nxt[k] != NIL) prv[nxt[k]] = k;
            pr[dead] = TK_NO_RANK;
            tok[k] = r;
            bool lower = false;
            if (nxt[k] != NIL) {
                uint32_t nr = rank_of_span(t, p + k, END(nxt[k]) - k, max_rank);
                pr[k] = nr;
                if (nr != TK_NO_RANK) {
                    if ((rc = push_entry(s, nr, k))) goto fail;
                    lower |= nr < r;
                }
            } else {
                pr[k] = TK_NO_RANK;
            }
            uint32_t q = prv[k];
            if (q != NIL) {
                uint32_t nr = rank_of_span(t, p + q, END(k) - q, max_rank);
                pr[q] = nr;
                if (nr != TK_NO_RANK) {
                    if ((rc = push_entry(s, nr, q))) goto fail;
                    lower |= nr < r;
                }
            }
            if (lower) {
                /* A merge made a pair that outranks the rest of this bucket
                 * (never seen with trained vocabularies, but possible): give
                 * the rest back so the global order stays exact. */
                for (size_t b = a + 1; b < m; b++)
                    if ((rc = push_entry(s, r, s->batch[b]))) goto fail;
                break;
            }
        }
    }
#undef END
    {
        size_t cnt = 0;
        for (uint32_t k = 0; k != NIL; k = nxt[k]) cnt++;
        if ((rc = tk_ids_reserve(out, cnt))) goto fail;
        for (uint32_t k = 0; k != NIL; k = nxt[k]) out->ids[out->len++] = tok[k];
    }
    return TK_OK;
fail:
    /* leave the scratch reusable */
    while (s->n_heap) s->head[pop_rank(s)] = 0;
    return rc;
}

int tk_bpe_piece(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    if (n == 0) return TK_OK;
    if (n == 1) {
        if (tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
        out->ids[out->len++] = t->byte_rank[p[0]];
        return TK_OK;
    }
    uint32_t r = rank_of_span(t, p, n, max_rank);
    if (r != TK_NO_RANK) {
        if (tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
        out->ids[out->len++] = r;
        return TK_OK;
    }
    if (n <= SMALL_PIECE) return bpe_small(t, p, n, max_rank, out);
    return bpe_long(t, p, n, max_rank, out);
}
