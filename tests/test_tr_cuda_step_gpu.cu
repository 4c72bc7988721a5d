/* test_tr_cuda_step_gpu.cu - the GPU step as a whole (issue 31 item 3)
 * through the GPU session (train/gpu_session.h), for GPT-2 and the Llama
 * family: 3 optimizer steps of 2 micro-batches each (the last one short,
 * 1 row fewer), run
 *   read   each micro-batch's loss read back (the path before: a wait per
 *          micro-step, the host sums the losses),
 *   eager  the loss summed on the device, read once per step,
 *   multi  + MKS_ADAMW_MULTI=1 (one AdamW launch over the tensor table),
 *   graph  + MKS_CUDA_GRAPH=1 (forward + backward as a replayed graph),
 *   both   multi and graph,
 * and every step's loss sum, target count and gradient norm, and the
 * parameters and optimizer state after the last step, must be the same
 * BITS in all five (fp32, bf16 with the document mask; GPT-2 also fp16
 * with a loss scale changed between steps: the graph's dloss factor
 * updated in place).
 * The graph runs must have captured and replayed (not silently fallen back).
 * Label gpu; exit 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "family.h"
#include "gpu_session.h"
#include "model.h"
#include "optim.h"
#include "tr.h"
}

static int g_fails = 0;

enum { MODE_READ, MODE_EAGER, MODE_MULTI, MODE_GRAPH, MODE_BOTH, N_MODES };
static const char *const mode_name[N_MODES] = {"read", "eager", "multi", "graph", "both"};
enum { STEPS = 3, MICRO = 2, B = 3, T = 32 };

struct result {
    bool ok = false;
    double loss[STEPS] = {0};
    uint64_t ntgt[STEPS] = {0};
    float gnorm[STEPS] = {0};
    std::vector<float> params, state0, state1;
    uint64_t graphs[3] = {0, 0, 0};
};

struct host_batch {
    std::vector<uint32_t> in;
    std::vector<int32_t> tg, pos, seg;
    tr_batch b;
};

static void make_batch(host_batch *h, int rows, int vocab, uint64_t seed, bool doc) {
    int n = rows * T;
    h->in.resize(n);
    h->tg.resize(n);
    h->pos.resize(n);
    h->seg.resize(n);
    uint64_t s = seed;
    for (int r = 0; r < rows; r++) {
        int d = 0, p = 0;
        for (int t = 0; t < T; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int i = r * T + t;
            h->in[i] = (uint32_t)((s >> 33) % (uint64_t)vocab);
            h->tg[i] = (s >> 50) % 7 == 0 ? -1 : (int32_t)((s >> 13) % (uint64_t)vocab);
            if (doc && t > 0 && (s >> 40) % 11 == 0) d++, p = 0;
            h->seg[i] = d;
            h->pos[i] = doc ? p++ : t;
        }
    }
    memset(&h->b, 0, sizeof h->b);
    h->b.rows = rows;
    h->b.T = T;
    h->b.inputs = h->in.data();
    h->b.targets = h->tg.data();
    h->b.pos = h->pos.data();
    h->b.seg = h->seg.data();
}

static void set_mode_env(int mode) {
    setenv("MKS_ADAMW_MULTI", mode == MODE_MULTI || mode == MODE_BOTH ? "1" : "0", 1);
    setenv("MKS_CUDA_GRAPH", mode == MODE_GRAPH || mode == MODE_BOTH ? "1" : "0", 1);
    unsetenv("MKS_ADAMW_PER_TENSOR");
}

static result run_mode(const tr_model_config *cfg, tr_precision prec, bool doc, int mode, const char *tag) {
    result r;
    set_mode_env(mode);
    size_t P = tr_model_param_count(cfg);
    std::vector<float> init(P);
    uint64_t s = 0xC0FFEE;
    for (size_t i = 0; i < P; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        init[i] = ((float)((s >> 40) & 0xFFFF) / 65536.0f - 0.5f) * 0.1f;
    }
    tr_gpu *g = NULL;
    char err[1024] = "";
    uint64_t ab = 0;
    if (tr_gpu_open(&g, cfg, B, T, prec, NULL, init.data(), &ab, err, sizeof err, 0, NULL) != TR_OK) {
        printf("%s %s: tr_gpu_open: %s\n", tag, mode_name[mode], err);
        g_fails++;
        return r;
    }
    const tr_optim_ops *opt = tr_optim_default();
    tr_optim_hparams h = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
    host_batch hb[STEPS][MICRO];
    for (int st = 0; st < STEPS; st++)
        for (int mi = 0; mi < MICRO; mi++)
            make_batch(&hb[st][mi], mi == MICRO - 1 ? B - 1 : B, cfg->vocab, 0x1234 + 977 * (uint64_t)(st * MICRO + mi),
                       doc);
    bool ok = true;
    for (int st = 0; st < STEPS && ok; st++) {
        if (prec == TR_FP16 && st == 2) {
            /* a new loss scale between steps (as after an overflow): every
             * mode gets it; the graph modes must update their dloss factor */
            std::vector<float> p(P), m0(P), m1(P);
            void *stv[TR_OPTIM_MAX_STATE] = {m0.data(), m1.data()};
            uint64_t extra[TR_GPU_EXTRA];
            ok = tr_gpu_get_state(g, p.data(), stv, extra) == TR_OK;
            float sc;
            uint32_t bits = (uint32_t)extra[0];
            memcpy(&sc, &bits, 4);
            sc *= 0.5f;
            memcpy(&bits, &sc, 4);
            extra[0] = bits;
            ok = ok && tr_gpu_set_state(g, p.data(), stv, extra, 0) == TR_OK;
        }
        ok = ok && tr_gpu_zero_grad(g) == TR_OK;
        double lsum = 0;
        uint64_t ksum = 0;
        for (int mi = 0; mi < MICRO && ok; mi++) {
            double l = 0, w = 0;
            uint64_t k = 0;
            ok = tr_gpu_micro(g, NULL, &hb[st][mi].b, doc, mode == MODE_READ ? &l : NULL, &k, &w, err, sizeof err) ==
                 TR_OK;
            lsum += l;
            ksum += k;
        }
        if (ok && mode != MODE_READ) {
            uint64_t kdev = 0;
            ok = tr_gpu_step_loss(g, &lsum, &kdev) == TR_OK;
            if (ok && kdev != ksum) {
                printf("%s %s step %d: the host's target count %llu, the device's %llu\n", tag, mode_name[mode], st,
                       (unsigned long long)ksum, (unsigned long long)kdev);
                g_fails++;
            }
        }
        int skipped = 0;
        float scale = 0;
        ok = ok && tr_gpu_step(g, &h, 1.0f, ksum, &r.gnorm[st], &skipped, &scale, err, sizeof err) == TR_OK;
        r.loss[st] = lsum;
        r.ntgt[st] = ksum;
        if (ok && skipped) {
            printf("%s %s step %d: skipped (non-finite gradient)\n", tag, mode_name[mode], st);
            g_fails++;
        }
    }
    if (!ok) {
        printf("%s %s: failed: %s\n", tag, mode_name[mode], err[0] ? err : tr_gpu_last_error());
        g_fails++;
        tr_gpu_close(g);
        return r;
    }
    r.params.resize(P);
    r.state0.resize(P);
    r.state1.resize(P);
    void *stv[TR_OPTIM_MAX_STATE] = {r.state0.data(), opt->n_state > 1 ? r.state1.data() : NULL};
    uint64_t extra[TR_GPU_EXTRA];
    r.ok = tr_gpu_get_state(g, r.params.data(), stv, extra) == TR_OK;
    tr_gpu_graph_counts(g, r.graphs);
    /* 6 micro-steps over 2 device batches x (3 rows, 2 rows): 2 captures, 4
     * replays; fp16: the new factor of step 3 captured again (2 more,
     * each an in-place update where the graph allows it), 2 replays */
    const uint64_t want_cap = prec == TR_FP16 ? 4 : 2, want_rep = prec == TR_FP16 ? 2 : 4;
    if ((mode == MODE_GRAPH || mode == MODE_BOTH) &&
        (!tr_gpu_graph_active(g) || r.graphs[0] != want_cap || r.graphs[1] != want_rep)) {
        printf("%s %s: the graphs were not used as expected (active %d, %llu captures, %llu replays, %llu updates; "
               "expected %llu and %llu)\n",
               tag, mode_name[mode], tr_gpu_graph_active(g), (unsigned long long)r.graphs[0],
               (unsigned long long)r.graphs[1], (unsigned long long)r.graphs[2], (unsigned long long)want_cap,
               (unsigned long long)want_rep);
        g_fails++;
    }
    tr_gpu_close(g);
    return r;
}

static size_t first_diff(const std::vector<float> &a, const std::vector<float> &b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) return i;
    return (size_t)-1;
}

static void compare(const char *tag, const result *r) {
    for (int m = 0; m < N_MODES; m++) {
        if (m == MODE_EAGER) continue; /* the reference: "read" (the switch back) and the others against it */
        const result &a = r[MODE_EAGER], &b = r[m];
        const char *what = NULL;
        size_t at = (size_t)-1;
        char where[256] = "";
        if (!a.ok || !b.ok) what = "a run failed";
        for (int st = 0; !what && st < STEPS; st++) {
            if (memcmp(&a.loss[st], &b.loss[st], sizeof(double)) || a.ntgt[st] != b.ntgt[st]) what = "loss sum";
            else if (memcmp(&a.gnorm[st], &b.gnorm[st], sizeof(float))) what = "gradient norm";
            if (what)
                snprintf(where, sizeof where, " at step %d (%.17g vs %.17g; norm %.9g vs %.9g)", st, a.loss[st],
                         b.loss[st], (double)a.gnorm[st], (double)b.gnorm[st]);
        }
        if (!what && (at = first_diff(a.params, b.params)) != (size_t)-1) what = "parameters";
        if (!what && (at = first_diff(a.state0, b.state0)) != (size_t)-1) what = "optimizer state 0";
        if (!what && (at = first_diff(a.state1, b.state1)) != (size_t)-1) what = "optimizer state 1";
        if (what && at != (size_t)-1) snprintf(where, sizeof where, " at element %zu", at);
        printf("| %-18s | eager vs %-5s | %-40s | %s |\n", tag, mode_name[m],
               what ? what : "losses, norms, params, state: same bits", what ? "FAIL" : "PASS");
        if (what) {
            printf("  %s differs%s\n", what, where);
            g_fails++;
        }
    }
    printf("|   (graphs: %llu captures, %llu replays, %llu updates in the 'both' run; losses %.6f %.6f %.6f)\n",
           (unsigned long long)r[MODE_BOTH].graphs[0], (unsigned long long)r[MODE_BOTH].graphs[1],
           (unsigned long long)r[MODE_BOTH].graphs[2],
           r[MODE_EAGER].ntgt[0] ? r[MODE_EAGER].loss[0] / r[MODE_EAGER].ntgt[0] : 0.0,
           r[MODE_EAGER].ntgt[1] ? r[MODE_EAGER].loss[1] / r[MODE_EAGER].ntgt[1] : 0.0,
           r[MODE_EAGER].ntgt[2] ? r[MODE_EAGER].loss[2] / r[MODE_EAGER].ntgt[2] : 0.0);
}

static void family(const char *spec, tr_precision prec, bool doc) {
    tr_model_config cfg;
    char err[256];
    if (tr_family_model(spec, 300, 64, &cfg, err, sizeof err) != TR_OK) {
        printf("%s: %s\n", spec, err);
        g_fails++;
        return;
    }
    char tag[64];
    snprintf(tag, sizeof tag, "%s %s%s", spec,
             prec == TR_FP32   ? "fp32"
             : prec == TR_BF16 ? "bf16"
                               : "fp16",
             doc ? " doc" : "");
    result r[N_MODES];
    for (int m = 0; m < N_MODES; m++) r[m] = run_mode(&cfg, prec, doc, m, tag);
    compare(tag, r);
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("test_tr_cuda_step_gpu: no CUDA device: skipped\n");
        return 77;
    }
    unsetenv("MKS_SYNC_DEBUG");
    printf("| %-18s | %-14s | %-40s | result |\n", "model", "runs", "what");
    printf("|--------------------|----------------|------------------------------------------|--------|\n");
    for (const char *spec : {"tiny", "llama-tiny"}) {
        family(spec, TR_FP32, false);
        family(spec, TR_BF16, true);
    }
    /* fp16 (the changed dloss factor) on GPT-2 only: the GPU Llama model's
     * fp16 path has no test of its own yet (test_tr_cuda_llama_gpu: fp32, bf16) */
    family("tiny", TR_FP16, false);
    unsetenv("MKS_ADAMW_MULTI");
    unsetenv("MKS_CUDA_GRAPH");
    printf("test_tr_cuda_step_gpu: %s\n", g_fails ? "FAILED" : "PASS");
    return g_fails ? 1 : 0;
}
