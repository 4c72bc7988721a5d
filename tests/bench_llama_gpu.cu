/* bench_llama_gpu.cu - times the GPU Llama model (train/gpu_llama.h) at a
 * Llama shape: random init on the device, random tokens, forward + backward +
 * clipped AdamW per step, as tests/bench_train_gpu.cu does for GPT-2. Run by
 * tests/gpu/run.sh step 10b next to tools/bench/llama_torch.py (the same
 * shape from the same config.json numbers, the same rows x seq-len), when
 * `llmtrain --device cuda` cannot train the config itself. Not a ctest.
 *
 *   bench_llama_gpu --layers 16 --heads 32 --kv-heads 8 --dim 2048 --ffn 8192 --vocab 50304
 *                   --seq-len 1024 --batch 8 --steps 10 [--untied] [--precision bf16|fp32]
 *                   [--theta 500000] [--llama3] [--max-seq N]
 *
 * Output: progress on stderr, one JSON line on stdout: tokens_per_s (median
 * over the steps after the first two), step_ms_median, params, arena and peak
 * device bytes (cudaMemGetInfo, context included), loss first / last.
 * Exit 0, 2 on an error (message on stderr), 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

extern "C" {
#include "gpu_llama.h"
}

static int arg_int(int argc, char **argv, const char *name, int def) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return atoi(argv[i + 1]);
    return def;
}
static const char *arg_str(int argc, char **argv, const char *name, const char *def) {
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return def;
}
static bool flag(int argc, char **argv, const char *name) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return true;
    return false;
}

int main(int argc, char **argv) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "bench_llama_gpu: no CUDA device\n");
        return 77;
    }
    tr_llama_config c;
    memset(&c, 0, sizeof c);
    c.n_layer = arg_int(argc, argv, "--layers", 16);
    c.n_head = arg_int(argc, argv, "--heads", 32);
    c.n_kv_head = arg_int(argc, argv, "--kv-heads", 8);
    c.d_model = arg_int(argc, argv, "--dim", 2048);
    c.d_ff = arg_int(argc, argv, "--ffn", 8192);
    c.vocab = arg_int(argc, argv, "--vocab", 50304);
    int T = arg_int(argc, argv, "--seq-len", 1024), B = arg_int(argc, argv, "--batch", 8);
    int steps = arg_int(argc, argv, "--steps", 10);
    c.max_seq = arg_int(argc, argv, "--max-seq", T);
    c.rope_theta = (float)atof(arg_str(argc, argv, "--theta", "500000"));
    c.norm_eps = 1e-5f;
    if (flag(argc, argv, "--llama3")) c.rope_scaling = kn_rope_scaling{32.0f, 1.0f, 4.0f, 8192};
    c.tied = !flag(argc, argv, "--untied");
    kn_dtype dt = strcmp(arg_str(argc, argv, "--precision", "bf16"), "fp32") ? KN_BF16 : KN_F32;
    if (steps < 3 || B <= 0 || T <= 0) {
        fprintf(stderr, "bench_llama_gpu: --steps >= 3, --batch and --seq-len > 0\n");
        return 2;
    }
    size_t N = (size_t)B * T;
    uint64_t free0 = 0, total = 0;
    {
        size_t f, t;
        cudaMemGetInfo(&f, &t);
        free0 = f, total = t;
    }
    tr_plan_out po;
    memset(&po, 0, sizeof po);
    po.n_items = 2;
    po.items[0].name = "model";
    po.items[0].bytes = tr_cuda_llama_arena_bytes(&c, B, T, dt, NULL);
    po.items[0].where = "device";
    po.items[1].name = "batch";
    po.items[1].bytes = (uint64_t)N * 8;
    po.items[1].where = "device";
    if (!po.items[0].bytes) {
        fprintf(stderr, "bench_llama_gpu: the GPU Llama model refuses this config (%s)\n", kn_cuda_last_error());
        return 2;
    }
    tr_cuda_arena a;
    if (tr_cuda_arena_create(&a, &po) != TR_OK) {
        fprintf(stderr, "bench_llama_gpu: arena of %llu bytes: %s\n", (unsigned long long)po.items[0].bytes,
                a.last_error);
        return 2;
    }
    cudaStream_t st;
    cudaStreamCreate(&st);
    uint32_t *d_in = (uint32_t *)tr_cuda_arena_take(&a, N * 4, "inputs");
    int32_t *d_tg = (int32_t *)tr_cuda_arena_take(&a, N * 4, "targets");
    tr_cuda_llama *m = NULL;
    int rc = tr_cuda_llama_create(&m, &c, B, T, dt, &a, st, NULL);
    if (rc != TR_OK || !d_in || !d_tg) {
        fprintf(stderr, "bench_llama_gpu: create: %d (%s; %s)\n", rc, a.last_error, kn_cuda_last_error());
        return 2;
    }
    tr_cuda_arena_seal(&a);
    if (tr_cuda_llama_init_random(m, 1) != TR_OK) {
        fprintf(stderr, "bench_llama_gpu: init: %s\n", kn_cuda_last_error());
        return 2;
    }
    /* one random batch per step (throughput does not depend on the token values) */
    std::vector<uint32_t> in(N);
    std::vector<int32_t> tg(N);
    uint64_t s = 12345;
    tr_optim_hparams h = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
    std::vector<double> ms;
    double loss_first = NAN, loss_last = NAN;
    uint64_t peak_used = 0;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int k = 0; k < steps; k++) {
        for (size_t i = 0; i < N; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            in[i] = (uint32_t)((s >> 33) % (uint64_t)c.vocab);
            tg[i] = (int32_t)((s >> 13) % (uint64_t)c.vocab);
        }
        cudaMemcpyAsync(d_in, in.data(), N * 4, cudaMemcpyHostToDevice, st);
        cudaMemcpyAsync(d_tg, tg.data(), N * 4, cudaMemcpyHostToDevice, st);
        cudaEventRecord(e0, st);
        double ls = 0;
        uint64_t nt = 0;
        if (tr_cuda_llama_zero_grad(m) != TR_OK ||
            /* the loss read waits for the backward (one sync a step, as llmtrain's log line) */
            tr_cuda_llama_fwd_bwd(m, B, T, d_in, d_tg, NULL, NULL, 1.0f / (float)N, &ls, &nt) != TR_OK ||
            tr_cuda_llama_step(m, &h, k + 1, 1.0f, NULL) != TR_OK) {
            fprintf(stderr, "bench_llama_gpu: step %d: %s\n", k + 1, kn_cuda_last_error());
            return 2;
        }
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        ms.push_back(t);
        double l = nt ? ls / (double)nt : NAN;
        if (k == 0) loss_first = l;
        loss_last = l;
        size_t f, tt;
        cudaMemGetInfo(&f, &tt);
        peak_used = std::max<uint64_t>(peak_used, (uint64_t)(tt - f));
        fprintf(stderr, "step %d: %.1f ms, loss %.4f\n", k + 1, t, l);
    }
    std::vector<double> tail(ms.begin() + 2, ms.end());
    std::sort(tail.begin(), tail.end());
    double med = tail[tail.size() / 2];
    printf("{\"impl\": \"bench_llama_gpu\", \"layers\": %d, \"heads\": %d, \"kv_heads\": %d, \"dim\": %d, \"ffn\": %d, "
           "\"vocab\": %d, \"tied\": %s, \"seq_len\": %d, \"batch\": %d, \"precision\": \"%s\", \"params\": %zu, "
           "\"steps\": %d, \"step_ms_median\": %.3f, \"tokens_per_s\": %.1f, \"arena_bytes\": %zu, "
           "\"peak_bytes\": %llu, \"device_bytes\": %llu, \"free_at_start\": %llu, \"loss_first\": %.5f, "
           "\"loss_last\": %.5f}\n",
           c.n_layer, c.n_head, c.n_kv_head, c.d_model, c.d_ff, c.vocab, c.tied ? "true" : "false", T, B,
           dt == KN_BF16 ? "bf16" : "fp32", tr_cuda_llama_num_params(m), steps, med, (double)N / (med / 1e3), a.size,
           (unsigned long long)peak_used, (unsigned long long)total, (unsigned long long)free0, loss_first, loss_last);
    tr_cuda_llama_destroy(m);
    cudaStreamDestroy(st);
    tr_cuda_arena_destroy(&a);
    return 0;
}
