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
#include <stdint.h>

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
/* The workspace cuDNN's fused attention may take (kernels/kn_attention_cudnn.cu,
 * when MKS_CUDA_ATTENTION=cudnn asks for it): plans needing more are not
 * chosen.  What flash-attention backward kernels keep: an fp32 dQ accumulator
 * (B NH T HS floats) and per-row statistics (4 floats a row), plus 4 MiB for
 * the library's small tables.  A bound chosen before any GPU run; the first
 * lent run prints the sizes cuDNN asked for (docs/gpu-notes.md). */
size_t kn_cudnn_attention_scratch_bytes(size_t B, size_t T, size_t NH, size_t HS);
/* kn_sumsq_cuda over n floats: one double per KN_SUMSQ_CHUNK elements. */
size_t kn_sumsq_scratch_bytes(size_t n);

/* ---- multi-tensor AdamW (kn_adamw_multi_cuda): one launch over a table of tensors ----
 * Each tensor k (n elements at element offset off of the parameter block)
 * is cut into blocks of KN_ADAMW_MULTI_ELEMS elements (the last one short);
 * the grid is the sum of the blocks, and block b works on the tensor whose
 * half-open range [bstart[k], bstart[k+1]) holds b: bstart is the prefix sum
 * of the block counts, bstart[0] = 0, bstart[nt] = the grid.  An empty
 * tensor has no block (bstart[k] == bstart[k+1]).  The layout is computed
 * on the host (kn_adamw_multi_layout) and uploaded once; the search and the
 * element range below are the ones the kernel runs, so the CPU test
 * (tests/test_adamw_multi_layout.c) checks the device's mapping. */
#define KN_ADAMW_MULTI_ELEMS 4096 /* 256 threads x 16 elements */
typedef struct {
    uint64_t off;   /* first element in the parameter block */
    uint64_t n;     /* elements (0: skipped) */
    uint32_t decay; /* weight decay applies (tr_model_param_decay) */
    uint32_t pad_;
} kn_adamw_tensor;
/* Bytes of the device table for nt tensors: nt entries, then nt + 1 block
 * starts (uint32); one arena piece. */
size_t kn_adamw_multi_table_bytes(size_t nt);
/* Fills tab[0..nt) and bstart[0..nt] (host arrays) from off/n/decay and
 * returns the grid (bstart[nt]); 0 with nothing to do; (size_t)-1 when the
 * grid would not fit a launch (over 2^31 - 1 blocks) or nt < 0. */
size_t kn_adamw_multi_layout(int nt, const size_t *off, const size_t *n, const int *decay, kn_adamw_tensor *tab,
                             uint32_t *bstart);

#if defined(__CUDACC__)
#define KN_HD __host__ __device__ __forceinline__
#else
#define KN_HD static inline
#endif
/* The tensor of block b (b < bstart[nt]): the last k with bstart[k] <= b,
 * by binary search; never an empty tensor (its successor starts at the same
 * block, so it is not the last). */
KN_HD int kn_adamw_multi_find(const uint32_t *bstart, int nt, uint32_t b) {
    int lo = 0, hi = nt; /* invariant: bstart[lo] <= b < bstart[hi] */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (bstart[mid] <= b) lo = mid;
        else hi = mid;
    }
    return lo;
}
/* The elements [*j0, *j1) of tensor k that block b covers (j relative to
 * the tensor's offset). */
KN_HD void kn_adamw_multi_range(const uint32_t *bstart, const kn_adamw_tensor *tab, int k, uint32_t b, uint64_t *j0,
                                uint64_t *j1) {
    uint64_t a = (uint64_t)(b - bstart[k]) * KN_ADAMW_MULTI_ELEMS, e = a + KN_ADAMW_MULTI_ELEMS;
    *j0 = a;
    *j1 = e < tab[k].n ? e : tab[k].n;
}

#ifdef __cplusplus
}
#endif
#endif /* KN_CUDA_SIZE_H */
