/* kn_cpu_size.h - the per-thread workspace the CPU kernels allocate while
 * they run, computed in plain C (kernels/kn_cpu_size.c, library kn_util: no
 * OpenMP), so that code which only plans can ask.
 *
 * Each parallel region of these kernels mallocs its thread's buffers and
 * frees them before it returns, so at most one kernel's workspace is live
 * per thread; the memory planner (train/plan.c) counts the matmul's panels
 * plus the attention's buffer per thread, an upper bound of that. The
 * layout constants below are the ones matmul_ref.c and llama_attn_fma_ref.c
 * allocate with (they include this header); the row paths of
 * attention_ref.c and llama_cpu_ref.c allocate a T-float row. So a kernel
 * and its size cannot drift apart unnoticed: test_llama_reserve holds every
 * allocation of a Llama forward + backward to these functions. */
#ifndef KN_CPU_SIZE_H
#define KN_CPU_SIZE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* matmul_ref.c: k block (part of the numerics: see there), the most rows of
 * a packed A block any micro-kernel uses, the most B columns of a task */
#define KN_CPU_MM_KC 256
#define KN_CPU_MM_MC_MAX 64
#define KN_CPU_MM_NB_MAX 256
/* llama_attn_fma_ref.c: query rows and keys of an attention tile */
#define KN_CPU_ATT_RB 24
#define KN_CPU_ATT_KB 128

/* One thread's matmul buffers: an MC x KC A block and a KC x NB B block. */
size_t kn_cpu_matmul_workspace_bytes(void);
/* One thread's buffer in GPT-2's attention backward (attention_ref.c): a
 * T-float row. */
size_t kn_cpu_attention_workspace_bytes(size_t T);
/* One thread's buffer in the GQA attention (kn_gqa_attention_*_cpu): the
 * larger of the exact path's T-float row and the FMA path's tiles (forward
 * HS x KB floats, backward 3 HS x KB + RB x KB), whichever numerics run. */
size_t kn_cpu_gqa_attention_workspace_bytes(size_t T, size_t HS);

#ifdef __cplusplus
}
#endif

#endif
