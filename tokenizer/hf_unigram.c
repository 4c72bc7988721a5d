/* hf_unigram.c - the model stage of a tokenizer.json whose model is
 * "Unigram" (T5/mT5/UL2, XLM-R, ALBERT, ... as transformers' converters
 * write them, and what HF's UnigramTrainer makes), with the semantics of HF
 * `tokenizers` (models/unigram/model.rs, 0.23), which are not
 * sentencepiece's (unigram.c):
 *
 *   - every vocab entry is in the trie (control pieces, <unk>, <0xNN>,
 *     user-defined pieces alike) with its own score: no UNUSED skip, no
 *     user-defined score rule;
 *   - scores and path sums are f64, never rebased;
 *   - a string listed twice is the last of its ids (token_to_ids is a map
 *     filled in vocab order), with that id's score;
 *   - Viterbi (encode_optimized): for each character start s, every entry
 *     that starts there proposes best[s] + score for its end; the first
 *     proposal to reach an end, then any strictly greater one, wins; a
 *     character no single-character entry covers proposes unk_id with
 *     min_score - 10 (min over every entry) - and fails the text when there
 *     is no unk_id and that proposal would win (MissingUnkId);
 *   - fuse_unk is always on: consecutive pieces whose id is unk_id (an
 *     entry matched as text counts too) are one string, which is looked up
 *     in the vocabulary (it may be an entry), else with byte_fallback is its
 *     bytes' <0xNN> when all of them exist, else unk_id.
 *
 * The entries are held in a double-array trie (base/check) built at load
 * from the sorted strings by key_trie.c (unigram.c's builder too): one
 * array read per byte of a walk. Its size is bounded by the entries' bytes
 * (which the file holds).
 *
 * The lattice: a pre-tokenizer with Metaspace split=false (the generic
 * converter's files) hands over a whole document as one word, so a word's
 * lattice can be megabytes. A node per byte holds only (start + 1, id), 8
 * bytes; the path scores live in a ring of a power of 2 above the longest
 * entry (a start proposes no farther), read back once, as the start they
 * end at is reached. With 16-byte nodes, a 1.2 MB document's lattice was 19 MB
 * written out to memory, faulted in, then read back (spm_nmt_first.json:
 * 11,800 page faults on 9.3 MB of text, half of them the lattice); the
 * backtrack copies (end, id) pairs out so the emitting pass reads those
 * alone. Tried and dropped (spm_nmt_first.json, 2000 pieces, perf, same
 * run): walking 4 starts in lockstep (the walks are independent; only the
 * proposals are ordered) took 33-43% more CPU for the whole process: with a
 * trie this small every step is an L1 hit, a lane's walk is 1-3 bytes
 * mostly, so the lanes did 1.6x the steps waiting for the longest one and
 * the per-lane proposal loops kept a mispredicted exit per start; scores
 * kept by slot (no id -> score load) changed nothing measurable. */
#include "hf_internal.h"

#include <math.h>

#define UNK_PENALTY 10.0 /* model.rs K_UNK_PENALTY */

struct tk_hf_uni {
    /* the entries' double array (key_trie.c); TK_DA_TERMINAL: an entry ends at the slot */
    tk_da_slot *slot;
    uint32_t *term; /* by slot: the id of the entry ending there (read only under TK_DA_TERMINAL); 4 bytes a
                     * slot (id and score side by side, 16, made a 250k-piece load fault 24 MB more) */
    size_t size;
    double *score;  /* by id */
    uint32_t n;     /* vocab entries */
    uint32_t reach; /* the farthest a start proposes: the longest entry's bytes, 4 at least (an unk character) */
    double min_score, unk_score;
    uint32_t unk_id; /* TK_NO_RANK: none */
    bool byte_fallback;
    uint32_t byte_id[256]; /* id of <0xNN>, TK_NO_RANK if none */
};

void tk_hf_uni_free(struct tk_hf_uni *u) {
    if (!u) return;
    free(u->slot);
    free(u->term);
    free(u->score);
    free(u);
}

/* ---- building the double array ------------------------------------------- */

/* A key's bytes, for tk_key_sort. */
static const uint8_t *key_bytes(const void *owner, uint32_t id) {
    return (const uint8_t *)((const char *const *)owner)[id];
}

/* The double array of ent[0, n) (one per distinct string) and the id
 * where each ends. */
static int du_build(struct tk_hf_uni *u, const char *const *key, const tk_key_ent *ent, uint32_t n) {
    uint32_t *at = malloc(((size_t)n + 1) * sizeof *at);
    if (!at) return TK_ERR_NOMEM;
    int rc = tk_da_build(ent, n, key, key_bytes, &u->slot, &u->size, at);
    if (!rc && !(u->term = malloc((u->size + 1) * sizeof *u->term))) rc = TK_ERR_NOMEM;
    for (uint32_t i = 0; !rc && i < n; i++) {
        u->slot[at[i]].base |= TK_DA_TERMINAL;
        u->term[at[i]] = ent[i].id;
    }
    free(at);
    return rc;
}

/* The id of the entry whose string is exactly p[0, n), TK_NO_RANK if none. */
static uint32_t du_lookup(const struct tk_hf_uni *u, const uint8_t *p, size_t n) {
    if (!n) return TK_NO_RANK;
    tk_da_walk w = tk_da_walk_root(u->slot);
    int at = 0;
    for (size_t k = 0; k < n; k++)
        if ((at = tk_da_walk_step(u->slot, &w, p[k])) < 0) return TK_NO_RANK;
    return at ? u->term[w.node] : TK_NO_RANK;
}

int tk_hf_uni_build(const char *const *key, const uint32_t *len, const double *score, uint32_t n, uint32_t unk_id,
                    bool byte_fallback, struct tk_hf_uni **out) {
    *out = NULL;
    struct tk_hf_uni *u = calloc(1, sizeof *u);
    tk_key_ent *ent = malloc(((size_t)n + 1) * sizeof *ent);
    int rc = TK_ERR_NOMEM;
    if (!u || !ent || !(u->score = malloc(((size_t)n + 1) * sizeof *u->score))) goto fail;
    u->n = n;
    u->unk_id = unk_id;
    u->byte_fallback = byte_fallback;
    u->min_score = INFINITY;
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        u->score[i] = score[i];
        if (score[i] < u->min_score) u->min_score = score[i];
        if (!len[i]) continue; /* "" never matches (the trie's walk yields prefixes of 1 byte or more) */
        if (len[i] > u->reach) u->reach = len[i];
        ent[m++] = (tk_key_ent){tk_key_head((const uint8_t *)key[i], len[i]), i, len[i]};
    }
    u->unk_score = u->min_score - UNK_PENALTY;
    if (u->reach < 4) u->reach = 4;
    if ((rc = tk_key_sort(ent, m, key, key_bytes))) goto fail;
    /* equal strings: the last id (the map's last insert) is the entry */
    uint32_t w = 0;
    for (uint32_t i = 0; i < m; i++) {
        if (w && ent[w - 1].len == ent[i].len && memcmp(key[ent[w - 1].id], key[ent[i].id], ent[i].len) == 0)
            ent[w - 1] = ent[i];
        else ent[w++] = ent[i];
    }
    if ((rc = du_build(u, key, ent, w))) goto fail;
    for (int b = 0; b < 256; b++) {
        char code[8];
        snprintf(code, sizeof code, "<0x%02X>", b);
        u->byte_id[b] = du_lookup(u, (const uint8_t *)code, 6);
    }
    free(ent);
    *out = u;
    return TK_OK;
fail:
    free(ent);
    tk_hf_uni_free(u);
    return rc;
}

uint32_t tk_hf_uni_size(const struct tk_hf_uni *u) { return u->n; }
double tk_hf_uni_unk_score(const struct tk_hf_uni *u) { return u->unk_score; }

/* ---- encoding -------------------------------------------------------------- */

void tk_hf_uni_scratch_free(hf_uni_scratch *w) {
    free(w->best);
    free(w->score);
    free(w->path);
    memset(w, 0, sizeof *w);
}

/* string_util::OneCharLen-style: from the lead byte (valid UTF-8 here). */
static inline size_t one_char_len(uint8_t b) {
    static const uint8_t t[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return t[b >> 4];
}

static int emit(tk_ids *out, uint32_t id) {
    if (out->len == out->cap && tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
    out->ids[out->len++] = id;
    return TK_OK;
}

/* A run of unk pieces p[0, n): model.rs tokenize's lookup of its string. */
static int emit_unk_run(const struct tk_hf_uni *u, const uint8_t *p, size_t n, tk_ids *out) {
    uint32_t id = du_lookup(u, p, n);
    if (id != TK_NO_RANK) return emit(out, id);
    if (u->byte_fallback) {
        size_t k = 0;
        while (k < n && u->byte_id[p[k]] != TK_NO_RANK) k++;
        if (k == n) {
            if (tk_ids_reserve(out, n)) return TK_ERR_NOMEM;
            for (k = 0; k < n; k++) out->ids[out->len++] = u->byte_id[p[k]];
            return TK_OK;
        }
    }
    return emit(out, u->unk_id); /* set: the run's pieces have it */
}

int tk_hf_uni_word(const struct tk_hf_uni *u, hf_uni_scratch *w, const uint8_t *t, size_t tn, tk_ids *out) {
    if (!tn) return TK_OK;
    if (tn >= INT32_MAX) return TK_ERR_LIMIT;
    if (w->best_cap < tn + 1) {
        hf_uni_node *b = realloc(w->best, (tn + 1) * sizeof *b);
        if (!b) return TK_ERR_NOMEM;
        w->best = b;
        w->best_cap = tn + 1;
    }
    size_t ring = 8, far = u->reach < tn ? u->reach : tn; /* no proposal goes past the word */
    while (ring <= far) ring *= 2;
    if (w->ring < ring) {
        double *r = realloc(w->score, ring * sizeof *r);
        if (!r) return TK_ERR_NOMEM;
        w->score = r;
        w->ring = ring;
    }
    hf_uni_node *restrict best = w->best;
    double *restrict sc = w->score;
    const size_t mask = ring - 1;
    /* start1 0: no path yet (zeroing the nodes a block at a time just
     * ahead of the starts instead measured the same) */
    memset(best, 0, (tn + 1) * sizeof *best);
    sc[0] = 0.0; /* the empty path's score, HF's default */
    const tk_da_slot *restrict sl = u->slot;
    const uint32_t *restrict term = u->term;
    const double *restrict score = u->score;
    for (size_t s = 0; s < tn;) {
        /* s is reached (a proposal from the start before it ended here, or
         * it is 0) and nothing proposes into it now: its score is final, and
         * its ring place is free for position s + ring (proposed into from
         * starts after s + ring - reach > s only) */
        double till = sc[s & mask];
        size_t mb = one_char_len(t[s]);
        if (mb > tn - s) mb = tn - s;
        bool single = false;
        tk_da_walk w = tk_da_walk_root(sl);
        for (size_t k = s; k < tn; k++) {
            int at = tk_da_walk_step(sl, &w, t[k]);
            if (at < 0) break;
            if (!at) continue;
            uint32_t id = term[w.node];
            double cand = score[id] + till;
            hf_uni_node *tg = &best[k + 1];
            double *ts = &sc[(k + 1) & mask];
            bool win = !tg->start1 | (cand > *ts); /* a select, not a branch: which wins is data */
            *ts = win ? cand : *ts;
            tg->start1 = win ? (uint32_t)s + 1 : tg->start1;
            tg->id = win ? id : tg->id;
            single |= k + 1 - s == mb;
        }
        if (!single) {
            hf_uni_node *tg = &best[s + mb];
            double *ts = &sc[(s + mb) & mask];
            double cand = u->unk_score + till;
            if (!tg->start1 || cand > *ts) {
                if (u->unk_id == TK_NO_RANK) return TK_ERR_DOC_UNK; /* HF: MissingUnkId */
                *ts = cand;
                tg->start1 = (uint32_t)s + 1;
                tg->id = u->unk_id;
            }
        }
        s += mb;
    }
    /* backtrack: the pieces' (end, id), last first; read back from this
     * array alone (a piece starts where the one before it ends), not from
     * the lattice, which for a long word is out of the cache by now */
    size_t np = 0;
    for (size_t e = tn; e > 0; e = best[e].start1 - 1) {
        if (!best[e].start1) return TK_ERR_ARG; /* every character end is reached: never */
        if (2 * np == w->path_cap) {
            size_t cap = w->path_cap ? w->path_cap * 2 : 512;
            uint32_t *p = realloc(w->path, cap * sizeof *p);
            if (!p) return TK_ERR_NOMEM;
            w->path = p;
            w->path_cap = cap;
        }
        w->path[2 * np] = (uint32_t)e;
        w->path[2 * np + 1] = best[e].id;
        np++;
    }
    int rc;
    size_t run = SIZE_MAX; /* start of the unk run in progress */
    for (size_t k = np; k-- > 0;) {
        size_t s = k + 1 < np ? w->path[2 * k + 2] : 0;
        uint32_t id = w->path[2 * k + 1];
        if (id == u->unk_id) { /* unk_id set: fused with its neighbours */
            if (run == SIZE_MAX) run = s;
            continue;
        }
        if (run != SIZE_MAX) {
            if ((rc = emit_unk_run(u, t + run, s - run, out))) return rc;
            run = SIZE_MAX;
        }
        if ((rc = emit(out, id))) return rc;
    }
    if (run != SIZE_MAX) return emit_unk_run(u, t + run, tn - run, out);
    return TK_OK;
}
