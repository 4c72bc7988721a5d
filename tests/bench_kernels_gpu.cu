/* bench_kernels_gpu.cu - times every kn_cuda op at GPT-2 shapes (bf16) and
 * projects a training step from them: what a GPU trainer built on these
 * kernels would reach (tokens/s, MFU), and which ops the time goes to.
 *
 *   bench_kernels_gpu [--model d12] [--B 16] [--T 1024] [--reps 10]
 *
 * Each op: 2 warm-up launches, then `reps` launches timed one by one with CUDA
 * events; the median is reported.  Inputs are random (never zeros).  FLOPs
 * are the op's useful multiply-adds x 2; bytes the fewest it must move
 * (inputs read once, outputs written once).  Peaks: 989 TFLOP/s dense bf16,
 * 4.8 TB/s (H200 datasheet; run.sh prints measured ceilings separately).
 * The projection: L x (per-layer forward + backward) + embedding, head,
 * loss, AdamW and grad norm over all parameters; launch gaps not counted.
 * Exit 77 without a GPU, 2 on a CUDA error. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

extern "C" {
#include "kn_cuda.h"
}
#include "../train/gpu_lmhead.cuh" /* the models' lm head + softmax-xent, whole or in row chunks (a path: run.sh's
                                      * fallback build compiles this file with -Ikernels alone) */

#define CK(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                     \
            exit(2);                                                                                                   \
        }                                                                                                              \
    } while (0)

static const double PEAK_FLOPS = 989e12, PEAK_BW = 4.8e12;

__global__ void rand_fill(float *p, size_t n, uint32_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16;
        x *= 0x7feb352du;
        x ^= x >> 15;
        x *= 0x846ca68bu;
        x ^= x >> 16;
        p[i] = scale * ((float)(x >> 8) * (1.0f / 8388608.0f) - 1.0f);
    }
}
__global__ void rand_fill_bf16(__nv_bfloat16 *p, size_t n, uint32_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16;
        x *= 0x7feb352du;
        x ^= x >> 15;
        p[i] = __float2bfloat16(scale * ((float)(x >> 8) * (1.0f / 8388608.0f) - 1.0f));
    }
}
__global__ void rand_ids(uint32_t *p, size_t n, uint32_t V, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = ((uint32_t)i * 2654435761u ^ seed) % V;
}

static uint32_t g_seed = 12345;
static void *dalloc_f32(size_t n, float scale = 1.0f) {
    float *p;
    CK(cudaMalloc(&p, n * 4 + 256));
    rand_fill<<<1024, 256>>>(p, n, g_seed++, scale);
    CK(cudaGetLastError());
    return p;
}
static void *dalloc_bf16(size_t n, float scale = 1.0f) {
    __nv_bfloat16 *p;
    CK(cudaMalloc(&p, n * 2 + 256));
    rand_fill_bf16<<<1024, 256>>>(p, n, g_seed++, scale);
    CK(cudaGetLastError());
    return p;
}

struct row {
    const char *op;
    char shape[64];
    double ms, flops, bytes;
    int per_layer; /* in the projected step: 1 (2) once (twice) per layer, 0 once a step, -1 not (an alternative) */
    int failed;
};
static std::vector<row> g_rows;
static int g_reps = 10;

static int g_dead = 0; /* a CUDA fault: the context is gone, later rows are skipped */
static char g_fault[256];

#define BK(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            snprintf(g_fault, sizeof g_fault, "%s: %s", op, cudaGetErrorString(e_));                                   \
            fprintf(stderr, "bench_kernels_gpu: %s\n", g_fault);                                                       \
            g_dead = 1;                                                                                                \
            r.failed = 1;                                                                                              \
            g_rows.push_back(r);                                                                                       \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

template <typename F>
static void bench(const char *op, const char *shape, double flops, double bytes, int per_layer, F f) {
    row r;
    memset(&r, 0, sizeof r);
    r.op = op;
    snprintf(r.shape, sizeof r.shape, "%s", shape);
    r.flops = flops;
    r.bytes = bytes;
    r.per_layer = per_layer;
    if (g_dead) {
        r.failed = 1;
        g_rows.push_back(r);
        return;
    }
    for (int i = 0; i < 2; i++)
        if (f() != KN_OK) {
            fprintf(stderr, "%s: error: %s\n", op, kn_cuda_last_error());
            r.failed = 1;
            g_rows.push_back(r);
            return;
        }
    BK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    BK(cudaEventCreate(&a));
    BK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int i = 0; i < g_reps; i++) {
        BK(cudaEventRecord(a));
        f();
        BK(cudaEventRecord(b));
        BK(cudaEventSynchronize(b));
        float ms = 0;
        BK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    BK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    r.ms = t[t.size() / 2];
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    g_rows.push_back(r);
}

int main(int argc, char **argv) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("bench_kernels_gpu: no CUDA device: skipped\n");
        return 77;
    }
    const char *model = "d12";
    int B = 16, T = 1024;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--B")) B = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--T")) T = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) g_reps = atoi(argv[i + 1]);
    }
    int L = 12, NH = 12, C = 768;
    if (!strcmp(model, "d24")) L = 24, NH = 16, C = 1024;
    else if (!strcmp(model, "d36")) L = 36, NH = 20, C = 1280;
    else if (!strcmp(model, "d48")) L = 48, NH = 25, C = 1600;
    else if (!strcmp(model, "tiny")) L = 2, NH = 2, C = 64;
    if (B <= 0 || T <= 0 || g_reps <= 0) return 64;
    int V = 50257, Vp = 50304, N = B * T;
    double P = (double)L * (12.0 * C * C + 13.0 * C) + (double)Vp * C + (double)T * C + 2.0 * C;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("bench_kernels_gpu: %s, %s B=%d T=%d (N=%d tokens), L=%d C=%d NH=%d, bf16, median of %d\n\n", prop.name,
           model, B, T, N, L, C, NH, g_reps);
    kn_dtype bf = KN_BF16;

    void *ws;
    CK(cudaMalloc(&ws, KN_CUBLASLT_WORKSPACE));
    kn_cuda_ctx *ctx;
    if (kn_cuda_ctx_create(&ctx, nullptr, ws, KN_CUBLASLT_WORKSPACE) != KN_OK) {
        fprintf(stderr, "ctx: %s\n", kn_cuda_last_error());
        return 2;
    }
    /* activations (bf16) */
    void *x = dalloc_bf16((size_t)N * C), *x2 = dalloc_bf16((size_t)N * C), *ln = dalloc_bf16((size_t)N * C);
    void *res = dalloc_bf16((size_t)N * C);
    void *qkv = dalloc_bf16((size_t)N * 3 * C), *att = dalloc_bf16((size_t)N * C),
         *dqkv = dalloc_bf16((size_t)N * 3 * C);
    void *fc = dalloc_bf16((size_t)N * 4 * C), *fcg = dalloc_bf16((size_t)N * 4 * C),
         *dfc = dalloc_bf16((size_t)N * 4 * C);
    void *dx = dalloc_bf16((size_t)N * C), *dout = dalloc_bf16((size_t)N * C);
    void *logits = dalloc_bf16((size_t)N * Vp, 4.0f);
    float *lse = (float *)dalloc_f32((size_t)B * NH * T), *mean = (float *)dalloc_f32(N),
          *rstd = (float *)dalloc_f32(N);
    float *losses = (float *)dalloc_f32(N);
    /* one layer's weights (bf16) + fp32 grads; the embedding */
    void *wqkv = dalloc_bf16((size_t)3 * C * C, 0.02f), *bqkv = dalloc_bf16(3 * C, 0.02f);
    void *wfc = dalloc_bf16((size_t)4 * C * C, 0.02f), *bfc = dalloc_bf16(4 * C, 0.02f);
    void *wproj = dalloc_bf16((size_t)C * 4 * C, 0.02f);
    void *wte = dalloc_bf16((size_t)Vp * C, 0.02f), *wpe = dalloc_bf16((size_t)T * C, 0.02f);
    float *lnw = (float *)dalloc_f32(C), *lnb = (float *)dalloc_f32(C);
    float *gw = (float *)dalloc_f32((size_t)4 * C * C), *gb = (float *)dalloc_f32(4 * C);
    float *gwte = (float *)dalloc_f32((size_t)Vp * C), *gwpe = (float *)dalloc_f32((size_t)T * C);
    float *glw = (float *)dalloc_f32(C), *glb = (float *)dalloc_f32(C);
    uint32_t *ids;
    int32_t *tg;
    CK(cudaMalloc(&ids, (size_t)N * 4));
    CK(cudaMalloc(&tg, (size_t)N * 4));
    rand_ids<<<256, 256>>>(ids, N, V, 7);
    rand_ids<<<256, 256>>>((uint32_t *)tg, N, V, 9);
    /* scratch, the largest any op asks for */
    size_t sb = kn_encoder_backward_scratch_bytes(N);
    sb = std::max(sb, kn_layernorm_backward_scratch_bytes(N, C));
    sb = std::max(sb, kn_matmul_backward_scratch_bytes(N, 4 * C));
    sb = std::max(sb, kn_attention_backward_scratch_bytes(B, T, NH));
    size_t Pn = (size_t)P;
    sb = std::max(sb, kn_sumsq_scratch_bytes(Pn));
    void *scratch;
    CK(cudaMalloc(&scratch, sb));
    /* optimizer over all parameters (fp32 master, m, v, grads; bf16 copy) */
    float *mp = (float *)dalloc_f32(Pn, 0.02f), *mg = (float *)dalloc_f32(Pn, 1e-3f),
          *mm = (float *)dalloc_f32(Pn, 1e-4f);
    float *mv = (float *)dalloc_f32(Pn, 1e-4f);
    CK(cudaMemset(mv, 0, Pn * 4)); /* v >= 0 */
    void *mlp = dalloc_bf16(Pn);
    double *ss;
    float *scale, *gnorm;
    CK(cudaMalloc(&ss, 8));
    CK(cudaMalloc(&scale, 4));
    CK(cudaMalloc(&gnorm, 4));
    CK(cudaDeviceSynchronize());

    char sh[64];
    double nC = (double)N * C, a2 = 2.0;
    double att_f = 2.0 * 2.0 * B * NH * (double)T * T / 2.0 * (C / NH); /* causal: QK^T + PV */
    snprintf(sh, sizeof sh, "N%d C%d", N, C);
    bench("encoder_forward", sh, 0, nC * a2 * 2, 0,
          [&] { return kn_encoder_forward_cuda(x, ids, nullptr, wte, wpe, B, T, C, V, T, bf, nullptr); });
    bench("layernorm_forward (plain)", sh, 0, nC * a2 * 2, -1,
          [&] { return kn_layernorm_forward_cuda(ln, mean, rstd, nullptr, x, nullptr, lnw, lnb, N, C, bf, nullptr); });
    bench("layernorm_fwd +residual", sh, 0, nC * a2 * 4, 2 /* two per layer */,
          [&] { return kn_layernorm_forward_cuda(ln, mean, rstd, res, x, x2, lnw, lnb, N, C, bf, nullptr); });
    snprintf(sh, sizeof sh, "%dx%d->%d bias", N, C, 3 * C);
    bench("matmul_fwd qkv", sh, 2.0 * N * C * 3 * C, a2 * (nC + 3.0 * C * C + 3.0 * nC), 1,
          [&] { return kn_matmul_forward_cuda(ctx, qkv, nullptr, ln, wqkv, bqkv, N, C, 3 * C, bf); });
    snprintf(sh, sizeof sh, "B%d T%d NH%d hs%d", B, T, NH, C / NH);
    bench("attention_forward", sh, att_f, a2 * (3.0 * nC + nC), -1,
          [&] { return kn_attention_forward_cuda(att, lse, qkv, nullptr, B, T, C, NH, bf, nullptr); });
    snprintf(sh, sizeof sh, "%dx%d->%d bias", N, C, C);
    bench("matmul_fwd attproj", sh, 2.0 * N * C * C, a2 * (2.0 * nC + 1.0 * C * C), 1,
          [&] { return kn_matmul_forward_cuda(ctx, x2, nullptr, att, wproj, bqkv, N, C, C, bf); });
    snprintf(sh, sizeof sh, "%dx%d->%d bias+gelu", N, C, 4 * C);
    bench("matmul_fwd fc +gelu", sh, 2.0 * N * C * 4 * C, a2 * (nC + 4.0 * C * C + 8.0 * nC), 1,
          [&] { return kn_matmul_forward_cuda(ctx, fcg, fc, ln, wfc, bfc, N, C, 4 * C, bf); });
    bench("matmul_fwd fc (no epilogue)", sh, 2.0 * N * C * 4 * C, a2 * (nC + 4.0 * C * C + 4.0 * nC), -1,
          [&] { return kn_matmul_forward_cuda(ctx, fc, nullptr, ln, wfc, bfc, N, C, 4 * C, bf); });
    snprintf(sh, sizeof sh, "n%d", N * 4 * C);
    bench("gelu_forward (unfused)", sh, 0, a2 * 8.0 * nC, -1,
          [&] { return kn_gelu_forward_cuda(fcg, fc, (size_t)N * 4 * C, bf, nullptr); });
    snprintf(sh, sizeof sh, "%dx%d->%d bias", N, 4 * C, C);
    bench("matmul_fwd fcproj", sh, 2.0 * N * 4 * C * C, a2 * (5.0 * nC + 4.0 * C * C), 1,
          [&] { return kn_matmul_forward_cuda(ctx, x2, nullptr, fcg, wproj, bqkv, N, 4 * C, C, bf); });
    /* backward, per layer */
    bench("matmul_bwd fcproj", sh, 4.0 * N * 4 * C * C, a2 * (nC + 4.0 * nC + 4.0 * nC) + 16.0 * C * C, -1,
          [&] { return kn_matmul_backward_cuda(ctx, dfc, gw, gb, dout, fcg, wproj, N, 4 * C, C, scratch, sb, bf); });
    /* the same with the GELU backward in its epilogue (the 16-bit default; MKS_GELU_UNFUSED=1
     * takes the two rows "matmul_bwd fcproj" + "gelu_backward" instead) */
    bench("matmul_bwd fcproj (dgelu)", sh, 4.0 * N * 4 * C * C, a2 * (nC + 4.0 * nC + 8.0 * nC) + 16.0 * C * C, 1, [&] {
        return kn_matmul_backward_dgelu_cuda(ctx, dfc, gw, gb, dout, fcg, wproj, fc, N, 4 * C, C, scratch, sb, bf);
    });
    snprintf(sh, sizeof sh, "n%d", N * 4 * C);
    bench("gelu_backward", sh, 0, a2 * 12.0 * nC, -1,
          [&] { return kn_gelu_backward_cuda(dfc, fc, dfc, (size_t)N * 4 * C, bf, nullptr); });
    snprintf(sh, sizeof sh, "%dx%d->%d bias", N, C, 4 * C);
    bench("matmul_bwd fc", sh, 4.0 * N * C * 4 * C, a2 * (4.0 * nC + nC + nC) + 16.0 * C * C, 1,
          [&] { return kn_matmul_backward_cuda(ctx, dx, gw, gb, dfc, ln, wfc, N, C, 4 * C, scratch, sb, bf); });
    snprintf(sh, sizeof sh, "N%d C%d", N, C);
    bench("layernorm_backward", sh, 0, a2 * 4.0 * nC, 2 /* two per layer */, [&] {
        return kn_layernorm_backward_cuda(dx, glw, glb, dout, x, lnw, mean, rstd, N, C, scratch, sb, bf, nullptr);
    });
    snprintf(sh, sizeof sh, "%dx%d->%d bias", N, C, C);
    bench("matmul_bwd attproj", sh, 4.0 * N * C * C, a2 * 3.0 * nC + 4.0 * C * C, 1,
          [&] { return kn_matmul_backward_cuda(ctx, dx, gw, gb, dout, att, wproj, N, C, C, scratch, sb, bf); });
    snprintf(sh, sizeof sh, "B%d T%d NH%d hs%d", B, T, NH, C / NH);
    bench("attention_backward", sh, 2.5 * att_f, a2 * (3.0 * nC + 3.0 * nC + 2.0 * nC), -1, [&] {
        return kn_attention_backward_cuda(dqkv, dout, qkv, att, lse, nullptr, B, T, C, NH, scratch, sb, bf, nullptr);
    });
    snprintf(sh, sizeof sh, "%dx%d->%d bias", N, C, 3 * C);
    bench("matmul_bwd qkv", sh, 4.0 * N * C * 3 * C, a2 * (3.0 * nC + 2.0 * nC) + 12.0 * C * C, 1,
          [&] { return kn_matmul_backward_cuda(ctx, dx, gw, gb, dqkv, ln, wqkv, N, C, 3 * C, scratch, sb, bf); });
    /* head, loss, embedding backward */
    snprintf(sh, sizeof sh, "%dx%d->%d", N, C, Vp);
    bench("matmul_fwd lm head", sh, 2.0 * N * C * Vp, a2 * (nC + (double)Vp * C + (double)N * Vp), 0,
          [&] { return kn_matmul_forward_cuda(ctx, logits, nullptr, ln, wte, nullptr, N, C, Vp, bf); });
    snprintf(sh, sizeof sh, "N%d V%d Vp%d", N, V, Vp);
    kn_softmax_xent_variant(0); /* the scalar kernel (MKS_XENT_SCALAR=1) */
    bench("softmax_xent_fused (in place)", sh, 0, a2 * 2.0 * N * Vp, -1, [&] {
        return kn_softmax_xent_fused_cuda(losses, logits, logits, tg, nullptr, 1.0f / N, N, V, Vp, bf, nullptr);
    });
    kn_softmax_xent_variant(1); /* the 16-byte kernel, the default */
    bench("softmax_xent_fused (vec)", sh, 0, a2 * 2.0 * N * Vp, 0, [&] {
        return kn_softmax_xent_fused_cuda(losses, logits, logits, tg, nullptr, 1.0f / N, N, V, Vp, bf, nullptr);
    });
    kn_softmax_xent_variant(-1);
    snprintf(sh, sizeof sh, "%dx%d->%d", N, C, Vp);
    bench("matmul_bwd lm head", sh, 4.0 * N * C * Vp, a2 * ((double)N * Vp + nC) + 6.0 * Vp * C, 0,
          [&] { return kn_matmul_backward_cuda(ctx, dx, gwte, nullptr, logits, ln, wte, N, C, Vp, scratch, sb, bf); });
    /* the head as the models run it (train/gpu_lmhead.cuh): whole (forward + xent, then the
     * backward: the three rows above in one) against row chunks (MKS_LMHEAD_CHUNK), each chunk's
     * backward at once; "auto" is the switch's size, 256 rows the L2-sized chunk the arithmetic
     * in train/gpu_lmhead.h advises against.  Alternatives (not in the step's sum): the line
     * after the projection puts them next to it. */
    tr_lmhead lh;
    memset(&lh, 0, sizeof lh);
    lh.ctx = ctx, lh.s = nullptr, lh.dt = bf, lh.x = ln, lh.w = wte, lh.dw = gwte, lh.dx = dx;
    lh.logits = logits, lh.losses = losses, lh.targets = tg, lh.dloss = 1.0f / N;
    lh.N = N, lh.C = C, lh.V = V, lh.Vp = Vp, lh.scratch = scratch, lh.scratch_bytes = sb;
    const double lm_flops = 6.0 * N * C * Vp;
    snprintf(sh, sizeof sh, "%dx%d->%d whole", N, C, Vp);
    bench("lm head+xent+bwd (whole)", sh, lm_flops, a2 * (3.0 * nC + 5.0 * N * Vp + 2.0 * Vp * C) + 8.0 * Vp * C, -1,
          [&] {
              lh.rows = (size_t)N;
              int r = tr_lmhead_pass(&lh, TR_LMHEAD_FORWARD);
              return r ? r
                       : kn_matmul_backward_cuda(ctx, dx, gwte, nullptr, logits, ln, wte, N, C, Vp, scratch, sb, bf);
          });
    const size_t lm_auto = tr_lmhead_chunk_rows(TR_LMHEAD_AUTO, (size_t)N, (size_t)C);
    const size_t lm_try[3] = {lm_auto, 1024, 256};
    static char lm_names[3][48];
    for (int k = 0; k < 3; k++) {
        size_t R = lm_try[k] < (size_t)N ? lm_try[k] : (size_t)N;
        double nch = (double)tr_lmhead_chunk_count((size_t)N, R);
        snprintf(lm_names[k], sizeof lm_names[k], "lm head+xent+bwd (%zu rows%s)", R, k == 0 ? ", auto" : "");
        snprintf(sh, sizeof sh, "%dx%d->%d x%.0f chunks", N, C, Vp, nch);
        bench(lm_names[k], sh, lm_flops, a2 * (3.0 * nC + 5.0 * N * Vp + 2.0 * nch * Vp * C) + nch * 8.0 * Vp * C, -1,
              [&] {
                  lh.rows = R;
                  return tr_lmhead_pass(&lh, TR_LMHEAD_FUSED);
              });
    }
    snprintf(sh, sizeof sh, "N%d C%d", N, C);
    bench("encoder_backward", sh, 0, a2 * nC + 8.0 * nC, 0, [&] {
        return kn_encoder_backward_cuda(gwte, gwpe, dout, ids, nullptr, B, T, C, V, T, scratch, sb, bf, nullptr);
    });
    snprintf(sh, sizeof sh, "P%.1fM", P / 1e6);
    bench("grad norm (sumsq+clip)", sh, 0, 4.0 * P, 0, [&] {
        int r = kn_sumsq_cuda(ss, mg, Pn, scratch, sb, nullptr);
        return r ? r : kn_clip_scale_cuda(scale, gnorm, ss, 1.0f, nullptr);
    });
    bench("adamw (+bf16 copy)", sh, 0, P * (4.0 * 7 + 2.0), 0, [&] {
        return kn_adamw_step_cuda(mp, mlp, KN_BF16, mg, mm, mv, Pn, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 5, scale,
                                  nullptr);
    });

    /* last: the tensor-core attention's four variants (kn_attention_tc_variant: "(tc)" is
     * "copy"); "pipe", the default, is the step's; tests/gpu/run.sh trains with the fastest
     * one whose test rows all passed */
    snprintf(sh, sizeof sh, "B%d T%d NH%d hs%d", B, T, NH, C / NH);
    kn_attention_tc_variant(0);
    bench("attention_forward (tc)", sh, att_f, a2 * (3.0 * nC + nC), -1,
          [&] { return kn_attention_forward_tc_cuda(att, lse, qkv, nullptr, B, T, C, NH, bf, nullptr); });
    bench("attention_backward (tc)", sh, 2.5 * att_f, a2 * (3.0 * nC + 3.0 * nC + 2.0 * nC), -1, [&] {
        return kn_attention_backward_tc_cuda(dqkv, dout, qkv, att, lse, nullptr, B, T, C, NH, scratch, sb, bf, nullptr);
    });
    static const char *const fwd_row[] = {"", "attention_forward (tc ldsm)", "attention_forward (tc pipe)",
                                          "attention_forward (tc pipe3)"};
    static const char *const bwd_row[] = {"", "attention_backward (tc ldsm)", "attention_backward (tc pipe)",
                                          "attention_backward (tc pipe3)"};
    for (int v = 1; v <= 3; v++) {
        kn_attention_tc_variant(v);
        bench(fwd_row[v], sh, att_f, a2 * (3.0 * nC + nC), v == 2 ? 1 : -1,
              [&] { return kn_attention_forward_tc_cuda(att, lse, qkv, nullptr, B, T, C, NH, bf, nullptr); });
        bench(bwd_row[v], sh, 2.5 * att_f, a2 * (3.0 * nC + 3.0 * nC + 2.0 * nC), v == 2 ? 1 : -1, [&] {
            return kn_attention_backward_tc_cuda(dqkv, dout, qkv, att, lse, nullptr, B, T, C, NH, scratch, sb, bf,
                                                 nullptr);
        });
    }
    kn_attention_tc_variant(-1);
    /* heads of 128 at a Llama 3.2 3B-like shape (B4 T1024, 24 query heads on 8 KV heads): the
     * grouped-query tensor-core kernels (32-key / 16-query tiles) against the SIMT ones the
     * Llama model took before them; not in the step's sum (GPT-2's shape) */
    {
        const int gB = 4, gT = 1024, gH = 24, gKV = 8, gHS = 128;
        const size_t gN = (size_t)gB * gT, gRS = (size_t)(gH + 2 * gKV) * gHS, gOS = (size_t)gH * gHS;
        void *gqkv = dalloc_bf16(gN * gRS), *gout = dalloc_bf16(gN * gOS), *gdout = dalloc_bf16(gN * gOS);
        void *gdqkv = dalloc_bf16(gN * gRS);
        float *glse = (float *)dalloc_f32((size_t)gB * gH * gT);
        const size_t gsb = kn_attention_backward_scratch_bytes(gB, gT, gH);
        void *gscr = dalloc_f32(gsb / 4 + 1);
        const double gf = 2.0 * 2.0 * gB * gH * (double)gT * gT / 2.0 * gHS; /* causal: QK^T + PV */
        const double gfb = a2 * gN * (gRS + gOS), gbb = a2 * gN * (2.0 * gRS + 3.0 * gOS);
        snprintf(sh, sizeof sh, "B%d T%d NH%d KV%d hs%d", gB, gT, gH, gKV, gHS);
        bench("gqa_attn_fwd hs128 (simt)", sh, gf, gfb, -1, [&] {
            return kn_gqa_attention_forward_cuda(gout, glse, gqkv, nullptr, gB, gT, gH, gKV, gHS, bf, nullptr);
        });
        bench("gqa_attn_bwd hs128 (simt)", sh, 2.5 * gf, gbb, -1, [&] {
            return kn_gqa_attention_backward_cuda(gdqkv, gdout, gqkv, gout, glse, nullptr, gB, gT, gH, gKV, gHS, gscr,
                                                  gsb, bf, nullptr);
        });
        bench("gqa_attn_fwd hs128 (tc)", sh, gf, gfb, -1, [&] {
            return kn_gqa_attention_forward_tc_cuda(gout, glse, gqkv, nullptr, gB, gT, gH, gKV, gHS, bf, nullptr);
        });
        bench("gqa_attn_bwd hs128 (tc)", sh, 2.5 * gf, gbb, -1, [&] {
            return kn_gqa_attention_backward_tc_cuda(gdqkv, gdout, gqkv, gout, glse, nullptr, gB, gT, gH, gKV, gHS,
                                                     gscr, gsb, bf, nullptr);
        });
    }
    printf("| %-30s | %-26s | %9s | %9s | %8s | %6s | %8s | %6s |\n", "op", "shape", "ms", "TFLOP/s", "%peak", "GB/s",
           "%bw", "x/step");
    printf("|--------------------------------|----------------------------|-----------|-----------|----------|--------|"
           "----------|--------|\n");
    double step_ms = 0, attn_ms = 0, mm_ms = 0;
    for (auto &r : g_rows) {
        if (r.failed) {
            printf("| %-30s | %-26s | %9s | FAILED: %s |\n", r.op, r.shape, "-",
                   g_dead && g_fault[0] ? g_fault : kn_cuda_last_error());
            continue;
        }
        double s = r.ms / 1e3;
        double tf = r.flops / s / 1e12, bw = r.bytes / s / 1e9;
        int mult = r.per_layer > 0 ? r.per_layer * L : 1;
        bool in_step = r.per_layer >= 0; /* what the model runs by default (train/gpu_model.cu, bf16) */
        printf("| %-30s | %-26s | %9.3f | %9.1f | %7.1f%% | %6.0f | %7.1f%% | %6s |\n", r.op, r.shape, r.ms, tf,
               100.0 * r.flops / s / PEAK_FLOPS, bw, 100.0 * r.bytes / s / PEAK_BW,
               in_step ? (mult > 1 ? (r.per_layer == 2 ? "2L" : "L") : "1") : "-");
        if (in_step) {
            step_ms += r.ms * mult;
            if (strstr(r.op, "attention")) attn_ms += r.ms * mult;
            if (strstr(r.op, "matmul")) mm_ms += r.ms * mult;
        }
    }
    double simt_ms = 0, pipe_ms = 0; /* forward + backward per layer */
    for (auto &r : g_rows) {
        if (r.failed) continue;
        if (!strcmp(r.op, "attention_forward") || !strcmp(r.op, "attention_backward")) simt_ms += r.ms;
        if (strstr(r.op, "(tc pipe)")) pipe_ms += r.ms;
    }
    double fpt = 6.0 * (P - (double)T * C) + 6.0 * L * T * C;
    double tps = N / (step_ms / 1e3);
    printf("\nprojected step (the rows marked in x/step: the model's default path; no launch gaps, no recompute): "
           "%.2f ms for %d tokens\n",
           step_ms, N);
    printf("  of which matmuls %.2f ms (%.0f%%), attention %.2f ms (%.0f%%), other %.2f ms\n", mm_ms,
           100 * mm_ms / step_ms, attn_ms, 100 * attn_ms / step_ms, step_ms - mm_ms - attn_ms);
    printf("  -> %.0f tokens/s, MFU %.1f%% (6N + 6LTC = %.3f GFLOP/token, peak 989 TFLOP/s)\n", tps,
           100.0 * tps * fpt / PEAK_FLOPS, fpt / 1e9);
    double simt_step = step_ms - L * pipe_ms + L * simt_ms;
    double simt_tps = simt_ms > 0 && pipe_ms > 0 ? N / (simt_step / 1e3) : 0;
    if (simt_tps > 0)
        printf("  with the SIMT attention instead (MKS_CUDA_ATTENTION=simt): %.2f ms -> %.0f tokens/s\n", simt_step,
               simt_tps);
    /* the head whole vs in chunks (MKS_LMHEAD_CHUNK): the step above with the chunked head instead */
    double lm_whole = -1, lm_chunk = -1;
    for (auto &r : g_rows) {
        if (r.failed) continue;
        if (!strcmp(r.op, "lm head+xent+bwd (whole)")) lm_whole = r.ms;
        if (!strcmp(r.op, lm_names[0])) lm_chunk = r.ms;
    }
    if (lm_whole > 0 && lm_chunk > 0)
        printf("  lm head + xent + backward: whole %.3f ms, in chunks of %zu rows (MKS_LMHEAD_CHUNK=auto) %.3f ms: "
               "step %.2f ms -> %.0f tokens/s; logits buffer %.1f -> %.1f MiB\n",
               lm_whole, lm_auto, lm_chunk, step_ms - lm_whole + lm_chunk, N / ((step_ms - lm_whole + lm_chunk) / 1e3),
               (double)N * Vp * 2 / 1048576.0, (double)lm_auto * Vp * 2 / 1048576.0);
    printf(
        "PROJECTION tokens_per_s=%.0f mfu=%.4f step_ms=%.3f attn_ms=%.3f matmul_ms=%.3f simt_attention_tokens_per_s=%.0f\n",
        tps, tps * fpt / PEAK_FLOPS, step_ms, attn_ms, mm_ms, simt_tps);
    if (g_dead) {
        printf("bench_kernels_gpu: CUDA fault (%s): rows after it were skipped\n", g_fault);
        return 2;
    }
    kn_cuda_ctx_destroy(ctx);
    return 0;
}
