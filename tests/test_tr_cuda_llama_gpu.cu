/* test_tr_cuda_llama_gpu.cu - the GPU Llama model (train/gpu_llama.h)
 * against the CPU reference model (train/llama_model.h, itself checked
 * against transformers by test_llama_model): the tensor table (names,
 * sizes, tr_llama offsets), the mean loss, every parameter gradient, a
 * bit-exact repeat, the clipped gradient norm and the parameters after one
 * AdamW step (the C reference's AdamW on the GPU's gradients).
 *
 * Configs: GQA (4 heads over 2 KV heads) untied; multi-query (KV 1) with
 * Qwen2's q/k/v biases (the stacked layout's permutation), tied embeddings
 * and Llama 3 rope_scaling; head size 128 (2 heads, 2 KV heads). Each in
 * fp32 (loss 1e-5, gradients 1e-4, parameters 1e-5) and bf16 (1e-2, 1e-1,
 * 1e-2: the GPT-2 model test's bars), with and without a document mask
 * (positions restarting per document). Every mode also evaluates
 * (grad_scale 0: forward only) and requires the training call's loss bit
 * for bit and the gradients untouched; the " chunk40" modes run the lm head
 * in chunks of 40 rows (MKS_LMHEAD_CHUNK=40: 135 rows are 40 + 40 + 40 + 15,
 * the last chunk short). Label gpu; exit 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "gpu_llama.h"
#include "kn.h"
#include "llama_model.h"
}

#include "gpu_model_check.h" /* relerr, check_row, g_fails */

static void row(const char *what, const char *mode, double rel, double l2, double tol) {
    check_row(52, 22, what, mode, rel, l2, tol);
}

static uint64_t g_s = 0x9E3779B97F4A7C15ull;
static float urnd(void) {
    g_s = g_s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_s >> 40) * (1.0 / 16777216.0));
}

static const char *g_extra = ""; /* " chunk40" while MKS_LMHEAD_CHUNK=40 is set */

static void run(const char *name, tr_llama_config cfg, kn_dtype dt, bool docmask) {
    char mode[64];
    snprintf(mode, sizeof mode, "%s %s%s%s", name, dt == KN_BF16 ? "bf16" : "fp32", docmask ? " doc" : "", g_extra);
    const bool lowp = dt != KN_F32;
    tr_llama *cpu = NULL;
    if (tr_llama_create(&cfg, &cpu) != 0) {
        printf("tr_llama_create failed (%s)\n", mode);
        g_fails++;
        return;
    }
    /* parameters: matrices 0.05 N(0,1)-ish uniform, norm weights around 1, biases small */
    for (int i = 0; i < tr_llama_n_tensors(cpu); i++) {
        const char *nm = tr_llama_tensor_name(cpu, i);
        size_t n = 0;
        float *p = tr_llama_param(cpu, nm, &n);
        bool norm = strstr(nm, "norm") != NULL, bias = strstr(nm, ".bias") != NULL;
        for (size_t k = 0; k < n; k++)
            p[k] = norm ? 1.0f + 0.2f * (urnd() - 0.5f) : (bias ? 0.1f : 0.17f) * (2.0f * urnd() - 1.0f);
    }
    const float *p0 = tr_llama_param(cpu, tr_llama_tensor_name(cpu, 0), NULL); /* the buffer's start */
    int B = 3, T = 45, N = B * T;
    std::vector<uint32_t> in(N);
    std::vector<int32_t> tg(N), pos(N), doc(N);
    for (int b = 0; b < B; b++) {
        int d = 0, p = 0;
        for (int t = 0; t < T; t++) {
            int i = b * T + t;
            in[i] = (uint32_t)(urnd() * cfg.vocab) % (uint32_t)cfg.vocab;
            tg[i] = (int32_t)(urnd() * cfg.vocab) % cfg.vocab;
            if (urnd() < 0.1f) tg[i] = -1;
            if (docmask && t > 0 && urnd() < 0.08f) d++, p = 0;
            doc[i] = d;
            pos[i] = docmask ? p++ : t;
        }
    }
    int ntg = 0;
    for (int i = 0; i < N; i++) ntg += tg[i] >= 0;
    double closs = 0;
    if (tr_llama_fwd_bwd(cpu, B, T, in.data(), tg.data(), docmask ? pos.data() : NULL, docmask ? doc.data() : NULL,
                         NULL, &closs) != 0) {
        printf("cpu fwd_bwd failed (%s)\n", mode);
        g_fails++;
        tr_llama_free(cpu);
        return;
    }
    const float *g0 = tr_llama_grad(cpu, tr_llama_tensor_name(cpu, 0), NULL);

    tr_plan_out po;
    memset(&po, 0, sizeof po);
    po.n_items = 2;
    po.items[0].name = "model";
    po.items[0].bytes = tr_cuda_llama_arena_bytes(&cfg, B, T, dt, NULL);
    po.items[0].where = "device";
    po.items[1].name = "batch";
    po.items[1].bytes = (uint64_t)N * 16;
    po.items[1].where = "device";
    tr_cuda_arena a;
    if (!po.items[0].bytes || tr_cuda_arena_create(&a, &po) != TR_OK) {
        printf("arena (%s): %zu bytes\n", mode, (size_t)po.items[0].bytes);
        g_fails++;
        tr_llama_free(cpu);
        return;
    }
    cudaStream_t st;
    cudaStreamCreate(&st);
    uint32_t *d_in = (uint32_t *)tr_cuda_arena_take(&a, N * 4, "inputs");
    int32_t *d_tg = (int32_t *)tr_cuda_arena_take(&a, N * 4, "targets");
    int32_t *d_pos = (int32_t *)tr_cuda_arena_take(&a, N * 4, "pos");
    int32_t *d_doc = (int32_t *)tr_cuda_arena_take(&a, N * 4, "doc");
    tr_cuda_llama *g = NULL;
    int rc = tr_cuda_llama_create(&g, &cfg, B, T, dt, &a, st, NULL);
    if (rc != TR_OK || !d_doc) {
        printf("tr_cuda_llama_create (%s): %d (%s; %s)\n", mode, rc, a.last_error, kn_cuda_last_error());
        g_fails++;
        cudaStreamDestroy(st);
        tr_cuda_arena_destroy(&a);
        tr_llama_free(cpu);
        return;
    }
    tr_cuda_arena_seal(&a);
    /* the table: every tr_llama tensor once, at its tr_llama offset */
    size_t P = tr_cuda_llama_num_params(g);
    bool table_ok = tr_cuda_llama_n_tensors(g) == tr_llama_n_tensors(cpu);
    size_t total = 0;
    for (int i = 0; table_ok && i < tr_cuda_llama_n_tensors(g); i++) {
        size_t co = 0, n = 0, cn = 0;
        const char *nm = tr_cuda_llama_tensor(g, i, &co, NULL, &n, NULL);
        const float *cp = tr_llama_param(cpu, nm, &cn);
        table_ok = cp && cn == n && (size_t)(cp - p0) == co;
        total += n;
    }
    table_ok = table_ok && total == P;
    printf("| %-52s | %-22s | %9s | %9s | %7s | %s |\n", "tensor table = tr_llama's names, sizes, offsets", mode, "-",
           "-", "0", table_ok ? "PASS" : "FAIL");
    if (!table_ok) g_fails++;
    cudaMemcpy(d_in, in.data(), N * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d_tg, tg.data(), N * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d_pos, pos.data(), N * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d_doc, doc.data(), N * 4, cudaMemcpyHostToDevice);
    tr_cuda_llama_set_params(g, p0);
    double gloss = 0;
    uint64_t gn = 0;
    const float gs = 1.0f / (float)ntg;
    rc = tr_cuda_llama_fwd_bwd(g, B, T, d_in, d_tg, docmask ? d_pos : NULL, docmask ? d_doc : NULL, gs, &gloss, &gn);
    if (rc != TR_OK || !table_ok) {
        if (rc != TR_OK) printf("gpu fwd_bwd (%s): %d (%s)\n", mode, rc, kn_cuda_last_error());
        g_fails++;
    } else {
        std::vector<float> gg(P), again(P);
        tr_cuda_llama_get(g, NULL, gg.data());
        double gl2 = 0;
        tr_cuda_llama_zero_grad(g);
        tr_cuda_llama_fwd_bwd(g, B, T, d_in, d_tg, docmask ? d_pos : NULL, docmask ? d_doc : NULL, gs, &gl2, NULL);
        tr_cuda_llama_get(g, NULL, again.data());
        bool same = gl2 == gloss && !memcmp(again.data(), gg.data(), P * 4);
        if (!same) g_fails++;
        printf("| %-52s | %-22s | %9s | %9s | %7s | %s |\n", "bit-exact repeat", mode, "-", "-", "0",
               same ? "PASS" : "FAIL");
        /* evaluation (tr_gpu_eval's call, grad_scale 0): forward only, the training call's loss and
         * target count, the gradients untouched */
        {
            double eloss = -1;
            uint64_t en = 0;
            std::vector<float> kept(P);
            int erc = tr_cuda_llama_fwd_bwd(g, B, T, d_in, d_tg, docmask ? d_pos : NULL, docmask ? d_doc : NULL, 0.0f,
                                            &eloss, &en);
            tr_cuda_llama_get(g, NULL, kept.data());
            bool eok = erc == TR_OK && eloss == gloss && en == gn && !memcmp(kept.data(), again.data(), P * 4);
            if (!eok) {
                printf("eval (%s): rc %d, loss %.9g vs %.9g, targets %llu vs %llu\n", mode, erc, eloss, gloss,
                       (unsigned long long)en, (unsigned long long)gn);
                g_fails++;
            }
            printf("| %-52s | %-22s | %9s | %9s | %7s | %s |\n", "eval: loss, grads kept", mode, "-", "-", "0",
                   eok ? "PASS" : "FAIL");
        }
        float lc = (float)closs, lg = (float)(gloss / (gn ? gn : 1));
        double l2 = 0, rel = relerr(&lg, &lc, 1, &l2);
        row("loss (mean)", mode, rel, l2, lowp ? 1e-2 : 1e-5);
        if ((int)gn != ntg) {
            printf("target count %llu vs %d\n", (unsigned long long)gn, ntg);
            g_fails++;
        }
        for (int i = 0; i < tr_cuda_llama_n_tensors(g); i++) {
            size_t co = 0, n = 0;
            const char *nm = tr_cuda_llama_tensor(g, i, &co, NULL, &n, NULL);
            char w[128];
            snprintf(w, sizeof w, "grad %s", nm);
            rel = relerr(gg.data() + co, g0 + co, n, &l2);
            row(w, mode, rel, l2, lowp ? 1e-1 : 1e-4);
        }
        /* one clipped AdamW step: the references (kn_clip_grad_norm_ref, kn_adamw_step_ref per
         * tensor with its decay flag) on the GPU's own gradients, so only clip + AdamW are compared */
        tr_optim_hparams h = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
        float cnorm = 0, gnorm = 0;
        std::vector<float> rp(p0, p0 + P), rg(gg), mm(P, 0.0f), vv(P, 0.0f);
        kn_clip_grad_norm_ref(rg.data(), P, 0.5f, &cnorm);
        for (int i = 0; i < tr_cuda_llama_n_tensors(g); i++) {
            size_t co = 0, n = 0;
            int decay = 0;
            tr_cuda_llama_tensor(g, i, &co, NULL, &n, &decay);
            kn_adamw_step_ref(rp.data() + co, rg.data() + co, mm.data() + co, vv.data() + co, n, h.lr, h.beta1, h.beta2,
                              h.eps, h.weight_decay, decay, 1);
        }
        tr_cuda_llama_zero_grad(g); /* the step's gradients: gg again */
        tr_cuda_llama_fwd_bwd(g, B, T, d_in, d_tg, docmask ? d_pos : NULL, docmask ? d_doc : NULL, gs, NULL, NULL);
        if (tr_cuda_llama_step(g, &h, 1, 0.5f, &gnorm) != TR_OK) {
            printf("gpu step (%s): %s\n", mode, kn_cuda_last_error());
            g_fails++;
        } else {
            rel = relerr(&gnorm, &cnorm, 1, &l2);
            row("grad norm", mode, rel, l2, 1e-5);
            std::vector<float> gp(P);
            tr_cuda_llama_get(g, gp.data(), NULL);
            rel = relerr(gp.data(), rp.data(), P, &l2);
            row("params after clipped AdamW", mode, rel, l2, 1e-5);
        }
    }
    tr_cuda_llama_destroy(g);
    cudaStreamDestroy(st);
    tr_cuda_arena_destroy(&a);
    tr_llama_free(cpu);
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("test_tr_cuda_llama_gpu: no CUDA device: skipped\n");
        return 77;
    }
    printf("| %-52s | %-22s | %-9s | %-9s | %-7s | result |\n", "what", "mode", "max-rel", "l2-rel", "tol");
    tr_llama_config gqa = {2, 4, 2, 256, 344, 300, 64, 10000.0f, 1e-5f, {0, 0, 0, 0}, 0, 0};
    tr_llama_config qwen = {2, 4, 1, 256, 344, 300, 64, 500000.0f, 1e-6f, {8.0f, 1.0f, 4.0f, 8192}, 1, 1};
    tr_llama_config hd128 = {2, 2, 2, 256, 300, 300, 64, 10000.0f, 1e-5f, {0, 0, 0, 0}, 0, 0};
    const kn_dtype dts[2] = {KN_F32, KN_BF16};
    for (int i = 0; i < 2; i++) {
        run("gqa", gqa, dts[i], false);
        run("gqa", gqa, dts[i], true);
        run("mqa+bias tied l3", qwen, dts[i], false);
        run("mqa+bias tied l3", qwen, dts[i], true);
        run("hd128", hd128, dts[i], true);
    }
    /* the lm head in row chunks (MKS_LMHEAD_CHUNK, read when a model is created; written without a
     * GPU: these rows are its first check): 40 rows of N = 135, the last chunk 15; untied (the head's
     * own gradient) and tied (the embedding's, completed by the embedding backward) */
    setenv("MKS_LMHEAD_CHUNK", "40", 1);
    g_extra = " chunk40";
    for (int i = 0; i < 2; i++) {
        run("gqa", gqa, dts[i], false);
        run("mqa+bias tied l3", qwen, dts[i], true);
    }
    unsetenv("MKS_LMHEAD_CHUNK");
    g_extra = "";
    printf("\n%s (%d failed)\n", g_fails ? "FAIL" : "PASS", g_fails);
    return g_fails ? 1 : 0;
}
