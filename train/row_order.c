/* row_order.c - the training row order (tr_row_at, train/tr.h).
 *
 * The train row visited at loader position p is a per-epoch keyed
 * permutation of 0..n-1: a 4-round Feistel network over the smallest even bit
 * width >= 2 that holds n, cycle-walking values >= n, keyed by
 * mix64(seed * golden + epoch + 1). No memory, so resuming at a saved
 * position replays exactly the rows an uninterrupted run would see. Its own
 * file (in tr_plan, which has no OpenMP, MPI or CUDA) so that the Python
 * module's row_order (tools/python/core_shardset.c) links this very code
 * instead of a copy. */
#include "tr.h"

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t tr_row_at(uint64_t p, uint64_t n, uint64_t seed, int shuffle) {
    if (n == 0) return 0;
    uint64_t epoch = p / n, i = p % n;
    if (!shuffle || n == 1) return i;
    int bits = 2;
    while (bits < 64 && (1ULL << bits) < n) bits++;
    if (bits & 1) bits++;
    int half = bits / 2;
    uint64_t hmask = (half >= 64) ? ~0ULL : ((1ULL << half) - 1);
    uint64_t key = mix64(seed * 0x9e3779b97f4a7c15ULL + epoch + 1);
    uint64_t x = i;
    do {
        uint64_t l = x >> half, r = x & hmask;
        for (int round = 0; round < 4; round++) {
            uint64_t f = mix64(r ^ (key + (uint64_t)round * 0x632be59bd9b4e019ULL)) & hmask;
            uint64_t t = l ^ f;
            l = r;
            r = t;
        }
        x = (l << half) | r;
    } while (x >= n);
    return x;
}
