/* test_tk_ids.h - what the tokenizer parity tests compare: a sequence of ids
 * as the first 16 hex digits of the sha256 of its little-endian u32 bytes
 * (what the tests/ref/make_tk_*_refs.py scripts write for each document). */
#ifndef MKS_TEST_TK_IDS_H
#define MKS_TEST_TK_IDS_H

#include "tk.h"

#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>

static inline void test_ids_sha(const tk_ids *v, char out[17]) {
    struct sha256_ctx c;
    sha256_init(&c);
    for (size_t i = 0; i < v->len; i++) {
        uint8_t b[4] = {(uint8_t)v->ids[i], (uint8_t)(v->ids[i] >> 8), (uint8_t)(v->ids[i] >> 16),
                        (uint8_t)(v->ids[i] >> 24)};
        sha256_update(&c, 4, b);
    }
    uint8_t d[32];
    sha256_digest(&c, 32, d);
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

#endif
