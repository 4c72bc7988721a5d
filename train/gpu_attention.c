/* gpu_attention.c - the GPU attention engine switch and its scratch (gpu_attention.h). */
#include "gpu_attention.h"

#include <stdlib.h>
#include <string.h>

#include "kn_cuda_size.h"

int tr_gpu_attention_request(void) {
    const char *v = getenv("MKS_CUDA_ATTENTION");
    if (!v) return 0;
    if (!strcmp(v, "cudnn")) return TR_GPU_CUDNN_DETERMINISTIC;
    if (!strcmp(v, "cudnn-fast")) return TR_GPU_CUDNN_FAST;
    return !strcmp(v, "simt") ? TR_GPU_ATT_SIMT : 0;
}

int tr_gpu_attention_cudnn_wanted(void) {
    int r = tr_gpu_attention_request();
    return r == TR_GPU_CUDNN_DETERMINISTIC || r == TR_GPU_CUDNN_FAST ? r : 0;
}

size_t tr_gpu_attention_scratch_bytes(size_t B, size_t T, size_t NH, size_t HS) {
    size_t s = kn_attention_backward_scratch_bytes(B, T, NH);
    if (tr_gpu_attention_cudnn_wanted()) {
        size_t c = kn_cudnn_attention_scratch_bytes(B, T, NH, HS);
        if (c > s) s = c;
    }
    return s;
}
