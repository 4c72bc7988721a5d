/* kn_cpu_size.c - the CPU kernels' per-thread workspace (kn_cpu_size.h). */
#include "kn_cpu_size.h"

size_t kn_cpu_matmul_workspace_bytes(void) {
    return sizeof(float) * ((size_t)KN_CPU_MM_MC_MAX * KN_CPU_MM_KC + (size_t)KN_CPU_MM_KC * KN_CPU_MM_NB_MAX);
}

size_t kn_cpu_attention_workspace_bytes(size_t T) { return sizeof(float) * T; }

size_t kn_cpu_gqa_attention_workspace_bytes(size_t T, size_t HS) {
    size_t row = sizeof(float) * T, fwd = sizeof(float) * HS * KN_CPU_ATT_KB,
           bwd = sizeof(float) * (3 * HS * KN_CPU_ATT_KB + (size_t)KN_CPU_ATT_RB * KN_CPU_ATT_KB);
    size_t m = row > fwd ? row : fwd;
    return m > bwd ? m : bwd;
}
