/* kn_adamw.cuh - the AdamW kernels (kernels/kn_elementwise.cu launches
 * them: kn_adamw_step_cuda, kn_adamw_multi_cuda), in a header of their own so
 * that tests/test_adamw_emu.cpp runs the same source on the CPU
 * (tests/emu/kn_emu.h) and checks the multi-tensor kernel against one launch
 * per tensor, bit for bit, and both against kn_adamw_step_ref. */
#ifndef KN_ADAMW_CUH
#define KN_ADAMW_CUH

#include "kn_cuda_common.cuh"
#include "kn_cuda_size.h"

/* One element's update: the per-tensor and the multi-tensor kernel both
 * call this, so their arithmetic (and its contraction into FMAs) is one
 * expression and their results are bit-identical. */
template <typename LP>
__device__ __forceinline__ void adamw_elem(float *p, LP *plp, const float *g, float *m, float *v, size_t i, float lr,
                                           float b1, float b2, float eps, float wd, int decay, float bc1, float bc2,
                                           const float *gscale, float sc) {
    float gi = gscale ? g[i] * sc : g[i];
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    float pi = p[i];
    if (decay) pi = pi - lr * wd * pi;
    pi = pi - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    if (plp) kn_st(plp + i, pi);
}

template <typename LP>
__global__ void adamw_kernel(float *p, LP *plp, const float *g, float *m, float *v, size_t n, float lr, float b1,
                             float b2, float eps, float wd, int decay, float bc1, float bc2, const float *gscale) {
    float sc = gscale ? *gscale : 1.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        adamw_elem(p, plp, g, m, v, i, lr, b1, b2, eps, wd, decay, bc1, bc2, gscale, sc);
}

/* Block b: tensor k = kn_adamw_multi_find (kn_cuda_size.h), its elements
 * [j0, j1) at offset tab[k].off of the whole block's p/plp/g/m/v. */
template <typename LP>
__global__ void adamw_multi_kernel(const kn_adamw_tensor *tab, const uint32_t *bstart, int nt, float *p, LP *plp,
                                   const float *g, float *m, float *v, float lr, float b1, float b2, float eps,
                                   float wd, float bc1, float bc2, const float *gscale) {
    float sc = gscale ? *gscale : 1.0f;
    int k = kn_adamw_multi_find(bstart, nt, blockIdx.x);
    uint64_t j0, j1;
    kn_adamw_multi_range(bstart, tab, k, blockIdx.x, &j0, &j1);
    const size_t off = (size_t)tab[k].off;
    const int decay = (int)tab[k].decay;
    for (uint64_t j = j0 + threadIdx.x; j < j1; j += blockDim.x)
        adamw_elem(p, plp, g, m, v, off + (size_t)j, lr, b1, b2, eps, wd, decay, bc1, bc2, gscale, sc);
}

#endif /* KN_ADAMW_CUH */
