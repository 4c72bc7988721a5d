/* gpu_attention.h - which attention engine the GPU models ask for, and the
 * kernel scratch it needs, in plain C so the planner and the models' carve
 * call the same function (tests/test_gpu_plan_carve) and the switch is
 * tested without a GPU.  Internal to the train module.
 *
 *   MKS_CUDA_ATTENTION=cudnn  cuDNN's fused flash attention
 *                             (kernels/kn_attention_cudnn.cu) for 16-bit
 *                             micro-batches without a document mask, with its
 *                             deterministic backward (bit-reproducible runs;
 *                             cuDNN >= 9.25); the own kernels for the rest and
 *                             whenever cuDNN is absent or refuses the shape
 *                             (one line says why).  Opt-in until a lent GPU
 *                             has run it.
 *   MKS_CUDA_ATTENTION=cudnn-fast  the same with cuDNN's default backward
 *                             (dQ summed with atomics: runs and resumes differ
 *                             in the last bits; any cuDNN 9).
 *   MKS_CUDA_ATTENTION=simt   the SIMT kernels (train/gpu_common.cuh)
 *   unset                     the own tensor-core kernels where they apply. */
#ifndef TR_GPU_ATTENTION_H
#define TR_GPU_ATTENTION_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MKS_CUDA_ATTENTION, read in this one place: "cudnn" TR_GPU_CUDNN_DETERMINISTIC,
 * "cudnn-fast" TR_GPU_CUDNN_FAST, "simt" TR_GPU_ATT_SIMT, anything else 0 (the
 * defaults). */
#define TR_GPU_CUDNN_DETERMINISTIC 1
#define TR_GPU_CUDNN_FAST 2
#define TR_GPU_ATT_SIMT 3
int tr_gpu_attention_request(void);
/* The cuDNN mode asked for (TR_GPU_CUDNN_*), 0 when none. */
int tr_gpu_attention_cudnn_wanted(void);
/* The attention's share of the models' kernel scratch for B x T rows of NH
 * heads of HS: the own backward's row sums, or with cuDNN asked for, the
 * larger cuDNN workspace bound (kn_cudnn_attention_scratch_bytes). */
size_t tr_gpu_attention_scratch_bytes(size_t B, size_t T, size_t NH, size_t HS);

#ifdef __cplusplus
}
#endif

#endif
