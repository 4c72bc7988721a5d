/* lenhist.c - exact length histogram with a hard memory cap (see
 * ds_internal.h): lint's median / outlier count and hist's percentiles read
 * ranks from it instead of sorting one entry per document. */
#include <stdlib.h>
#include <string.h>

#include "ds.h"
#include "ds_internal.h"

/* Coarse key: v rounded down to its 7 most significant bits. */
static uint64_t coarse_key(uint64_t v) {
    int msb = 63 - __builtin_clzll(v);
    return msb > 6 ? v & ~((UINT64_C(1) << (msb - 6)) - 1) : v;
}

static size_t slot_of(uint64_t key, size_t cap) {
    uint64_t x = key * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(x >> 32) & (cap - 1);
}

/* Insert count c at key (no growth check). */
static void map_put(uint64_t *keys, uint64_t *counts, size_t cap, uint64_t key, uint64_t c, size_t *n) {
    size_t j = slot_of(key, cap);
    while (keys[j] && keys[j] != key) j = (j + 1) & (cap - 1);
    if (!keys[j]) {
        keys[j] = key;
        counts[j] = 0;
        (*n)++;
    }
    counts[j] += c;
}

/* Rebuild the map with cap slots, rounding the keys when coarse. */
static int map_rebuild(ds_lenhist *h, size_t cap, int coarse) {
    uint64_t *nk = calloc(cap, sizeof *nk), *nc = malloc(cap * sizeof *nc);
    if (!nk || !nc) {
        free(nk);
        free(nc);
        return DS_ERR_NOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < h->cap; i++)
        if (h->keys[i]) map_put(nk, nc, cap, coarse ? coarse_key(h->keys[i]) : h->keys[i], h->counts[i], &n);
    free(h->keys);
    free(h->counts);
    h->keys = nk;
    h->counts = nc;
    h->cap = cap;
    h->n = n;
    h->coarse = coarse;
    return DS_OK;
}

int ds_lenhist_add(ds_lenhist *h, uint64_t v) {
    if (v < DS_LH_DENSE) {
        if (!h->dense && !(h->dense = calloc(DS_LH_DENSE, sizeof *h->dense))) return DS_ERR_NOMEM;
        h->dense[v]++;
        h->total++;
        return DS_OK;
    }
    uint64_t key = h->coarse ? coarse_key(v) : v;
    size_t max = h->sparse_max ? h->sparse_max : DS_LH_SPARSE_MAX;
    if (h->cap) { /* present already: no growth needed */
        size_t j = slot_of(key, h->cap);
        while (h->keys[j] && h->keys[j] != key) j = (j + 1) & (h->cap - 1);
        if (h->keys[j]) {
            h->counts[j]++;
            h->total++;
            return DS_OK;
        }
    }
    if (!h->coarse && h->n >= max) { /* one distinct value too many: bucket from now on */
        if (map_rebuild(h, h->cap, 1)) return DS_ERR_NOMEM;
        return ds_lenhist_add(h, v);
    }
    if ((h->n + 1) * 2 > h->cap) { /* load <= 1/2 */
        size_t nc = h->cap ? h->cap * 2 : 64;
        if (map_rebuild(h, nc, h->coarse)) return DS_ERR_NOMEM;
    }
    map_put(h->keys, h->counts, h->cap, key, 1, &h->n);
    h->total++;
    return DS_OK;
}

static int cmp_pair(const void *a, const void *b) {
    uint64_t x = ((const uint64_t *)a)[0], y = ((const uint64_t *)b)[0];
    return x < y ? -1 : x > y;
}

/* Sparse entries as sorted (value, count) pairs; *out NULL when empty. */
static int sorted_pairs(const ds_lenhist *h, uint64_t **out) {
    *out = NULL;
    if (!h->n) return DS_OK;
    uint64_t *p = malloc(h->n * 2 * sizeof *p);
    if (!p) return DS_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < h->cap; i++)
        if (h->keys[i]) {
            p[2 * k] = h->keys[i];
            p[2 * k + 1] = h->counts[i];
            k++;
        }
    qsort(p, h->n, 2 * sizeof *p, cmp_pair);
    *out = p;
    return DS_OK;
}

int ds_lenhist_ranks(const ds_lenhist *h, const uint64_t *ranks, uint64_t *out, size_t n) {
    uint64_t *pairs;
    if (sorted_pairs(h, &pairs)) return DS_ERR_NOMEM;
    for (size_t q = 0; q < n; q++) {
        uint64_t want = ranks[q], seen = 0, val = 0;
        int found = 0;
        if (h->dense)
            for (uint64_t v = 0; v < DS_LH_DENSE && !found; v++) {
                seen += h->dense[v];
                if (seen >= want) found = 1, val = v;
            }
        for (size_t i = 0; i < h->n && !found; i++) {
            seen += pairs[2 * i + 1];
            if (seen >= want) found = 1, val = pairs[2 * i];
        }
        if (!found && h->n) val = pairs[2 * (h->n - 1)]; /* rank > total: the largest value */
        out[q] = val;
    }
    free(pairs);
    return DS_OK;
}

int ds_lenhist_count_above(const ds_lenhist *h, double thr, uint64_t *out) {
    uint64_t c = 0;
    if (h->dense)
        for (uint64_t v = 0; v < DS_LH_DENSE; v++)
            if ((double)v > thr) c += h->dense[v];
    for (size_t i = 0; i < h->cap; i++)
        if (h->keys[i] && (double)h->keys[i] > thr) c += h->counts[i];
    *out = c;
    return DS_OK;
}

void ds_lenhist_free(ds_lenhist *h) {
    free(h->dense);
    free(h->keys);
    free(h->counts);
    memset(h, 0, sizeof *h);
}
