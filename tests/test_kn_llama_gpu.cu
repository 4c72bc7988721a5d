/* test_kn_llama_gpu.cu - the Llama family's CUDA kernels (kernels/kn_llama.cu,
 * API in kn_cuda.h) against their C references (kernels/llama_ref.c,
 * llama_gqa_ref.c; kn_llama.h) on fresh random inputs, fp32, bf16 and fp16.
 *
 * Pass (as test_kernels_gpu): error <= 1e-5 for fp32 and 1e-2 for bf16/fp16,
 * measured as max|d|/max|ref| and as ||d||_2/||ref||_2; the rotary table
 * <= 1e-6 (the same fp32 angle, cos/sin in double on both sides); any NaN or
 * Inf fails.  Overwritten outputs are poisoned with NaN first (an element a
 * kernel never writes fails); accumulated ones (+=) start from the same
 * random values on both sides.  16-bit inputs are rounded first and the
 * reference runs on the rounded values.  The GQA backward also runs twice
 * and must repeat bit for bit (no atomics).
 *
 * The tensor-core GQA kernels (bf16, head_dim 64) run the same rows.
 *
 * Shapes: head_dim 16, 32, 64 and 128, odd sequence lengths (77, 131, 333), NKV = 1,
 * NKV = NH (plain MHA) and groups in between, document masks, rotary
 * positions restarting per document and position ids NULL, Llama 3
 * rope_scaling, RMSNorm widths off the warp multiple (100) and at 2048.
 *
 * --cpu: only the reference-side checks, which need no GPU (run by ctest as
 * test_kn_llama_gpu_refs, label cpu): the rotary table reproduces
 * kn_rope_forward_ref bit for bit; the GQA reference with NKV == NH is the
 * MHA reference bit for bit; its backward matches a central finite
 * difference of sum(out * dout) to 1e-3 relative (steps of 1e-2; 1.3e-5 seen); bad
 * shapes are refused.
 *
 * Exit: 0 all pass, 1 a check failed, 2 a CUDA error, 77 no GPU (label gpu).
 * KN_TEST_SEED=<n> repeats a run (the seed is printed). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

extern "C" {
#include "kn.h"
#include "kn_cuda.h"
#include "kn_llama.h"
}

#define KN_CHECK_SHAPE_FIRST
#include "kn_gpu_check.cuh"

/* document ids (B,T): a new document every ~1/p positions; positions restart
 * at each document (what --doc-mask feeds the rotary embedding) */
static void make_docs(std::vector<int32_t> &doc, std::vector<int32_t> &pos, int B, int T, int p) {
    doc.assign((size_t)B * T, 0);
    pos.assign((size_t)B * T, 0);
    for (int b = 0; b < B; b++) {
        int id = 0, start = 0;
        for (int t = 0; t < T; t++) {
            if (t > 0 && rnd64() % (uint64_t)p == 0) id++, start = t;
            doc[(size_t)b * T + t] = id;
            pos[(size_t)b * T + t] = t - start;
        }
    }
}

static const kn_rope_scaling k_llama3 = {8.0f, 1.0f, 4.0f, 8192}; /* Llama 3.1/3.2's rope_scaling */

/* ---- reference-side checks (no GPU) ---------------------------------------------------------- */
static void cpu_rope_table(int hd, const kn_rope_scaling *sc) {
    int H = 3, N = 50, maxp = 9000;
    vf inv(hd / 2), table((size_t)maxp * hd), x = randn((size_t)N * H * hd), ref(x.size()), via(x.size());
    REF(kn_rope_inv_freq_ref(inv.data(), hd, 500000.0f, sc));
    REF(kn_rope_table_ref(table.data(), inv.data(), maxp, hd));
    std::vector<int32_t> pos(N);
    for (int n = 0; n < N; n++) pos[n] = (int32_t)(rnd64() % maxp);
    REF(kn_rope_forward_ref(ref.data(), x.data(), pos.data(), inv.data(), N, H, hd));
    int h2 = hd / 2;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < h2; i++) {
                size_t b = ((size_t)n * H + h) * hd;
                float c = table[((size_t)pos[n] * h2 + i) * 2], s = table[((size_t)pos[n] * h2 + i) * 2 + 1];
                float x1 = x[b + i], x2 = x[b + i + h2];
                volatile float a1 = x1 * c, a2 = x2 * s, a3 = x2 * c, a4 = x1 * s; /* no contraction */
                via[b + i] = a1 - a2;
                via[b + i + h2] = a3 + a4;
            }
    char what[96];
    snprintf(what, sizeof what, "ref: rope table reproduces rope_forward_ref (hd %d%s)", hd, sc ? ", llama3" : "");
    expect(!memcmp(via.data(), ref.data(), ref.size() * sizeof(float)), what);
}

static void cpu_gqa_is_mha(void) {
    int B = 2, T = 37, NH = 4, HS = 64, C = NH * HS;
    vf qkv = randn((size_t)B * T * 3 * C), o1((size_t)B * T * C), o2(o1.size()), a1((size_t)B * NH * T * T),
       a2(a1.size()), dout = randn(o1.size()), d1(qkv.size()), d2(qkv.size());
    std::vector<int32_t> doc, pos;
    make_docs(doc, pos, B, T, 9);
    REF(kn_attention_forward_ref(o1.data(), a1.data(), qkv.data(), doc.data(), B, T, C, NH));
    REF(kn_gqa_attention_forward_ref(o2.data(), a2.data(), qkv.data(), doc.data(), B, T, NH, NH, HS));
    REF(kn_attention_backward_ref(d1.data(), dout.data(), qkv.data(), a1.data(), doc.data(), B, T, C, NH));
    REF(kn_gqa_attention_backward_ref(d2.data(), dout.data(), qkv.data(), a2.data(), doc.data(), B, T, NH, NH, HS));
    expect(!memcmp(o1.data(), o2.data(), o1.size() * 4) && !memcmp(d1.data(), d2.data(), d1.size() * 4),
           "ref: GQA with NKV == NH is the MHA reference bit for bit");
}

/* d/dx sum(out * dout) by central differences at a sample of inputs */
static void cpu_gqa_fd(int NKV) {
    int B = 1, T = 9, NH = 4, HS = 64, RS = (NH + 2 * NKV) * HS, OS = NH * HS;
    vf qkv = randn((size_t)B * T * RS, 0.5f), out((size_t)B * T * OS), att((size_t)B * NH * T * T),
       dout = randn(out.size()), dqkv(qkv.size());
    std::vector<int32_t> doc, pos;
    make_docs(doc, pos, B, T, 4);
    REF(kn_gqa_attention_forward_ref(out.data(), att.data(), qkv.data(), doc.data(), B, T, NH, NKV, HS));
    REF(kn_gqa_attention_backward_ref(dqkv.data(), dout.data(), qkv.data(), att.data(), doc.data(), B, T, NH, NKV, HS));
    auto f = [&](const vf &in) {
        vf o(out.size()), a(att.size());
        REF(kn_gqa_attention_forward_ref(o.data(), a.data(), in.data(), doc.data(), B, T, NH, NKV, HS));
        double s = 0;
        for (size_t i = 0; i < o.size(); i++) s += (double)o[i] * dout[i];
        return s;
    };
    double maxd = 0, maxr = 0;
    for (int k = 0; k < 60; k++) {
        size_t i = rnd64() % qkv.size();
        vf p = qkv, m = qkv;
        p[i] += 1e-2f, m[i] -= 1e-2f;
        double fd = (f(p) - f(m)) / (double)(p[i] - m[i]);
        maxd = fmax(maxd, fabs(fd - dqkv[i]));
        maxr = fmax(maxr, fabs(fd));
    }
    char what[96];
    snprintf(what, sizeof what, "ref: GQA backward = finite difference (NKV %d), rel %.1e", NKV, maxd / maxr);
    expect(maxd <= 1e-3 * maxr, what);
}

static void cpu_refusals(void) {
    float x[8];
    int32_t d[1] = {0};
    expect(kn_gqa_attention_forward_ref(x, x, x, d, 1, 1, 4, 3, 2) == KN_EINVAL &&
               kn_gqa_attention_backward_ref(x, x, x, x, d, 1, 1, 4, 0, 2) == KN_EINVAL &&
               kn_rope_table_ref(x, x, 4, 3) == KN_EINVAL,
           "ref: NH % NKV != 0, NKV 0, odd head_dim refused");
}

/* ---- kernels vs references -------------------------------------------------------------------- */
static void t_rmsnorm(kn_dtype dt, bool fused, int N, int C) {
    char shape[64];
    snprintf(shape, sizeof shape, "N%d C%d%s", N, C, fused ? " +residual" : "");
    const float eps = 1e-5f;
    vf a = randn((size_t)N * C), b2 = randn((size_t)N * C), w = randn(C);
    round_to(a, dt);
    round_to(b2, dt);
    vf x = a;
    if (fused) {
        REF(kn_residual_forward_ref(x.data(), a.data(), b2.data(), x.size()));
        round_to(x, dt); /* the residual stream is stored in dt */
    }
    dbuf d_a((size_t)N * C, dt), d_b((size_t)N * C, dt), d_out((size_t)N * C, dt), d_res((size_t)N * C, dt);
    dbuf d_w(C, KN_F32), d_rstd(N, KN_F32);
    d_a.put(a);
    d_b.put(b2);
    d_w.put(w);
    KN(kn_rmsnorm_forward_cuda(d_out.p, d_rstd.f(), fused ? d_res.p : nullptr, d_a.p, fused ? d_b.p : nullptr, d_w.f(),
                               N, C, eps, dt, nullptr));
    vf out((size_t)N * C), rstd(N);
    REF(kn_rmsnorm_forward_ref(out.data(), rstd.data(), x.data(), w.data(), N, C, eps));
    check(fused ? "rmsnorm_fwd (fused add)" : "rmsnorm_forward", dt, shape, d_out.get(), out);
    check("rmsnorm_forward rstd", dt, shape, d_rstd.get(), rstd);
    if (fused) check("rmsnorm_fwd residual out", dt, shape, d_res.get(), x);
    if (fused) { /* in place: resid_out aliasing inp, as a trainer updates its residual stream */
        dbuf d_x((size_t)N * C, dt);
        d_x.put(a);
        KN(kn_rmsnorm_forward_cuda(d_out.p, d_rstd.f(), d_x.p, d_x.p, d_b.p, d_w.f(), N, C, eps, dt, nullptr));
        check("rmsnorm_fwd (in place add)", dt, shape, d_out.get(), out);
    }
    vf dout = randn((size_t)N * C), dinp = randn((size_t)N * C), dw = randn(C);
    round_to(dout, dt);
    round_to(dinp, dt);
    dbuf g_dout((size_t)N * C, dt), g_dinp((size_t)N * C, dt), g_dw(C, KN_F32), d_x((size_t)N * C, dt);
    g_dout.put(dout);
    g_dinp.put(dinp);
    g_dw.put(dw);
    d_x.put(x);
    size_t sb = kn_rmsnorm_backward_scratch_bytes(N, C);
    dbuf scratch((sb + 3) / 4, KN_F32);
    KN(kn_rmsnorm_backward_cuda(g_dinp.p, g_dw.f(), g_dout.p, d_x.p, d_w.f(), d_rstd.f(), N, C, scratch.p,
                                scratch.bytes(), dt, nullptr));
    REF(kn_rmsnorm_backward_ref(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C));
    check("rmsnorm_backward dinp (+=)", dt, shape, g_dinp.get(), dinp);
    check("rmsnorm_backward dweight", dt, shape, g_dw.get(), dw);
}

static void t_rope_table(int hd, const kn_rope_scaling *sc, int maxp) {
    char shape[64];
    snprintf(shape, sizeof shape, "hd%d maxp%d%s", hd, maxp, sc ? " llama3" : "");
    vf inv(hd / 2), table((size_t)maxp * hd);
    REF(kn_rope_inv_freq_ref(inv.data(), hd, 500000.0f, sc));
    REF(kn_rope_table_ref(table.data(), inv.data(), maxp, hd));
    dbuf d_inv(hd / 2, KN_F32), d_table((size_t)maxp * hd, KN_F32);
    d_inv.put(inv);
    KN(kn_rope_table_cuda(d_table.f(), d_inv.f(), maxp, hd, nullptr));
    check("rope_table", KN_F32, shape, d_table.get(), table, 1e-6);
}

/* q and k heads of packed rows [q (H) | k (KV) | v (KV)] rotated in one
 * launch (ld = the row), v untouched; forward, then backward on a fresh dout */
static void t_rope(kn_dtype dt, int B, int T, int H, int KV, int hd, bool with_pos, const kn_rope_scaling *sc) {
    char shape[64];
    snprintf(shape, sizeof shape, "B%d T%d H%d KV%d hd%d%s%s", B, T, H, KV, hd, with_pos ? " pos" : "",
             sc ? " l3" : "");
    int N = B * T, nh = H + KV, ld = (H + 2 * KV) * hd, maxp = 4096;
    vf inv(hd / 2);
    REF(kn_rope_inv_freq_ref(inv.data(), hd, 10000.0f, sc));
    dbuf d_inv(hd / 2, KN_F32), d_table((size_t)maxp * hd, KN_F32);
    d_inv.put(inv);
    KN(kn_rope_table_cuda(d_table.f(), d_inv.f(), maxp, hd, nullptr));
    std::vector<int32_t> doc, pos;
    make_docs(doc, pos, B, T, 23);
    if (!with_pos)
        for (int n = 0; n < N; n++) pos[n] = n % T;
    for (int n = 0; with_pos && n < N; n += 17) pos[n] = (int32_t)(rnd64() % maxp); /* far positions too */
    int32_t *d_pos = dput(pos);
    vf x = randn((size_t)N * ld);
    round_to(x, dt);
    /* the reference on the q/k part of each row, the v part copied */
    vf qk((size_t)N * nh * hd), ref = x;
    for (int n = 0; n < N; n++) memcpy(&qk[(size_t)n * nh * hd], &x[(size_t)n * ld], (size_t)nh * hd * 4);
    REF(kn_rope_forward_ref(qk.data(), qk.data(), pos.data(), inv.data(), N, nh, hd));
    for (int n = 0; n < N; n++) memcpy(&ref[(size_t)n * ld], &qk[(size_t)n * nh * hd], (size_t)nh * hd * 4);
    dbuf d_x((size_t)N * ld, dt);
    d_x.put(x);
    KN(kn_rope_forward_cuda(d_x.p, d_x.p, with_pos ? d_pos : nullptr, d_table.f(), N, T, nh, hd, ld, maxp, dt,
                            nullptr));
    check("rope_forward (in place)", dt, shape, d_x.get(), ref);
    vf dout = randn((size_t)N * ld);
    round_to(dout, dt);
    vf dref = dout;
    for (int n = 0; n < N; n++) memcpy(&qk[(size_t)n * nh * hd], &dout[(size_t)n * ld], (size_t)nh * hd * 4);
    REF(kn_rope_backward_ref(qk.data(), qk.data(), pos.data(), inv.data(), N, nh, hd));
    for (int n = 0; n < N; n++) memcpy(&dref[(size_t)n * ld], &qk[(size_t)n * nh * hd], (size_t)nh * hd * 4);
    dbuf g_dout((size_t)N * ld, dt), g_dx((size_t)N * ld, dt);
    g_dout.put(dout);
    g_dx.put(dout); /* the v part is not written: it keeps dout's values, as dref */
    KN(kn_rope_backward_cuda(g_dx.p, g_dout.p, with_pos ? d_pos : nullptr, d_table.f(), N, T, nh, hd, ld, maxp, dt,
                             nullptr));
    check("rope_backward", dt, shape, g_dx.get(), dref);
    cudaFree(d_pos);
}

static void t_swiglu(kn_dtype dt, size_t n) {
    char shape[64];
    snprintf(shape, sizeof shape, "n%zu", n);
    vf g = randn(n, 3.0f), u = randn(n), dout = randn(n);
    round_to(g, dt);
    round_to(u, dt);
    round_to(dout, dt);
    dbuf d_g(n, dt), d_u(n, dt), d_o(n, dt), d_dy(n, dt), d_dg(n, dt), d_du(n, dt);
    d_g.put(g);
    d_u.put(u);
    d_dy.put(dout);
    KN(kn_swiglu_forward_cuda(d_o.p, d_g.p, d_u.p, n, dt, nullptr));
    vf o(n), dg(n), du(n);
    REF(kn_swiglu_forward_ref(o.data(), g.data(), u.data(), n));
    check("swiglu_forward", dt, shape, d_o.get(), o);
    KN(kn_swiglu_backward_cuda(d_dg.p, d_du.p, d_dy.p, d_g.p, d_u.p, n, dt, nullptr));
    REF(kn_swiglu_backward_ref(dg.data(), du.data(), dout.data(), g.data(), u.data(), n));
    check("swiglu_backward dgate", dt, shape, d_dg.get(), dg);
    check("swiglu_backward dup", dt, shape, d_du.get(), du);
    KN(kn_swiglu_backward_cuda(d_dy.p, d_du.p, d_dy.p, d_g.p, d_u.p, n, dt, nullptr)); /* dgate aliasing dout */
    check("swiglu_backward (in place)", dt, shape, d_dy.get(), dg);
}

/* tc: the tensor-core kernels (kn_gqa_attention_*_tc_cuda; bf16, HS 64 or 128), else the SIMT ones */
static void t_gqa(kn_dtype dt, int B, int T, int NH, int NKV, int HS, bool docs, bool tc = false) {
    char shape[64];
    snprintf(shape, sizeof shape, "B%d T%d H%d KV%d hs%d%s%s", B, T, NH, NKV, HS, docs ? " doc" : "", tc ? " tc" : "");
    size_t RS = (size_t)(NH + 2 * NKV) * HS, OS = (size_t)NH * HS, N = (size_t)B * T;
    vf qkv = randn(N * RS);
    round_to(qkv, dt);
    std::vector<int32_t> doc, pos;
    make_docs(doc, pos, B, T, 37);
    int32_t *d_doc = dput(doc);
    const int32_t *dd = docs ? d_doc : nullptr;
    dbuf d_qkv(N * RS, dt), d_out(N * OS, dt), d_lse((size_t)B * NH * T, KN_F32);
    d_qkv.put(qkv);
    if (tc) KN(kn_gqa_attention_forward_tc_cuda(d_out.p, d_lse.f(), d_qkv.p, dd, B, T, NH, NKV, HS, dt, nullptr));
    else KN(kn_gqa_attention_forward_cuda(d_out.p, d_lse.f(), d_qkv.p, dd, B, T, NH, NKV, HS, dt, nullptr));
    vf out(N * OS), att((size_t)B * NH * T * T);
    REF(kn_gqa_attention_forward_ref(out.data(), att.data(), qkv.data(), docs ? doc.data() : nullptr, B, T, NH, NKV,
                                     HS));
    check("gqa_attention_forward", dt, shape, d_out.get(), out);

    vf dout = randn(N * OS), dqkv(N * RS);
    round_to(dout, dt);
    dbuf g_dout(N * OS, dt), g_dqkv(N * RS, dt);
    g_dout.put(dout);
    size_t sb = kn_attention_backward_scratch_bytes(B, T, NH);
    dbuf scratch((sb + 3) / 4, KN_F32);
    if (tc)
        KN(kn_gqa_attention_backward_tc_cuda(g_dqkv.p, g_dout.p, d_qkv.p, d_out.p, d_lse.f(), dd, B, T, NH, NKV, HS,
                                             scratch.p, scratch.bytes(), dt, nullptr));
    else
        KN(kn_gqa_attention_backward_cuda(g_dqkv.p, g_dout.p, d_qkv.p, d_out.p, d_lse.f(), dd, B, T, NH, NKV, HS,
                                          scratch.p, scratch.bytes(), dt, nullptr));
    REF(kn_gqa_attention_backward_ref(dqkv.data(), dout.data(), qkv.data(), att.data(), docs ? doc.data() : nullptr, B,
                                      T, NH, NKV, HS));
    vf first = g_dqkv.get();
    check("gqa_attention_backward dqkv", dt, shape, first, dqkv);
    g_dqkv.poison();
    if (tc)
        KN(kn_gqa_attention_backward_tc_cuda(g_dqkv.p, g_dout.p, d_qkv.p, d_out.p, d_lse.f(), dd, B, T, NH, NKV, HS,
                                             scratch.p, scratch.bytes(), dt, nullptr));
    else
        KN(kn_gqa_attention_backward_cuda(g_dqkv.p, g_dout.p, d_qkv.p, d_out.p, d_lse.f(), dd, B, T, NH, NKV, HS,
                                          scratch.p, scratch.bytes(), dt, nullptr));
    vf again = g_dqkv.get();
    char what[160];
    snprintf(what, sizeof what, "gqa backward repeats bit for bit (%s %s)", dtn(dt), shape);
    expect(!memcmp(first.data(), again.data(), first.size() * 4), what);
    cudaFree(d_doc);
}

static void t_refusals(void) {
    dbuf a(1024, KN_F32);
    expect(kn_gqa_attention_forward_cuda(a.p, a.f(), a.p, nullptr, 1, 4, 4, 3, 64, KN_F32, nullptr) == KN_EINVAL &&
               kn_gqa_attention_forward_cuda(a.p, a.f(), a.p, nullptr, 1, 4, 4, 2, 96, KN_F32, nullptr) == KN_EINVAL &&
               kn_gqa_attention_backward_cuda(a.p, a.p, a.p, a.p, a.f(), nullptr, 1, 4, 4, 2, 64, a.p, 4, KN_F32,
                                              nullptr) == KN_EINVAL &&
               kn_rope_forward_cuda(a.p, a.p, nullptr, a.f(), 4, 4, 2, 64, 100, 16, KN_F32, nullptr) == KN_EINVAL &&
               kn_rmsnorm_backward_cuda(a.p, a.f(), a.p, a.p, a.f(), a.f(), 100, 8, a.p, 4, KN_F32, nullptr) ==
                   KN_EINVAL,
           "cuda: NH % NKV, head size 96, small scratch, ld < heads, refused");
    expect(
        kn_gqa_attention_forward_tc_cuda(a.p, a.f(), a.p, nullptr, 1, 4, 4, 2, 64, KN_F32, nullptr) == KN_EINVAL &&
            kn_gqa_attention_forward_tc_cuda(a.p, a.f(), a.p, nullptr, 1, 4, 4, 2, 96, KN_BF16, nullptr) == KN_EINVAL &&
            kn_gqa_attention_forward_tc_cuda(a.p, a.f(), a.p, nullptr, 1, 4, 4, 3, 64, KN_BF16, nullptr) == KN_EINVAL &&
            kn_gqa_attention_backward_tc_cuda(a.p, a.p, a.p, a.p, a.f(), nullptr, 1, 4, 4, 2, 64, a.p, 4, KN_BF16,
                                              nullptr) == KN_EINVAL,
        "cuda: tensor-core GQA refuses fp32, head size 96, NH % NKV, small scratch");
}

static void cpu_checks(void) {
    cpu_rope_table(64, nullptr);
    cpu_rope_table(128, &k_llama3);
    cpu_gqa_is_mha();
    cpu_gqa_fd(1);
    cpu_gqa_fd(2);
    cpu_refusals();
}

int main(int argc, char **argv) {
    bool cpu_only = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu")) cpu_only = true;
        else {
            fprintf(stderr, "test_kn_llama_gpu: unknown argument %s (--cpu)\n", argv[i]);
            return 64;
        }
    }
    const char *se = getenv("KN_TEST_SEED");
    uint64_t seed = se ? strtoull(se, nullptr, 10) : (uint64_t)time(nullptr);
    g_rng = seed;
    printf("test_kn_llama_gpu: seed %llu (KN_TEST_SEED to repeat)\n", (unsigned long long)seed);
    if (cpu_only) {
        cpu_checks();
        printf("\n%d of %d checks failed\n", g_fail, g_checks);
        return g_fail ? 1 : 0;
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("test_kn_llama_gpu: no CUDA device (%s): skipped\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("test_kn_llama_gpu: %s (sm_%d%d, %d SMs)\n\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    printf("| %-28s | %-24s | %-4s | %-9s | %-9s | %-7s | result\n", "op", "shape", "dt", "max-rel", "l2-rel", "tol");
    cpu_checks();
    t_refusals();
    t_rope_table(64, nullptr, 8192);
    t_rope_table(128, &k_llama3, 8192);
    const kn_dtype dts[3] = {KN_F32, KN_BF16, KN_F16};
    for (int i = 0; i < 3; i++) {
        kn_dtype dt = dts[i];
        t_rmsnorm(dt, false, 77, 100);
        t_rmsnorm(dt, true, 77, 100);
        t_rmsnorm(dt, true, 130, 2048); /* Llama 3.2 1B's width; 3 row blocks, the last partial */
        t_rmsnorm(dt, false, 200, 576); /* SmolLM 135M's width */
        t_rope(dt, 2, 77, 4, 1, 64, true, nullptr);
        t_rope(dt, 1, 131, 4, 2, 128, true, &k_llama3);
        t_rope(dt, 2, 33, 3, 3, 64, false, &k_llama3);
        t_swiglu(dt, 100003);
        t_gqa(dt, 2, 77, 4, 1, 64, true);    /* KVH = 1 (multi-query), odd T */
        t_gqa(dt, 1, 131, 4, 4, 128, false); /* KVH = H (plain MHA), head dim 128 */
        t_gqa(dt, 2, 200, 8, 2, 128, true);  /* groups of 4, hd 128, doc mask */
        t_gqa(dt, 1, 333, 6, 3, 64, true);   /* groups of 2, 6 tiles */
        t_gqa(dt, 2, 77, 4, 2, 16, true);    /* llama-tiny's heads of 16 (llmtrain --device cuda) */
        t_gqa(dt, 1, 70, 4, 1, 32, false);   /* heads of 32 */
    }
    /* the tensor-core kernels on the grouped-query row (bf16, heads of 64): GPT-2's pipelined
     * kernels with a KV head per rep query heads; odd T (partial tiles), doc masks */
    t_gqa(KN_BF16, 2, 77, 4, 1, 64, true, true);    /* multi-query: one KV head for 4 */
    t_gqa(KN_BF16, 1, 333, 6, 3, 64, true, true);   /* groups of 2, 6 tiles */
    t_gqa(KN_BF16, 1, 200, 16, 4, 64, false, true); /* groups of 4 (Llama 3.2 1B's 32 / 8), unmasked */
    t_gqa(KN_BF16, 2, 130, 4, 4, 64, false, true);  /* NKV = NH: GPT-2's arithmetic on the Llama row */
    /* heads of 128 (Llama 3, Qwen2.5 1.5B+, Mistral): 32-key tiles forward and dq, 16-query tiles
     * dk/dv (kn_attention_tc_pipe.cu); checked on the CPU emulator (test_attn_tc_emu) before any GPU */
    t_gqa(KN_BF16, 2, 77, 4, 1, 128, true, true);    /* multi-query, odd T, doc mask */
    t_gqa(KN_BF16, 1, 333, 6, 3, 128, true, true);   /* groups of 2, 11 key tiles */
    t_gqa(KN_BF16, 1, 200, 24, 8, 128, false, true); /* groups of 3 (Llama 3.2 3B's 24 / 8), unmasked */
    t_gqa(KN_BF16, 2, 130, 4, 4, 128, false, true);  /* NKV = NH */
    t_gqa(KN_BF16, 1, 21, 4, 2, 128, false, true);   /* T under one tile */
    printf("\n%d of %d checks failed\n", g_fail, g_checks);
    return g_fail ? 1 : 0;
}
