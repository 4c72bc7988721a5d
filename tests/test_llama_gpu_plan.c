/* test_llama_gpu_plan.c - the planner's rows of the GPU Llama model
 * (tr_llama_gpu_plan_rows, train/gpu_llama_plan.c, plain C in tr_plan)
 * against the model's own carve (tr_cuda_llama_arena_bytes,
 * train/gpu_llama.cu: host code, no device needed): equal to the byte over a
 * grid of configs (GQA / MQA / MHA, head size 16, 32, 64 and 128, tied / untied,
 * q/k/v biases), micro-batches and dtypes; the parameter count equal to the
 * CPU model's (tr_llama); refused configs give 0 rows and 0 bytes. Label cpu
 * (CUDA builds: it links tr_cuda). */
#include <stdio.h>
#include <string.h>

#include "gpu_llama.h"
#include "llama_model.h"
#include "test_check.h"

static void one(const tr_llama_config *c, int B, int T, kn_dtype dt) {
    const tr_optim_ops *opt = tr_optim_default();
    tr_llama_gpu_row rows[TR_LLAMA_GPU_ROWS];
    int n = tr_llama_gpu_plan_rows(c, B, T, (int)kn_dtype_size(dt), opt, rows);
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) sum += rows[i].fixed + (uint64_t)B * rows[i].per_row;
    size_t carve = tr_cuda_llama_arena_bytes(c, B, T, dt, opt);
    CHECK(n > 0 && sum == carve, "L%d H%d KV%d C%d F%d V%d tied%d bias%d B%d T%d dt%d: rows %d sum %llu vs carve %zu",
          c->n_layer, c->n_head, c->n_kv_head, c->d_model, c->d_ff, c->vocab, c->tied, c->qkv_bias, B, T, (int)dt, n,
          (unsigned long long)sum, carve);
}

int main(void) {
    const tr_llama_config base = {2, 4, 2, 256, 344, 300, 64, 10000.0f, 1e-5f, {0, 0, 0, 0}, 0, 0};
    const int kv[3] = {1, 2, 4};
    int cases = 0;
    for (int k = 0; k < 3; k++)
        for (int tied = 0; tied < 2; tied++)
            for (int bias = 0; bias < 2; bias++)
                for (int h128 = 0; h128 < 2; h128++) {
                    tr_llama_config c = base;
                    c.n_kv_head = h128 ? (kv[k] > 2 ? 2 : kv[k]) : kv[k];
                    if (h128) c.n_head = 2;
                    c.tied = tied, c.qkv_bias = bias;
                    /* the parameter count: the CPU model's tensors, summed */
                    tr_llama *m = NULL;
                    CHECK(tr_llama_create(&c, &m) == 0);
                    size_t P = 0;
                    for (int i = 0; m && i < tr_llama_n_tensors(m); i++) {
                        size_t nn = 0;
                        tr_llama_param(m, tr_llama_tensor_name(m, i), &nn);
                        P += nn;
                    }
                    CHECK(P == tr_llama_gpu_param_count(&c), "params %zu vs %zu", P, tr_llama_gpu_param_count(&c));
                    tr_llama_free(m);
                    const int Bs[3] = {1, 3, 8}, Ts[2] = {17, 64};
                    for (int b = 0; b < 3; b++)
                        for (int t = 0; t < 2; t++)
                            for (int d = 0; d < 3; d++, cases++) one(&c, Bs[b], Ts[t], (kn_dtype)d);
                }
    /* Llama 3.2 1B's shape at the run.sh batch: the planner's figure, printed */
    tr_llama_config big = {16, 32, 8, 2048, 8192, 50304, 1024, 500000.0f, 1e-5f, {32.0f, 1.0f, 4.0f, 8192}, 1, 0};
    one(&big, 8, 1024, KN_BF16);
    tr_llama_gpu_row rows[TR_LLAMA_GPU_ROWS];
    int n = tr_llama_gpu_plan_rows(&big, 8, 1024, 2, tr_optim_default(), rows);
    uint64_t tot = 0;
    for (int i = 0; i < n; i++) {
        uint64_t b = rows[i].fixed + 8 * rows[i].per_row;
        tot += b;
        printf("  %-85s %10.1f MiB\n", rows[i].name, b / 1048576.0);
    }
    printf("  Llama 3.2 1B shape, V 50304, 8 x 1024 bf16: %zu params, device arena %.2f GiB\n",
           tr_llama_gpu_param_count(&big), tot / 1073741824.0);
    /* llama-tiny's shape (heads of 16, what llmtrain --device cuda --model llama-tiny runs) and heads of 32 */
    const tr_llama_config tiny = {2, 4, 2, 64, 128, 512, 64, 10000.0f, 1e-5f, {0, 0, 0, 0}, 1, 0};
    for (int d = 0; d < 3; d++, cases++) one(&tiny, 4, 32, (kn_dtype)d);
    tr_llama_config h32 = base;
    h32.n_head = 8, h32.n_kv_head = 2;
    one(&h32, 3, 17, KN_BF16), cases++;
    /* refusals: head size 8 (the GQA kernels take 16, 32, 64 or 128), T beyond max_seq */
    tr_llama_config bad = base;
    bad.n_head = 32; /* head size 8 */
    CHECK(tr_llama_gpu_plan_rows(&bad, 2, 16, 2, tr_optim_default(), rows) == 0 &&
          tr_cuda_llama_arena_bytes(&bad, 2, 16, KN_BF16, NULL) == 0);
    CHECK(tr_llama_gpu_plan_rows(&base, 2, 65, 2, tr_optim_default(), rows) == 0 &&
          tr_cuda_llama_arena_bytes(&base, 2, 65, KN_BF16, NULL) == 0);
    printf("test_llama_gpu_plan: %d shapes, rows == carve\n", cases + 1);
    return failures ? 1 : 0;
}
