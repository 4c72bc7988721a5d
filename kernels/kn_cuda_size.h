/* kn_cuda_size.h - how much scratch and workspace the CUDA kernels of
 * kn_cuda.h need, computed in plain C (kernels/kn_cuda_size.c, library
 * kn_util: no CUDA, no OpenMP), so that code which only plans can ask.
 *
 * One source for three readers: each kernel refuses (KN_EINVAL) a scratch
 * buffer smaller than its function here; the GPU model (train/gpu_model.cu)
 * carves its arena piece with them; the memory planner (train/plan.c, also
 * `mkshards plan` in the CPU-only build) prints that piece as its "kernel
 * scratch" row.  The layout constants below are the ones the kernels launch
 * with, so a kernel and its size cannot drift apart (tests/test_plan_kernels.c
 * holds the planner's row equal to them over a grid of shapes).
 *
 * Sizes are size_t, so the planner can ask about shapes no kernel takes (the
 * kernels take int sizes and check them first); a size of 0 gives 0. */
#ifndef KN_CUDA_SIZE_H
#define KN_CUDA_SIZE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cuBLASLt workspace handed to kn_cuda_ctx_create (the Hopper recommendation). */
#define KN_CUBLASLT_WORKSPACE ((size_t)32 << 20)

/* Rows per block of the deterministic column sums: the matmul bias gradient
 * (kernels/kn_matmul.cu) and the LayerNorm weight/bias gradient
 * (kernels/kn_layernorm.cu; 8 warps share a block's rows, so a multiple of 8). */
#define KN_BIAS_ROWS 256
#define KN_LN_BWD_ROWS 64
/* Elements per partial sum of the gradient norm (kernels/kn_elementwise.cu). */
#define KN_SUMSQ_CHUNK 4096

/* kn_encoder_backward_cuda over N = B*T tokens: the ids sorted as four
 * 256-byte-aligned arrays of N 32-bit keys/values (in, out), then CUB's
 * radix-sort temporary storage, at most kn_encoder_sort_temp_bytes(N). */
size_t kn_encoder_backward_scratch_bytes(size_t N);
/* The bound on cub::DeviceRadixSort::SortPairs' temporary storage for N
 * 32-bit key/value pairs the kernel reserves: 16 N + 64 KiB. CUB needs about
 * 8 N + a few KiB (its alternate key and value buffers, the per-tile look-back
 * counters); kn_encoder_backward_cuda checks CUB's own figure against this at
 * every call and refuses, naming both, if a CUB version ever needs more. */
size_t kn_encoder_sort_temp_bytes(size_t N);
/* kn_layernorm_backward_cuda: ceil(N / KN_LN_BWD_ROWS) partial rows of
 * dweight and dbias (2C floats). */
size_t kn_layernorm_backward_scratch_bytes(size_t N, size_t C);
/* kn_rmsnorm_backward_cuda (kernels/kn_llama.cu): ceil(N / KN_LN_BWD_ROWS)
 * partial rows of dweight (C floats). */
size_t kn_rmsnorm_backward_scratch_bytes(size_t N, size_t C);
/* kn_matmul_backward_cuda / _dgelu_cuda with a bias gradient: ceil(N /
 * KN_BIAS_ROWS) partial rows of OC floats (none is needed without dbias). */
size_t kn_matmul_backward_scratch_bytes(size_t N, size_t OC);
/* kn_attention_backward_cuda / _tc_cuda: one fp32 row sum per (b, head, t). */
size_t kn_attention_backward_scratch_bytes(size_t B, size_t T, size_t NH);
/* kn_sumsq_cuda over n floats: one double per KN_SUMSQ_CHUNK elements. */
size_t kn_sumsq_scratch_bytes(size_t n);

#ifdef __cplusplus
}
#endif
#endif /* KN_CUDA_SIZE_H */
