/* test_tr_cuda_gpu.cu - the device arena (train/gpu_arena.h): the arena
 * is sized from a real plan, hands out aligned pieces, refuses after seal and
 * when exhausted; pinned buffers; an input upload through the copy stream
 * arrives intact and in order.  Label gpu; exit 77 without a GPU. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "tr.h"
#include "gpu_arena.h"
}

static int fails = 0;
#define EXPECT(c)                                                                                                      \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                                        \
            fails++;                                                                                                   \
        }                                                                                                              \
    } while (0)

int main(void) {
    char name[256];
    uint64_t total = 0, fr = 0;
    if (tr_cuda_device_info(name, sizeof name, &total, &fr) != TR_OK) {
        printf("test_tr_cuda_gpu: no CUDA device: skipped\n");
        return 77;
    }
    printf("device %s: %.1f GiB total, %.1f GiB free\n", name, total / 1073741824.0, fr / 1073741824.0);

    tr_plan_in pi;
    memset(&pi, 0, sizeof pi);
    EXPECT(tr_model_preset("tiny", &pi.n_layer, &pi.n_head, &pi.n_embd) == 0);
    pi.vocab_size = 512;
    pi.seq_len = pi.max_seq = 64;
    pi.batch_tokens = pi.token_budget = 8 * 64;
    pi.device = TR_DEV_CUDA;
    pi.precision = TR_BF16;
    pi.mem_budget = 4ull << 30;
    tr_plan_out po;
    EXPECT(tr_plan(&pi, &po) == TR_OK && po.fits);
    size_t ab = tr_cuda_arena_bytes(&po);
    printf("plan: %d rows, arena %zu bytes\n", po.micro_rows, ab);
    EXPECT(ab > 0);

    uint64_t used0 = 0, used1 = 0;
    EXPECT(tr_cuda_mem_used(&used0) == TR_OK);
    tr_cuda_arena a;
    EXPECT(tr_cuda_arena_create(&a, &po) == TR_OK);
    EXPECT(tr_cuda_mem_used(&used1) == TR_OK);
    printf("arena: %zu bytes; device use grew by %llu bytes\n", a.size, (unsigned long long)(used1 - used0));

    cudaStream_t compute;
    EXPECT(cudaStreamCreate(&compute) == cudaSuccess);
    int B = po.micro_rows, T = 64;
    tr_cuda_input *in = NULL;
    EXPECT(tr_cuda_input_create(&in, &a, B, T, compute) == TR_OK);
    void *p1 = tr_cuda_arena_take(&a, 1000, "test piece");
    EXPECT(p1 && ((uintptr_t)p1 % TR_CUDA_ALIGN) == 0);
    EXPECT(tr_cuda_arena_take(&a, a.size, "too big") == NULL);
    printf("exhausted: %s\n", a.last_error);
    tr_cuda_arena_seal(&a);
    EXPECT(tr_cuda_arena_take(&a, 16, "after seal") == NULL);
    printf("sealed: %s\n", a.last_error);

    /* two uploads through pinned buffers, one into each device batch slot */
    tr_batch hb;
    memset(&hb, 0, sizeof hb);
    size_t n = (size_t)B * T;
    hb.rows = B;
    hb.T = T;
    hb.inputs = (uint32_t *)tr_cuda_pinned_alloc(n * 4, NULL);
    hb.targets = (int32_t *)tr_cuda_pinned_alloc(n * 4, NULL);
    hb.pos = (int32_t *)tr_cuda_pinned_alloc(n * 4, NULL);
    hb.seg = (int32_t *)tr_cuda_pinned_alloc(n * 4, NULL);
    EXPECT(hb.inputs && hb.targets && hb.pos && hb.seg);
    uint32_t *back = (uint32_t *)malloc(n * 4);
    for (int round = 0; round < 2 && back && hb.inputs; round++) {
        for (size_t i = 0; i < n; i++) {
            hb.inputs[i] = (uint32_t)(i * 7 + round);
            hb.targets[i] = (int32_t)i;
            hb.pos[i] = (int32_t)(i % T);
            hb.seg[i] = 0;
        }
        tr_cuda_batch dev;
        EXPECT(tr_cuda_input_upload(in, &hb, &dev) == TR_OK);
        double w = 0;
        EXPECT(tr_cuda_input_host_done(in, &w) == TR_OK);
        EXPECT(cudaMemcpyAsync(back, dev.inputs, n * 4, cudaMemcpyDeviceToHost, compute) == cudaSuccess);
        EXPECT(tr_cuda_input_consumed(in) == TR_OK);
        EXPECT(cudaStreamSynchronize(compute) == cudaSuccess);
        int bad = 0;
        for (size_t i = 0; i < n; i++) bad += back[i] != (uint32_t)(i * 7 + round);
        EXPECT(bad == 0);
        printf("upload %d: %zu tokens, host wait %.3f ms, %d mismatches\n", round, n, w * 1e3, bad);
    }
    free(back);
    tr_cuda_pinned_free(hb.inputs, NULL);
    tr_cuda_pinned_free(hb.targets, NULL);
    tr_cuda_pinned_free(hb.pos, NULL);
    tr_cuda_pinned_free(hb.seg, NULL);
    tr_cuda_input_destroy(in);
    cudaStreamDestroy(compute);
    tr_cuda_arena_destroy(&a);
    printf("test_tr_cuda_gpu: %s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
