/* kn_internal.h - private helpers of the kn reference kernels. */
#ifndef KN_INTERNAL_H
#define KN_INTERNAL_H

#ifdef _OPENMP
#include <omp.h>
#define KN_STR_(x) #x
#define KN_OMP(x) _Pragma(KN_STR_(omp x))
#else
#define KN_OMP(x)
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 8-float GCC/Clang vector (two SSE registers without AVX). */
typedef float kn_v8f __attribute__((vector_size(32)));

/* x86-64 GCC: compile hot functions twice (AVX2 and baseline) and pick at
 * load time (ifunc), so a portable -O2 build still uses 256-bit vectors. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(KN_NO_CLONES)
#define KN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KN_CLONES
#endif

/* dot product with 8 partial sums (fixed order: deterministic) */
static inline float kn_dot(const float *a, const float *b, int n) {
    kn_v8f acc = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        kn_v8f x, y;
        memcpy(&x, a + i, sizeof x);
        memcpy(&y, b + i, sizeof y);
        acc += x * y;
    }
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Attention: t attends t2 iff t2 <= t and (no document mask or the same
 * document). */
static inline int kn_attn_visible(const int32_t *docrow, int t, int t2) { return !docrow || docrow[t2] == docrow[t]; }
/* One (b, h, t) row of causal attention over packed rows of RS floats (q at
 * qo, k at ko, v at vo in each): scores, softmax into a (T floats: masked
 * and future positions 0), output o (hs). GPT-2's [q|k|v] rows and the Llama
 * CPU model's GQA rows both use it (attention_ref.c). */
void kn_attn_row_fwd(float *a, float *o, const float *base, const int32_t *docrow, int t, int T, size_t RS, size_t qo,
                     size_t ko, size_t vo, int hs, float scale);

/* 1 (the default): the matmul's micro-kernels read full panels of a
 * row-major A in place; 0: every A panel is packed first, as before
 * (test_kn_ops checks both give the same bits). Returns the previous
 * setting. Not thread-safe: call between matmuls. */
int kn_matmul_set_a_in_place(int on);
/* 1 when the matmul runs its FMA numerics (kn_matmul_set_isa /
 * MKS_MATMUL_ISA): the kernel matmul_ref.c has picked (picking it on first
 * use), so the Llama kernels' FMA paths follow the matmul's numerics. */
int kn_matmul_is_fma(void);
/* The GQA attention on the FMA numerics (llama_attn_fma_ref.c), arguments
 * as kn_gqa_attention_*_cpu (kn_llama.h), already checked by them. */
int kn_gqa_attention_forward_fma(float *out, float *att, const float *qkv, const int32_t *doc, int B, int T, int NH,
                                 int NKV, int HS);
/* The vector lanes of its tiles: 16 (AVX-512F) or 8 (AVX2), the same bits
 * either way; 0 picks the widest the CPU has. Returns the lanes in use or
 * KN_EINVAL (not on this CPU). Not thread-safe: call between kernels. */
int kn_gqa_attention_fma_lanes(int lanes);
/* SwiGLU on packed [gate | up] rows on the FMA numerics (the same file):
 * as kn_swiglu_packed_*_cpu with a vectorized exponential. */
int kn_swiglu_packed_forward_fma(float *out, const float *gu, int N, int F);
int kn_swiglu_packed_backward_fma(float *dgu, const float *dout, const float *gu, int N, int F);
/* kn_softmax_xent_forward_ref with Vp == V on the FMA numerics (the same
 * file), arguments checked by kn_softmax_xent_forward_cpu. */
int kn_softmax_xent_forward_fma(float *losses, float *probs, const float *logits, const int32_t *targets, int N, int V);
int kn_gqa_attention_backward_fma(float *dqkv, const float *dout, const float *out, const float *qkv, const float *att,
                                  const int32_t *doc, int B, int T, int NH, int NKV, int HS);

#endif
