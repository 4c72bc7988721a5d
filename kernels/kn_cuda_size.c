/* kn_cuda_size.c - the CUDA kernels' scratch sizes in plain C (see
 * kn_cuda_size.h): built into kn_util, so the planner has them without CUDA. */
#include "kn_cuda_size.h"

#include <stdint.h>

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

size_t kn_encoder_sort_temp_bytes(size_t N) { return N ? 16 * N + 65536 : 0; }

size_t kn_encoder_backward_scratch_bytes(size_t N) {
    return N ? 4 * align256(N * sizeof(uint32_t)) + kn_encoder_sort_temp_bytes(N) : 0;
}

size_t kn_layernorm_backward_scratch_bytes(size_t N, size_t C) {
    return ((N + KN_LN_BWD_ROWS - 1) / KN_LN_BWD_ROWS) * 2 * C * sizeof(float);
}

size_t kn_rmsnorm_backward_scratch_bytes(size_t N, size_t C) {
    return ((N + KN_LN_BWD_ROWS - 1) / KN_LN_BWD_ROWS) * C * sizeof(float);
}

size_t kn_matmul_backward_scratch_bytes(size_t N, size_t OC) {
    return ((N + KN_BIAS_ROWS - 1) / KN_BIAS_ROWS) * OC * sizeof(float);
}

size_t kn_attention_backward_scratch_bytes(size_t B, size_t T, size_t NH) { return B * NH * T * sizeof(float); }

size_t kn_cudnn_attention_scratch_bytes(size_t B, size_t T, size_t NH, size_t HS) {
    return B * NH * T * (HS + 4) * sizeof(float) + ((size_t)4 << 20);
}

size_t kn_sumsq_scratch_bytes(size_t n) { return ((n + KN_SUMSQ_CHUNK - 1) / KN_SUMSQ_CHUNK) * sizeof(double); }

size_t kn_adamw_multi_table_bytes(size_t nt) { return nt * sizeof(kn_adamw_tensor) + (nt + 1) * sizeof(uint32_t); }

size_t kn_adamw_multi_layout(int nt, const size_t *off, const size_t *n, const int *decay, kn_adamw_tensor *tab,
                             uint32_t *bstart) {
    if (nt < 0 || (nt > 0 && (!off || !n || !decay || !tab || !bstart))) return (size_t)-1;
    uint64_t blocks = 0;
    if (bstart) bstart[0] = 0;
    for (int k = 0; k < nt; k++) {
        tab[k].off = off[k];
        tab[k].n = n[k];
        tab[k].decay = decay[k] ? 1u : 0u;
        tab[k].pad_ = 0;
        blocks += (n[k] + KN_ADAMW_MULTI_ELEMS - 1) / KN_ADAMW_MULTI_ELEMS;
        if (blocks > (uint64_t)INT32_MAX) return (size_t)-1; /* gridDim.x's limit; bstart stays in uint32 */
        bstart[k + 1] = (uint32_t)blocks;
    }
    return (size_t)blocks;
}
