/* test_plan_kernels.c - the memory plan's GPU rows against what the CUDA
 * kernels and the optimizer ask for, over a grid of shapes (CPU only: the
 * kernels' sizes come from kernels/kn_cuda_size.h, plain C).
 *
 * For each model (tiny, d12, d24 and odd shapes), T, B, precision and
 * recompute level, tr_plan (device cuda, B forced) must show:
 *  - "kernel scratch (largest backward op)" = the largest scratch any
 *    backward kernel the GPU model launches asks for at that shape, each
 *    taken from the kernel's own size function: the encoder backward over
 *    B*T ids, LayerNorm backward (B*T, C) (ln1, ln2, lnf), the matmul bias
 *    gradients of qkv (3C), the attention projection (C), fc (4C) and the fc
 *    projection (C) (the tied lm head has none), attention backward
 *    (B, T, NH) and the gradient norm over every parameter;
 *  - "cuBLAS workspace" = KN_CUBLASLT_WORKSPACE, the workspace the GPU model
 *    hands cuBLASLt;
 *  - the optimizer's row (its plan_row / plan_row_shard) = its state bytes
 *    (n_state x state_bytes x the parameters, or the rank's shard).
 * The list of launches is written out here, apart from the planner's
 * composition (tr_model_gpu_scratch_bytes), so a planner that drops or
 * mis-sizes one of them fails, and so does one that keeps its own copy of a
 * kernel's formula while the kernel's layout constant changes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kn_cuda_size.h"
#include "model.h"
#include "optim.h"
#include "test_check.h"
#include "tr.h"

static const tr_plan_item *row(const tr_plan_out *o, const char *name) {
    for (int i = 0; i < o->n_items; i++)
        if (!strcmp(o->items[i].name, name)) return &o->items[i];
    return NULL;
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* What the GPU model's backward kernels ask for at (B, T): the calls of
 * train/gpu_model.cu's fwd_bwd and step, shape by shape. */
static size_t kernels_scratch(const tr_model_config *c, size_t B, size_t T) {
    size_t N = B * T, C = (size_t)c->d_model, s = 0;
    s = max_sz(s, kn_encoder_backward_scratch_bytes(N));       /* dwte, dwpe */
    s = max_sz(s, kn_layernorm_backward_scratch_bytes(N, C));  /* ln1, ln2, lnf */
    s = max_sz(s, kn_matmul_backward_scratch_bytes(N, 3 * C)); /* qkv */
    s = max_sz(s, kn_matmul_backward_scratch_bytes(N, C));     /* attention projection */
    s = max_sz(s, kn_matmul_backward_scratch_bytes(N, 4 * C)); /* fc */
    s = max_sz(s, kn_matmul_backward_scratch_bytes(N, C));     /* fc projection */
    s = max_sz(s, kn_attention_backward_scratch_bytes(B, T, (size_t)c->n_head));
    s = max_sz(s, kn_sumsq_scratch_bytes(tr_model_param_count(c))); /* gradient norm */
    return s;
}

typedef struct {
    const char *name;
    int L, NH, C, V;
} shape;

/* One GPU plan at (B forced, T, precision, recompute, world): its rows
 * against the kernels and the optimizer. Returns 1 when it was planned. */
static int check_plan(const shape *s, int T, int B, tr_precision prec, int rc, int world, const tr_optim_ops *opt) {
    tr_plan_in in;
    memset(&in, 0, sizeof in);
    in.n_layer = s->L;
    in.n_head = s->NH;
    in.n_embd = s->C;
    in.vocab_size = (uint32_t)s->V;
    in.seq_len = T;
    in.max_seq = T;
    in.batch_tokens = (uint64_t)B * (uint64_t)T * (uint64_t)world;
    in.device = TR_DEV_CUDA;
    in.precision = prec;
    in.recompute = rc;
    in.force_micro_rows = B;
    in.world = world;
    in.zero = world > 1;
    tr_plan_out o;
    int prc = tr_plan(&in, &o);
    CHECK(prc == TR_OK, "%s T=%d B=%d: tr_plan %d (%s)", s->name, T, B, prc, o.reason);
    if (prc != TR_OK) return 0;
    tr_model_config mc;
    CHECK(tr_model_config_make(s->L, s->NH, s->C, T, s->V, &mc) == TR_MODEL_OK);
    const tr_plan_item *ks = row(&o, "kernel scratch (largest backward op)");
    size_t want = kernels_scratch(&mc, (size_t)B, (size_t)T);
    CHECK(ks && ks->bytes == want, "%s T=%d B=%d %s rc%d: the plan's kernel scratch %" PRIu64 ", the kernels ask %zu",
          s->name, T, B, tr_precision_name(prec), rc, ks ? ks->bytes : 0, want);
    const tr_plan_item *ws = row(&o, "cuBLAS workspace");
    CHECK(ws && ws->bytes == KN_CUBLASLT_WORKSPACE, "%s: cuBLAS workspace %" PRIu64, s->name, ws ? ws->bytes : 0);
    /* a rank's state: ceil(P / world) elements with ZeRO-1 */
    uint64_t P = o.params, sh = world > 1 ? P / (uint64_t)world + (P % (uint64_t)world != 0) : P;
    const tr_plan_item *os = row(&o, world > 1 ? opt->plan_row_shard : opt->plan_row);
    CHECK(os && os->bytes == tr_optim_state_bytes(opt, sh) && !strcmp(os->where, "device"),
          "%s world %d: optimizer row %" PRIu64 ", state %" PRIu64, s->name, world, os ? os->bytes : 0,
          tr_optim_state_bytes(opt, sh));
    return 1;
}

int main(void) {
    const shape shapes[] = {
        {"tiny", 2, 2, 64, 512}, {"d12", 12, 12, 768, 50257},       {"d24", 24, 16, 1024, 50257},
        {"odd", 3, 3, 96, 1000}, {"wide-vocab", 2, 4, 128, 200019},
    };
    const int Ts[] = {16, 63, 64, 255, 1024};
    const int Bs[] = {1, 2, 3, 7, 16, 33};
    const tr_optim_ops *opt = tr_optim_layout_default();
    int n = 0;
    CHECK(opt && opt->n_state >= 1 && opt->state_bytes >= 1, "no optimizer layout");
    if (!opt) return 1;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
            for (size_t bi = 0; bi < sizeof Bs / sizeof Bs[0]; bi++)
                for (int prec = TR_FP32; prec <= TR_FP16; prec++)
                    for (int rc = 0; rc <= 2; rc++)
                        for (int world = 1; world <= 4; world += 3)
                            n += check_plan(&shapes[si], Ts[ti], Bs[bi], (tr_precision)prec, rc, world, opt);
    /* the CPU plan's optimizer row: the host model's state (tr_optim_host_init) */
    {
        tr_plan_in in;
        memset(&in, 0, sizeof in);
        in.n_layer = 2, in.n_head = 2, in.n_embd = 64, in.vocab_size = 512, in.seq_len = 64, in.max_seq = 64;
        in.device = TR_DEV_CPU;
        in.force_micro_rows = 2;
        tr_plan_out o;
        CHECK(tr_plan(&in, &o) == TR_OK);
        const tr_plan_item *os = row(&o, opt->plan_row);
        CHECK(os && os->bytes == tr_optim_state_bytes(opt, o.params) && !strcmp(os->where, "host"),
              "CPU optimizer row %" PRIu64, os ? os->bytes : 0);
    }
    printf("test_plan_kernels: %d plans checked (kernel scratch, cuBLAS workspace, %s state rows): %s\n", n, opt->name,
           failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
