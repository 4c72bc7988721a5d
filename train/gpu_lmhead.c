/* gpu_lmhead.c - the lm head's row chunks (gpu_lmhead.h): the switch, the
 * environment's request (the sizes and the chunk table are inline in the
 * header, so tests/bench_kernels_gpu.cu needs no library for them). */
#include "gpu_lmhead.h"

#include <stdlib.h>

long tr_lmhead_chunk_parse(const char *s) {
    if (!s || !*s) return 0;
    if (s[0] == 'a' && s[1] == 'u' && s[2] == 't' && s[3] == 'o' && !s[4]) return TR_LMHEAD_AUTO;
    long v = 0;
    for (const char *p = s; *p; p++) { /* digits only: no sign, no spaces, no hex */
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (*p - '0');
        if (v > TR_LMHEAD_CHUNK_MAX) return 0;
    }
    return v;
}

long tr_lmhead_chunk_request(void) { return tr_lmhead_chunk_parse(getenv("MKS_LMHEAD_CHUNK")); }
