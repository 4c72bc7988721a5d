/* kn_cuda_common.cuh - helpers shared by the kernels/ .cu files (private to
 * kernels/: code elsewhere includes the public kn_cuda.h and kn_cuda_check.h). */
#ifndef KN_CUDA_COMMON_CUH
#define KN_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "kn_cuda.h"

#include "kn_cuda_check.h" /* KN_CU_CHECK, KN_LAUNCH_CHECK, kn_cuda_set_error (kn_cuda_err.h) */

/* The kernels' own convention: a failed call or launch returns KN_ECUDA. */
#define KN_CUDA_TRY(call) KN_CU_CHECK(call, return KN_ECUDA)

#define KN_CUDA_LAUNCHED(what) KN_LAUNCH_CHECK(what, return KN_ECUDA)

typedef __nv_bfloat16 kn_bf16;
typedef __half kn_f16;

__device__ __forceinline__ float kn_ld(const float *p) { return *p; }
__device__ __forceinline__ float kn_ld(const kn_bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ float kn_ld(const kn_f16 *p) { return __half2float(*p); }
__device__ __forceinline__ void kn_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void kn_st(kn_bf16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void kn_st(kn_f16 *p, float v) { *p = __float2half_rn(v); }

__device__ __forceinline__ float kn_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float kn_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static inline unsigned kn_blocks(size_t n, unsigned threads, unsigned cap = 65535u * 16u) {
    size_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned)(b > cap ? cap : b);
}

/* 8 consecutive elements as floats: one 16-byte access for 16-bit types,
 * two for fp32 (callers check the alignment; kn_layernorm.cu and
 * kn_softmax_xent.cu use them). */
__device__ __forceinline__ void ld8(const float *p, float v[8]) {
    float4 a = *(const float4 *)p, b = *(const float4 *)(p + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
template <typename T> __device__ __forceinline__ void ld8(const T *p, float v[8]) {
    uint4 u = *(const uint4 *)p;
    const T *h = (const T *)&u;
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = kn_ld(h + i);
}
__device__ __forceinline__ void st8(float *p, const float v[8]) {
    *(float4 *)p = make_float4(v[0], v[1], v[2], v[3]);
    *(float4 *)(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
}
template <typename T> __device__ __forceinline__ void st8(T *p, const float v[8]) {
    uint4 u;
    T *h = (T *)&u;
#pragma unroll
    for (int i = 0; i < 8; i++) kn_st(h + i, v[i]);
    *(uint4 *)p = u;
}

/* A kernel variant behind an opt-in environment flag ("1": on), cached in
 * *state (-1: not read yet); the kn_*_variant setters write *state. */
static inline bool kn_opt_in(int *state, const char *env) {
    if (*state < 0) {
        const char *e = getenv(env);
        *state = e && e[0] == '1';
    }
    return *state == 1;
}

/* Dispatch on the activation dtype: DT is the element type inside BODY. */
#define KN_DISPATCH(dt, ...)                                                                                           \
    do {                                                                                                               \
        if ((dt) == KN_F32) {                                                                                          \
            typedef float DT;                                                                                          \
            __VA_ARGS__;                                                                                               \
        } else if ((dt) == KN_BF16) {                                                                                  \
            typedef kn_bf16 DT;                                                                                        \
            __VA_ARGS__;                                                                                               \
        } else if ((dt) == KN_F16) {                                                                                   \
            typedef kn_f16 DT;                                                                                         \
            __VA_ARGS__;                                                                                               \
        } else {                                                                                                       \
            return KN_EINVAL;                                                                                          \
        }                                                                                                              \
    } while (0)

#endif
