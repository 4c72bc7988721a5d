/* test_attn_tc_emu.cpp - the pipelined tensor-core attention kernels
 * (kernels/kn_attention_tc_pipe.cu: forward, dq, dk/dv) run on the CPU by
 * tests/emu/kn_emu.h and compared with the C references, where no GPU is lent
 * (issue 31, item 5).  Label cpu; built where the CUDA headers are (the
 * kernels are compiled as host C++ with -DKN_EMU, no nvcc, no device).
 *
 * What it shows: the kernels' indexing, masking, pipelining order and mma /
 * ldmatrix fragment use give the reference's numbers for GPT-2's row and the
 * grouped-query row (multi-query, groups, NKV = NH), odd sequence lengths
 * (partial tiles), document masks, for heads of 64 and of 128 (the 32-key /
 * 16-query tiles of kn_attention_tc_pipe.cu's tc_tiles<128>, which no GPU has
 * run yet: here is where their indexing is checked).  That the emulator's fragment layouts are
 * the hardware's is shown by the same kernels for GPT-2's row, which passed
 * every row on an H200 (docs/gpu-results.md, 2026-12-04): a layout the
 * emulator got wrong would fail them here.
 *
 * The SIMT kernels (kernels/kn_attention_simt.cuh, the Llama family's
 * tiling kn_att_gqa_cfg: what the GPU Llama model runs for fp32, fp16 and
 * head sizes other than 64, none of it yet run on a GPU for NKV < NH) run the
 * same way for head sizes 16, 32, 64 and 128, fp32 and bf16.
 *
 * Pass: as test_kernels_gpu's rows, max|d|/max|ref| and ||d||/||ref|| <= 1e-2
 * for bf16 (bf16 inputs; the tensor-core kernels' P and dS operands are bf16
 * too) and 1e-5 for fp32, lse <= 1e-4 relative; outputs start as NaN, so an
 * element never written fails. */
#include "../kernels/kn_attention_simt.cuh"
#include "../kernels/kn_attention_tc_pipe.cu"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "kn_llama.h"
}
#include "emu/emu_check.h"

static void compare(const char *what, const char *shape, const std::vector<float> &got, const std::vector<float> &ref,
                    double tol) {
    double dmax = 0, rmax = 0, d2 = 0, r2 = 0;
    size_t bad = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        if (!isfinite(got[i])) {
            bad++;
            continue;
        }
        double d = fabs((double)got[i] - ref[i]);
        dmax = d > dmax ? d : dmax;
        rmax = fabs(ref[i]) > rmax ? fabs(ref[i]) : rmax;
        d2 += d * d;
        r2 += (double)ref[i] * ref[i];
    }
    double rel_max = rmax > 0 ? dmax / rmax : dmax, rel_2 = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    bool ok = !bad && rel_max <= tol && rel_2 <= tol;
    char line[200];
    snprintf(line, sizeof line, "%-22s %-30s %8.2e %8.2e%s", what, shape, rel_max, rel_2, bad ? " (non-finite)" : "");
    expect(ok, line);
}

static std::vector<float> to_float(const std::vector<kn_bf16> &v) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); i++) f[i] = __bfloat162float(v[i]);
    return f;
}
static std::vector<float> to_float(const std::vector<float> &v) { return v; }
static void store(kn_bf16 &d, float v) { d = __float2bfloat16_rn(v); }
static void store(float &d, float v) { d = v; }

/* B x T rows of random documents (a new one every ~1/p positions) */
static std::vector<int32_t> make_docs(int B, int T, int p) {
    std::vector<int32_t> d((size_t)B * T);
    for (int b = 0; b < B; b++) {
        int id = 0;
        for (int t = 0; t < T; t++) {
            if (t > 0 && rnd64() % (uint64_t)p == 0) id++;
            d[(size_t)b * T + t] = id;
        }
    }
    return d;
}

/* the row log-sum-exps in double from the same (rounded) scores */
static std::vector<float> lse_ref(const std::vector<float> &qkvf, const int32_t *dd, int B, int T, const kn_att_geo &G,
                                  int HS, float scale) {
    const int NH = G.NH;
    const size_t RS = G.RS;
    std::vector<float> lref((size_t)B * NH * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = &qkvf[((size_t)b * T + t) * RS + (size_t)h * HS];
                double m = -INFINITY, s = 0;
                std::vector<double> sc((size_t)t + 1, -INFINITY);
                for (int k = 0; k <= t; k++) {
                    if (dd && dd[(size_t)b * T + k] != dd[(size_t)b * T + t]) continue;
                    const float *kk = &qkvf[((size_t)b * T + k) * RS + G.koff + (size_t)(h / G.rep) * HS];
                    double dot = 0;
                    for (int d = 0; d < HS; d++) dot += (double)q[d] * kk[d];
                    sc[(size_t)k] = dot * scale;
                    m = sc[(size_t)k] > m ? sc[(size_t)k] : m;
                }
                for (int k = 0; k <= t; k++)
                    if (sc[(size_t)k] > -INFINITY) s += exp(sc[(size_t)k] - m);
                lref[((size_t)b * NH + h) * T + t] = (float)(m + log(s));
            }
    return lref;
}

/* the q, k and v parts of a packed gradient compared separately: a kernel that skips one is named */
static void compare_qkv(const char *shape, const std::vector<float> &got, const std::vector<float> &dref, size_t N,
                        const kn_att_geo &G, double tol) {
    const char *part[3] = {"backward dq", "backward dk", "backward dv"};
    size_t lo[3] = {0, G.koff, G.voff}, hi[3] = {G.koff, G.voff, G.RS};
    for (int p = 0; p < 3; p++) {
        std::vector<float> g2, r2;
        for (size_t n = 0; n < N; n++)
            for (size_t c = lo[p]; c < hi[p]; c++) {
                g2.push_back(got[n * G.RS + c]);
                r2.push_back(dref[n * G.RS + c]);
            }
        compare(part[p], shape, g2, r2, tol);
    }
}

template <int HS> static void run_case(int B, int T, int NH, int NKV, bool docs) {
    char shape[96];
    snprintf(shape, sizeof shape, "B%d T%d H%d KV%d%s%s", B, T, NH, NKV, HS == 64 ? "" : " hs128", docs ? " doc" : "");
    kn_att_geo G = kn_att_geo_gqa(T, NH, NKV, HS);
    size_t N = (size_t)B * T, RS = G.RS, OS = G.OS;
    std::vector<kn_bf16> qkv(N * RS), out(N * OS), dout(N * OS), dqkv(N * RS);
    for (auto &x : qkv) x = __float2bfloat16_rn(randn());
    for (auto &x : dout) x = __float2bfloat16_rn(randn());
    std::vector<float> qkvf = to_float(qkv), doutf = to_float(dout), lse((size_t)B * NH * T, NAN);
    for (auto &x : out) x = __float2bfloat16_rn(NAN);
    for (auto &x : dqkv) x = __float2bfloat16_rn(NAN);
    std::vector<int32_t> doc = make_docs(B, T, 29);
    const int32_t *dd = docs ? doc.data() : nullptr;
    const float scale = 1.0f / sqrtf((float)HS);

    /* forward */
    dim3 fgrid((unsigned)((T + TC_BQ - 1) / TC_BQ), (unsigned)NH, (unsigned)B);
    int rc = kn_emu_launch(fgrid, 128, [&] {
        if (docs) att_fwd_pipe_kernel<HS, true>(out.data(), lse.data(), qkv.data(), dd, G, scale);
        else att_fwd_pipe_kernel<HS, false>(out.data(), lse.data(), qkv.data(), nullptr, G, scale);
    });
    expect(rc == 0, "forward ran to completion (no barrier deadlock)");
    std::vector<float> oref(N * OS), att((size_t)B * NH * T * T);
    if (kn_gqa_attention_forward_ref(oref.data(), att.data(), qkvf.data(), dd, B, T, NH, NKV, HS) != 0) {
        expect(false, "reference forward");
        return;
    }
    compare("forward out", shape, to_float(out), oref, 1e-2);
    compare("forward lse", shape, lse, lse_ref(qkvf, dd, B, T, G, HS, scale), 1e-4);

    /* backward: D = rowsum(dout * out) as the GPU's dsum kernel forms it (fp32 of the bf16 values) */
    std::vector<float> outf = to_float(out), Dsum((size_t)B * NH * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                float acc = 0.0f;
                for (int d = 0; d < HS; d++) {
                    size_t i = ((size_t)b * T + t) * OS + (size_t)h * HS + d;
                    acc += doutf[i] * outf[i];
                }
                Dsum[((size_t)b * NH + h) * T + t] = acc;
            }
    { /* the GPU's D kernel (8 lanes a row, 16-byte loads, HS / 64 of them) against that sum; 2
       * blocks, so that its grid-stride loop walks the rows (and the emulator makes 512 fibers, not
       * one per row's lane) */
        std::vector<float> Dk(Dsum.size(), NAN);
        int r2 = kn_emu_launch(dim3(2), 256,
                               [&] { att_dsum_vec_kernel<HS>(Dk.data(), dout.data(), out.data(), B, T, (int)OS, NH); });
        expect(r2 == 0, "dsum ran to completion");
        compare("backward D (dsum)", shape, Dk, Dsum, 1e-5);
    }
    dim3 qgrid((unsigned)((T + 63) / 64), (unsigned)NH, (unsigned)B);
    dim3 kgrid((unsigned)((T + 63) / 64), (unsigned)NKV, (unsigned)B);
    rc = kn_emu_launch(qgrid, 128, [&] {
        if (docs)
            att_dq_pipe_kernel<HS, true>(dqkv.data(), dout.data(), qkv.data(), lse.data(), Dsum.data(), dd, G, scale);
        else
            att_dq_pipe_kernel<HS, false>(dqkv.data(), dout.data(), qkv.data(), lse.data(), Dsum.data(), nullptr, G,
                                          scale);
    });
    rc |= kn_emu_launch(kgrid, 128, [&] {
        if (docs)
            att_dkdv_pipe_kernel<HS, true, 1>(dqkv.data(), dout.data(), qkv.data(), lse.data(), Dsum.data(), dd, G,
                                              scale);
        else
            att_dkdv_pipe_kernel<HS, false, 1>(dqkv.data(), dout.data(), qkv.data(), lse.data(), Dsum.data(), nullptr,
                                               G, scale);
    });
    expect(rc == 0, "backward ran to completion (no barrier deadlock)");
    std::vector<float> dref(N * RS);
    if (kn_gqa_attention_backward_ref(dref.data(), doutf.data(), qkvf.data(), att.data(), dd, B, T, NH, NKV, HS) != 0) {
        expect(false, "reference backward");
        return;
    }
    compare_qkv(shape, to_float(dqkv), dref, N, G, 1e-2);
}

/* The SIMT kernels with the Llama family's tiling, launched as kn_att_fwd_launch /
 * kn_att_bwd_launch do (D by kn_att_dsum_kernel, then dq, then dk/dv). */
template <int HS, typename T> static void run_simt_case(int B, int Tn, int NH, int NKV, bool docs) {
    typedef kn_att_gqa_cfg<HS> Cfg;
    const bool bf = sizeof(T) == 2;
    const double tol = bf ? 1e-2 : 1e-5;
    char shape[96];
    snprintf(shape, sizeof shape, "simt %s B%d T%d H%d KV%d hs%d%s", bf ? "bf16" : "fp32", B, Tn, NH, NKV, HS,
             docs ? " doc" : "");
    kn_att_geo G = kn_att_geo_gqa(Tn, NH, NKV, HS);
    size_t N = (size_t)B * Tn;
    std::vector<T> qkv(N * G.RS), out(N * G.OS), dout(N * G.OS), dqkv(N * G.RS);
    for (auto &x : qkv) store(x, randn());
    for (auto &x : dout) store(x, randn());
    for (auto &x : out) store(x, NAN);
    for (auto &x : dqkv) store(x, NAN);
    std::vector<float> qkvf = to_float(qkv), doutf = to_float(dout), lse((size_t)B * NH * Tn, NAN),
                       Dsum((size_t)B * NH * Tn, NAN);
    std::vector<int32_t> doc = make_docs(B, Tn, 29);
    const int32_t *dd = docs ? doc.data() : nullptr;
    const float scale = 1.0f / sqrtf((float)HS);
    dim3 fgrid((unsigned)((Tn + Cfg::BQ - 1) / Cfg::BQ), (unsigned)NH, (unsigned)B);
    int rc = kn_emu_launch(fgrid, Cfg::BQ,
                           [&] { kn_att_fwd_kernel<HS, Cfg, T>(out.data(), lse.data(), qkv.data(), dd, G, scale); });
    std::vector<float> oref(N * G.OS), att((size_t)B * NH * Tn * Tn), dref(N * G.RS);
    if (kn_gqa_attention_forward_ref(oref.data(), att.data(), qkvf.data(), dd, B, Tn, NH, NKV, HS) != 0 ||
        kn_gqa_attention_backward_ref(dref.data(), doutf.data(), qkvf.data(), att.data(), dd, B, Tn, NH, NKV, HS) !=
            0) {
        expect(false, "reference");
        return;
    }
    compare("forward out", shape, to_float(out), oref, tol);
    compare("forward lse", shape, lse, lse_ref(qkvf, dd, B, Tn, G, HS, scale), 1e-4);
    size_t rows = (size_t)B * NH * Tn;
    rc |= kn_emu_launch(dim3(kn_blocks(rows, 256)), 256,
                        [&] { kn_att_dsum_kernel<T>(Dsum.data(), dout.data(), out.data(), B, G, HS); });
    dim3 gq((unsigned)((Tn + Cfg::BQ - 1) / Cfg::BQ), (unsigned)NH, (unsigned)B);
    rc |= kn_emu_launch(gq, Cfg::BQ, [&] {
        kn_att_dq_kernel<HS, Cfg, T>(dqkv.data(), dout.data(), qkv.data(), lse.data(), Dsum.data(), dd, G, scale);
    });
    dim3 gk((unsigned)((Tn + Cfg::KB - 1) / Cfg::KB), (unsigned)NKV, (unsigned)B);
    rc |= kn_emu_launch(gk, Cfg::KB, [&] {
        kn_att_dkdv_kernel<HS, Cfg, T>(dqkv.data(), dout.data(), qkv.data(), lse.data(), Dsum.data(), dd, G, scale);
    });
    char what[128];
    snprintf(what, sizeof what, "%s ran to completion", shape);
    expect(rc == 0, what);
    compare_qkv(shape, to_float(dqkv), dref, N, G, tol);
}

int main(void) {
    const char *se = getenv("KN_TEST_SEED");
    if (se) g_rng = strtoull(se, nullptr, 10) | 1;
    printf("test_attn_tc_emu: the pipelined tensor-core attention on the CPU emulator (seed %llu)\n",
           (unsigned long long)g_rng);
    /* GPT-2's geometry is the grouped-query one with NKV = NH */
    kn_att_geo a = kn_att_geo_gpt2(100, 256, 4), b = kn_att_geo_gqa(100, 4, 4, 64);
    expect(a.RS == b.RS && a.OS == b.OS && a.koff == b.koff && a.voff == b.voff && a.rep == 1 && b.rep == 1 &&
               a.NKV == b.NKV,
           "GPT-2's row is the grouped-query row with NKV = NH");
    run_case<64>(1, 130, 2, 2, false); /* GPT-2's row: 3 tiles, the last of 2 rows */
    run_case<64>(1, 130, 2, 2, true);
    run_case<64>(1, 64, 2, 2, false);            /* one full tile */
    run_case<64>(1, 77, 4, 1, true);             /* multi-query */
    run_case<64>(2, 100, 4, 2, false);           /* groups of 2, two sequences */
    run_case<64>(1, 200, 4, 2, true);            /* groups of 2, 4 tiles, documents */
    run_simt_case<64, float>(1, 77, 4, 1, true); /* multi-query */
    run_simt_case<64, kn_bf16>(2, 70, 4, 2, false);
    run_simt_case<128, float>(1, 100, 4, 2, true); /* the dk/dv block halved (KB 32, QB 8) */
    run_simt_case<128, kn_bf16>(1, 45, 8, 2, false);
    run_simt_case<16, float>(2, 77, 4, 2, true);  /* llama-tiny's heads of 16 */
    run_simt_case<32, float>(1, 70, 4, 4, false); /* NKV = NH */
    /* heads of 128 (Llama 3 / Qwen2.5 / Mistral): 32-key tiles forward and dq, 16-query tiles dk/dv;
     * last, so that the rows above draw the inputs they drew before */
    run_case<128>(1, 130, 2, 2, false); /* NKV = NH (GPT-2's row): 5 key tiles, the last of 2 rows */
    run_case<128>(1, 130, 2, 2, true);
    run_case<128>(1, 77, 4, 1, true);   /* multi-query, documents, odd T */
    run_case<128>(2, 100, 4, 2, false); /* groups of 2, two sequences */
    run_case<128>(1, 150, 8, 2, true);  /* groups of 4, documents */
    run_case<128>(1, 21, 4, 2, false);  /* T under one tile (16-query, 32-key and 64-row blocks) */
    run_case<128>(1, 64, 4, 4, false);  /* exact 64-row block, every skip path taken */
    printf("\n%d of %d checks failed\n", g_fail, g_checks);
    return g_fail ? 1 : 0;
}
