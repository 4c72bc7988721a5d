/* bpe.c - byte-pair merging of one pre-token piece, with tiktoken's rule:
 * repeatedly merge the adjacent pair whose concatenation has the lowest rank
 * (leftmost on ties) until no adjacent concatenation is a token.
 *
 * Pieces up to 32 bytes use the flat merge (bpe_flat.h: a vector scan over
 * one lane per byte); up to 255 bytes a stack heap. Longer pieces (megabyte
 * runs of letters, digits or spaces) are merged as 32-byte chunks whose
 * junctions are checked with an exact pair test and repaired where needed
 * (docs/tokenizer.md gives the argument); the global bucket-queue merge is
 * the fallback that keeps the cost linear whatever the input.
 */
#include "tk_internal.h"

#include <pthread.h>
#include <sys/mman.h>
#include <stdlib.h>

#define FLAT_PIECE 32 /* up to here: flat array scan */
#define FLAT_LANES 64 /* lanes of the flat merge (chunks of long pieces use up to 64) */
_Static_assert(FLAT_LANES <= 64, "the parts of a flat merge are the bits of one uint64_t");
#define SMALL_PIECE 255 /* up to here: stack heap (bpe_mid); beyond: chunks (tk_bpe_chunked) */
#define PC_BITS 14
#define PREFETCH_AHEAD 16
/* Piece cache: results of pieces that needed merging (words recur). */
#define PIECE_CACHE_SETS 4096
#define PIECE_CACHE_BYTES 44
#define PIECE_CACHE_IDS 14
#define PC_SIZE (1u << PC_BITS)

static inline __attribute__((always_inline)) uint32_t rank_of_span(const tk_tokenizer *t, const uint8_t *p, size_t n,
                                                                   uint32_t max_rank) {
    uint32_t r, k = ((uint32_t)p[0] << 8) | p[1];
    if (n == 2) r = t->pair2[k];
    else if (n == 3) r = tk_map3_get(t, p);
    else if (n <= 8) /* the short map's filter answers most misses as cheaply as maxlen2 would */
        r = tk_smap_get(t, tk_short_word(p, n), n);
    else if (n > t->maxlen2[k] && t->maxlen2[k] != 255) return TK_NO_RANK;
    else r = tk_lmap_get(t, p, n, tk_hash_bytes(p, n));
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

/* Short pieces (up to FLAT_PIECE bytes): one lane per byte holds the rank
 * of the pair starting there (FLAT_INF once that byte is inside a part or
 * has no pair). Each step takes the lowest rank and its leftmost lane with
 * a branch-free scan over all lanes (SSE2 where available), then relinks
 * the parts. For a few dozen bytes this beats a heap, whose sift loops
 * mispredict on every level. */
#define FLAT_INF INT32_MAX
/* A lane holds the key (rank << 6) | lane, so the lowest key names both the
 * lowest rank and its leftmost lane: one min-reduction, no compare-and-find
 * pass after it. Ranks must stay below 2^25 (larger vocabularies take the
 * heap merges). */
#define FLAT_LANE_BITS 6
#define FLAT_MAX_RANKS (1u << (31 - FLAT_LANE_BITS))

static inline __attribute__((always_inline)) int32_t flat_key(uint32_t rank, unsigned lane) {
    return rank < FLAT_MAX_RANKS ? (int32_t)(rank << FLAT_LANE_BITS | lane) : FLAT_INF;
}

/* Key of the pair spanning p[0..n), which starts at lane `lane`. */
static inline __attribute__((always_inline)) int32_t flat_rank(const tk_tokenizer *t, const uint8_t *p, size_t n,
                                                               uint32_t max_rank, unsigned lane) {
    return flat_key(rank_of_span(t, p, n, max_rank), lane);
}

#if defined(__SSE2__)
#include <emmintrin.h>
static inline __m128i flat_min4(__m128i a, __m128i b) {
    __m128i lt = _mm_cmplt_epi32(a, b);
    return _mm_or_si128(_mm_and_si128(lt, a), _mm_andnot_si128(lt, b));
}
/* Lowest key of rk[0..4*nvec). Always inlined with a constant nvec, so the
 * loops unroll into registers. */
static inline __attribute__((always_inline)) int32_t flat_argmin(const int32_t *rk, unsigned nvec) {
    __m128i m = _mm_loadu_si128((const __m128i *)rk);
    for (unsigned i = 1; i < nvec; i++) m = flat_min4(m, _mm_loadu_si128((const __m128i *)(rk + 4 * i)));
    m = flat_min4(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = flat_min4(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(m);
}
#else
static inline __attribute__((always_inline)) int32_t flat_argmin(const int32_t *rk, unsigned nvec) {
    int32_t best = FLAT_INF;
    for (unsigned k = 0; k < 4 * nvec; k++) best = rk[k] < best ? rk[k] : best;
    return best;
}
#endif

/* One short piece being merged; several can be stepped in turn so that
 * the rank look-ups of one overlap the scans of the others. */
typedef struct {
    _Alignas(64) int32_t rk[FLAT_LANES];
    uint32_t tok[FLAT_LANES];
    const uint8_t *p;
    uint32_t n, nvec; /* bytes; lanes scanned / 4 */
    uint64_t alive;   /* bit k: a part starts at byte k */
} flat_state;

/* alive before any merge: one part per byte */
static inline uint64_t flat_all_parts(size_t n) { return n >= 64 ? ~0ull : (1ull << n) - 1; }

/* Start of the first part in `above` (alive masked to the lanes past some
 * part), or n when there is none. */
static inline __attribute__((always_inline)) unsigned flat_next(uint64_t above, unsigned n) {
    return above ? (unsigned)__builtin_ctzll(above) : n;
}

static inline void flat_init(flat_state *st, const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank) {
    st->p = p;
    st->n = (uint32_t)n;
    st->nvec = n <= 8 ? 2 : n <= 16 ? 4 : n <= 32 ? 8 : 16;
    st->alive = flat_all_parts(n);
    for (size_t k = 0; k < n; k++) st->tok[k] = t->byte_rank[p[k]];
    for (size_t k = 0; k + 1 < n; k++) {
        uint32_t r = t->pair2[((uint32_t)p[k] << 8) | p[k + 1]];
        st->rk[k] = flat_key(r < max_rank ? r : TK_NO_RANK, (unsigned)k);
    }
    for (size_t k = n ? n - 1 : 0; k < 4 * st->nvec; k++) st->rk[k] = FLAT_INF;
}

/* rk[lane] = val. With SSE2 the whole 4-lane vector is rewritten: the next
 * scan loads it as a vector, and a vector load of lanes written one by one
 * stalls on store forwarding (this was the longest step of a merge). */
static inline void flat_set(int32_t *rk, unsigned lane, int32_t val) {
#if defined(__SSE2__)
    __m128i *v = (__m128i *)rk + (lane >> 2);
    __m128i m = _mm_cmpeq_epi32(_mm_set_epi32(3, 2, 1, 0), _mm_set1_epi32((int)(lane & 3)));
    _mm_store_si128(v, _mm_or_si128(_mm_and_si128(m, _mm_set1_epi32(val)), _mm_andnot_si128(m, _mm_load_si128(v))));
#else
    rk[lane] = val;
#endif
}

static int bpe_small(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out);

/* The tokens left, in order; returns how many. */
static inline size_t flat_tokens(const flat_state *st, uint32_t *dst) {
    size_t m = 0;
    for (uint64_t a = st->alive; a; a &= a - 1) dst[m++] = st->tok[__builtin_ctzll(a)];
    return m;
}

static inline int flat_emit(const flat_state *st, tk_ids *out) {
    if (tk_ids_reserve(out, st->n)) return TK_ERR_NOMEM; /* at most one token per byte */
    out->len += flat_tokens(st, out->ids + out->len);
    return TK_OK;
}

/* ---- long pieces: bucket queue ---------------------------------------- */

/* Buckets are chains of fixed-size blocks so that walking one touches
 * contiguous memory (a per-entry linked list costs a cache miss per entry). */
#define BLOCK_NODES 62
typedef struct {
    uint32_t next; /* previous block of the same bucket + 1, 0 = none */
    uint32_t count;
    uint32_t node[BLOCK_NODES];
} block;

typedef struct {
    uint32_t nxt, prv; /* linked list of live parts (NIL ends) */
    uint32_t tok;      /* rank of the part starting here */
    uint32_t pr;       /* rank of this part + the next, TK_NO_RANK if none */
} node;

/* Growable binary min-heap of 64-bit keys. */
typedef struct {
    uint64_t *v;
    size_t n, cap;
} u64heap;

static int heap_push(u64heap *h, uint64_t key) {
    if (h->n == h->cap) {
        size_t c = h->cap ? h->cap * 2 : 256;
        uint64_t *v = realloc(h->v, c * sizeof *v);
        if (!v) return TK_ERR_NOMEM;
        h->v = v;
        h->cap = c;
    }
    size_t i = h->n++;
    while (i && h->v[(i - 1) / 2] > key) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = key;
    return TK_OK;
}

static uint64_t heap_pop(u64heap *h) {
    uint64_t top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h->v[c + 1] < h->v[c]) c++;
        if (h->v[c] >= last) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n) h->v[i] = last;
    return top;
}

typedef struct {
    uint64_t h; /* tk_hash_bytes of the piece; 0 = empty */
    uint16_t len, n_ids;
    uint8_t bytes[PIECE_CACHE_BYTES];
    uint32_t ids[PIECE_CACHE_IDS];
} piece_entry;

/* A slot of the pair cache: key and rank in one 16-byte slot, so a hit is
 * one cache line (as two arrays it was two misses). */
typedef struct {
    uint64_t key; /* ((left << 32) | right) + 1; 0 = empty */
    uint32_t rank, pad;
} pair_slot;

typedef struct scratch {
    uint32_t n_ranks;
    uint32_t *head; /* per rank: newest block + 1, 0 = empty bucket */
    block *blk;
    size_t n_blk, cap_blk;
    u64heap ranks; /* ranks whose bucket is non-empty */
    node *nd;      /* per node (one per byte of the piece) */
    uint32_t *batch;
    size_t cap_nodes;
    /* Direct-mapped cache: (left token, right token) -> rank of their
     * concatenation. Long pathological pieces repeat the same few pairs, so
     * this replaces most hash-table probes over growing byte strings. */
    pair_slot *pc;
    uint64_t pc_serial; /* tokenizer the cache belongs to */
    uint32_t pc_max;
    piece_entry *pcache;
    uint64_t pcache_serial;
    u64heap local; /* (rank << 32 | node) outranking the current bucket */
    /* Chunked long pieces: (left, right) -> "BPE of their bytes gives
     * exactly these two tokens", and buffers for re-encoding windows. */
    uint64_t *cc_key;
    uint8_t *cc_val;
    uint64_t cc_serial;
    tk_ids win, pair, reach_tmp;
    uint8_t *cat;
    size_t cat_cap;
} scratch;

/* A zeroed block written before it is read: calloc maps a large block to
 * the shared zero page, where the first read of a page maps it read-only and
 * the first write then takes a second fault, copy-on-write, whose TLB
 * flush interrupts every other CPU the process runs on (the reader and
 * writer threads). Caches probe before they store, so every page paid both;
 * zeroing the block at once costs one fault per page. */
static void *(*volatile zero_bytes)(void *, int, size_t) = memset; /* not folded into calloc */
void *tk_zalloc_written(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    size_t bytes = n * size;
    uint8_t *p = malloc(bytes);
    if (!p) return NULL;
#ifdef MADV_POPULATE_WRITE
    /* a block this size is a fresh mapping: its pages in one call, not a
     * page fault each (~1 us apiece in a VM); older kernels refuse it */
    if (bytes >= (64u << 10)) {
        uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
        if (e > a) (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
    }
#endif
    zero_bytes(p, 0, bytes);
    return p;
}

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    scratch *s = p;
    if (!s) return;
    free(s->head);
    free(s->blk);
    free(s->ranks.v);
    free(s->nd);
    free(s->batch);
    free(s->local.v);
    free(s->pc);
    free(s->pcache);
    free(s->cc_key);
    free(s->cc_val);
    free(s->win.ids);
    free(s->pair.ids);
    free(s->reach_tmp.ids);
    free(s->cat);
    free(s);
}

static void make_key(void) { pthread_key_create(&g_key, scratch_free); }

static scratch *thread_scratch(void) {
    pthread_once(&g_key_once, make_key);
    scratch *s = pthread_getspecific(g_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(g_key, s)) {
            free(s);
            return NULL;
        }
    }
    return s;
}

static scratch *get_scratch(uint32_t n_ranks, size_t nodes) {
    scratch *s = thread_scratch();
    if (!s) return NULL;
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
        node *a = realloc(s->nd, c * sizeof *a);
        if (a) s->nd = a;
        uint32_t *f = a ? realloc(s->batch, c * 4) : NULL;
        if (f) s->batch = f;
        if (!f) return NULL;
        s->cap_nodes = c;
    }
    return s;
}

static int push_entry(scratch *s, uint32_t rank, uint32_t node) {
    uint32_t h = s->head[rank];
    if (h && s->blk[h - 1].count < BLOCK_NODES) {
        block *bk = &s->blk[h - 1];
        bk->node[bk->count++] = node;
        return TK_OK;
    }
    if (s->n_blk == s->cap_blk) {
        size_t c = s->cap_blk ? s->cap_blk * 2 : 1024;
        block *nb = realloc(s->blk, c * sizeof *nb);
        if (!nb) return TK_ERR_NOMEM;
        s->blk = nb;
        s->cap_blk = c;
    }
    if (!s->head[rank]) {
        /* bucket becomes non-empty: its rank goes on the heap */
        if (heap_push(&s->ranks, rank)) return TK_ERR_NOMEM;
    }
    block *bk = &s->blk[s->n_blk];
    bk->next = h;
    bk->count = 1;
    bk->node[0] = node;
    s->head[rank] = (uint32_t)++s->n_blk;
    return TK_OK;
}

/* The per-thread (left token, right token) -> rank cache, reset when the
 * tokenizer or the rank limit changes. NULL if it cannot be allocated. */
/* The key and value arrays of a direct-mapped per-thread cache (keys
 * zeroed: 0 marks an empty slot). 0, or -1 with both left NULL. */
static int cache_alloc(uint64_t **key, void **val, size_t slots, size_t val_size) {
    *key = tk_zalloc_written(slots, sizeof **key);
    *val = malloc(slots * val_size);
    if (*key && *val) return 0;
    free(*key);
    free(*val);
    *key = NULL;
    *val = NULL;
    return -1;
}

static scratch *pair_cache(const tk_tokenizer *t, uint32_t max_rank) {
    scratch *s = thread_scratch();
    if (!s) return NULL;
    if (!s->pc) {
        if (!(s->pc = tk_zalloc_written(PC_SIZE, sizeof *s->pc))) return NULL; /* zeroed: every slot empty */
        s->pc_serial = t->serial;
        s->pc_max = max_rank;
    }
    if (s->pc_serial != t->serial || s->pc_max != max_rank) {
        memset(s->pc, 0, PC_SIZE * sizeof *s->pc);
        s->pc_serial = t->serial;
        s->pc_max = max_rank;
    }
    return s;
}

static inline uint32_t cached_pair_rank(scratch *s, const tk_tokenizer *t, uint32_t ta, uint32_t tb, const uint8_t *p,
                                        size_t len, uint32_t max_rank) {
    if (len > t->max_token_len) return TK_NO_RANK;
    if (!s) return rank_of_span(t, p, len, max_rank);
    uint64_t key = (((uint64_t)ta << 32) | tb) + 1;
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> (64 - PC_BITS);
    pair_slot *e = &s->pc[h];
    if (e->key == key) return e->rank;
    uint32_t r = rank_of_span(t, p, len, max_rank);
    e->key = key;
    e->rank = r;
    return r;
}

#define NIL UINT32_MAX

typedef struct {
    const tk_tokenizer *t;
    const uint8_t *p;
    size_t n;
    uint32_t max_rank;
    scratch *s;
} longctx;

/* A new pair: below the rank being processed it must run before the rest of
 * that bucket (local heap, ordered by rank then position); otherwise it
 * waits in its bucket. */
static inline int add_pair(scratch *s, uint32_t rank, uint32_t node, uint32_t cur) {
    if (rank < cur) return heap_push(&s->local, ((uint64_t)rank << 32) | node);
    return push_entry(s, rank, node);
}

#define END(c, k) (c->s->nd[k].nxt == NIL ? (uint32_t)c->n : c->s->nd[k].nxt)

/* Rank of the concatenation of the parts at a and b (b = a's successor). */
static inline uint32_t pair_rank(longctx *c, uint32_t a, uint32_t b) {
    scratch *s = c->s;
    return cached_pair_rank(s, c->t, s->nd[a].tok, s->nd[b].tok, c->p + a, END(c, b) - a, c->max_rank);
}

/* Merge node k with its successor into token `rank`; queue the two new pairs. */
static int merge_at(longctx *c, uint32_t k, uint32_t rank, uint32_t cur) {
    scratch *s = c->s;
    node *nd = s->nd;
    uint32_t dead = nd[k].nxt;
    nd[k].nxt = nd[dead].nxt;
    if (nd[k].nxt != NIL) nd[nd[k].nxt].prv = k;
    nd[dead].pr = TK_NO_RANK;
    s->nd[k].tok = rank;
    int rc;
    uint32_t q = nd[k].prv;
    if (q != NIL) {
        uint32_t nr = pair_rank(c, q, k);
        nd[q].pr = nr;
        if (nr != TK_NO_RANK && (rc = add_pair(s, nr, q, cur))) return rc;
    }
    nd[k].pr = TK_NO_RANK;
    if (nd[k].nxt != NIL) {
        uint32_t nr = pair_rank(c, k, nd[k].nxt);
        nd[k].pr = nr;
        if (nr != TK_NO_RANK && (rc = add_pair(s, nr, k, cur))) return rc;
    }
    return TK_OK;
}

/* Run every queued pair that outranks the current bucket. */
static int drain_local(longctx *c, uint32_t cur) {
    scratch *s = c->s;
    while (s->local.n) {
        uint64_t key = heap_pop(&s->local);
        uint32_t rank = (uint32_t)(key >> 32), k = (uint32_t)key;
        if (s->nd[k].pr != rank || s->nd[k].nxt == NIL) continue; /* stale */
        int rc = merge_at(c, k, rank, cur);
        if (rc) return rc;
    }
    return TK_OK;
}

/* The parts a mid-size merge starts from, a linked list over positions
 * 0..n-1 (n is the end sentinel: nxt == n for the last part): the bytes, or
 * (start != NULL) the parts char_parts gave. */
static void mid_parts(const tk_tokenizer *t, const uint8_t *p, size_t n, const uint64_t *start,
                      const uint32_t *start_tok, uint8_t *nxt, uint8_t *prv, uint32_t *tok) {
    if (!start) {
        for (size_t k = 0; k < n; k++) {
            nxt[k] = (uint8_t)(k + 1);
            prv[k] = (uint8_t)(k ? k - 1 : 0);
            tok[k] = t->byte_rank[p[k]];
        }
        return;
    }
    size_t last = 0; /* part 0 always starts at byte 0 */
    prv[0] = 0;
    tok[0] = start_tok[0];
    for (size_t k = 1; k <= n; k++) {
        if (k < n && !(start[k >> 6] >> (k & 63) & 1)) continue;
        nxt[last] = (uint8_t)k;
        if (k < n) {
            prv[k] = (uint8_t)last;
            tok[k] = start_tok[k];
            last = k;
        }
    }
}

/* Rank of the pair of part k and the part after it (there must be one). */
static inline uint32_t part_pair_rank(scratch *s, const tk_tokenizer *t, const uint8_t *p, const uint8_t *nxt,
                                      const uint32_t *tok, size_t k, uint32_t max_rank) {
    size_t b = nxt[k];
    return cached_pair_rank(s, t, tok[k], tok[b], p + k, (size_t)nxt[b] - k, max_rank);
}

/* The same before any merge: from the 2-byte table on bytes. */
static inline uint32_t mid_first_rank(scratch *s, const tk_tokenizer *t, const uint8_t *p, const uint64_t *start,
                                      const uint8_t *nxt, const uint32_t *tok, size_t k, uint32_t max_rank) {
    if (!start) {
        uint32_t r = t->pair2[((uint32_t)p[k] << 8) | p[k + 1]];
        return r < max_rank ? r : TK_NO_RANK;
    }
    return part_pair_rank(s, t, p, nxt, tok, k, max_rank);
}

/* Merge part k with the part after it into token r; returns where the
 * absorbed part started. */
static inline uint32_t mid_join(uint8_t *nxt, uint8_t *prv, uint32_t *tok, size_t n, uint32_t k, uint32_t r) {
    uint32_t dead = nxt[k];
    nxt[k] = nxt[dead];
    if (nxt[k] < n) prv[nxt[k]] = (uint8_t)k;
    tok[k] = r;
    return dead;
}

/* The parts' tokens, in order, onto out. */
static int mid_emit(const uint8_t *nxt, const uint32_t *tok, size_t n, tk_ids *out) {
    size_t cnt = 0;
    for (size_t k = 0; k < n; k = nxt[k]) cnt++;
    if (tk_ids_reserve(out, cnt)) return TK_ERR_NOMEM;
    for (size_t k = 0; k < n; k = nxt[k]) out->ids[out->len++] = tok[k];
    return TK_OK;
}

/* Key of a lane of the vector mid-size merge (bpe_flat.h): rank << 8 | lane,
 * positive while ranks stay below MID_MAX_RANKS. Unused where no vector
 * variant is built (clang, other architectures). */
#define MID_MAX_RANKS (1u << 23)
static inline __attribute__((unused)) int32_t mid_key(uint32_t rank, unsigned lane) {
    return rank == TK_NO_RANK ? FLAT_INF : (int32_t)(rank << 8 | lane);
}

/* Mid-size pieces without the vector merge (bpe_mid_from): doubly linked
 * parts and a binary min-heap of (rank << 8 | position) on the stack; stale
 * heap keys are skipped. The parts start as the bytes, or (start != NULL)
 * as given by char_parts. */
static int bpe_mid_heap(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, const uint64_t *start,
                        const uint32_t *start_tok, tk_ids *out) {
    uint8_t nxt[SMALL_PIECE + 1], prv[SMALL_PIECE + 1];
    uint32_t pr[SMALL_PIECE + 1], tok[SMALL_PIECE + 1], heap[3 * SMALL_PIECE];
    scratch *s = pair_cache(t, max_rank);
    size_t hn = 0;
#define HPUSH(key)                                                                                                     \
    do {                                                                                                               \
        uint32_t k_ = (key);                                                                                           \
        size_t i_ = hn++;                                                                                              \
        while (i_ && heap[(i_ - 1) / 2] > k_) {                                                                        \
            heap[i_] = heap[(i_ - 1) / 2];                                                                             \
            i_ = (i_ - 1) / 2;                                                                                         \
        }                                                                                                              \
        heap[i_] = k_;                                                                                                 \
    } while (0)
    mid_parts(t, p, n, start, start_tok, nxt, prv, tok);
    for (size_t k = 0; k < n; k++) pr[k] = TK_NO_RANK;
    for (size_t k = 0; nxt[k] < n; k = nxt[k]) {
        uint32_t r = mid_first_rank(s, t, p, start, nxt, tok, k, max_rank);
        if (r != TK_NO_RANK) {
            pr[k] = r;
            HPUSH(r << 8 | (uint32_t)k);
        }
    }
    while (hn) {
        uint32_t top = heap[0], last = heap[--hn];
        size_t i = 0;
        for (;;) {
            size_t c = 2 * i + 1;
            if (c >= hn) break;
            if (c + 1 < hn && heap[c + 1] < heap[c]) c++;
            if (heap[c] >= last) break;
            heap[i] = heap[c];
            i = c;
        }
        if (hn) heap[i] = last;
        uint32_t r = top >> 8, k = top & 0xFF;
        if (pr[k] != r) continue; /* stale */
        pr[mid_join(nxt, prv, tok, n, k, r)] = TK_NO_RANK;
        pr[k] = TK_NO_RANK;
        if (nxt[k] < n) {
            uint32_t nr = part_pair_rank(s, t, p, nxt, tok, k, max_rank);
            pr[k] = nr;
            if (nr != TK_NO_RANK) HPUSH(nr << 8 | k);
        }
        if (k > 0) {
            uint32_t q = prv[k];
            uint32_t nr = part_pair_rank(s, t, p, nxt, tok, q, max_rank);
            pr[q] = nr;
            if (nr != TK_NO_RANK) HPUSH(nr << 8 | q);
        }
    }
#undef HPUSH
    return mid_emit(nxt, tok, n, out);
}

static int bpe_mid_from(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, const uint64_t *start,
                        const uint32_t *start_tok, tk_ids *out);

static int bpe_mid(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    return bpe_mid_from(t, p, n, max_rank, NULL, NULL, out);
}

/* ---- merging from characters -------------------------------------------
 * In a piece of UTF-8 text the first merges of a multi-byte character mostly
 * just rebuild that character (Thai, Chinese, Cyrillic: 2-3 bytes each, half
 * of the merge steps of such text). Where that is provably what the merge
 * loop on bytes does, the loop starts from the character's token instead.
 *
 * Why it is exact. Take a character c of the piece and a leading run of the
 * merges its bytes go through when merged alone (all of them, or for a
 * 3-byte character just the first), every one ranked below `limit`, the
 * lowest rank of a token that could cover some of c's bytes together with
 * bytes of the piece outside c (a straddle). (1) While that run is not done,
 * one of its pairs (rank < limit) is pending, so no straddle of c is ever
 * the lowest pair: c's bytes merge as they do alone. (2) Any other merge the
 * byte loop makes meanwhile ranks below that pending pair, so below limit;
 * it does not touch c, and the pairs the character loop has in addition
 * (c's partly merged parts with each other: the merge after the run, which
 * ranks at or above limit, or the run would go on; c's parts with a
 * neighbour: straddles) rank above it, so the character loop makes the same
 * merge at that point. By induction
 * over the merges both loops end with the same tokens; equal ranks are the
 * same token on disjoint pairs, which commute. Characters that fail, 4-byte
 * ones and ASCII start from their bytes; a piece with invalid UTF-8 keeps
 * the byte start altogether (the alignment of tokens over c needs valid
 * text).
 *
 * `limit` is bounded from below per occurrence: tokens holding all of c and
 * more, or the last two / first two bytes of a 3-byte c with a neighbour,
 * are taken over the whole vocabulary (char_slot.lim); a token ending with
 * c's lead byte is looked up by the byte before c (pre1), one starting with
 * c's last byte by the byte after it (suf1), as those are the straddles the
 * neighbours decide most (" \xd0", rank 300 in o200k_base, outranks most
 * Cyrillic letters, but only after a space). test_bpe_chars checks the
 * result against the byte loop. */

static inline unsigned utf8_len(uint8_t b) {
    return b < 0x80 ? 1 : b < 0xC0 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0;
}

static inline void lower(uint32_t *slot, uint32_t r) {
    if (r < *slot) *slot = r;
}

/* The tables hold rank + 1, 0 for none (a calloc'd table is empty: no pass
 * over it, and pages never touched are never faulted in); rank_of(v) is
 * TK_NO_RANK for 0. */
static inline void lower1(uint32_t *slot, uint32_t r) {
    if (*slot - 1 > r) *slot = r + 1;
}
static inline uint32_t rank_of(uint32_t v) { return v - 1; }

/* Record token b[0..n) of rank r (or made by a merge of priority r) in the straddle minima. A token that cannot
 * occur in valid UTF-8 is recorded up to its first invalid byte only: it
 * never meets the text this path takes. */
void tk_charmin_note(tk_charmin *ct, const uint8_t *b, size_t n, uint32_t r) {
    size_t m = 0;
    while (m < n && (b[m] & 0xC0) == 0x80) m++;
    if (m == n) return; /* continuation bytes only: inside one character */
    if (m == 1) lower1(&ct->suf1[(b[0] & 63u) << 8 | b[1]], r);
    if (m == 2) lower1(&ct->suf2[(b[0] & 63u) << 6 | (b[1] & 63u)], r);
    /* m == 3: the end of a 4-byte character, which always starts from bytes */
    for (size_t i = m; i < n;) {
        unsigned len = utf8_len(b[i]);
        if (!len) return;
        if (i + len > n) { /* the token ends inside this character, after another byte */
            if (i > 0 && n - i == 1 && len <= 3) lower1(&ct->pre1[(uint32_t)b[i - 1] << 6 | (b[i] & 63u)], r);
            if (i > 0 && n - i == 2 && len == 3) lower1(&ct->pre2[(b[i] & 15u) << 6 | (b[i + 1] & 63u)], r);
            return;
        }
        for (unsigned k = 1; k < len; k++)
            if ((b[i + k] & 0xC0) != 0x80) return;
        if (len == 2 && n > 2) lower1(&ct->whole[(b[i] & 31u) << 6 | (b[i + 1] & 63u)], r);
        if (len == 3 && n > 3) lower1(&ct->whole[(b[i] & 15u) << 12 | (b[i + 1] & 63u) << 6 | (b[i + 2] & 63u)], r);
        i += len;
    }
}

tk_charmin *tk_charmin_build(const tk_tokenizer *t) {
    tk_charmin *cm = calloc(1, sizeof *cm); /* every minimum: none */
    if (!cm) return NULL;
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        const uint8_t *b = t->arena + t->tok_off[r];
        size_t n = t->tok_off[r + 1] - t->tok_off[r], k = 0;
        while (k < n && b[k] < 0x80) k++;
        if (k < n && n > 1) tk_charmin_note(cm, b, n, r);
    }
    return cm;
}

void tk_chartab_free(tk_chartab *ct) {
    if (!ct) return;
    for (size_t i = 0; i < sizeof ct->blk / sizeof ct->blk[0]; i++) free(ct->blk[i]);
    free(ct->own);
    free(ct);
}

/* Block hi of the table, allocated by the first thread that needs it. */
char_slot *tk_chartab_block(tk_chartab *ct, uint32_t hi) {
    char_slot *mine = tk_zalloc_written(256, sizeof *mine), *none = NULL; /* lim 0: not worked out */
    if (!mine) return NULL;
    if (__atomic_compare_exchange_n(&ct->blk[hi], &none, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return mine;
    free(mine); /* another thread was first */
    return none;
}

tk_chartab *tk_chartab_new(const tk_charmin *m, tk_charmin *own) {
    tk_chartab *ct = m ? calloc(1, sizeof *ct) : NULL; /* no block yet */
    if (!ct) {
        free(own);
        return NULL;
    }
    ct->m = m;
    ct->own = own;
    return ct;
}

static tk_chartab *char_table_build(const tk_tokenizer *t) {
    if (t->charmin) return tk_chartab_new(t->charmin, NULL);
    tk_charmin *own = tk_charmin_build(t);
    return tk_chartab_new(own, own);
}

void tk_char_slot_set(char_slot *e, uint32_t first, uint32_t first_rank, uint32_t whole, uint32_t high, uint32_t lim) {
    /* atomics: another thread may be writing the same values */
    __atomic_store_n(&e->first, first, __ATOMIC_RELAXED);
    __atomic_store_n(&e->first_rank, first_rank, __ATOMIC_RELAXED);
    __atomic_store_n(&e->whole, whole, __ATOMIC_RELAXED);
    __atomic_store_n(&e->high, high, __ATOMIC_RELAXED);
    __atomic_store_n(&e->lim, lim ? lim : 1, __ATOMIC_RELEASE); /* rank 0 (a 1-byte token) is never a straddle */
}

/* The table, built by the first thread that needs it (NULL: out of memory,
 * or ranks too large to carry the CT_BC flag). */
static tk_chartab *char_table(const tk_tokenizer *t) {
    tk_chartab **slot = (tk_chartab **)&t->chartab, *ct = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (ct || t->n_ranks >= CT_BC) return ct;
    tk_chartab *mine = char_table_build(t), *none = NULL;
    if (!mine) return NULL;
    if (__atomic_compare_exchange_n(slot, &none, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return mine;
    tk_chartab_free(mine); /* another thread was first */
    return none;
}

/* Slot of BMP character cp (c: its 2 or 3 bytes) for merge-by-rank, worked
 * out on first use (NULL: out of memory). Threads may work one out at once:
 * they write the same values, and lim (nonzero) is stored last. */
static const char_slot *char_slot_of(const void *ctx, tk_chartab *ct, uint32_t cp, const uint8_t *c, unsigned len) {
    const tk_tokenizer *t = ctx;
    char_slot *e = tk_chartab_slot(ct, cp);
    if (!e || __atomic_load_n(&e->lim, __ATOMIC_ACQUIRE)) return e;
    uint32_t lim = rank_of(ct->m->whole[cp]), first, whole, high;
    if (len == 2) {
        first = whole = high = t->pair2[(uint32_t)c[0] << 8 | c[1]];
    } else {
        uint32_t ab = t->pair2[(uint32_t)c[0] << 8 | c[1]], bc = t->pair2[(uint32_t)c[1] << 8 | c[2]];
        uint32_t r1 = ab <= bc ? ab : bc; /* equal: the same token, and the leftmost pair goes first */
        first = r1 == TK_NO_RANK ? TK_NO_RANK : ab <= bc ? ab : (bc | CT_BC);
        whole = r1 == TK_NO_RANK ? TK_NO_RANK : tk_map3_get(t, c); /* the second merge makes all three bytes */
        high = whole == TK_NO_RANK ? TK_NO_RANK : r1 > whole ? r1 : whole;
        lower(&lim, rank_of(ct->m->suf2[(c[1] & 63u) << 6 | (c[2] & 63u)]));
        lower(&lim, rank_of(ct->m->pre2[(c[0] & 15u) << 6 | (c[1] & 63u)]));
    }
    tk_char_slot_set(e, first, first & ~CT_BC, whole, high, lim);
    return e;
}

/* The parts the merge starts from: bit k of start[] when a part starts at
 * byte k, tok[k] its token; slot_of gives a character's merges in the
 * engine's terms (ctx: its argument; NULL when out of memory). 1: start
 * from bytes (invalid UTF-8, no character passing the test, no memory),
 * 0: done. */
int tk_char_parts(const tk_tokenizer *t, tk_chartab *ct, tk_char_slot_fn slot_of, const void *ctx, const uint8_t *p,
                  size_t n, uint64_t start[4], uint32_t *tok) {
    size_t k;
    memset(start, 0, 4 * sizeof *start);
    int any = 0;
    for (k = 0; k < n;) {
        unsigned len = utf8_len(p[k]);
        if (!len || k + len > n) return 1;
        uint32_t cp = p[k] & (0x7Fu >> len);
        for (unsigned i = 1; i < len; i++) {
            if ((p[k + i] & 0xC0) != 0x80) return 1;
            cp = cp << 6 | (p[k + i] & 63u);
        }
        if (len > 1 && (cp < (len == 2   ? 0x80u
                              : len == 3 ? 0x800u
                                         : 0x10000u) ||
                        cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)))
            return 1;        /* overlong, surrogate or beyond Unicode: not valid text */
        unsigned keep = len; /* bytes of this character that start a part of their own: whole 1, [ab][c] 2 */
        uint32_t first = TK_NO_RANK;
        if ((len == 2 || len == 3) && n > len) {
            const char_slot *e = slot_of(ctx, ct, cp, p + k, len);
            if (!e) return 1; /* out of memory: the byte start, which is always right */
            uint32_t limit = __atomic_load_n(&e->lim, __ATOMIC_RELAXED);
            uint32_t high = __atomic_load_n(&e->high, __ATOMIC_RELAXED);
            uint32_t e_first = __atomic_load_n(&e->first, __ATOMIC_RELAXED);
            uint32_t first_rank = __atomic_load_n(&e->first_rank, __ATOMIC_RELAXED);
            if (k > 0) lower(&limit, rank_of(ct->m->pre1[(uint32_t)p[k - 1] << 6 | (p[k] & 63u)]));
            if (k + len < n) lower(&limit, rank_of(ct->m->suf1[(p[k + len - 1] & 63u) << 8 | p[k + len]]));
            if (high < limit) {
                keep = 1;
                first = __atomic_load_n(&e->whole, __ATOMIC_RELAXED);
            } else if (len == 3 && e_first != TK_NO_RANK && first_rank < limit) {
                keep = 2;
                first = e_first;
            }
        }
        /* parts: whole; [ab][c] (first = ab); [a][bc] (first = bc | CT_BC); or one per byte */
        for (unsigned i = 0; i < len; i++) {
            if ((keep == 1 && i > 0) || (keep == 2 && !(first & CT_BC) && i == 1) ||
                (keep == 2 && (first & CT_BC) && i == 2))
                continue;
            start[(k + i) >> 6] |= 1ull << ((k + i) & 63);
            tok[k + i] = t->byte_rank[p[k + i]];
        }
        if (keep < len) {
            tok[k + (keep == 2 && (first & CT_BC))] = first & ~CT_BC;
            any = 1;
        }
        k += len;
    }
    return any ? 0 : 1;
}

/* tk_char_parts for merge-by-rank; 1 also for ASCII-only pieces. */
static int char_parts(const tk_tokenizer *t, const uint8_t *p, size_t n, uint64_t start[4], uint32_t *tok) {
    size_t k = 0;
    while (k < n && p[k] < 0x80) k++;
    if (k == n) return 1;
    tk_chartab *ct = char_table(t);
    return ct ? tk_char_parts(t, ct, char_slot_of, t, p, n, start, tok) : 1;
}

static int flat_run(flat_state *st, const tk_tokenizer *t, tk_ids *out);

int tk_bpe_char_start(const tk_tokenizer *t, const uint8_t *p, size_t n) {
    uint64_t start[4];
    uint32_t tok[SMALL_PIECE + 1];
    return n > 2 && n <= SMALL_PIECE && char_parts(t, p, n, start, tok) == 0;
}

/* bpe_short from characters (max_rank: none); 1 when the piece starts from bytes. */
static int bpe_chars(const tk_tokenizer *t, const uint8_t *p, size_t n, tk_ids *out) {
    uint64_t start[4];
    uint32_t tok[SMALL_PIECE + 1];
    if (char_parts(t, p, n, start, tok)) return 1;
    if (n <= FLAT_PIECE && t->n_ranks <= FLAT_MAX_RANKS) {
        flat_state st;
        st.p = p;
        st.n = (uint32_t)n;
        st.nvec = n <= 8 ? 2 : n <= 16 ? 4 : 8;
        st.alive = start[0];
        for (size_t k = 0; k < 4 * st.nvec; k++) st.rk[k] = FLAT_INF;
        for (uint64_t a = start[0]; a; a &= a - 1) {
            unsigned k = (unsigned)__builtin_ctzll(a);
            st.tok[k] = tok[k];
            uint64_t rest = a & (a - 1);
            if (!rest) break;
            uint64_t after = rest & (rest - 1);
            unsigned e = after ? (unsigned)__builtin_ctzll(after) : (unsigned)n;
            st.rk[k] = flat_rank(t, p + k, e - k, TK_NO_RANK, k);
        }
        return flat_run(&st, t, out);
    }
    return bpe_mid_from(t, p, n, TK_NO_RANK, start, tok, out);
}

static int bpe_short(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    if (max_rank == TK_NO_RANK && n > 2) {
        int rc = bpe_chars(t, p, n, out);
        if (rc <= 0) return rc;
    }
    if (n <= FLAT_PIECE && t->n_ranks <= FLAT_MAX_RANKS) return bpe_small(t, p, n, max_rank, out);
    return bpe_mid(t, p, n, max_rank, out);
}

static int bpe_merge_long(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    if (n >= UINT32_MAX - 1) return TK_ERR_ARG;
    scratch *s = get_scratch(t->n_ranks, n);
    if (!s) return TK_ERR_NOMEM;
    if (!pair_cache(t, max_rank)) return TK_ERR_NOMEM;
    longctx c = {t, p, n, max_rank, s};
    node *nd = s->nd;
    int rc = TK_OK;
    s->n_blk = 0;
    s->ranks.n = 0;
    s->local.n = 0;
    /* Node k starts at byte k; a node that was merged away is unreachable. */
    for (size_t k = 0; k < n; k++) {
        nd[k].nxt = k + 1 < n ? (uint32_t)(k + 1) : NIL;
        nd[k].prv = k ? (uint32_t)(k - 1) : NIL;
        nd[k].tok = t->byte_rank[p[k]];
        nd[k].pr = TK_NO_RANK;
    }
    for (size_t k = 0; k + 1 < n; k++) {
        uint32_t r = t->pair2[((uint32_t)p[k] << 8) | p[k + 1]];
        if (r < max_rank) {
            nd[k].pr = r;
            if ((rc = push_entry(s, r, (uint32_t)k))) goto fail;
        }
    }
    while (s->ranks.n) {
        uint32_t r = (uint32_t)heap_pop(&s->ranks);
        /* Take the whole bucket. Only overlapping pairs of equal rank (a
         * chain such as "a a a a") need leftmost-first order; disjoint
         * chains commute. So each entry walks left to the start of its
         * chain and the chain is merged left to right: no sort needed. */
        /* Blocks are chained newest first: lay them out oldest first, so a
         * bucket filled left to right comes out in ascending positions and
         * the walk to a chain's start below stays short. */
        size_t m = 0;
        for (uint32_t b = s->head[r]; b; b = s->blk[b - 1].next) m += s->blk[b - 1].count;
        if (m > s->cap_nodes) {
            uint32_t *nb = realloc(s->batch, m * 2 * sizeof *nb);
            if (!nb) {
                rc = TK_ERR_NOMEM;
                goto fail;
            }
            s->batch = nb;
            s->cap_nodes = m * 2;
        }
        size_t end = m;
        for (uint32_t b = s->head[r]; b; b = s->blk[b - 1].next) {
            const block *bk = &s->blk[b - 1];
            end -= bk->count;
            memcpy(s->batch + end, bk->node, bk->count * sizeof bk->node[0]);
        }
        s->head[r] = 0;
        for (size_t a = 0; a < m; a++) {
            /* the bucket's nodes are scattered over the piece: fetch ahead */
            if (a + PREFETCH_AHEAD < m) __builtin_prefetch(&nd[s->batch[a + PREFETCH_AHEAD]]);
            uint32_t k = s->batch[a];
            if (nd[k].pr != r || nd[k].nxt == NIL) continue; /* stale */
            while (nd[k].prv != NIL && nd[nd[k].prv].pr == r) k = nd[k].prv;
            while (k != NIL && nd[k].pr == r) {
                if ((rc = merge_at(&c, k, r, r))) goto fail;
                uint32_t after = nd[k].nxt;
                if (s->local.n && (rc = drain_local(&c, r))) goto fail;
                k = after;
            }
        }
    }
    {
        size_t cnt = 0;
        for (uint32_t k = 0; k != NIL; k = nd[k].nxt) cnt++;
        if ((rc = tk_ids_reserve(out, cnt))) goto fail;
        for (uint32_t k = 0; k != NIL; k = nd[k].nxt) out->ids[out->len++] = nd[k].tok;
    }
    return TK_OK;
fail:
    /* leave the scratch reusable */
    while (s->ranks.n) s->head[(uint32_t)heap_pop(&s->ranks)] = 0;
    return rc;
}

/* ---- long pieces: chunks joined by a pair check -------------------------
 *
 * A token sequence is the BPE encoding of its bytes exactly when every
 * token is its own encoding and every two neighbours (a, b) are
 * "compatible": BPE(bytes(a) bytes(b)) = [a, b]. (If the merge loop over
 * the whole text ever merged across a boundary of the sequence, take the
 * first such merge: until then each token's span evolved on its own, so
 * the same merge is the first choice of the loop run on just those two
 * neighbours. The converse holds because any stretch of a BPE encoding is
 * the encoding of its bytes.) docs/tokenizer.md has the argument at length.
 *
 * So a long piece is cut into chunks of up to CHUNK bytes merged on their
 * own (flat merge, in registers and L1), and each junction is checked with
 * one cached pair test. A failed junction is repaired by re-encoding a
 * window of tokens around it, growing each side while its outer junction
 * fails. Should a window outgrow max(1024, 4 x longest token) bytes, the
 * whole piece goes to the global merge (bpe_merge_long), so the cost stays
 * linear whatever the input. */
#define CHUNK 32
#define CHUNK_GROUP 8
#define CC_BITS 14
#define CC_SIZE (1u << CC_BITS)

static inline uint32_t tok_len(const tk_tokenizer *t, uint32_t r) {
    return (uint32_t)(t->tok_off[r + 1] - t->tok_off[r]);
}

static inline int emit1(tk_ids *out, uint32_t r) {
    if (out->len == out->cap && tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
    out->ids[out->len++] = r;
    return TK_OK;
}

/* The merge loop on n bytes, without chunking. Unlike tk_bpe_piece it may
 * not answer a window that spells a token with that token unless the merge
 * loop reaches it from the token's own bytes (a few vocabulary entries are
 * unreachable); reachability is worked out once per token and kept. */
static int bpe_merge_only(const tk_tokenizer *t, const uint8_t *p, size_t n, tk_ids *out) {
    if (n > SMALL_PIECE) return bpe_merge_long(t, p, n, TK_NO_RANK, out);
    if (n == 1) return emit1(out, t->byte_rank[p[0]]);
    return bpe_short(t, p, n, TK_NO_RANK, out);
}

static int reachable(const tk_tokenizer *t, uint32_t r, tk_ids *tmp) {
    uint8_t state = __atomic_load_n(&t->reach[r], __ATOMIC_RELAXED);
    if (state) return state == 1;
    tmp->len = 0;
    int rc = bpe_merge_only(t, t->arena + t->tok_off[r], tok_len(t, r), tmp);
    if (rc) return rc;
    int yes = tmp->len == 1 && tmp->ids[0] == r;
    __atomic_store_n(&t->reach[r], (uint8_t)(yes ? 1 : 2), __ATOMIC_RELAXED);
    return yes;
}

static int bpe_exact(const tk_tokenizer *t, scratch *s, const uint8_t *p, size_t n, tk_ids *out) {
    if (n >= 3 && n <= t->max_token_len) {
        uint32_t r = rank_of_span(t, p, n, TK_NO_RANK);
        if (r != TK_NO_RANK) {
            int yes = reachable(t, r, &s->reach_tmp);
            if (yes < 0) return yes;
            if (yes) return emit1(out, r);
        }
    }
    return bpe_merge_only(t, p, n, out);
}

static inline uint64_t cc_slot(uint32_t a, uint32_t b, uint64_t *key) {
    *key = (((uint64_t)a << 32) | b) + 1;
    return (*key * 0x9E3779B97F4A7C15ull) >> (64 - CC_BITS);
}

/* BPE of bytes(a) bytes(b) into *w; 1 if it is [a, b], 0 if not, <0 on error. */
static int join_pair(const tk_tokenizer *t, scratch *s, uint32_t a, uint32_t b, tk_ids *w) {
    uint32_t la = tok_len(t, a), lb = tok_len(t, b);
    if (la + lb > s->cat_cap) {
        uint8_t *c = realloc(s->cat, la + lb);
        if (!c) return TK_ERR_NOMEM;
        s->cat = c;
        s->cat_cap = la + lb;
    }
    memcpy(s->cat, t->arena + t->tok_off[a], la);
    memcpy(s->cat + la, t->arena + t->tok_off[b], lb);
    w->len = 0;
    uint64_t key, h = cc_slot(a, b, &key);
    int rc;
    if (la + lb <= t->max_token_len && rank_of_span(t, s->cat, la + lb, TK_NO_RANK) != TK_NO_RANK) {
        /* a and b spell a token: were the merge loop ever to hold the
         * parts [a, b] it would join them, so they are not compatible */
        s->cc_key[h] = key;
        s->cc_val[h] = 0;
        return (rc = bpe_exact(t, s, s->cat, la + lb, w)) ? rc : 0;
    }
    if ((rc = bpe_merge_only(t, s->cat, la + lb, w))) return rc;
    int ok = w->len == 2 && w->ids[0] == a && w->ids[1] == b;
    s->cc_key[h] = key;
    s->cc_val[h] = (uint8_t)ok;
    return ok;
}

/* 1 if BPE(bytes(a) bytes(b)) = [a, b], 0 if not, <0 on error. */
static int compatible(const tk_tokenizer *t, scratch *s, uint32_t a, uint32_t b) {
    uint64_t key, h = cc_slot(a, b, &key);
    if (s->cc_key[h] == key) return s->cc_val[h];
    return join_pair(t, s, a, b, &s->pair);
}

/* out->ids[base..] encodes p[0..jpos) and tokens j.. encode the bytes after
 * it, but the junction before token j failed the pair test. Re-encode windows
 * around it; if win_ready, s->win already holds the encoding of the first
 * window (the two tokens at the junction). 1: repaired, 0: window too large
 * (caller falls back), <0: error. */
static int repair(const tk_tokenizer *t, scratch *s, const uint8_t *p, size_t base, size_t j, size_t jpos,
                  int win_ready, tk_ids *out) {
    size_t limit = 4 * (size_t)t->max_token_len;
    if (limit < 1024) limit = 1024;
    /* Each side of the window grows only while its own outer junction fails:
     * usually the new chunk is just out of phase (repeated text) and the
     * window needs more of the right side, not of the settled left. */
    for (size_t kl = 1, kr = 1;; win_ready = 0) {
        size_t lo = j - base < kl ? base : j - kl;
        size_t hi = out->len - j < kr ? out->len : j + kr;
        size_t start = jpos, end = jpos;
        for (size_t i = lo; i < j; i++) start -= tok_len(t, out->ids[i]);
        for (size_t i = j; i < hi; i++) end += tok_len(t, out->ids[i]);
        if (end - start > limit) return 0;
        int rc;
        if (!win_ready) {
            s->win.len = 0;
            if ((rc = bpe_exact(t, s, p + start, end - start, &s->win))) return rc;
        }
        const uint32_t *w = s->win.ids;
        size_t m = s->win.len;
        int okl = 1, okr = 1;
        if (lo > base && (okl = compatible(t, s, out->ids[lo - 1], w[0])) < 0) return okl;
        if (hi < out->len && (okr = compatible(t, s, w[m - 1], out->ids[hi])) < 0) return okr;
        if (!okl) kl *= 2;
        if (!okr) kr *= 2;
        if (!okl || !okr) continue;
        /* splice: out[lo..hi) := window */
        size_t tail = out->len - hi;
        if (m > hi - lo && (rc = tk_ids_reserve(out, m - (hi - lo)))) return rc;
        memmove(out->ids + lo + m, out->ids + hi, tail * sizeof *out->ids);
        memcpy(out->ids + lo, w, m * sizeof *w);
        out->len = lo + m + tail;
        return 1;
    }
}

/* Append a chunk's tokens (raw[0..m), encoding p[pos..]) to out and make
 * the junction before them sound: a cached verdict, or the pair's encoding,
 * which is also the first repair window. 1: ok, 0: no small window repairs
 * it (fall back to the whole piece), <0: error. */
static int chunk_joined(const tk_tokenizer *t, scratch *s, const uint8_t *p, size_t base, size_t pos,
                        const uint32_t *raw, size_t m, tk_ids *out) {
    size_t j = out->len;
    int rc;
    if ((rc = tk_ids_reserve(out, m))) return rc;
    memcpy(out->ids + j, raw, m * sizeof *raw);
    out->len += m;
    if (j == base) return 1;
    uint64_t key, h = cc_slot(out->ids[j - 1], out->ids[j], &key);
    int fresh = s->cc_key[h] != key;
    rc = fresh ? join_pair(t, s, out->ids[j - 1], out->ids[j], &s->win) : s->cc_val[h];
    if (rc == 0) rc = repair(t, s, p, base, j, pos, fresh, out);
    return rc;
}

/* Length of the chunk starting at pos: up to `chunk` bytes, cut before the
 * byte pair of the highest rank among the last few candidates (a pair that
 * is no token at all ranks highest). The merge loop joins such a pair late
 * if ever, so the junction more often holds and needs no repair. */
#define CUT_CHOICE 8
static inline size_t chunk_cut(const tk_tokenizer *t, const uint8_t *p, size_t pos, size_t n, size_t chunk) {
    if (n - pos <= chunk) return n - pos;
    if (chunk <= CUT_CHOICE) return chunk;
    size_t best = chunk;
    uint32_t best_r = t->pair2[((uint32_t)p[pos + chunk - 1] << 8) | p[pos + chunk]];
    for (size_t m = chunk - 1; m > chunk - CUT_CHOICE; m--) {
        uint32_t r = t->pair2[((uint32_t)p[pos + m - 1] << 8) | p[pos + m]];
        if (r > best_r) {
            best_r = r;
            best = m;
        }
    }
    return best;
}

#define FLAT_FN(name) name##_base
#define FLAT_SIMD 0
#include "bpe_flat.h"
#undef FLAT_SIMD
#undef FLAT_FN

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define BPE_HAVE_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2")
#include <immintrin.h>
#define FLAT_FN(name) name##_avx2
#define FLAT_SIMD 1
#include "bpe_flat.h"
#undef FLAT_SIMD
#undef FLAT_FN
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2")
#define FLAT_FN(name) name##_avx512
#define FLAT_SIMD 2
#include "bpe_flat.h"
#undef FLAT_SIMD
#undef FLAT_FN
#pragma GCC pop_options

/* 0: baseline, 1: AVX2, 2: AVX-512 (F, VL, BW, DQ) */
static int simd_known = -1;
static int simd_level(void) {
    int v = __atomic_load_n(&simd_known, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
                ? 2
            : __builtin_cpu_supports("avx2") ? 1
                                             : 0;
        __atomic_store_n(&simd_known, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

int tk_simd_level(int force) {
#ifdef BPE_HAVE_AVX2
    int best = (__atomic_store_n(&simd_known, -1, __ATOMIC_RELAXED), simd_level());
    if (force >= 0 && force < best) __atomic_store_n(&simd_known, force, __ATOMIC_RELAXED);
    return simd_level();
#else
    (void)force;
    return 0;
#endif
}

static int bpe_small(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
#ifdef BPE_HAVE_AVX2
    if (n > 16) { /* only the 32-lane scan differs */
        int level = simd_level();
        if (level == 2) return small_avx512(t, p, n, max_rank, out);
        if (level == 1) return small_avx2(t, p, n, max_rank, out);
    }
#endif
    return small_base(t, p, n, max_rank, out);
}

static int flat_run(flat_state *st, const tk_tokenizer *t, tk_ids *out) {
#ifdef BPE_HAVE_AVX2
    if (st->n > 16) {
        int level = simd_level();
        if (level == 2) return run_avx512(st, t, out);
        if (level == 1) return run_avx2(st, t, out);
    }
#endif
    return run_base(st, t, out);
}

/* Mid-size pieces: the vector flat merge (bpe_flat.h) where the CPU has
 * AVX2 and ranks fit its keys, else the heap. */
static int bpe_mid_from(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, const uint64_t *start,
                        const uint32_t *start_tok, tk_ids *out) {
#ifdef BPE_HAVE_AVX2
    if (t->n_ranks < MID_MAX_RANKS) {
        int level = simd_level();
        if (level == 2) return mid_avx512(t, p, n, max_rank, start, start_tok, out);
        if (level == 1) return mid_avx2(t, p, n, max_rank, start, start_tok, out);
    }
#endif
    return bpe_mid_heap(t, p, n, max_rank, start, start_tok, out);
}

int tk_bpe_chunked(const tk_tokenizer *t, const uint8_t *p, size_t n, size_t chunk, tk_ids *out) {
    scratch *s = thread_scratch();
    if (!s) return TK_ERR_NOMEM;
    if (!s->cc_key) {
        if (cache_alloc(&s->cc_key, (void **)&s->cc_val, CC_SIZE, sizeof *s->cc_val)) return TK_ERR_NOMEM;
        s->cc_serial = t->serial;
    }
    if (s->cc_serial != t->serial) {
        memset(s->cc_key, 0, CC_SIZE * sizeof *s->cc_key);
        s->cc_serial = t->serial;
    }
    if (chunk < 1) chunk = 1;
    if (chunk > FLAT_LANES) chunk = FLAT_LANES;
    if (t->n_ranks > FLAT_MAX_RANKS) return bpe_merge_long(t, p, n, TK_NO_RANK, out);
    size_t base = out->len;
#ifdef BPE_HAVE_AVX2
    int level = simd_level();
    int rc = level == 2   ? chunks_avx512(t, s, p, n, chunk, out)
             : level == 1 ? chunks_avx2(t, s, p, n, chunk, out)
                          : chunks_base(t, s, p, n, chunk, out);
#else
    int rc = chunks_base(t, s, p, n, chunk, out);
#endif
    if (rc < 0) return rc;
    if (rc == 0) { /* no small window fits: merge the whole piece at once */
        out->len = base;
        return bpe_merge_long(t, p, n, TK_NO_RANK, out);
    }
    return TK_OK;
}

static int bpe_long(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    if (max_rank != TK_NO_RANK) return bpe_merge_long(t, p, n, max_rank, out);
#ifdef BPE_HAVE_AVX2
    /* with AVX-512 a 64-lane scan costs little more than a 32-lane one, and
     * half as many junctions need testing */
    if (simd_level() == 2) return tk_bpe_chunked(t, p, n, 2 * CHUNK, out);
#endif
    return tk_bpe_chunked(t, p, n, CHUNK, out);
}

static piece_entry *piece_cache_slot(const tk_tokenizer *t, uint64_t h) {
    scratch *s = thread_scratch();
    if (!s) return NULL;
    if (!s->pcache) {
        s->pcache = tk_zalloc_written(PIECE_CACHE_SETS, sizeof *s->pcache);
        if (!s->pcache) return NULL;
        s->pcache_serial = t->serial;
    }
    if (s->pcache_serial != t->serial) {
        memset(s->pcache, 0, PIECE_CACHE_SETS * sizeof *s->pcache);
        s->pcache_serial = t->serial;
    }
    return &s->pcache[(h >> 20) & (PIECE_CACHE_SETS - 1)];
}

/* Short pieces that are no token go through the piece cache because words
 * recur in text; on text where they do not (random letters) the cache only
 * costs. Per thread: the hit rate over each 4096 probes decides, and a cold
 * streak turns the cache off for the next 64 K such pieces, then it is
 * tried again. */
#define SHORT_WINDOW 4096
#define SHORT_SKIP 65536
static _Thread_local struct { uint32_t probes, hits, skip; } short_stats;

int tk_bpe_piece(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    if (n == 0) return TK_OK;
    if (n == 1) return emit1(out, t->byte_rank[p[0]]);
    if (n == 2) {
        uint32_t r = t->pair2[((uint32_t)p[0] << 8) | p[1]];
        if (r < max_rank) return emit1(out, r);
        return bpe_short(t, p, n, max_rank, out);
    }
    if (n <= 8) {
        /* the short map is one probe: try it before anything else */
        uint32_t r = tk_smap_get(t, tk_short_word(p, n), n);
        if (r < max_rank) return emit1(out, r);
        if (max_rank != TK_NO_RANK) return bpe_short(t, p, n, max_rank, out);
        /* else the piece cache below (measured on the corpus: 4-9% faster
         * than merging), unless it has been missing */
        if (short_stats.skip) {
            short_stats.skip--;
            return bpe_short(t, p, n, max_rank, out);
        }
        if (++short_stats.probes == SHORT_WINDOW) {
            if (short_stats.hits < SHORT_WINDOW / 4) short_stats.skip = SHORT_SKIP;
            short_stats.probes = short_stats.hits = 0;
        }
    }
    if (n > SMALL_PIECE || max_rank != TK_NO_RANK || n > PIECE_CACHE_BYTES) {
        /* no hashing a megabyte to learn it is not a token */
        uint32_t r = n > 8 && n <= t->max_token_len ? tk_lmap_get(t, p, n, tk_hash_bytes(p, n)) : TK_NO_RANK;
        if (r < max_rank) return emit1(out, r);
        return n > SMALL_PIECE ? bpe_long(t, p, n, max_rank, out) : bpe_short(t, p, n, max_rank, out);
    }
    /* 3..44 bytes: the per-thread piece cache (L2-sized) answers recurring
     * words before the vocabulary (a few cache misses) or a merge loop. */
    uint64_t h0 = tk_hash_bytes(p, n), h = h0 | 1; /* cache tags are never 0 */
    piece_entry *e = piece_cache_slot(t, h);
    if (e && e->h == h && e->len == n && tk_bytes_eq(e->bytes, p, n)) {
        short_stats.hits += n <= 8;
        if (tk_ids_reserve(out, e->n_ids)) return TK_ERR_NOMEM;
        memcpy(out->ids + out->len, e->ids, e->n_ids * sizeof *e->ids);
        out->len += e->n_ids;
        return TK_OK;
    }
    size_t from = out->len;
    int rc;
    uint32_t r = n > 8 ? tk_lmap_get(t, p, n, h0) : TK_NO_RANK;
    if (r != TK_NO_RANK) rc = emit1(out, r);
    else rc = bpe_short(t, p, n, max_rank, out);
    if (e && rc == TK_OK && out->len - from <= PIECE_CACHE_IDS) {
        e->h = h;
        e->len = (uint16_t)n;
        e->n_ids = (uint16_t)(out->len - from);
        memcpy(e->bytes, p, n);
        memcpy(e->ids, out->ids + from, e->n_ids * sizeof *e->ids);
    }
    return rc;
}
