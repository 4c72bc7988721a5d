/* unigram.c - the engine of SentencePiece models whose model_type is
 * UNIGRAM (T5/mT5/UL2, XLM-R, ALBERT ...).
 *
 * spm.c reads the ModelProto (pieces, normalizer, byte fallback, unk,
 * user-defined and control pieces) and decodes, load_spm.c hands UNIGRAM
 * models here (this file never calls the loader); this file encodes as
 * unigram::Model::EncodeOptimized of sentencepiece 0.2.1 and later (0.2.3
 * checked; its only encoder) followed by SentencePieceProcessor::Encode's
 * handling of unknown pieces, so the ids are those of
 * `SentencePieceProcessor.encode`:
 *
 *   - Viterbi over the lattice of the normalized text, positions in bytes:
 *     for each character start s (by its lead byte), every NORMAL or
 *     USER_DEFINED piece that starts there (UNUSED pieces are in the trie
 *     and skipped) proposes best[s] + score as best[end]; strictly greater
 *     wins, so among equal scores the first proposed (the earlier start,
 *     then the shorter piece) stays;
 *   - a USER_DEFINED piece of l bytes scores 0.1 * (l - 1);
 *   - a character no single-character piece covers is unk, scored
 *     min_score - 10 (kUnkPenalty), min over the NORMAL pieces;
 *   - path scores are floats, summed in float; when the score at s is
 *     beyond +-100000 (kScoreResetThreshold) every score from s to the
 *     furthest end reached so far is rebased by it. Near-ties are decided by
 *     that rounding, so it is reproduced exactly; the word cache (below)
 *     answers only where that rounding provably cannot change a word's
 *     pieces, and the path score it carries on is the float sum the
 *     Viterbi would hold;
 *   - then unk with byte_fallback is its bytes' <0xNN> pieces, and a run of
 *     unk pieces is one unk.
 * sentencepiece 0.2.0 and earlier differ: no rebasing (documents whose
 * path passes -100000, some 15000 tokens, can differ in a few near-ties)
 * and USER_DEFINED pieces scored l * max_score - 0.1.
 *
 * The pieces are held in a double-array trie (base/check, as Darts, which
 * sentencepiece uses) built at load from the sorted pieces by key_trie.c
 * (hf_unigram.c's builder too); its size is bounded by the pieces' bytes
 * (which the file holds). */
#include "spm_internal.h"
#include "tk_engine.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define SPM_OF(t) ((const tk_spm *)(t)->engine_state)
#define UNK_PENALTY 10.0f     /* unigram::kUnkPenalty */
#define SCORE_RESET 100000.0f /* EncodeOptimized's kScoreResetThreshold */

typedef struct {
    int32_t id;  /* the piece ending at the slot */
    float score; /* its lattice score (user-defined: by its length) */
} uni_term;

struct tk_uni {
    /* the pieces' double array (key_trie.c; 8-byte slots, eight a cache
     * line); TK_DA_TERMINAL: a piece (not UNUSED) ends at the slot */
    tk_da_slot *slot;
    uni_term *term; /* by slot, read only where TK_DA_TERMINAL is set */
    size_t size;    /* slots used; 256 more are allocated, free, so base + c needs no bound check */
    float min_score, unk_score;
    uint32_t n_trie; /* pieces in the trie */
    /* no NORMAL or USER_DEFINED piece holds '▁' past its first byte, so no
     * piece crosses a '▁' of the text: the word cache applies */
    bool cut_safe;
};

void tk_unigram_free(struct tk_uni *u) {
    if (!u) return;
    free(u->slot);
    free(u->term);
    free(u);
}

/* ---- building the trie ---------------------------------------------------- */

/* A piece's bytes, for tk_key_sort and tk_da_build. */
static const uint8_t *piece_bytes(const void *owner, uint32_t id) { return ((const tk_spm *)owner)->piece[id]; }

/* The double array of ent[0, n) and each kept piece's id and lattice score
 * where it ends. */
static int build_trie(const tk_spm *m, struct tk_uni *u, const tk_key_ent *ent, uint32_t n) {
    uint32_t *at = malloc(((size_t)n + 1) * sizeof *at);
    if (!at) return TK_ERR_NOMEM;
    int rc = tk_da_build(ent, n, m, piece_bytes, &u->slot, &u->size, at);
    if (!rc && !(u->term = malloc((u->size + 1) * sizeof *u->term))) rc = TK_ERR_NOMEM;
    for (uint32_t i = 0; !rc && i < n; i++) {
        uint32_t id = ent[i].id;
        if (m->type[id] == SP_UNUSED) continue; /* in the trie, skipped by EncodeOptimized */
        u->slot[at[i]].base |= TK_DA_TERMINAL;
        /* GetUserDefinedScore: 0.1 * (length - 1), a float */
        u->term[at[i]] =
            (uni_term){(int32_t)id, m->type[id] == SP_USER ? (float)(0.1 * (double)(ent[i].len - 1)) : m->score[id]};
    }
    free(at);
    return rc;
}

int tk_unigram_build(tk_spm *m, char *err, size_t errlen, const char *path) {
    struct tk_uni *u = calloc(1, sizeof *u);
    tk_key_ent *ent = malloc(((size_t)m->n + 1) * sizeof *ent);
    int rc = TK_ERR_NOMEM;
    if (!u || !ent) goto fail;
    /* unigram::Model::Model: min over the NORMAL pieces, from FLT_MAX;
     * an infinite score makes the model unusable there */
    u->min_score = FLT_MAX;
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        int ty = m->type[i];
        if (isinf(m->score[i])) {
            tk_set_err(err, errlen, "%s: pieces[%u]: Unigram model with an infinite score (sentencepiece refuses it)",
                       path, i);
            free(ent);
            tk_unigram_free(u);
            return TK_ERR_FORMAT;
        }
        if (ty == SP_NORMAL && m->score[i] < u->min_score) u->min_score = m->score[i];
        if (ty == SP_NORMAL || ty == SP_USER || ty == SP_UNUSED) { /* the model's pieces_ */
            ent[n++] = (tk_key_ent){tk_key_head(m->piece[i], m->plen[i]), i, m->plen[i]};
        }
    }
    u->unk_score = u->min_score - UNK_PENALTY;
    u->cut_safe = true;
    for (uint32_t i = 0; i < m->n && u->cut_safe; i++) {
        if (!(m->type[i] == SP_NORMAL || m->type[i] == SP_USER) || m->plen[i] <= 3) continue;
        const uint8_t *pc = m->piece[i], *end = pc + m->plen[i];
        for (const uint8_t *x = pc + 1; (x = memchr(x, 0xe2, (size_t)(end - x))) && end - x >= 3; x++)
            if (x[1] == SPACE_SYM[1] && x[2] == SPACE_SYM[2]) {
                u->cut_safe = false;
                break;
            }
    }
    u->n_trie = n;
    if ((rc = tk_key_sort(ent, n, m, piece_bytes))) goto fail;
    if ((rc = build_trie(m, u, ent, n))) goto fail;
    free(ent);
    m->uni = u;
    return TK_OK;
fail:
    tk_set_err(err, errlen, "%s: Unigram model: %s while building its piece trie", path,
               rc == TK_ERR_LIMIT ? "too many trie nodes" : "out of memory");
    free(ent);
    tk_unigram_free(u);
    return rc;
}

/* ---- encoding -------------------------------------------------------------- */

typedef struct {
    float score;   /* best path score ending here */
    int32_t start; /* where its last piece starts, -1: no path yet */
    int32_t id;    /* its last piece */
} best_node;

/* The word cache (u->cut_safe models only). Every path of the lattice
 * passes through each position where a '▁' starts (no piece crosses it), so
 * the text splits there into words whose best paths are independent, but
 * for the float rounding of T + the word's sums, T = the path score where
 * the word starts. An entry holds a word's path found in double with T = 0
 * and tmax: the largest |T| for which float sums from T provably make the
 * same decisions (each of the word's nc additions errs by at most half an
 * ulp, so two candidates move by at most 2 nc half-ulps relative to each
 * other; every decision on the path has a margin over that) and no score
 * inside the word passes the rebasing threshold. A hit gives the pieces,
 * and the float path score at the word's end is T + their scores summed in
 * float in path order, which is what the Viterbi would hold there.
 * Memory: 2^CACHE_BITS entries of 128 bytes (2 MiB) per encoding thread,
 * whatever the text; a word not in it costs one walk, as without it. */
#define KEY_MAX 32 /* bytes of a cached word */
#define ENT_MAX 10 /* pieces of a cached word (an entry: 128 bytes) */
#define CACHE_BITS 14
#define KEY_RING 4 /* the words keyed ahead, + 1 */
typedef struct {
    int32_t id;  /* an unk piece: -(its bytes) */
    float score; /* its lattice score */
} uni_piece;
typedef struct {
    uint64_t key[KEY_MAX / 8]; /* the word's bytes, zero padded */
    uint32_t tag;              /* the model's serial + 1 (below 2^32); 0: empty */
    float tmax;                /* usable while |T| <= tmax; -1: never (the Viterbi runs) */
    uint8_t klen, np;
    uint8_t pad;           /* of a set's first way: which way was used last */
    uint8_t unk;           /* an unk piece is on the path */
    uni_piece pc[ENT_MAX]; /* the pieces: up to 2 in the entry's first cache line */
    uint8_t pad2[4];
} uni_entry;
_Static_assert(sizeof(uni_entry) == 128, "an entry is two cache lines");

typedef struct {
    tk_bytes norm;
    best_node *best;
    size_t best_cap;
    uint32_t *path; /* backtracked: (id, off, len) triples, last piece first */
    size_t path_cap;
    uni_entry *cache; /* 1 << CACHE_BITS entries, any model's (tag) */
} uni_scratch;

static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    uni_scratch *w = p;
    if (!w) return;
    tk_bytes_free(&w->norm);
    free(w->best);
    free(w->path);
    free(w->cache);
    free(w);
}

static void key_init(void) { pthread_key_create(&g_key, scratch_free); }

static uni_scratch *scratch(void) {
    pthread_once(&g_once, key_init);
    uni_scratch *w = pthread_getspecific(g_key);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w || pthread_setspecific(g_key, w)) {
            free(w);
            return NULL;
        }
    }
    return w;
}

/* string_util::OneCharLen: from the lead byte alone. */
static inline size_t one_char_len(uint8_t b) {
    static const uint8_t t[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return t[b >> 4];
}

/* A word's lattice in double from 0 (word_viterbi): the best score of
 * every end, its runner-up, the largest magnitude any candidate reaches. */
typedef struct {
    double bs[KEY_MAX + 1], sec[KEY_MAX + 1], wmax;
    int32_t st[KEY_MAX + 1], id[KEY_MAX + 1];
    float sc[KEY_MAX + 1];
} local_path;

/* EncodeOptimized over t[0, tn) from a path score t0 at 0, into best. */
static void viterbi(const tk_spm *m, const struct tk_uni *u, const uint8_t *t, size_t tn, float t0, best_node *best) {
    /* -inf: the first proposal always wins (scores are finite), as
     * sentencepiece's starts_at == -1 test has it, without a branch */
    for (size_t i = 0; i <= tn; i++) best[i] = (best_node){-INFINITY, -1, -1};
    best[0].score = t0;
    const tk_da_slot *sl = u->slot;
    size_t frontier = 0; /* the furthest end any piece has reached */
    for (size_t s = 0; s < tn;) {
        float till = best[s].score;
        if (till < -SCORE_RESET || till > SCORE_RESET) {
            /* sentencepiece rebases the scores of the positions still ahead
             * (a float loses the differences of pieces' scores as the sum
             * grows); the ids depend on exactly when it does */
            const float offset = till;
            for (size_t i = s; i <= frontier; i++)
                if (i == s || best[i].start != -1) best[i].score -= offset;
            till = 0.0f;
        }
        size_t mb = one_char_len(t[s]);
        if (mb > tn - s) mb = tn - s;
        bool single = false;
        tk_da_walk w = tk_da_walk_root(sl);
        for (size_t k = s; k < tn; k++) {
            int at = tk_da_walk_step(sl, &w, t[k]);
            if (at < 0) break;
            if (!at) continue;
            const uint32_t node = w.node;
            int32_t id = u->term[node].id;
            size_t len = k + 1 - s;
            frontier = k + 1 > frontier ? k + 1 : frontier;
            float cand = u->term[node].score + till;
            best_node *tg = &best[k + 1];
            bool win = cand > tg->score; /* select, not branch: which wins is data */
            tg->score = win ? cand : tg->score;
            tg->start = win ? (int32_t)s : tg->start;
            tg->id = win ? id : tg->id;
            single |= len == mb;
        }
        if (!single) {
            if (s + mb > frontier) frontier = s + mb;
            best_node *tg = &best[s + mb];
            float cand = u->unk_score + till;
            if (cand > tg->score) {
                tg->score = cand;
                tg->start = (int32_t)s;
                tg->id = (int32_t)m->unk_id;
            }
        }
        s += mb;
    }
}

/* The same lattice over a word t[0, tn) (tn <= KEY_MAX) in double from 0,
 * with every end's runner-up: what a cache entry is made of. No rebasing
 * (word_viterbi proves only words whose scores stay below it). The float
 * lattice is not walked here: where the entry's proof covers the path
 * score the word starts at, its pieces are the float Viterbi's. */
static void walk_double(const tk_spm *m, const struct tk_uni *u, const uint8_t *t, size_t tn, local_path *d) {
    for (size_t i = 0; i <= tn; i++) {
        d->bs[i] = d->sec[i] = -INFINITY;
        d->st[i] = -1;
    }
    d->bs[0] = 0.0;
    double wmax = 0.0;
    const tk_da_slot *sl = u->slot;
    /* select, not branch: which candidate wins is data (a mispredicted
     * branch per proposal cost more than the selects); the runner-up is
     * max(sec, min(best, c)): the old best when c wins, else c if above it */
#define PROPOSE_D(end, cid, csc)                                                                                       \
    do {                                                                                                               \
        const size_t e_ = (end);                                                                                       \
        const double c_ = from + (double)(csc), b_ = d->bs[e_], s_ = d->sec[e_], m_ = c_ < b_ ? c_ : b_;               \
        const bool win_ = c_ > b_;                                                                                     \
        wmax = fabs(c_) > wmax ? fabs(c_) : wmax;                                                                      \
        d->sec[e_] = m_ > s_ ? m_ : s_;                                                                                \
        d->bs[e_] = win_ ? c_ : b_;                                                                                    \
        d->st[e_] = win_ ? (int32_t)s : d->st[e_];                                                                     \
        d->id[e_] = win_ ? (cid) : d->id[e_];                                                                          \
        d->sc[e_] = win_ ? (csc) : d->sc[e_];                                                                          \
    } while (0)
    for (size_t s = 0; s < tn;) {
        const double from = d->bs[s];
        size_t mb = one_char_len(t[s]);
        if (mb > tn - s) mb = tn - s;
        bool single = false;
        tk_da_walk w = tk_da_walk_root(sl);
        for (size_t k = s; k < tn; k++) {
            int at = tk_da_walk_step(sl, &w, t[k]);
            if (at < 0) break;
            if (!at) continue;
            single |= k + 1 - s == mb;
            PROPOSE_D(k + 1, u->term[w.node].id, u->term[w.node].score);
        }
        if (!single) PROPOSE_D(s + mb, (int32_t)m->unk_id, u->unk_score);
        s += mb;
    }
    d->wmax = wmax;
#undef PROPOSE_D
}

/* A word's best path (what a cache entry holds, for any number of pieces):
 * its pieces in order, whether one is unk, and tmax (-1: never usable). */
typedef struct {
    uni_piece pc[KEY_MAX];
    size_t np;
    bool unk;
    float tmax;
} word_path;

/* The path of the word t[0, n) (n <= KEY_MAX, nc characters) found in
 * double from 0 (exact for these sums: float scores, a few additions), the
 * margin of every decision on it over the runner-up (0 on a tie: the
 * proposal order decides, which rounding can change), and from those tmax
 * (-1 with no path). */
static void word_viterbi(const tk_spm *m, const struct tk_uni *u, const uint8_t *t, size_t n, size_t nc,
                         word_path *wp) {
    local_path d;
    walk_double(m, u, t, n, &d);
    wp->np = 0;
    wp->unk = false;
    wp->tmax = -1.0f;
    int32_t rid[KEY_MAX];
    float rsc[KEY_MAX];
    double margin = INFINITY;
    size_t np = 0;
    bool unk = false;
    for (size_t x = n; x > 0; x = (size_t)d.st[x]) {
        if (d.st[x] < 0) return;
        if (d.bs[x] - d.sec[x] < margin) margin = d.bs[x] - d.sec[x];
        /* unk: one character, emitted as its bytes' pieces or as part of a
         * fused run, as emit_path does */
        bool k = d.id[x] == (int32_t)m->unk_id;
        unk |= k;
        rid[np] = k ? -(int32_t)(x - (size_t)d.st[x]) : d.id[x];
        rsc[np++] = d.sc[x];
    }
    wp->unk = unk;
    for (size_t k = 0; k < np; k++) wp->pc[k] = (uni_piece){rid[np - 1 - k], rsc[np - 1 - k]};
    wp->np = np;
    /* candidates' magnitudes stay below 2^b when |T| + wmax + 1 < 2^b (the
     * 1 covers the rounding, nc half-ulps of at most 2^-8); there a float
     * addition errs by at most 2^(b-25), and the decisions hold while
     * margin > 2 nc 2^(b-25). No rebasing inside: |T| + wmax + 1 <= 100000. */
    for (int b = 17; b > 0; b--) {
        const double pb = (double)(1u << b); /* 2^b, 2^(b-25) exactly, without ldexp's call */
        if (!(margin > 2.0 * (double)nc * (pb / 33554432.0) + 1e-9)) continue; /* 1e-9: the double sums' rounding */
        double lim = pb - d.wmax - 1.0;
        if (lim > (double)SCORE_RESET - d.wmax - 1.0) lim = (double)SCORE_RESET - d.wmax - 1.0;
        if (lim >= 0.0) wp->tmax = (float)lim * (1.0f - 1e-6f); /* float(lim) may round up */
        return;
    }
}

/* Appends the piece id covering bytes[0, len) as SentencePieceProcessor::
 * Encode does: an unk piece as its bytes' pieces with byte fallback, else a
 * run of unk pieces (across pieces and words: *prev_unk) as one. The caller
 * has reserved room for len ids (1 for a piece that is not unk). */
static inline void put_piece(const tk_spm *m, uint32_t id, const uint8_t *bytes, size_t len, bool *prev_unk,
                             tk_ids *out) {
    bool unk = id == m->unk_id;
    if (unk && m->byte_fallback) {
        for (size_t j = 0; j < len; j++) out->ids[out->len++] = m->byte_id[bytes[j]];
        return;
    }
    if (!(unk && *prev_unk)) out->ids[out->len++] = id;
    *prev_unk = unk;
}

/* Backtracks best over t[0, tn) (positions from off in the text) and
 * appends the ids (put_piece). */
static int emit_path(const tk_spm *m, uni_scratch *w, const uint8_t *t, size_t tn, bool *prev_unk, tk_ids *out) {
    size_t np = 0;
    for (size_t e = tn; e > 0; e = (size_t)w->best[e].start) {
        if (np == w->path_cap) {
            size_t cap = w->path_cap ? w->path_cap * 2 : 1024;
            uint32_t *p = realloc(w->path, cap * 3 * sizeof *p);
            if (!p) return TK_ERR_NOMEM;
            w->path = p;
            w->path_cap = cap;
        }
        const best_node *b = &w->best[e];
        w->path[3 * np] = (uint32_t)b->id;
        w->path[3 * np + 1] = (uint32_t)b->start;
        w->path[3 * np + 2] = (uint32_t)(e - (size_t)b->start);
        np++;
    }
    if (tk_ids_reserve(out, np)) return TK_ERR_NOMEM;
    for (size_t k = np; k-- > 0;) {
        uint32_t id = w->path[3 * k], off = w->path[3 * k + 1], len = w->path[3 * k + 2];
        size_t room = id == m->unk_id && m->byte_fallback ? len : 1; /* byte pieces may have taken the room */
        if (out->cap - out->len < room && tk_ids_reserve(out, room)) return TK_ERR_NOMEM;
        put_piece(m, id, t + off, len, prev_unk, out);
    }
    return TK_OK;
}

static int best_reserve(uni_scratch *w, size_t n) {
    if (w->best_cap >= n + 1) return TK_OK;
    best_node *p = realloc(w->best, (n + 1) * sizeof *p);
    if (!p) return TK_ERR_NOMEM;
    w->best = p;
    w->best_cap = n + 1;
    return TK_OK;
}

/* The end of the word starting at p (the next '▁' at a character start,
 * by lead bytes as the Viterbi steps) and its characters in *nc. The text
 * has KEY_MAX readable bytes past tn. */
static inline size_t word_end(const uint8_t *t, size_t p, size_t tn, size_t *nc) {
    size_t s = p + one_char_len(t[p]), c = 1;
    while (s < tn) {
        uint8_t b = t[s];
        if (b < 0x80) {
#ifdef __SSE2__
            /* the ASCII run from s (one character a byte) in one step;
             * the 16 bytes read lie within the 32 readable past tn */
            unsigned hi = (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(t + s)));
            size_t k = (size_t)__builtin_ctz(hi | 0x10000u);
            if (k > tn - s) k = tn - s;
            s += k;
            c += k;
            continue;
#else
            s++;
#endif
        } else {
            if (b == 0xe2 && t[s + 1] == 0x96 && t[s + 2] == 0x81) break;
            s += one_char_len(b);
        }
        c++;
    }
    *nc = c;
    return s < tn ? s : tn;
}

static inline bool same_key(const uni_entry *e, uint32_t tag, const uint64_t *k, size_t len) {
    return e->tag == tag && e->klen == len && e->key[0] == k[0] && e->key[1] == k[1] && e->key[2] == k[2] &&
           e->key[3] == k[3];
}

static inline uint64_t load64(const uint8_t *p) {
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

/* The word starting at p: its end q, characters nc, zero-padded key and
 * cache set (for words of at most KEY_MAX bytes). */
typedef struct {
    size_t q, nc, set;
    uint64_t k[KEY_MAX / 8];
} word_key;

static inline void word_at(const uint8_t *t, size_t p, size_t tn, word_key *wk) {
    wk->q = word_end(t, p, tn, &wk->nc);
    size_t len = wk->q - p;
    if (len > KEY_MAX) return;
#ifdef __SSE2__
    /* the 32 bytes from p (readable: KEY_MAX past tn), those from len on
     * zeroed by comparing their index with len */
    const __m128i n16 = _mm_set1_epi8((char)len);
    __m128i lo = _mm_loadu_si128((const __m128i *)(t + p)), hi = _mm_loadu_si128((const __m128i *)(t + p + 16));
    lo = _mm_and_si128(lo, _mm_cmplt_epi8(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), n16));
    hi = _mm_and_si128(
        hi, _mm_cmplt_epi8(_mm_setr_epi8(16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31), n16));
    _mm_storeu_si128((__m128i *)wk->k, lo);
    _mm_storeu_si128((__m128i *)(wk->k + 2), hi);
#else
    for (size_t j = 0; j < KEY_MAX / 8; j++) {
        size_t left = len > 8 * j ? len - 8 * j : 0;
        wk->k[j] = left >= 8 ? load64(t + p + 8 * j) : left ? load64(t + p + 8 * j) & ((1ull << (8 * left)) - 1) : 0;
    }
#endif
    uint64_t h = (wk->k[0] * 0x9e3779b97f4a7c15ull) ^ (wk->k[1] * 0xc2b2ae3d27d4eb4full) ^
                 (wk->k[2] * 0x165667b19e3779f9ull) ^ (wk->k[3] * 0x27d4eb2f165667c5ull) ^ len;
    h ^= h >> 29;
    wk->set = ((h * 0xff51afd7ed558ccdull) >> (64 - CACHE_BITS)) & ~(size_t)1;
}

/* A word's pieces from its cache entry or word_viterbi: their ids (an unk
 * piece as put_piece has it) appended to out, and the path score at the
 * word's end in *till, summed in float piece by piece as the Viterbi does.
 * TK_ERR_NOMEM or TK_OK. */
static inline int emit_word(const tk_spm *m, const uni_piece *pc, size_t np, bool unk, const uint8_t *t, float *till,
                            bool *prev_unk, tk_ids *out) {
    size_t room = unk ? 4 * np : np; /* an unk character: up to 4 byte pieces */
    if (out->cap - out->len < room && tk_ids_reserve(out, room)) return TK_ERR_NOMEM;
    float sc = *till;
    if (!unk) {
        for (size_t j = 0; j < np; j++) {
            out->ids[out->len++] = (uint32_t)pc[j].id;
            sc += pc[j].score;
        }
        *prev_unk = false;
    } else {
        size_t off = 0;
        for (size_t j = 0; j < np; j++) {
            int32_t id = pc[j].id; /* an unk piece: -(its bytes) */
            size_t n = id >= 0 ? m->plen[id] : (size_t)-id;
            sc += pc[j].score;
            put_piece(m, id >= 0 ? (uint32_t)id : m->unk_id, t + off, n, prev_unk, out);
            off += n;
        }
    }
    *till = sc;
    return TK_OK;
}

/* The word wp (its key k, len bytes) into entry e of the set whose first
 * way holds the recently-used mark *mru. */
static inline void cache_put(uni_entry *e, uint8_t *mru, const uni_entry *cache, uint32_t tag, const uint64_t *k,
                             size_t len, const word_path *wp) {
    *mru = (uint8_t)(e - cache) & 1;
    memcpy(e->key, k, sizeof e->key);
    e->tag = tag;
    e->klen = (uint8_t)len;
    e->np = (uint8_t)wp->np;
    e->unk = wp->unk;
    e->tmax = wp->tmax;
    memcpy(e->pc, wp->pc, wp->np * sizeof *wp->pc);
}

static int unigram_encode(const tk_tokenizer *tok, const uint8_t *s, size_t n, tk_ids *out) {
    const tk_spm *m = SPM_OF(tok);
    const struct tk_uni *u = m->uni;
    uni_scratch *w = scratch();
    if (!w) return TK_ERR_NOMEM;
    int rc = tk_spm_normalize(m, s, n, &w->norm);
    if (rc) return rc;
    size_t tn = w->norm.len;
    if (!tn) return TK_OK;
    if (tn >= INT32_MAX) return TK_ERR_LIMIT;
    /* KEY_MAX zero bytes past the text: word_end and the key loads read there */
    if (tk_bytes_append(&w->norm, NULL, KEY_MAX)) return TK_ERR_NOMEM;
    memset(w->norm.data + tn, 0, KEY_MAX);
    w->norm.len = tn;
    const uint8_t *t = w->norm.data;
    bool prev_unk = false;
    /* entries are tagged serial + 1 (32 bits): past 2^32 - 1 tokenizers in
     * one process two models could share a tag, so those run uncached */
    if (!u->cut_safe || m->serial >= UINT32_MAX) {
        if (best_reserve(w, tn)) return TK_ERR_NOMEM;
        viterbi(m, u, t, tn, 0.0f, w->best);
        return emit_path(m, w, t, tn, &prev_unk, out);
    }
    if (!w->cache) {
        w->cache = aligned_alloc(128, ((size_t)1 << CACHE_BITS) * sizeof *w->cache);
        if (!w->cache) return TK_ERR_NOMEM;
        memset(w->cache, 0, ((size_t)1 << CACHE_BITS) * sizeof *w->cache);
    }
    const uint32_t tag = (uint32_t)m->serial + 1;
    float till = 0.0f; /* the path score at p, as the Viterbi holds it */
    /* two keys used in turn (the next word's is made while this one's is
     * looked up); copying one into the other stalled on store forwarding */
    /* a ring of keys: the sets of the next words are fetched while this
     * one is looked up (a word's lookup is shorter than a fetch from L3);
     * copying keys instead stalled on store forwarding */
    word_key keys[KEY_RING];
    unsigned head = 0, ready = 1; /* keys[head, head + ready) (mod KEY_RING): the words from p on */
    word_path wp;                 /* a word not in the cache */
    word_at(t, 0, tn, &keys[0]);
    size_t next = keys[0].q; /* where the first word not keyed yet starts */
    for (size_t p = 0; p < tn; head = (head + 1) % KEY_RING, ready--) {
        while (ready < KEY_RING && next < tn) {
            word_key *nx = &keys[(head + ready) % KEY_RING];
            word_at(t, next, tn, nx);
            if (nx->q - next <= KEY_MAX) {
                __builtin_prefetch(&w->cache[nx->set]);
                __builtin_prefetch(&w->cache[nx->set + 1]);
            }
            next = nx->q;
            ready++;
        }
        const word_key *wk = &keys[head];
        size_t q = wk->q, nc = wk->nc, len = q - p;
        const uint64_t *k = wk->k;
        if (till < -SCORE_RESET || till > SCORE_RESET) till = 0.0f; /* the Viterbi rebases at p */
        if (len <= KEY_MAX) {
            /* two ways a set, least recently used out: a word met once
             * does not push out one met all the time */
            uni_entry *e = &w->cache[wk->set];
            uint8_t *mru = &e->pad;
            bool hit = same_key(e, tag, k, len);
            if (!hit && same_key(e + 1, tag, k, len)) {
                hit = true;
                e++;
            }
            const uni_piece *pc;
            size_t np;
            bool unk;
            float tmax;
            if (hit) {
                *mru = (uint8_t)(e - w->cache) & 1;
                pc = e->pc, np = e->np, unk = e->unk, tmax = e->tmax;
            } else {
                word_viterbi(m, u, t + p, len, nc, &wp);
                pc = wp.pc, np = wp.np, unk = wp.unk, tmax = wp.tmax;
                /* cached (a word with no usable proof too: its next
                 * occurrence goes straight to the Viterbi); a word of more
                 * pieces is used this once and leaves the set as it was */
                if (np <= ENT_MAX) cache_put(e + !*mru, mru, w->cache, tag, k, len, &wp);
            }
            if (fabsf(till) <= tmax) {
                if (emit_word(m, pc, np, unk, t + p, &till, &prev_unk, out)) return TK_ERR_NOMEM;
                p = q;
                continue;
            }
            if (best_reserve(w, len)) return TK_ERR_NOMEM;
            viterbi(m, u, t + p, len, till, w->best);
        } else {
            if (best_reserve(w, len)) return TK_ERR_NOMEM;
            viterbi(m, u, t + p, len, till, w->best);
        }
        till = w->best[len].score;
        if ((rc = emit_path(m, w, t + p, len, &prev_unk, out))) return rc;
        p = q;
    }
    return TK_OK;
}

/* ---- the engine (tk_engine.h) ---------------------------------------------- */

static void shown(const uint8_t *p, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        if (p[i] < 0x20 || p[i] == 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i]);
        else out[o++] = (char)p[i];
    }
    out[o] = 0;
}

static void unigram_describe(const tk_tokenizer *t, char *buf, size_t len) {
    const tk_spm *m = SPM_OF(t);
    const spm_spec *sp = &m->norm.spec;
    char nm[64];
    shown(sp->name, sp->name_len < 40 ? sp->name_len : 40, nm, sizeof nm);
    snprintf(buf, len, "sentencepiece .model: %s%s%s%s%s | Unigram (Viterbi over %u pieces, unk score %g%s%s)%s",
             sp->cmap_len ? "charsmap " : "identity", sp->cmap_len ? nm : "",
             sp->add_dummy_prefix ? ", dummy prefix" : "", sp->remove_extra_ws ? ", remove extra whitespace" : "",
             sp->escape_ws ? ", escape whitespace" : "", m->uni->n_trie, (double)m->uni->unk_score,
             m->byte_fallback ? ", byte fallback" : "", m->user_maxlen ? ", user-defined symbols" : "",
             m->has_denorm ? " | denormalizer charsmap" : "");
}

static void unigram_free_state(void *state) {
    tk_spm *m = state;
    if (!m) return;
    tk_unigram_free(m->uni);
    m->uni = NULL;
    tk_spm_free(m);
}

const tk_engine tk_engine_unigram = {
    .name = "unigram",
    .sniff = NULL, /* load_spm.c's loader hands UNIGRAM models over */
    .load = NULL,
    .encode = unigram_encode,
    .encode_special = NULL,     /* encode.c splits at the specials */
    .decode = tk_spm_decode_op, /* spm.c's: same pieces and normalizer */
    .describe = unigram_describe,
    .lossless = tk_spm_lossless_op,
    .savable = tk_spm_savable_op,
    .image = false,
    .default_pp = TK_PP_ABSENT, /* <s> ... </s> by name, as SentencePiece BPE */
    .free = unigram_free_state,
};
