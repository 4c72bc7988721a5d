/* gpu_step.c - the host-side decisions of the GPU step (gpu_step.h), plain C. */
#include "gpu_step.h"

#include <stdlib.h>
#include <string.h>

int tr_gpu_env_on(const char *name) {
    const char *e = name ? getenv(name) : NULL;
    return e && e[0] && strcmp(e, "0") != 0;
}

int tr_gpu_adamw_multi_wanted(void) {
    return tr_gpu_env_on("MKS_ADAMW_MULTI") && !tr_gpu_env_on("MKS_ADAMW_PER_TENSOR");
}

int tr_gpu_step_sync_wanted(void) { return tr_gpu_env_on("MKS_GPU_STEP_SYNC"); }

int tr_gpu_graph_wanted(int sync_debug, int has_hook) {
    return tr_gpu_env_on("MKS_CUDA_GRAPH") && !sync_debug && !has_hook;
}

uint64_t tr_gpu_count_targets(const int32_t *targets, size_t n) {
    uint64_t k = 0;
    for (size_t i = 0; targets && i < n; i++) k += targets[i] >= 0;
    return k;
}

int tr_gpu_graph_find(const tr_gpu_graph_key *keys, int n, const tr_gpu_graph_key *k, int *exact) {
    int shape = -1;
    if (exact) *exact = 0;
    for (int i = 0; keys && k && i < n; i++) {
        const tr_gpu_graph_key *e = &keys[i];
        if (e->rows != k->rows || e->T != k->T || e->doc != k->doc || e->inputs != k->inputs) continue;
        if (e->factor_bits == k->factor_bits) {
            if (exact) *exact = 1;
            return i;
        }
        if (shape < 0) shape = i;
    }
    return shape;
}
