/* bench_llama_cpu_step.c - per-step time (forward + backward, no optimizer) of the
 * CPU reference Llama model (train/llama_model.c) on random tokens, for the
 * issue 30 item 5 comparison with transformers on PyTorch CPU at the same
 * threads (OMP_NUM_THREADS) and batch. Prints one JSON line.
 *
 *   cmake --build BUILD --target bench_llama_cpu_step
 *   OMP_NUM_THREADS=2 BUILD/tests/bench_llama_cpu_step L NH NKV C F V B T STEPS
 * (It lives in tests/, not tools/bench/, because it drives the model's
 * internal API, which front ends may not include: ctest front_end_headers.)
 *
 * Prints the planner's figure (tr_llama_memory total) and the peak RSS too.
 * tools/bench/llama_torch.py --vs-c runs this next to transformers and
 * prints the ratio.
 *
 * Measured, 12 layers, 12 heads, 4 KV heads, d 768, ffn 2048, vocab 32000,
 * tied (100,092,672 params), B 2 x T 256, 2 threads, on the shared 2-core
 * machine at load average 12-25 (every figure is slowed by that load; only
 * the ratios of alternating runs mean anything):
 *  - this model vs the previous one (per-call calloc, separate q/k/v and
 *    gate/up matmuls, K/V copied per query head), alternating processes:
 *    56.1/35.2, 39.5/34.3, 53.2/36.1 s: new/old median 0.68 (1.48x faster);
 *  - vs transformers 5.25 LlamaForCausalLM fp32 (SDPA, torch 2.15 CPU,
 *    set_num_threads(2)), forward + backward, llama_torch.py --vs-c, 3
 *    rounds of 3 steps: 50.1/32.1, 42.9/25.1, 55.2/40.9 s: ratio median
 *    1.56 (still SLOWER: the shared GPT-2 matmul kernel is 45% of the
 *    samples and its packing another 14%; its 8-wide AVX2 micro-kernel
 *    against oneDNN/MKL's AVX-512 on this Xeon);
 *  - on the machine when QUIET (load 2, 17:56 UTC), --vs-c 2 rounds of 2
 *    steps: C 3.12/3.35 s vs torch 1.35/1.40 s: ratio 2.35 - the load
 *    figures above flatter the C model; quiet, the previous model took
 *    3.38 s (16:42, one run), so the one-block/packed rework gains ~5% and
 *    the gap is the matmul kernel (a step is ~307 GFLOP of matmul: torch
 *    runs it at ~224 GFLOP/s on 2 cores, AVX-512; this model at ~95);
 *  - memory: tr_llama_memory 1,240,281,088 B, peak RSS 1,246,793,728 B
 *    (+0.5%);
 *  - after the AVX-512 matmul kernel (kernels/matmul_ref.c, 8x32 tile,
 *    transposing packs; bit-identical to the portable kernel, goldens
 *    unchanged), on a quiet 16-core Xeon of the same family (device host,
 *    taskset 2 cores, OMP_NUM_THREADS 2, 3 alternating rounds of 3 steps):
 *    before 3.04/2.98/3.05 s, after 2.25/2.06/2.02 s per step (1.48x); CPU
 *    per 4-step process 26.2 -> 18.5 s. Against torch's quiet 1.35-1.40 s
 *    above: ~1.5x slower (was 2.35x). That is near the limit of these
 *    numerics: a rounded multiply then a rounded add (no FMA, as the C
 *    standard mode compiles the portable kernel) issues 2 zmm uops per
 *    multiply-add on the 2 vector ports, ~100 GFLOP/s a core measured, so
 *    the ~307 GFLOP take >= ~1.5 s on 2 cores. The same kernel with FMA
 *    (results change in the last bits: every golden would be re-recorded)
 *    ran 1.48/1.41/1.52 s in the same rounds.
 *  - FMA kernels (kernels/matmul_ref.c: AVX-512 8x48 / AVX2 6x16, now the
 *    default; the exact kernels stay for the goldens), this shared 2-core
 *    machine at load average 17-25, llama_torch.py --vs-c, 3 rounds of 3
 *    steps, transformers fp32 SDPA on torch CPU:
 *    2 threads (both with their OpenMP defaults): C 17.0/13.0/14.7 s wall,
 *    5.04/4.57/4.98 s CPU vs torch 28.4/28.4/29.3 s wall, 10.5/9.9/9.8 s
 *    CPU: ratio C/torch wall 0.46-0.60 (median 0.50), CPU 0.46-0.51 (torch
 *    loses more than C to the load: its threads spin-wait for each other);
 *    1 thread (no waiting between threads, so CPU time is the work):
 *    C 3.15/3.11/3.15 s CPU vs torch 2.89/2.96/2.97 s: ratio 1.05-1.09
 *    (median 1.06): per unit of work torch is still ~6% ahead. The
 *    matmuls run at 126-170 GFLOP per CPU-second against oneDNN's 131-171
 *    on the same shapes (one thread); the rest is attention (~11% of the
 *    samples) and packing (~15% at one thread).
 *    QUIET (load 1.3-2.4, 23:39 UTC), 2 threads, 3 rounds of 3 steps:
 *    C 1.526/1.563/1.612 s (CPU 3.03/3.10/3.21) vs torch 1.354/1.358/
 *    1.364 s (CPU 2.66/2.68/2.70): ratio wall 1.13-1.18 (median 1.15), CPU
 *    1.14-1.19 - still SLOWER than torch by ~15%; the same minutes, exact
 *    kernel (MKS_MATMUL_ISA=avx512) 2.27/2.22 s vs FMA 1.58/1.62 s (1.40x).
 *  - attention as blocked FMA matmuls, SwiGLU and softmax-xent on 8-lane
 *    exponentials (kernels/llama_attn_fma_ref.c; docs/model.md "CPU speed
 *    of the Llama model"), load average 10-16, CPU s per step: against
 *    the same tree without them, alternating, 1 thread 2.97-3.08 ->
 *    2.50-2.63 (pairs 0.82-0.88), 2 threads 4.88-5.37 -> 4.21-5.10 (pairs
 *    0.86-0.98); llama_torch.py --vs-c, 3 rounds of 3 steps: 1 thread C
 *    2.61/2.94/2.71 vs torch 2.93/3.17/3.00 CPU s (ratio 0.89-0.93, median
 *    0.90; wall 0.72/2.26/0.93, one round disturbed), 2 threads CPU ratio
 *    0.49-0.51, wall 0.40-0.59 (torch spin-waits under the load). The
 *    quiet-machine 2-thread ratio is still to be measured. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "llama_model.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: %s L NH NKV C F V B T STEPS\n", argv[0]);
        return 64;
    }
    int a[9];
    for (int i = 0; i < 9; i++) a[i] = atoi(argv[i + 1]);
    tr_llama_config c = {a[0], a[1], a[2], a[3], a[4], a[5], a[7], 10000.f, 1e-5f, {0, 0, 0, 0}, 1, 0};
    int B = a[6], T = a[7], steps = a[8];
    tr_llama *m = NULL;
    if (steps < 1 || tr_llama_create(&c, &m)) {
        fprintf(stderr, "bad config or no memory\n");
        return 2;
    }
    srand(1);
    for (int i = 0; i < tr_llama_n_tensors(m); i++) {
        size_t n;
        const char *name = tr_llama_tensor_name(m, i);
        float *p = tr_llama_param(m, name, &n);
        int norm = strstr(name, "norm") != NULL;
        for (size_t k = 0; k < n; k++) p[k] = norm ? 1.f : 0.02f * ((float)rand() / RAND_MAX - 0.5f);
    }
    uint32_t *x = malloc((size_t)B * T * sizeof *x);
    int32_t *y = malloc((size_t)B * T * sizeof *y);
    for (int i = 0; i < B * T; i++) x[i] = (uint32_t)(rand() % c.vocab), y[i] = rand() % c.vocab;
    double *t = malloc((size_t)steps * sizeof *t), *tc = malloc((size_t)steps * sizeof *tc), loss = 0;
    tr_llama_mem mem;
    if (tr_llama_memory(&c, B, T, &mem) || tr_llama_reserve(m, B, T)) {
        fprintf(stderr, "batch too large for memory\n");
        return 3;
    }
    if (tr_llama_fwd_bwd(m, B, T, x, y, NULL, NULL, NULL, &loss)) return 2; /* warm-up */
    for (int s = 0; s < steps; s++) {
        double t0 = now(), c0 = cpu_now();
        tr_llama_fwd_bwd(m, B, T, x, y, NULL, NULL, NULL, &loss);
        t[s] = now() - t0;
        tc[s] = cpu_now() - c0;
    }
    qsort(t, (size_t)steps, sizeof *t, cmp);
    qsort(tc, (size_t)steps, sizeof *tc, cmp);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    /* the planner's figure (params + grads + acts + scratch) next to the
     * peak RSS, which adds the tokens, the tensor table, code and libraries */
    /* step_cpu_s_median: CPU time (user + sys, all threads) of a step, which
     * other processes on a shared machine disturb less than the wall time */
    printf("{\"params\": %zu, \"B\": %d, \"T\": %d, \"step_s_median\": %.4f, \"step_cpu_s_median\": %.4f, "
           "\"loss\": %.4f, "
           "\"memory_total_bytes\": %zu, \"peak_rss_bytes\": %ld}\n",
           tr_llama_param_count(&c), B, T, t[steps / 2], tc[steps / 2], loss, mem.total, ru.ru_maxrss * 1024L);
    tr_llama_free(m);
    free(x);
    free(y);
    free(t);
    free(tc);
    return 0;
}
