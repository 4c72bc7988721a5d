/* test_adamw_emu.cpp - the AdamW kernels of kernels/kn_adamw.cuh run on the
 * CPU (tests/emu/kn_emu.h: each block's threads as fibers), no GPU needed
 * (issue 31 items 3 and 5): the multi-tensor kernel (one launch over a table
 * of tensors with gaps between them, empty tensors, one element, sizes
 * around the 4,096-element block) against one launch of the per-tensor
 * kernel per tensor, as the GPU step ran before MKS_ADAMW_MULTI=1: the fp32
 * params, m, v and the 16-bit copy must be the same bits, elements between
 * tensors untouched; both within 1e-6 of the C reference kn_adamw_step_ref.
 * For fp32 (no copy), bf16 and fp16 copies, with and without the device
 * gradient scale.  On the GPU, test_tr_cuda_step_gpu checks the same
 * equality through the whole step. */
#include "../kernels/kn_adamw.cuh"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "kn.h"
}
#include "emu/emu_check.h"

template <typename LP> static const char *lp_name() {
    return sizeof(LP) == 4 ? "fp32 (no copy)" : (std::is_same<LP, kn_bf16>::value ? "bf16 copy" : "fp16 copy");
}

template <typename LP> static void run(bool with_scale) {
    const size_t E = KN_ADAMW_MULTI_ELEMS;
    const std::vector<size_t> sizes = {3, 0, E - 1, 1, E, 0, E + 1, 2 * E + 17, 256, 255, 7};
    const int nt = (int)sizes.size();
    std::vector<size_t> off(nt);
    std::vector<int> decay(nt);
    size_t P = 0;
    for (int k = 0; k < nt; k++) {
        P += 5; /* a gap no kernel may touch */
        off[k] = P;
        P += sizes[k];
        decay[k] = k % 3 != 1;
    }
    P += 5;
    std::vector<float> p0(P), g(P), m0(P), v0(P);
    for (size_t i = 0; i < P; i++) {
        p0[i] = (urand() - 0.5f) * 0.2f;
        g[i] = (urand() - 0.5f) * 0.01f;
        m0[i] = (urand() - 0.5f) * 0.001f;
        v0[i] = urand() * 1e-6f;
    }
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, sc = 0.37f;
    const int t = 7;
    const float bc1 = 1.0f - powf(b1, (float)t), bc2 = 1.0f - powf(b2, (float)t); /* as the launchers */
    const float *gs = with_scale ? &sc : nullptr;
    const bool lowp = sizeof(LP) != 4;
    /* per tensor: the launches of kn_adamw_step_cuda, one per non-empty tensor */
    std::vector<float> pa = p0, ma = m0, va = v0;
    std::vector<LP> la(P), lb(P);
    for (size_t i = 0; i < P; i++) { /* a value no update writes */
        kn_st(&la[i], -7.0f);
        kn_st(&lb[i], -7.0f);
    }
    int rc = 0;
    for (int k = 0; k < nt; k++) {
        size_t n = sizes[k], o = off[k];
        if (!n) continue;
        LP *lp = lowp ? la.data() + o : nullptr;
        rc |= kn_emu_launch(dim3(kn_blocks(n, 256)), 256, [&] {
            adamw_kernel<LP>(pa.data() + o, lp, g.data() + o, ma.data() + o, va.data() + o, n, lr, b1, b2, eps, wd,
                             decay[k], bc1, bc2, gs);
        });
    }
    /* multi: one launch over the table */
    std::vector<kn_adamw_tensor> tab(nt);
    std::vector<uint32_t> bstart(nt + 1);
    size_t blocks = kn_adamw_multi_layout(nt, off.data(), sizes.data(), decay.data(), tab.data(), bstart.data());
    std::vector<float> pb = p0, mb = m0, vb = v0;
    rc |= kn_emu_launch(dim3((unsigned)blocks), 256, [&] {
        adamw_multi_kernel<LP>(tab.data(), bstart.data(), nt, pb.data(), lowp ? lb.data() : nullptr, g.data(),
                               mb.data(), vb.data(), lr, b1, b2, eps, wd, bc1, bc2, gs);
    });
    char what[128];
    snprintf(what, sizeof what, "%s%s: %zu blocks, both ran", lp_name<LP>(), with_scale ? ", grad scale" : "", blocks);
    expect(rc == 0 && blocks == 1 + 1 + 1 + 1 + 2 + 3 + 1 + 1 + 1, what);
    bool same = !memcmp(pa.data(), pb.data(), P * 4) && !memcmp(ma.data(), mb.data(), P * 4) &&
                !memcmp(va.data(), vb.data(), P * 4) && (!lowp || !memcmp(la.data(), lb.data(), P * sizeof(LP)));
    snprintf(what, sizeof what, "%s%s: multi == per tensor, bit for bit (params, m, v, copy)", lp_name<LP>(),
             with_scale ? ", grad scale" : "");
    expect(same, what);
    /* the gaps: untouched by either */
    size_t touched = 0;
    for (int k = 0; k <= nt; k++) {
        size_t a = k == 0 ? 0 : off[k - 1] + sizes[k - 1], e = k == nt ? P : off[k];
        for (size_t i = a; i < e; i++)
            touched += memcmp(&pb[i], &p0[i], 4) || memcmp(&mb[i], &m0[i], 4) || memcmp(&vb[i], &v0[i], 4);
    }
    snprintf(what, sizeof what, "%s%s: elements between tensors untouched", lp_name<LP>(),
             with_scale ? ", grad scale" : "");
    expect(touched == 0, what);
    /* the C reference, tensor by tensor, on the scaled gradient */
    std::vector<float> pr = p0, mr = m0, vr = v0, gr = g;
    if (with_scale)
        for (auto &x : gr) x *= sc;
    for (int k = 0; k < nt; k++)
        if (sizes[k])
            kn_adamw_step_ref(pr.data() + off[k], gr.data() + off[k], mr.data() + off[k], vr.data() + off[k], sizes[k],
                              lr, b1, b2, eps, wd, decay[k], t);
    /* test_kernels_gpu's measure: the largest difference over the largest value */
    double dmax[3] = {0, 0, 0}, rmax[3] = {0, 0, 0}, worst = 0;
    bool copy_ok = true;
    for (size_t i = 0; i < P; i++) {
        const float *got[3] = {&pb[i], &mb[i], &vb[i]}, *ref[3] = {&pr[i], &mr[i], &vr[i]};
        for (int q = 0; q < 3; q++) {
            dmax[q] = fmax(dmax[q], fabs((double)*got[q] - *ref[q]));
            rmax[q] = fmax(rmax[q], fabs((double)*ref[q]));
        }
        if (lowp) {
            float c = kn_ld(&lb[i]);
            bool inside = false;
            for (int k = 0; k < nt; k++) inside |= i >= off[k] && i < off[k] + sizes[k];
            if (inside && fabsf(c - pb[i]) > fabsf(pb[i]) * 1e-2f + 1e-6f) copy_ok = false;
            if (!inside && c != -7.0f) copy_ok = false;
        }
    }
    for (int q = 0; q < 3; q++) worst = fmax(worst, rmax[q] > 0 ? dmax[q] / rmax[q] : dmax[q]);
    snprintf(what, sizeof what, "%s%s: vs kn_adamw_step_ref (%.1e <= 1e-5 of the largest; copy %s)", lp_name<LP>(),
             with_scale ? ", grad scale" : "", worst, lowp ? "within 1%" : "none");
    expect(worst <= 1e-5 && copy_ok, what);
}

int main(void) {
    g_rng = 0x2545F4914F6CDD1Dull; /* this test's inputs since it was written */
    printf("| %-72s | result |\n", "multi-tensor AdamW on the CPU emulator");
    printf("|--------------------------------------------------------------------------|--------|\n");
    for (bool s : {false, true}) {
        run<float>(s);
        run<kn_bf16>(s);
        run<kn_f16>(s);
    }
    printf("test_adamw_emu: %d checks, %d failures\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
