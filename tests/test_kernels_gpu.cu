/* test_kernels_gpu.cu - every CUDA kernel (kernels/kn_cuda.h) against its C
 * reference (kernels/kn.h) on fresh random inputs, fp32 and bf16.
 *
 * Pass: error <= 1e-5 (fp32) / 1e-2 (bf16, fp16), measured both as max|d|/max|ref|
 * and as ||d||_2/||ref||_2; any NaN or Inf in an output fails.  Outputs that
 * the kernel overwrites are poisoned with NaN (0xFF bytes) before the run, so
 * an element it never writes fails; outputs it accumulates into (+=) start
 * from random values on both sides.  bf16/fp16 inputs are rounded first
 * and the reference runs on the rounded values.
 *
 * Exit: 0 all pass, 1 a check failed (a kernel returning an error counts as
 * a failed check; the run goes on), 2 a CUDA error (sticky: the run stops),
 * 77 no GPU.
 * KN_TEST_SEED=<n> repeats a run (the seed is printed).
 * --small: only the small shapes (no d12-sized attention/matmul, a short
 * gradient-norm vector): for compute-sanitizer memcheck/racecheck, which run
 * kernels 10-100x slower (tests/gpu/run.sh).
 * Label gpu: it only ever runs on a machine with a GPU.
 */
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
}

#include "kn_gpu_check.cuh"

/* ------------------------------------------------------------------------------------------- */
static void t_encoder(kn_dtype dt, bool with_pos) {
    int B = 3, T = 77, C = 96, V = 300, maxT = 128;
    char shape[64];
    snprintf(shape, sizeof shape, "B%d T%d C%d V%d%s", B, T, C, V, with_pos ? " pos" : "");
    int N = B * T;
    std::vector<uint32_t> inp(N);
    std::vector<int32_t> pos(N);
    for (int i = 0; i < N; i++) {
        inp[i] = (uint32_t)(rnd64() % 40); /* few distinct ids: many repeats */
        if (i % 7 == 0) inp[i] = (uint32_t)(rnd64() % V);
        pos[i] = (int32_t)(rnd64() % maxT);
    }
    vf wte = randn((size_t)V * C), wpe = randn((size_t)maxT * C);
    round_to(wte, dt);
    round_to(wpe, dt);
    uint32_t *d_inp = dput(inp);
    int32_t *d_pos = dput(pos);
    const int32_t *pp = with_pos ? d_pos : nullptr;
    dbuf d_wte((size_t)V * C, dt), d_wpe((size_t)maxT * C, dt), d_out((size_t)N * C, dt);
    d_wte.put(wte);
    d_wpe.put(wpe);
    KN(kn_encoder_forward_cuda(d_out.p, d_inp, pp, d_wte.p, d_wpe.p, B, T, C, V, maxT, dt, nullptr));
    vf ref((size_t)N * C);
    REF(kn_encoder_forward_ref(ref.data(), inp.data(), with_pos ? pos.data() : nullptr, wte.data(), wpe.data(), B, T, C,
                               V, maxT));
    check("encoder_forward", dt, shape, d_out.get(), ref);

    vf dout = randn((size_t)N * C);
    round_to(dout, dt);
    vf dwte = randn((size_t)V * C), dwpe = randn((size_t)maxT * C); /* += targets start non-zero */
    dbuf g_dout((size_t)N * C, dt), g_dwte((size_t)V * C, KN_F32), g_dwpe((size_t)maxT * C, KN_F32);
    g_dout.put(dout);
    g_dwte.put(dwte);
    g_dwpe.put(dwpe);
    size_t sb = kn_encoder_backward_scratch_bytes(N);
    dbuf scratch(sb, KN_F32 /* bytes via n*4 >= sb */);
    KN(kn_encoder_backward_cuda(g_dwte.f(), g_dwpe.f(), g_dout.p, d_inp, pp, B, T, C, V, maxT, scratch.p,
                                scratch.bytes(), dt, nullptr));
    REF(kn_encoder_backward_ref(dwte.data(), dwpe.data(), dout.data(), inp.data(), with_pos ? pos.data() : nullptr, B,
                                T, C, V, maxT));
    check("encoder_backward dwte", dt, shape, g_dwte.get(), dwte);
    check("encoder_backward dwpe", dt, shape, g_dwpe.get(), dwpe);
    cudaFree(d_inp);
    cudaFree(d_pos);
}

static void t_layernorm(kn_dtype dt, bool fused, int N = 300, int C = 200) {
    char shape[64];
    snprintf(shape, sizeof shape, "N%d C%d%s", N, C, fused ? " +residual" : "");
    vf a = randn((size_t)N * C), b2 = randn((size_t)N * C), w = randn(C), bias = randn(C);
    for (int i = 0; i < N * C; i++) a[i] += 0.5f; /* a non-zero mean */
    round_to(a, dt);
    round_to(b2, dt);
    vf x = a;
    if (fused) {
        REF(kn_residual_forward_ref(x.data(), a.data(), b2.data(), x.size()));
        round_to(x, dt); /* the residual stream is stored in dt */
    }
    dbuf d_a((size_t)N * C, dt), d_b((size_t)N * C, dt), d_out((size_t)N * C, dt), d_res((size_t)N * C, dt);
    dbuf d_w(C, KN_F32), d_bias(C, KN_F32), d_mean(N, KN_F32), d_rstd(N, KN_F32);
    d_a.put(a);
    d_b.put(b2);
    d_w.put(w);
    d_bias.put(bias);
    KN(kn_layernorm_forward_cuda(d_out.p, d_mean.f(), d_rstd.f(), fused ? d_res.p : nullptr, d_a.p,
                                 fused ? d_b.p : nullptr, d_w.f(), d_bias.f(), N, C, dt, nullptr));
    vf out((size_t)N * C), mean(N), rstd(N);
    REF(kn_layernorm_forward_ref(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N, C));
    check(fused ? "layernorm_fwd (fused add)" : "layernorm_forward", dt, shape, d_out.get(), out);
    check("layernorm_forward mean", dt, shape, d_mean.get(), mean, dt == KN_F32 ? 1e-5 : 1e-2);
    check("layernorm_forward rstd", dt, shape, d_rstd.get(), rstd);
    if (fused) check("layernorm_fwd residual out", dt, shape, d_res.get(), x);

    /* backward from the reference's mean/rstd (the kernel under test only) */
    vf dout = randn((size_t)N * C), dinp = randn((size_t)N * C), dw = randn(C), db = randn(C);
    round_to(dout, dt);
    round_to(dinp, dt);
    dbuf g_dout((size_t)N * C, dt), g_x((size_t)N * C, dt), g_dinp((size_t)N * C, dt), g_dw(C, KN_F32), g_db(C, KN_F32);
    g_dout.put(dout);
    g_x.put(x);
    g_dinp.put(dinp);
    g_dw.put(dw);
    g_db.put(db);
    d_mean.put(mean);
    d_rstd.put(rstd);
    size_t sb = kn_layernorm_backward_scratch_bytes(N, C);
    dbuf scratch((sb + 3) / 4, KN_F32);
    KN(kn_layernorm_backward_cuda(g_dinp.p, g_dw.f(), g_db.f(), g_dout.p, g_x.p, d_w.f(), d_mean.f(), d_rstd.f(), N, C,
                                  scratch.p, scratch.bytes(), dt, nullptr));
    REF(kn_layernorm_backward_ref(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                                  rstd.data(), N, C));
    check("layernorm_backward dinp(+=)", dt, shape, g_dinp.get(), dinp);
    check("layernorm_backward dweight", dt, shape, g_dw.get(), dw);
    check("layernorm_backward dbias", dt, shape, g_db.get(), db);
}

static void t_matmul(kn_cuda_ctx *ctx, kn_dtype dt, bool with_bias, bool gelu, int N = 264, int C = 192, int OC = 320) {
    char shape[64];
    snprintf(shape, sizeof shape, "N%d C%d OC%d%s%s", N, C, OC, with_bias ? " bias" : "", gelu ? " gelu" : "");
    vf inp = randn((size_t)N * C), w = randn((size_t)OC * C, 0.1f), bias = randn(OC);
    round_to(inp, dt);
    round_to(w, dt);
    round_to(bias, dt);
    dbuf d_inp((size_t)N * C, dt), d_w((size_t)OC * C, dt), d_b(OC, dt), d_out((size_t)N * OC, dt),
        d_pre((size_t)N * OC, dt);
    d_inp.put(inp);
    d_w.put(w);
    d_b.put(bias);
    KN(kn_matmul_forward_cuda(ctx, d_out.p, gelu ? d_pre.p : nullptr, d_inp.p, d_w.p, with_bias ? d_b.p : nullptr, N, C,
                              OC, dt));
    vf pre((size_t)N * OC);
    REF(kn_matmul_forward_ref(pre.data(), inp.data(), w.data(), with_bias ? bias.data() : nullptr, N, C, OC));
    if (gelu) {
        vf post((size_t)N * OC);
        REF(kn_gelu_forward_ref(post.data(), pre.data(), post.size()));
        check("matmul_forward +gelu out", dt, shape, d_out.get(), post);
        check("matmul_forward +gelu pre", dt, shape, d_pre.get(), pre);
        return;
    }
    check("matmul_forward", dt, shape, d_out.get(), pre);

    vf dout = randn((size_t)N * OC), dw = randn((size_t)OC * C), db = randn(OC), dinp((size_t)N * C);
    round_to(dout, dt);
    dbuf g_dout((size_t)N * OC, dt), g_dinp((size_t)N * C, dt), g_dw((size_t)OC * C, KN_F32), g_db(OC, KN_F32);
    g_dout.put(dout);
    g_dw.put(dw);
    g_db.put(db);
    size_t sb = kn_matmul_backward_scratch_bytes(N, OC);
    dbuf scratch((sb + 3) / 4, KN_F32);
    KN(kn_matmul_backward_cuda(ctx, g_dinp.p, g_dw.f(), with_bias ? g_db.f() : nullptr, g_dout.p, d_inp.p, d_w.p, N, C,
                               OC, scratch.p, scratch.bytes(), dt));
    REF(kn_matmul_backward_ref(dinp.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), inp.data(),
                               w.data(), N, C, OC));
    check("matmul_backward dinp", dt, shape, g_dinp.get(), dinp);
    check("matmul_backward dweight(+=)", dt, shape, g_dw.get(), dw);
    if (with_bias) check("matmul_backward dbias(+=)", dt, shape, g_db.get(), db);

    /* the same dinp through the DGELU epilogue: (dout @ w) * gelu'(pre), pre (N,C) the
     * pre-activation of this layer's input (GPT's fc projection); the reference is the
     * product above, then kn_gelu_backward_ref */
    vf pre_in = randn((size_t)N * C), dgin((size_t)N * C);
    round_to(pre_in, dt);
    dbuf d_prein((size_t)N * C, dt), g_dg((size_t)N * C, dt);
    d_prein.put(pre_in);
    g_dg.poison();
    KN(kn_matmul_backward_dgelu_cuda(ctx, g_dg.p, nullptr, nullptr, g_dout.p, nullptr, d_w.p, d_prein.p, N, C, OC,
                                     scratch.p, scratch.bytes(), dt));
    REF(kn_gelu_backward_ref(dgin.data(), pre_in.data(), dinp.data(), dgin.size()));
    check("matmul_backward dinp +dgelu", dt, shape, g_dg.get(), dgin);
}

/* tc: check the tensor-core kernels too (run last: a fault there must not
 * take the other rows with it) */
static void t_attention(kn_dtype dt, int B, int T, int C, int NH, bool docs, bool tc = false) {
    char shape[64];
    snprintf(shape, sizeof shape, "B%d T%d C%d NH%d%s", B, T, C, NH, docs ? " doc" : "");
    vf qkv = randn((size_t)B * T * 3 * C);
    round_to(qkv, dt);
    std::vector<int32_t> doc((size_t)B * T);
    for (int b = 0; b < B; b++) {
        int id = 0;
        for (int t = 0; t < T; t++) {
            if (t > 0 && rnd64() % 37 == 0) id++;
            doc[(size_t)b * T + t] = id;
        }
    }
    int32_t *d_doc = dput(doc);
    const int32_t *dd = docs ? d_doc : nullptr;
    dbuf d_qkv((size_t)B * T * 3 * C, dt), d_out((size_t)B * T * C, dt), d_lse((size_t)B * NH * T, KN_F32);
    d_qkv.put(qkv);
    KN(kn_attention_forward_cuda(d_out.p, d_lse.f(), d_qkv.p, dd, B, T, C, NH, dt, nullptr));
    vf out((size_t)B * T * C), att((size_t)B * NH * T * T);
    REF(kn_attention_forward_ref(out.data(), att.data(), qkv.data(), docs ? doc.data() : nullptr, B, T, C, NH));
    check("attention_forward", dt, shape, d_out.get(), out);
    /* the tensor-core kernels, same reference: "(tc)" the default (transposed shared
     * copies), "(tc ldsm)" the ldmatrix .trans variant, "(tc pipe)" the pipelined
     * kernels, "(tc pipe3)" those with the dk/dv kernel at 3 blocks per SM
     * (tests/gpu/run.sh trains with the fastest variant whose rows all pass) */
    static const char *const fwd_row[] = {"attention_forward (tc)", "attention_forward (tc ldsm)",
                                          "attention_forward (tc pipe)", "attention_forward (tc pipe3)"};
    static const char *const lse_row[] = {"attention_fwd lse tc vs simt", "attention_fwd lse tc ldsm",
                                          "attention_fwd lse tc pipe", "attention_fwd lse tc pipe3"};
    for (int v = 0; tc && dt == KN_BF16 && C / NH == 64 && v <= 3; v++) {
        kn_attention_tc_variant(v);
        dbuf t_out((size_t)B * T * C, dt), t_lse((size_t)B * NH * T, KN_F32);
        t_out.poison();
        t_lse.poison();
        KN(kn_attention_forward_tc_cuda(t_out.p, t_lse.f(), d_qkv.p, dd, B, T, C, NH, dt, nullptr));
        check(fwd_row[v], dt, shape, t_out.get(), out);
        check(lse_row[v], KN_F32, shape, t_lse.get(), d_lse.get(), 1e-2);
    }
    kn_attention_tc_variant(-1);

    vf dout = randn((size_t)B * T * C), dqkv((size_t)B * T * 3 * C);
    round_to(dout, dt);
    dbuf g_dout((size_t)B * T * C, dt), g_dqkv((size_t)B * T * 3 * C, dt);
    g_dout.put(dout);
    size_t sb = kn_attention_backward_scratch_bytes(B, T, NH);
    dbuf scratch((sb + 3) / 4, KN_F32);
    /* the kernel's own forward output (what training feeds back) */
    KN(kn_attention_backward_cuda(g_dqkv.p, g_dout.p, d_qkv.p, d_out.p, d_lse.f(), dd, B, T, C, NH, scratch.p,
                                  scratch.bytes(), dt, nullptr));
    REF(kn_attention_backward_ref(dqkv.data(), dout.data(), qkv.data(), att.data(), docs ? doc.data() : nullptr, B, T,
                                  C, NH));
    check("attention_backward dqkv", dt, shape, g_dqkv.get(), dqkv);
    static const char *const bwd_row[] = {"attention_backward (tc)", "attention_backward (tc ldsm)",
                                          "attention_backward (tc pipe)", "attention_backward (tc pipe3)"};
    for (int v = 0; tc && dt == KN_BF16 && C / NH == 64 && v <= 3; v++) {
        kn_attention_tc_variant(v);
        g_dqkv.poison();
        KN(kn_attention_backward_tc_cuda(g_dqkv.p, g_dout.p, d_qkv.p, d_out.p, d_lse.f(), dd, B, T, C, NH, scratch.p,
                                         scratch.bytes(), dt, nullptr));
        check(bwd_row[v], dt, shape, g_dqkv.get(), dqkv);
    }
    kn_attention_tc_variant(-1);
    cudaFree(d_doc);
}

static void t_gelu(kn_dtype dt) {
    size_t n = 100003;
    vf x = randn(n, 2.0f), dout = randn(n);
    round_to(x, dt);
    round_to(dout, dt);
    dbuf d_x(n, dt), d_out(n, dt), d_dout(n, dt), d_dinp(n, dt);
    d_x.put(x);
    d_dout.put(dout);
    KN(kn_gelu_forward_cuda(d_out.p, d_x.p, n, dt, nullptr));
    KN(kn_gelu_backward_cuda(d_dinp.p, d_x.p, d_dout.p, n, dt, nullptr));
    vf out(n), dinp(n);
    REF(kn_gelu_forward_ref(out.data(), x.data(), n));
    REF(kn_gelu_backward_ref(dinp.data(), x.data(), dout.data(), n));
    check("gelu_forward", dt, "n100003", d_out.get(), out);
    check("gelu_backward", dt, "n100003", d_dinp.get(), dinp);
}

static void t_residual(kn_dtype dt) {
    size_t n = 70001;
    vf a = randn(n), b = randn(n);
    round_to(a, dt);
    round_to(b, dt);
    dbuf d_a(n, dt), d_b(n, dt), d_out(n, dt);
    d_a.put(a);
    d_b.put(b);
    KN(kn_residual_forward_cuda(d_out.p, d_a.p, d_b.p, n, dt, nullptr));
    vf out(n);
    REF(kn_residual_forward_ref(out.data(), a.data(), b.data(), n));
    round_to(out, dt);
    check("residual_forward", dt, "n70001", d_out.get(), out);
    KN(kn_residual_forward_cuda(d_a.p, d_a.p, d_b.p, n, dt, nullptr)); /* in place */
    check("residual_forward (in place)", dt, "n70001", d_a.get(), out);
}

static void t_xent(kn_dtype dt, int V = 1000) {
    int N = 96, Vp = 1024;
    char shape[48];
    snprintf(shape, sizeof shape, "N%d V%d Vp%d", N, V, Vp);
    vf logits = randn((size_t)N * Vp, 3.0f);
    round_to(logits, dt);
    std::vector<int32_t> tg(N);
    for (int i = 0; i < N; i++) tg[i] = (i % 11 == 5) ? -1 : (int32_t)(rnd64() % V);
    vf dloss = randn(N);
    int32_t *d_tg = dput(tg);
    dbuf d_log((size_t)N * Vp, dt), d_loss(N, KN_F32), d_lse(N, KN_F32), d_dl(N, KN_F32), d_grad((size_t)N * Vp, dt);
    d_log.put(logits);
    d_dl.put(dloss);
    KN(kn_softmax_xent_forward_cuda(d_loss.f(), d_lse.f(), d_log.p, d_tg, N, V, Vp, dt, nullptr));
    vf loss(N), probs((size_t)N * Vp);
    REF(kn_softmax_xent_forward_ref(loss.data(), probs.data(), logits.data(), tg.data(), N, V, Vp));
    check("softmax_xent_forward loss", dt, shape, d_loss.get(), loss, 1e-5); /* fp32 math on either input */

    vf grad((size_t)N * Vp);
    KN(kn_softmax_xent_backward_cuda(d_grad.p, d_log.p, d_lse.f(), d_tg, d_dl.f(), 0.0f, N, V, Vp, dt, nullptr));
    REF(kn_softmax_xent_backward_ref(grad.data(), probs.data(), tg.data(), dloss.data(), 0.0f, N, V, Vp));
    check("softmax_xent_backward dloss[]", dt, shape, d_grad.get(), grad);

    float sc = 1.0f / 1234.0f;
    d_grad.poison();
    KN(kn_softmax_xent_backward_cuda(d_grad.p, d_log.p, d_lse.f(), d_tg, nullptr, sc, N, V, Vp, dt, nullptr));
    REF(kn_softmax_xent_backward_ref(grad.data(), probs.data(), tg.data(), nullptr, sc, N, V, Vp));
    check("softmax_xent_backward scale", dt, shape, d_grad.get(), grad);

    /* fused, in place over the logits: the scalar kernel, then (16-bit logits) the
     * 16-byte one, "(vec)" (tests/gpu/run.sh trains with it when its rows pass) */
    for (int v = 0; v <= (dt == KN_F32 ? 0 : 1); v++) {
        kn_softmax_xent_variant(v);
        d_log.put(logits);
        d_loss.poison();
        KN(kn_softmax_xent_fused_cuda(d_loss.f(), d_log.p, d_log.p, d_tg, nullptr, sc, N, V, Vp, dt, nullptr));
        check(v ? "softmax_xent_fused (vec) loss" : "softmax_xent_fused loss", dt, shape, d_loss.get(), loss, 1e-5);
        check(v ? "softmax_xent_fused (vec) dlogits" : "softmax_xent_fused dlogits", dt, shape, d_log.get(), grad);
    }
    kn_softmax_xent_variant(-1);
    cudaFree(d_tg);
}

static void t_adamw(kn_dtype lp) {
    size_t n = 50001;
    const char *shape = "n50001 t3 clip0.5";
    vf p = randn(n), g = randn(n), m = randn(n, 0.1f), v = randn(n, 0.1f);
    for (auto &x : v) x = fabsf(x);
    dbuf d_p(n, KN_F32), d_g(n, KN_F32), d_m(n, KN_F32), d_v(n, KN_F32), d_lp(n, lp), d_sc(1, KN_F32);
    for (int decay = 0; decay <= 1; decay++) {
        d_p.put(p);
        d_g.put(g);
        d_m.put(m);
        d_v.put(v);
        d_sc.put(vf{0.5f});
        d_lp.poison();
        KN(kn_adamw_step_cuda(d_p.f(), d_lp.p, lp, d_g.f(), d_m.f(), d_v.f(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, decay,
                              3, d_sc.f(), nullptr));
        vf rp = p, rg = g, rm = m, rv = v;
        REF(kn_scale_ref(rg.data(), n, 0.5f));
        REF(kn_adamw_step_ref(rp.data(), rg.data(), rm.data(), rv.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, decay,
                              3));
        check(decay ? "adamw params (decay)" : "adamw params", KN_F32, shape, d_p.get(), rp);
        check("adamw m", KN_F32, shape, d_m.get(), rm);
        check("adamw v", KN_F32, shape, d_v.get(), rv);
        check("adamw compute copy", lp, shape, d_lp.get(), rp);
    }
}

static void t_gradnorm(void) {
    size_t n = 1000003;
    vf g = randn(n, 0.01f);
    dbuf d_g(n, KN_F32), d_ss(2, KN_F32) /* one double */, d_sc(1, KN_F32), d_norm(1, KN_F32);
    d_g.put(g);
    size_t sb = kn_sumsq_scratch_bytes(n);
    dbuf scratch((sb + 3) / 4, KN_F32);
    KN(kn_sumsq_cuda((double *)d_ss.p, d_g.f(), n, scratch.p, scratch.bytes(), nullptr));
    double ss = 0;
    CK(cudaMemcpy(&ss, d_ss.p, sizeof ss, cudaMemcpyDeviceToHost));
    double rss = 0;
    REF(kn_sumsq_ref(g.data(), n, &rss));
    check("sumsq (double)", KN_F32, "n1000003", vf{(float)ss}, vf{(float)rss}, 1e-6);
    /* clip to half the norm */
    float maxn = (float)(0.5 * sqrt(rss));
    KN(kn_clip_scale_cuda(d_sc.f(), d_norm.f(), (const double *)d_ss.p, maxn, nullptr));
    float sc = 0;
    CK(cudaMemcpy(&sc, d_sc.p, sizeof sc, cudaMemcpyDeviceToHost));
    KN(kn_scale_cuda(d_g.f(), n, sc, nullptr));
    vf rg = g;
    float rnorm = 0;
    REF(kn_clip_grad_norm_ref(rg.data(), n, maxn, &rnorm));
    check("clip norm", KN_F32, "n1000003", d_norm.get(), vf{rnorm});
    check("clip scaled grads", KN_F32, "n1000003", d_g.get(), rg);
}

static bool g_small = false;

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) g_small = true;
        else {
            fprintf(stderr, "test_kernels_gpu: unknown argument %s (--small)\n", argv[i]);
            return 64;
        }
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("test_kernels_gpu: no CUDA device (%s): skipped\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const char *se = getenv("KN_TEST_SEED");
    uint64_t seed = se ? strtoull(se, nullptr, 10) : (uint64_t)time(nullptr);
    g_rng = seed;
    printf("test_kernels_gpu: %s (sm_%d%d, %d SMs), seed %llu (KN_TEST_SEED to repeat)\n\n", prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, (unsigned long long)seed);
    printf("| %-28s | %-4s | %-22s | %-9s | %-9s | %-7s | result\n", "op", "dt", "shape", "max-rel", "l2-rel", "tol");
    printf(
        "|------------------------------|------|------------------------|-----------|-----------|---------|-------\n");

    void *ws = nullptr;
    CK(cudaMalloc(&ws, KN_CUBLASLT_WORKSPACE));
    kn_cuda_ctx *ctx = nullptr;
    if (kn_cuda_ctx_create(&ctx, nullptr, ws, KN_CUBLASLT_WORKSPACE) != KN_OK) {
        printf("kn_cuda_ctx_create: %s\n", kn_cuda_last_error());
        return 2;
    }

    const kn_dtype dts[3] = {KN_F32, KN_BF16, KN_F16};
    for (int i = 0; i < 3; i++) {
        kn_dtype dt = dts[i];
        t_encoder(dt, false);
        t_encoder(dt, true);
        t_layernorm(dt, false);
        t_layernorm(dt, true);
        t_layernorm(dt, false, 77, 100);  /* C % 8 != 0: the scalar backward */
        t_layernorm(dt, true, 130, 1600); /* d48's width: 7 column chunks, the last partial */
        t_matmul(ctx, dt, true, false);
        t_matmul(ctx, dt, false, false);
        t_matmul(ctx, dt, true, true);
        t_attention(dt, 2, 200, 128, 2, false); /* hs 64, T not a multiple of the tiles */
        t_attention(dt, 2, 200, 128, 2, true);  /* document mask */
        t_attention(dt, 1, 130, 128, 4, true);  /* hs 32 */
        t_attention(dt, 2, 333, 256, 4, true);  /* hs 64, 6 tiles, doc mask */
        if (!g_small) {
            t_attention(dt, 1, 1024, 768, 12, true);         /* d12's shape (one row) */
            t_matmul(ctx, dt, true, false, 1024, 768, 3072); /* d12's fc layer, 1024 tokens */
        }
        t_residual(dt);
        t_gelu(dt);
        t_xent(dt);
        t_xent(dt, 1001); /* V % 8 != 0: the 16-byte kernel's scalar tail */
        t_adamw(dt);
    }
    t_gradnorm();
    /* last: the tensor-core attention (written without a GPU) */
    t_attention(KN_BF16, 2, 200, 128, 2, false, true);
    t_attention(KN_BF16, 2, 333, 256, 4, true, true);
    t_attention(KN_BF16, 2, 333, 256, 4, false, true);
    if (!g_small) {
        t_attention(KN_BF16, 1, 1024, 768, 12, true, true);
        t_attention(KN_BF16, 2, 1024, 768, 12, false, true); /* no mask: the interior tiles' unmasked path */
    }

    kn_cuda_ctx_destroy(ctx);
    cudaFree(ws);
    printf("\ntest_kernels_gpu: %d of %d checks passed%s\n", g_checks - g_fail, g_checks,
           g_fail ? " - FAILURES above" : "");
    return g_fail ? 1 : 0;
}
