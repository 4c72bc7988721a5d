/* key_trie.c - the double array (base/check, as Darts) of the Unigram
 * engines' tries: unigram.c (SentencePiece .model: a piece id and its float
 * lattice score where a piece ends) and hf_unigram.c (tokenizer.json: an
 * id) lay their sorted strings out with this one builder and keep their
 * own payloads by slot, so the layout and its bounds are the same for both.
 *
 * Slots are laid out depth first (the order of the sorted strings): a
 * node's children are placed when it is reached, near the free slots the
 * walk is using, so a chain of single children (the bytes of a piece past
 * where it branches off, every byte of a multi-byte character) lands in
 * nearby slots and a walk along it stays within a few cache lines. Breadth
 * first put each depth after the whole previous one, a cache miss per step
 * in a large trie (245k pieces: encode 18-25% slower on the multi-language
 * corpus). */
#include "tk_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    tk_da_slot *slot;
    uint32_t *nf; /* union-find: nf[i] leads to the first free slot >= i */
    size_t cap;   /* allocated slots */
    size_t size;  /* slots used */
} da_builder;

static int grow(da_builder *b, size_t need) {
    if (need + 256 <= b->cap) return TK_OK;
    size_t cap = b->cap ? b->cap : need + 256; /* the first call sizes it */
    while (cap < need + 256) {
        if (cap > SIZE_MAX / 2 / sizeof(tk_da_slot) / 4) return TK_ERR_NOMEM;
        cap *= 2;
    }
    if (cap > INT32_MAX) return TK_ERR_LIMIT;
    tk_da_slot *sl = realloc(b->slot, cap * sizeof *sl);
    if (sl) b->slot = sl;
    uint32_t *nf = realloc(b->nf, cap * sizeof *nf);
    if (nf) b->nf = nf;
    if (!sl || !nf) return TK_ERR_NOMEM;
    for (size_t i = b->cap; i < cap; i++) {
        sl[i] = (tk_da_slot){TK_DA_FREE, 0};
        nf[i] = (uint32_t)i;
    }
    b->cap = cap;
    return TK_OK;
}

/* The first free slot >= i (taken slots link onwards; paths compressed),
 * so a search for a base visits free slots only. */
static size_t next_free(uint32_t *nf, size_t i) {
    size_t r = i;
    while (nf[r] != r) r = nf[r];
    while (nf[i] != r) {
        size_t nx = nf[i];
        nf[i] = (uint32_t)r;
        i = nx;
    }
    return r;
}

static void take(da_builder *b, size_t t, uint32_t parent) {
    b->slot[t].check = parent;
    b->nf[t] = (uint32_t)(t + 1); /* t + 1 < cap: a slot is taken only below cap - 256 */
    if (t + 1 > b->size) b->size = t + 1;
}

typedef struct {
    uint32_t node, lo, hi, depth;
} pending;

int tk_da_build(const tk_key_ent *ent, uint32_t n, const void *owner,
                const uint8_t *(*bytes)(const void *owner, uint32_t id), tk_da_slot **slot_out, size_t *size_out,
                uint32_t *at) {
    *slot_out = NULL;
    *size_out = 0;
    size_t total = 1;
    for (uint32_t i = 0; i < n; i++) total += ent[i].len;
    /* the strings copied in sorted order: every node scans its range of
     * them, and reading them where their owner has them (id order) was a
     * cache miss per string and depth (250k pieces: 350 ms of a 545 ms load) */
    pending *st = malloc(total * sizeof *st); /* at most one entry per node */
    uint8_t *buf = malloc(total);
    size_t *off = malloc(((size_t)n + 1) * sizeof *off);
    da_builder b = {0};
    int rc = TK_ERR_NOMEM;
    if (!st || !buf || !off) goto out;
    off[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(buf + off[i], bytes(owner, ent[i].id), ent[i].len);
        off[i + 1] = off[i] + ent[i].len;
    }
    /* sized once for what a double array of the strings' nodes usually
     * needs (one slot per node, some gaps), so growing rarely copies it */
    if ((rc = grow(&b, total + total / 8))) goto out;
    take(&b, 0, TK_DA_FREE - 1); /* the root: taken, and no node's child */
    size_t next_check = 1, sp = 0;
    if (n) st[sp++] = (pending){0, 0, n, 0};
    uint8_t label[256];
    uint32_t from[257];
    while (sp) {
        pending p = st[--sp];
        uint32_t lo = p.lo;
        if (ent[lo].len == p.depth) at[lo++] = p.node; /* distinct strings: only the first ends here */
        int nl = 0;
        for (uint32_t i = lo; i < p.hi; i++) {
            uint8_t c = buf[off[i] + p.depth];
            if (!nl || c != label[nl - 1]) {
                label[nl] = c;
                from[nl++] = i;
            }
        }
        from[nl] = p.hi;
        if (!nl) continue;
        /* first base whose slots base + label[k] are all free: label[0]'s
         * slot runs over the free slots only */
        next_check = next_free(b.nf, next_check);
        size_t pos = next_free(b.nf, next_check > (size_t)label[0] + 1 ? next_check : (size_t)label[0] + 1);
        for (size_t tries = 0;; tries++) {
            /* a wide node in fragmented space: place it past everything
             * used (all free there), while the array stays within 4 slots
             * per node, so memory stays bounded by the strings */
            if (tries == 8 && b.size + 256 < 4 * total + 1024) pos = b.size + label[0] > pos ? b.size + label[0] : pos;
            if (pos + 512 > b.cap && (rc = grow(&b, pos + 512))) goto out; /* base + any label < cap - 256 */
            size_t bs = pos - label[0];
            int k = 1;
            while (k < nl && b.slot[bs + label[k]].check == TK_DA_FREE) k++;
            if (k == nl) break;
            pos = next_free(b.nf, pos + 1);
        }
        size_t bs = pos - label[0];
        b.slot[p.node].base = (uint32_t)bs; /* bs < cap <= INT32_MAX: clear of TK_DA_TERMINAL */
        /* pushed last child first: the first child's subtree is laid out next */
        for (int k = nl; k-- > 0;) {
            size_t t = bs + label[k];
            take(&b, t, p.node);
            st[sp++] = (pending){(uint32_t)t, from[k], from[k + 1], p.depth + 1};
        }
    }
    rc = TK_OK;
out:
    free(st);
    free(buf);
    free(off);
    free(b.nf);
    if (rc) {
        free(b.slot);
        return rc;
    }
    *slot_out = b.slot;
    *size_out = b.size;
    return TK_OK;
}
