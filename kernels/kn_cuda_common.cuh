/* kn_cuda_common.cuh - helpers shared by the kernels/ .cu files (not installed). */
#ifndef KN_CUDA_COMMON_CUH
#define KN_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "kn_cuda.h"

/* Records the message for kn_cuda_last_error(). */
void kn_cuda_set_error(const char *fmt, ...);

#define KN_CUDA_LAUNCHED(what)                                                                    \
    do {                                                                                          \
        cudaError_t e_ = cudaGetLastError();                                                      \
        if (e_ != cudaSuccess) {                                                                  \
            kn_cuda_set_error("%s: %s", (what), cudaGetErrorString(e_));                          \
            return KN_ECUDA;                                                                      \
        }                                                                                         \
    } while (0)

#define KN_CUDA_TRY(call)                                                                         \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            kn_cuda_set_error("%s: %s", #call, cudaGetErrorString(e_));                           \
            return KN_ECUDA;                                                                      \
        }                                                                                         \
    } while (0)

typedef __nv_bfloat16 kn_bf16;
typedef __half kn_f16;

__device__ __forceinline__ float kn_ld(const float *p) { return *p; }
__device__ __forceinline__ float kn_ld(const kn_bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ float kn_ld(const kn_f16 *p) { return __half2float(*p); }
__device__ __forceinline__ void kn_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void kn_st(kn_bf16 *p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void kn_st(kn_f16 *p, float v) { *p = __float2half_rn(v); }

__device__ __forceinline__ float kn_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float kn_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static inline unsigned kn_blocks(size_t n, unsigned threads, unsigned cap = 65535u * 16u)
{
    size_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    return (unsigned)(b > cap ? cap : b);
}

/* Dispatch on the activation dtype: DT is the element type inside BODY. */
#define KN_DISPATCH(dt, ...)                                                                     \
    do {                                                                                          \
        if ((dt) == KN_F32) {                                                                     \
            typedef float DT;                                                                     \
            __VA_ARGS__;                                                                          \
        } else if ((dt) == KN_BF16) {                                                             \
            typedef kn_bf16 DT;                                                                   \
            __VA_ARGS__;                                                                          \
        } else if ((dt) == KN_F16) {                                                             \
            typedef kn_f16 DT ;                                                                   \
            __VA_ARGS__;                                                                          \
        } else {                                                                                  \
            return KN_EINVAL;                                                                     \
        }                                                                                         \
    } while (0)

#endif
