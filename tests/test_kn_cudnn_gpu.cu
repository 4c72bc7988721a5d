/* test_kn_cudnn_gpu.cu - cuDNN's fused attention (kernels/kn_attention_cudnn.cu,
 * the optional engine behind MKS_CUDA_ATTENTION=cudnn) against the C
 * reference (kn_gqa_attention_*_ref on the same rounded inputs) and against
 * the own CUDA kernels, on the packed rows both model families use.
 *
 * Pass: out, lse and dqkv within 1e-2 of the reference (max|d|/max|ref| and
 * ||d||/||ref||, as test_kn_llama_gpu); lse within 1e-3 of the own kernels'
 * (both are the natural-log log-sum-exp of the scaled scores: the own
 * backward can take cuDNN's forward); dqkv is written whole (poisoned
 * first); a call with too little workspace is refused by prepare, not run.
 * Both backward modes: the atomic one (MKS_CUDA_ATTENTION=cudnn-fast; two
 * runs' largest difference printed) and the deterministic one (cudnn),
 * which must repeat bit for bit - with cuDNN < 9.25 it cannot be had within
 * a linear workspace: its rows then print "skip" with the reason (a refusal
 * from cuDNN >= 9.25 fails).  The line "cudnn modes: deterministic yes|no"
 * tells tests/gpu/run.sh step 10a which mode to train with.
 *
 * Shapes: GPT-2's row (NKV = NH, heads of 64) at d12's width and a short T,
 * grouped-query rows (multi-query, groups of 2 and 4) with heads of 64 and
 * 128, odd T (77, 333), bf16 and fp16.
 *
 * Exit: 0 all pass, 1 a check failed, 2 a CUDA error, 77 no GPU or a build
 * without cuDNN (label gpu; tests/gpu/run.sh builds with it).  The first
 * line says which cuDNN ran. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

extern "C" {
#include "kn.h"
#include "kn_cuda.h"
#include "kn_llama.h"
}

#define KN_CHECK_SHAPE_FIRST
#include "kn_gpu_check.cuh"

static int g_det_ok = 1; /* every deterministic row ran and repeated */

static void t_cudnn(kn_dtype dt, int B, int T, int NH, int NKV, int HS, int det) {
    char shape[64];
    snprintf(shape, sizeof shape, "B%d T%d H%d KV%d hs%d %s", B, T, NH, NKV, HS, det ? "det" : "fast");
    size_t RS = (size_t)(NH + 2 * NKV) * HS, OS = (size_t)NH * HS, N = (size_t)B * T;
    size_t ws_cap = kn_cudnn_attention_scratch_bytes(B, T, NH, HS), fw = 0, bw = 0;
    char why[512];
    if (kn_cudnn_attention_prepare(&fw, &bw, B, T, NH, NKV, HS, ws_cap, det, dt, why, sizeof why) != KN_OK) {
        if (det) g_det_ok = 0;
        if (det && kn_cudnn_attention_version() < 92500) { /* expected: no linear-workspace deterministic path */
            printf("| %-28s | %-24s | %-4s | skip: %.150s |\n", "cudnn_attention", shape, dtn(dt), why);
            return;
        }
        printf("| %-28s | %-24s | %-4s | prepare refused: %s | FAIL |\n", "cudnn_attention", shape, dtn(dt), why);
        g_fail++, g_checks++;
        return;
    }
    printf("  (%s %s: workspace forward %zu, backward %zu bytes; bound %zu)\n", dtn(dt), shape, fw, bw, ws_cap);
    vf qkv = randn(N * RS);
    round_to(qkv, dt);
    dbuf d_qkv(N * RS, dt), d_out(N * OS, dt), d_lse((size_t)B * NH * T, KN_F32), ws((ws_cap + 3) / 4, KN_F32);
    d_qkv.put(qkv);
    KN(kn_cudnn_attention_forward(d_out.p, d_lse.f(), d_qkv.p, B, T, NH, NKV, HS, ws.p, ws_cap, dt, nullptr));
    vf out(N * OS), att((size_t)B * NH * T * T);
    REF(kn_gqa_attention_forward_ref(out.data(), att.data(), qkv.data(), nullptr, B, T, NH, NKV, HS));
    check("cudnn attention forward", dt, shape, d_out.get(), out);
    vf lse_cudnn = d_lse.get();

    /* the own kernels' lse on the same rows: the same quantity */
    dbuf o2(N * OS, dt), l2((size_t)B * NH * T, KN_F32);
    KN(kn_gqa_attention_forward_cuda(o2.p, l2.f(), d_qkv.p, nullptr, B, T, NH, NKV, HS, dt, nullptr));
    check("cudnn lse vs own kernels' lse", dt, shape, lse_cudnn, l2.get(), 1e-3);

    vf dout = randn(N * OS), dqkv(N * RS);
    round_to(dout, dt);
    dbuf g_dout(N * OS, dt), g_dqkv(N * RS, dt);
    g_dout.put(dout);
    KN(kn_cudnn_attention_backward(g_dqkv.p, g_dout.p, d_qkv.p, d_out.p, d_lse.f(), B, T, NH, NKV, HS, ws.p, ws_cap,
                                   det, dt, nullptr));
    REF(kn_gqa_attention_backward_ref(dqkv.data(), dout.data(), qkv.data(), att.data(), nullptr, B, T, NH, NKV, HS));
    vf first = g_dqkv.get();
    check("cudnn attention backward dqkv", dt, shape, first, dqkv);
    g_dqkv.poison();
    KN(kn_cudnn_attention_backward(g_dqkv.p, g_dout.p, d_qkv.p, d_out.p, d_lse.f(), B, T, NH, NKV, HS, ws.p, ws_cap,
                                   det, dt, nullptr));
    vf again = g_dqkv.get();
    char what[160];
    if (det) {
        snprintf(what, sizeof what, "cudnn backward repeats bit for bit (%s %s)", dtn(dt), shape);
        bool same = !memcmp(first.data(), again.data(), first.size() * 4);
        if (!same) g_det_ok = 0;
        expect(same, what);
    } else {
        double d = 0;
        for (size_t i = 0; i < first.size(); i++) d = fmax(d, fabs((double)first[i] - again[i]));
        printf("  (%s %s: two atomic backward runs differ by at most %.3g)\n", dtn(dt), shape, d);
    }
}

/* A workspace bound of 0 bytes: either cuDNN has a plan that needs none
 * (then it runs), or prepare says no; it must never run a plan that writes
 * past a workspace it was not given. */
static void t_small_workspace(void) {
    size_t fw = 1, bw = 1;
    char why[512];
    int rc = kn_cudnn_attention_prepare(&fw, &bw, 2, 256, 4, 4, 64, 0, 0, KN_BF16, why, sizeof why);
    printf("  (workspace bound 0: %s%s)\n",
           rc == KN_OK ? "plans without workspace exist" : "refused: ", rc == KN_OK ? "" : why);
    expect(rc == KN_ENOTSUP || (rc == KN_OK && fw == 0 && bw == 0), "a 0-byte workspace bound is kept");
    expect(kn_cudnn_attention_prepare(&fw, &bw, 2, 256, 4, 4, 64, 1 << 26, 0, KN_F32, why, sizeof why) == KN_ENOTSUP,
           "fp32 rows are refused (KN_ENOTSUP: the caller's own kernels run)");
}

/* Time (information, not a check): d12's attention, B16 T1024 NH12 HS64 bf16, forward and
 * backward, cuDNN against the own pipelined tensor-core kernels (the default), median of 10. */
static float time_ms(int (*f)(void *), void *arg) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int i = 0; i < 13; i++) {
        CK(cudaEventRecord(a));
        if (f(arg) != KN_OK) return -1.0f;
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t = 0;
        CK(cudaEventElapsedTime(&t, a, b));
        if (i >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms[ms.size() / 2];
}

struct att_args {
    int B, T, NH, HS, det;
    void *qkv, *out, *dout, *dqkv, *ws;
    float *lse;
    size_t ws_bytes;
};
static int cu_fwd(void *p) {
    att_args *a = (att_args *)p;
    return kn_cudnn_attention_forward(a->out, a->lse, a->qkv, a->B, a->T, a->NH, a->NH, a->HS, a->ws, a->ws_bytes,
                                      KN_BF16, nullptr);
}
static int cu_bwd(void *p) {
    att_args *a = (att_args *)p;
    return kn_cudnn_attention_backward(a->dqkv, a->dout, a->qkv, a->out, a->lse, a->B, a->T, a->NH, a->NH, a->HS, a->ws,
                                       a->ws_bytes, a->det, KN_BF16, nullptr);
}
static int own_fwd(void *p) {
    att_args *a = (att_args *)p;
    return kn_attention_forward_tc_cuda(a->out, a->lse, a->qkv, nullptr, a->B, a->T, a->NH * a->HS, a->NH, KN_BF16,
                                        nullptr);
}
static int own_bwd(void *p) {
    att_args *a = (att_args *)p;
    return kn_attention_backward_tc_cuda(a->dqkv, a->dout, a->qkv, a->out, a->lse, nullptr, a->B, a->T, a->NH * a->HS,
                                         a->NH, a->ws, a->ws_bytes, KN_BF16, nullptr);
}

static void t_timing(int det) {
    att_args a = {16, 1024, 12, 64, det, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0};
    size_t N = (size_t)a.B * a.T, C = (size_t)a.NH * a.HS;
    a.ws_bytes = kn_cudnn_attention_scratch_bytes(a.B, a.T, a.NH, a.HS);
    char why[512];
    size_t fw, bw;
    if (kn_cudnn_attention_prepare(&fw, &bw, a.B, a.T, a.NH, a.NH, a.HS, a.ws_bytes, det, KN_BF16, why, sizeof why) !=
        KN_OK) {
        printf("  timing (%s): cuDNN refused d12's shape: %s\n", det ? "det" : "fast", why);
        return;
    }
    dbuf qkv(N * 3 * C, KN_BF16), out(N * C, KN_BF16), dout(N * C, KN_BF16), dqkv(N * 3 * C, KN_BF16),
        lse((size_t)a.B * a.NH * a.T, KN_F32), ws((a.ws_bytes + 3) / 4, KN_F32);
    qkv.put(randn(N * 3 * C));
    dout.put(randn(N * C));
    a.qkv = qkv.p, a.out = out.p, a.dout = dout.p, a.dqkv = dqkv.p, a.lse = lse.f(), a.ws = ws.p;
    float cf = time_ms(cu_fwd, &a), cb = time_ms(cu_bwd, &a), of = time_ms(own_fwd, &a), ob = time_ms(own_bwd, &a);
    /* causal: half of the 4 B NH T^2 HS multiply-adds of QK^T and PV; backward 2.5x the forward */
    double fl = 4.0 * a.B * a.NH * (double)a.T * a.T * a.HS / 2.0;
    printf("  timing d12 attention B16 T1024 bf16 (median of 10): cuDNN fwd %.3f ms (%.0f TFLOP/s) bwd(%s) %.3f ms "
           "(%.0f); own tc fwd %.3f ms (%.0f) bwd %.3f ms (%.0f); cuDNN/own fwd+bwd %.2fx\n",
           cf, fl / cf / 1e9, det ? "det" : "fast", cb, 2.5 * fl / cb / 1e9, of, fl / of / 1e9, ob, 2.5 * fl / ob / 1e9,
           (of + ob) / (cf + cb));
}

int main(void) {
    const char *seed = getenv("KN_TEST_SEED");
    g_rng = seed ? strtoull(seed, nullptr, 10) : (uint64_t)time(nullptr);
    printf("seed %llu (KN_TEST_SEED to repeat)\n", (unsigned long long)g_rng);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("test_kn_cudnn_gpu: no CUDA device (%s): skipped\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    if (!kn_cudnn_attention_version()) {
        printf("test_kn_cudnn_gpu: skip: this build has no cuDNN (MKS_CUDNN; tests/gpu/run.sh builds with it)\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("test_kn_cudnn_gpu: cuDNN %d on %s (sm_%d%d)\n\n", kn_cudnn_attention_version(), prop.name, prop.major,
           prop.minor);
    printf("| %-28s | %-24s | %-4s | %-9s | %-9s | %-7s | result\n", "op", "shape", "dt", "max-rel", "l2-rel", "tol");
    const kn_dtype dts[2] = {KN_BF16, KN_F16};
    for (int det = 0; det < 2; det++)
        for (int i = 0; i < 2; i++) {
            kn_dtype dt = dts[i];
            t_cudnn(dt, 2, 256, 12, 12, 64, det); /* GPT-2's row at d12's heads */
            t_cudnn(dt, 2, 77, 4, 1, 64, det);    /* multi-query, odd T */
            t_cudnn(dt, 1, 333, 6, 3, 64, det);   /* groups of 2 */
            t_cudnn(dt, 2, 200, 8, 2, 128, det);  /* groups of 4, heads of 128 (Llama 3 8B's shape of head) */
        }
    t_small_workspace();
    t_timing(0);
    if (g_det_ok) t_timing(1);
    printf("cudnn modes: deterministic %s\n", g_det_ok ? "yes" : "no");
    printf("\n%d of %d checks failed\n", g_fail, g_checks);
    return g_fail ? 1 : 0;
}
