/* ref_bpe.h - the textbook BPE merge loop (tiktoken's algorithm), written
 * independently of tokenizer/bpe.c on top of the public tk_rank_of: repeatedly
 * merge the adjacent pair whose concatenation has the lowest rank, leftmost
 * first, until no adjacent concatenation is a token. Quadratic: for checking
 * the fast paths on test inputs only. */
#ifndef MKS_REF_BPE_H
#define MKS_REF_BPE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tk.h"

/* The tokens of p[0..n) into out (room for n); returns how many. */
static inline size_t reference_bpe(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t *out) {
    size_t *start = malloc((n + 1) * sizeof *start), m = n;
    if (!start) abort();
    for (size_t k = 0; k <= n; k++) start[k] = k;
    for (;;) {
        int64_t best = -1;
        size_t bi = 0;
        for (size_t k = 0; k + 1 < m; k++) {
            int64_t r = tk_rank_of(t, p + start[k], start[k + 2] - start[k]);
            if (r >= 0 && (best < 0 || r < best)) {
                best = r;
                bi = k;
            }
        }
        if (best < 0) break;
        memmove(start + bi + 1, start + bi + 2, (m - bi - 1) * sizeof *start);
        m--;
    }
    for (size_t k = 0; k < m; k++) out[k] = (uint32_t)tk_rank_of(t, p + start[k], start[k + 1] - start[k]);
    free(start);
    return m;
}

/* A xorshift64 generator for test inputs (fixed seed: reproducible runs). */
static inline uint64_t test_rnd(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

#endif
