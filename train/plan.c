/* plan.c - the memory planner: a pure function from (model, T, budgets,
 * device, precision, recompute) to an exact byte table and the largest
 * micro-batch that fits. docs/memory-plan.md documents every line; the CPU
 * lines are exactly what train/model.c and train/loader.c allocate (the
 * model's own tr_model_memory), the GPU lines are the layout the CUDA
 * backend carves out of its single device arena (train/gpu_model.cu: the
 * kernel scratch from the kernels' own size functions, kernels/kn_cuda_size.h).
 * The optimizer's rows come from its table (train/optim.h). */
#include "tr.h"

#include <inttypes.h>
#include <string.h>

#include "comm.h"
#include "dp.h"
#include "family.h"
#include "gpu_lmhead.h"
#include "kn_cuda_size.h"
#include "model.h"
#include "optim.h"

/* Fixed CPU-side costs that are not model tensors (see docs/memory-plan.md);
 * the kernels' per-thread workspace is the family's (tr_model_mem.kernel_ws). */
/* Process runtime that appears after the trainer starts allocating, per
 * kernel thread: thread stack pages, malloc arena headroom and code pages
 * first touched by the kernels. Calibrated against VmHWM
 * (test_trainer_rss; 0.37 MiB with 1 thread, 0.84 MiB with 2). */
#define TR_PLAN_CPU_RUNTIME_PER_THREAD (448u * 1024u)
#define TR_PLAN_CUDA_CTX (512ull << 20) /* CUDA context + kernels image, outside the arena */
#define TR_PLAN_GIB (1024ull * 1024 * 1024)
#define TR_PLAN_INPUT_SLOTS 2            /* gpu_arena.h TR_CUDA_INPUT_SLOTS: two device batches */
#define TR_PLAN_CUDA_LATE (256ull << 20) /* mapped after the probe + margin (tr_plan_device_capacity) */

uint64_t tr_plan_device_capacity(uint64_t free_bytes) {
    uint64_t c = free_bytes + TR_PLAN_CUDA_CTX;
    return c > TR_PLAN_CUDA_LATE ? c - TR_PLAN_CUDA_LATE : 0;
}

static void item(tr_plan_out *o, const char *name, uint64_t fixed, uint64_t per_row, int B, const char *where) {
    if (o->n_items >= TR_PLAN_MAX_ITEMS) return;
    tr_plan_item *it = &o->items[o->n_items++];
    it->name = name;
    it->per_row = per_row * (uint64_t)B;
    it->bytes = fixed + it->per_row;
    it->where = where;
}

static uint64_t dtype_bytes(tr_precision p) { return p == TR_FP32 ? 4 : 2; }

static uint64_t world_of(const tr_plan_in *in) { return in->world > 1 ? (uint64_t)in->world : 1; }

/* Elements of P a rank holds when sharded over the world (ZeRO-1): the
 * shard of train/comm.h, ceil(P / world). */
static uint64_t shard_of(const tr_plan_in *in, uint64_t P) {
    uint64_t w = world_of(in);
    return in->zero ? P / w + (P % w != 0) : P;
}

/* ZeRO-1 on the CPU: elements of the largest rank's shard, in the layout
 * train/dist.c shards by (tr_dp_zero_shard, train/dp.h: whole parts of the
 * gradient norm's TR_DP_NORM_PARTS). */
static uint64_t cpu_zero_shard(uint64_t P, int W) {
    uint64_t most = 0;
    for (int r = 0; r < W; r++) {
        size_t lo, hi;
        tr_dp_zero_shard((size_t)P, W, r, &lo, &hi);
        if (hi - lo > most) most = hi - lo;
    }
    return most;
}

/* Data-parallel lines (train/comm.h; the NCCL engine, train/comm_nccl.cu):
 * the host communicator's all-reduce bucket (TR_COMM_DEFAULT_BUCKET floats,
 * CPU and GPU runs: the GPU run bootstraps NCCL over it); NCCL's own channel buffers
 * (GPU, outside the arena): an estimate, 32 channels x 2 ring links x the
 * default NCCL_BUFFSIZE of 4 MiB. */
#define TR_PLAN_COMM_BUCKET_BYTES (4ull << 20)
#define TR_PLAN_NCCL_BUFFERS (32ull * 2 * (4ull << 20))

/* What the CPU and GPU tables share for one B. */
typedef struct {
    uint64_t T, L, C, NH, Vp, P;
    /* one loader buffer of B rows: tr_loader_buffer_bytes rounds each array
     * to 64 bytes, so it is evaluated for B directly (not linear), spread as
     * a fixed part */
    uint64_t lbB;
    int nbuf;
    const tr_optim_ops *opt;
} plan_dims;

/* The CPU table (the host model itself, backend_cpu.c); returns the host total. */
static uint64_t eval_cpu(const tr_plan_in *in, const tr_model_config *mc, const plan_dims *d, int B, tr_plan_out *o,
                         int force_acc) {
    uint64_t T = d->T, L = d->L, C = d->C, NH = d->NH, P = d->P;
    const tr_optim_ops *opt = d->opt;
    tr_model_mem mm;
    tr_model_memory(mc, B, in->seq_len, &mm);
    item(o, "parameters (fp32)", mm.params, 0, B, "host");
    item(o, "gradients (fp32)", mm.grads, 0, B, "host");
    /* the optimizer's state (tr_optim_host_init). ZeRO-1 on the CPU
     * (train/dist.c): a rank holds its shard of it only, cut in whole
     * gradient-norm parts (tr_dp_zero_shard); the largest rank's */
    if (in->zero && world_of(in) > 1)
        item(o, opt->plan_row_shard, tr_optim_state_bytes(opt, cpu_zero_shard(P, (int)world_of(in))), 0, B, "host");
    else item(o, opt->plan_row, tr_optim_state_bytes(opt, P), 0, B, "host");
    if (mc->family != TR_FAMILY_GPT2) { /* the family's own exact figures (train/family.h memory) */
        item(o, "activations (forward, kept for backward)", 0, mm.acts / (uint64_t)B, B, "host");
        item(o, "backward scratch (grad acts)", 0, mm.grad_acts / (uint64_t)B, B, "host");
    } else {
        /* activations: split into per-layer and the rest for the table */
        uint64_t per_tok_layer = 4 * (16 * C + 4);
        uint64_t att_layer = 4 * NH * T * T;
        uint64_t layers = (uint64_t)B * L * (T * per_tok_layer + att_layer);
        item(o, "activations: blocks (ln, qkv, att, mlp, residuals)", 0, L * (T * per_tok_layer + att_layer), B,
             "host");
        item(o, "activations: embed, lnf, logits, loss", mm.acts - layers, 0, B, "host");
        item(o, "backward scratch (grad acts)", mm.grad_acts, 0, B, "host");
    }
    {
        /* backend_cpu.c: the step's gradient sum while a further
         * micro-batch is computed from zero (more than one per step) */
        uint64_t bt = in->batch_tokens ? in->batch_tokens : T, R = bt / T;
        uint64_t share = ((R ? R : 1) + world_of(in) - 1) / world_of(in);
        if (force_acc ? share > 1 : (share + (uint64_t)B - 1) / (uint64_t)B > 1)
            item(o, "gradient accumulator (micro-batches > 1 per step)", mm.grads, 0, B, "host");
    }
    item(o, "loader buffers", d->lbB * (uint64_t)d->nbuf, 0, B, "host");
    item(o, "loader row scratch + val batch", 9 * (T + 1) + d->lbB, 0, B, "host");
    item(o, "kernel workspaces (per thread: matmul panels, attention)",
         (uint64_t)(in->cpu_threads > 0 ? in->cpu_threads : 1) * mm.kernel_ws, 0, B, "host");
    item(o, "runtime (per thread: stack, malloc arena, code pages)",
         (uint64_t)(in->cpu_threads > 0 ? in->cpu_threads : 1) * TR_PLAN_CPU_RUNTIME_PER_THREAD, 0, B, "host");
    if (world_of(in) > 1) item(o, "communication buffer (all-reduce bucket)", TR_PLAN_COMM_BUCKET_BYTES, 0, B, "host");
    uint64_t tot = 0;
    for (int i = 0; i < o->n_items; i++) tot += o->items[i].bytes;
    o->host_bytes = tot;
    o->device_bytes = 0;
    return tot;
}

/* The GPU's activation rows for the recompute level, per token and layer,
 * stored for backward. The CUDA attention is flash-style: it never stores
 * the NH x T probabilities, only a fp32 log-sum-exp per head (4*NH bytes),
 * and recomputes tiles in backward. */
static void gpu_activation_items(const tr_plan_in *in, const plan_dims *d, uint64_t ab, int B, tr_plan_out *o) {
    uint64_t T = d->T, L = d->L, C = d->C, NH = d->NH;
    uint64_t keep_elems, keep_f32, scratch_elems, scratch_f32;
    switch (in->recompute) {
    case 0:
        keep_elems = 16 * C;
        keep_f32 = 4 + NH; /* ln1/ln2 mean+rstd, attention lse */
        scratch_elems = 0;
        scratch_f32 = 0;
        break;
    case 1: /* GELU output recomputed from the fc output in backward */
        keep_elems = 12 * C;
        keep_f32 = 4 + NH;
        scratch_elems = 4 * C; /* one layer's GELU output */
        scratch_f32 = 0;
        break;
    default: /* only each block's input kept; one block recomputed at a time */
        keep_elems = C;
        keep_f32 = 0;
        scratch_elems = 16 * C; /* one full level-0 layer */
        scratch_f32 = 4 + NH;
        break;
    }
    uint64_t per_row_layers = T * L * (keep_elems * ab + keep_f32 * 4);
    item(o,
         in->recompute == 0   ? "activations: blocks (all stored, attention lse only)"
         : in->recompute == 1 ? "activations: blocks (recompute 1: no GELU output)"
                              : "activations: blocks (recompute 2: block inputs only)",
         0, per_row_layers, B, "device");
    if (scratch_elems)
        item(o, "recompute scratch (one layer)", 0, T * (scratch_elems * ab + scratch_f32 * 4), B, "device");
}

/* GPT-2's GPU model rows (train/gpu_model.cu's carve) and the device input
 * batch, in the order the plan has always printed them. */
static void gpt2_gpu_items(const tr_plan_in *in, const tr_model_config *mc, const plan_dims *d, int B, tr_plan_out *o) {
    uint64_t T = d->T, C = d->C, Vp = d->Vp, P = d->P;
    const tr_optim_ops *opt = d->opt;
    /* bf16/fp16 keep a half-precision compute copy of the weights, fp32
     * master weights, fp32 gradients and the optimizer's state. */
    uint64_t ab = dtype_bytes(in->precision);
    int mixed = in->precision != TR_FP32;
    item(o, mixed ? "parameters (compute copy, 16-bit)" : "parameters (fp32)", P * ab, 0, B, "device");
    int zero = in->zero && world_of(in) > 1;
    uint64_t Ppad = P; /* NCCL's reduce-scatter / all-gather: world equal shards */
    if (world_of(in) > 1) Ppad = (P / world_of(in) + (P % world_of(in) != 0)) * world_of(in);
    if (mixed)
        item(o, zero ? "master weights (fp32, 1/N shard: ZeRO-1)" : "master weights (fp32)", shard_of(in, P) * 4, 0, B,
             "device");
    item(o, "gradients (fp32)", Ppad * 4, 0, B, "device");
    item(o, zero ? opt->plan_row_shard : opt->plan_row, tr_optim_state_bytes(opt, shard_of(in, P)), 0, B, "device");
    gpu_activation_items(in, d, ab, B, o);
    item(o, "activations: embed, projection, lnf (+stats)", 0, T * (3 * C * ab + 8), B, "device");
    /* the logits buffer: every row's, or one chunk's (MKS_LMHEAD_CHUNK; the carve's own function,
     * train/gpu_lmhead.h): then a fixed size, min(chunk, B x T) rows */
    uint64_t lm = tr_lmhead_chunk_rows(tr_lmhead_chunk_request(), (size_t)B * (size_t)T, (size_t)C);
    if (lm >= (uint64_t)B * T) item(o, "logits (Vp) + dlogits in place", 0, T * Vp * ab, B, "device");
    else item(o, "logits (Vp) + dlogits in place, one chunk", lm * Vp * ab, 0, B, "device");
    item(o, "loss workspace (fp32 per token)", 0, T * 4 * 2, B, "device");
    item(o, "backward scratch (dresidual, dln, d4C)", 0, T * 6 * C * ab, B, "device");
    /* two device batches (gpu_arena.h TR_CUDA_INPUT_SLOTS: the next copy overlaps the compute) */
    item(o, "device input batch x2 (ids, targets, pos, doc)", 0, T * 16 * TR_PLAN_INPUT_SLOTS, B, "device");
    /* the largest backward op's scratch, the GPU model's own figure from
     * the kernels' size functions (tr_model_gpu_scratch_bytes) */
    item(o, "kernel scratch (largest backward op)", tr_model_gpu_scratch_bytes(mc, (size_t)B, (size_t)in->seq_len), 0,
         B, "device");
    /* loss/norm accumulators and 256-byte alignment of every carved piece */
    item(o, "small buffers + arena alignment", 64 * 256 + 64, 0, B, "device");
    item(o, "cuBLAS workspace", KN_CUBLASLT_WORKSPACE, 0, B, "device");
}

/* The GPU table (the device arena of gpu_arena.cu, and the host lines of a
 * GPU run); returns the device total. The model's rows are its family's
 * (train/family.h gpu_plan: the same formulas as its GPU model's carve) or
 * GPT-2's; the run's rows around them are every family's. */
static uint64_t eval_gpu(const tr_plan_in *in, const tr_model_config *mc, const plan_dims *d, int B, tr_plan_out *o) {
    uint64_t P = d->P;
    const tr_optim_ops *opt = d->opt;
    const tr_family_ops *fam = tr_family_of(mc);
    if (fam && fam->gpu_plan) {
        tr_gpu_plan_row rows[TR_PLAN_MAX_ITEMS];
        char why[8];
        int n = fam->gpu_plan(mc, B, in->seq_len, in->precision, in->recompute, opt, rows, TR_PLAN_MAX_ITEMS, why,
                              sizeof why);
        if (!n) { /* a shape or level its GPU model refuses (tr_plan says why): nothing fits it */
            o->device_bytes = o->host_bytes = UINT64_MAX;
            return UINT64_MAX;
        }
        for (int i = 0; i < n; i++) item(o, rows[i].name, rows[i].fixed, rows[i].per_row, B, "device");
        item(o, "device input batch x2 (ids, targets, pos, doc)", 0, d->T * 16 * TR_PLAN_INPUT_SLOTS, B, "device");
    } else {
        gpt2_gpu_items(in, mc, d, B, o);
    }
    item(o, "CUDA context (outside the arena)", TR_PLAN_CUDA_CTX, 0, B, "device");
    item(o, "pinned loader buffers", d->lbB * (uint64_t)d->nbuf, 0, B, "host");
    /* the host model the run starts from and checkpoints through: fp32
     * params (initialised there), the optimizer's state (filled by a
     * checkpoint or a resume); its gradient array is allocated but never
     * touched (not resident). Measured on the H200 for d36 before any
     * checkpoint: 3,123 MiB of RSS growth against 2.7 MiB of host lines
     * without this one. */
    item(o, "host model copy (params; optimizer state once written)", P * 4 + tr_optim_state_bytes(opt, P), 0, B,
         "host");
    if (world_of(in) > 1) {
        item(o, "NCCL buffers (estimate; outside the arena)", TR_PLAN_NCCL_BUFFERS, 0, B, "device");
        item(o, "communication buffer (host all-reduce bucket)", TR_PLAN_COMM_BUCKET_BYTES, 0, B, "host");
    }
    uint64_t dev = 0, host = 0;
    for (int i = 0; i < o->n_items; i++) {
        if (!strcmp(o->items[i].where, "device")) dev += o->items[i].bytes;
        else host += o->items[i].bytes;
    }
    o->device_bytes = dev;
    o->host_bytes = host;
    return dev;
}

/* Evaluate the table for one B; returns the total of the budgeted side
 * (force_acc: count the gradient accumulator whatever B is, for the linear
 * model in tr_plan). */
static uint64_t eval_acc(const tr_plan_in *in, const tr_model_config *mc, int B, tr_plan_out *o, int force_acc) {
    o->n_items = 0;
    plan_dims d = {
        .T = (uint64_t)in->seq_len,
        .L = (uint64_t)mc->n_layer,
        .C = (uint64_t)mc->d_model,
        .NH = (uint64_t)mc->n_head,
        .Vp = (uint64_t)mc->vocab_padded,
        .P = (uint64_t)tr_model_param_count(mc),
        .lbB = tr_loader_buffer_bytes(B, in->seq_len),
        .nbuf = in->nbuf >= 2 ? in->nbuf : 2,
        .opt = in->optim ? tr_optim_layout_find(in->optim) : tr_optim_layout_default(), /* tr_plan checked */
    };
    o->params = d.P;
    return in->device == TR_DEV_CPU ? eval_cpu(in, mc, &d, B, o, force_acc) : eval_gpu(in, mc, &d, B, o);
}

static uint64_t eval(const tr_plan_in *in, const tr_model_config *mc, int B, tr_plan_out *o) {
    return eval_acc(in, mc, B, o, 0);
}

static int max_rows_tokens(const tr_plan_in *in, int R) {
    uint64_t b = in->token_budget ? in->token_budget / (uint64_t)in->seq_len : (uint64_t)R;
    if (b > (uint64_t)R) b = (uint64_t)R;
    return (int)b;
}

static void human(char *buf, size_t n, uint64_t b) {
    if (b >= TR_PLAN_GIB) snprintf(buf, n, "%.2f GiB", (double)b / (double)TR_PLAN_GIB);
    else if (b >= (1ull << 20)) snprintf(buf, n, "%.1f MiB", (double)b / (double)(1ull << 20));
    else snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
}

/* The model of (in): GPT-2 of its shape, or another family's configuration
 * (model_cfg) with the context max_seq (advice tries shorter rows). */
static int plan_config(const tr_plan_in *in, tr_model_config *mc) {
    _Static_assert(sizeof(tr_model_config) <= sizeof in->model_cfg, "tr_plan_in.model_cfg holds a tr_model_config");
    if (!in->model_family)
        return tr_model_config_make(in->n_layer, in->n_head, in->n_embd, in->max_seq, (int)in->vocab_size, mc);
    memcpy(mc, in->model_cfg, sizeof *mc);
    if (mc->family != in->model_family) return TR_MODEL_EINVAL;
    mc->max_seq = in->max_seq;
    if (mc->family == TR_FAMILY_LLAMA) mc->llama.max_seq = in->max_seq;
    return tr_model_config_check(mc);
}

/* Does (in) fit with B = 1? Used for advice. */
static int fits1(const tr_plan_in *in) {
    tr_model_config mc;
    if (plan_config(in, &mc)) return 0;
    tr_plan_out o;
    memset(&o, 0, sizeof o);
    uint64_t t = eval(in, &mc, 1, &o);
    if (in->token_budget && (uint64_t)in->seq_len > in->token_budget) return 0;
    return !in->mem_budget || t <= in->mem_budget;
}

static void advise(const tr_plan_in *in, tr_plan_out *o, uint64_t need1) {
    char *a = o->advice;
    size_t n = sizeof o->advice, u = 0;
    char hb[32];
    human(hb, sizeof hb, need1);
#define ADD(...)                                                                                                       \
    do {                                                                                                               \
        if (u < n) u += (size_t)snprintf(a + u, n - u, __VA_ARGS__);                                                   \
    } while (0)
    if (in->mem_budget && need1 > in->mem_budget) ADD("a budget of at least %s (one row); ", hb);
    /* shorter rows */
    for (int T = in->seq_len / 2; T >= 16; T /= 2) {
        tr_plan_in t = *in;
        t.seq_len = T;
        if (t.max_seq > T) t.max_seq = T;
        if (fits1(&t)) {
            ADD("--seq-len %d; ", T);
            break;
        }
    }
    if (in->device == TR_DEV_CUDA) {
        for (int r = in->recompute + 1; r <= TR_GPU_RECOMPUTE_MAX; r++) {
            tr_plan_in t = *in;
            t.recompute = r;
            if (fits1(&t)) {
                ADD("--recompute %d; ", r);
                break;
            }
        }
        if (in->precision == TR_FP32) {
            tr_plan_in t = *in;
            t.precision = TR_BF16;
            if (fits1(&t)) ADD("--precision bf16; ");
            else if (TR_GPU_RECOMPUTE_MAX >= 2) {
                t.recompute = 2;
                if (fits1(&t)) ADD("--precision bf16 --recompute 2; ");
            }
        }
    }
    static const char *names[] = {"d36", "d24", "d12", "tiny"};
    for (size_t i = 0; !in->model_family && i < sizeof names / sizeof names[0]; i++) { /* GPT-2 for GPT-2 */
        tr_plan_in t = *in;
        if (tr_model_preset(names[i], &t.n_layer, &t.n_head, &t.n_embd)) continue;
        if ((uint64_t)t.n_layer * (uint64_t)t.n_embd >= (uint64_t)in->n_layer * (uint64_t)in->n_embd) continue;
        if (fits1(&t)) {
            ADD("a smaller model (--model %s); ", names[i]);
            break;
        }
    }
    if (u >= 2 && a[u - 2] == ';') a[u - 2] = 0;
    if (!u) snprintf(a, n, "nothing short of a larger memory budget");
#undef ADD
}

int tr_plan(const tr_plan_in *in, tr_plan_out *o) {
    memset(o, 0, sizeof *o);
    if (!in || in->seq_len < 1 || in->n_layer < 1 || in->n_head < 1 || in->n_embd < 1 || in->vocab_size < 1 ||
        in->max_seq < in->seq_len || in->recompute < 0 || in->recompute > 2 || (uint32_t)in->seq_len > TR_MAX_SEQ_LEN ||
        (uint32_t)in->max_seq > TR_MAX_ROW_LEN || in->vocab_size > TR_MAX_VOCAB || in->world < 0 ||
        in->world > (1 << 20) || in->zero < 0 || in->zero > 1 || (in->optim && !tr_optim_layout_find(in->optim)))
        return TR_ERR_ARG;
    tr_model_config mc;
    if (plan_config(in, &mc)) return TR_ERR_ARG;
    /* a family with GPU rows of its own must have them for this shape and level */
    const tr_family_ops *fam = tr_family_of(&mc);
    if (in->device != TR_DEV_CPU && fam && fam->gpu_plan) {
        tr_gpu_plan_row rows[TR_PLAN_MAX_ITEMS];
        if (!fam->gpu_plan(&mc, 1, in->seq_len, in->precision, in->recompute,
                           in->optim ? tr_optim_layout_find(in->optim) : tr_optim_layout_default(), rows,
                           TR_PLAN_MAX_ITEMS, o->reason, sizeof o->reason))
            return TR_ERR_ARG;
    }
    uint64_t bt = in->batch_tokens ? in->batch_tokens : (uint64_t)in->seq_len;
    uint64_t R = bt / (uint64_t)in->seq_len;
    if (R < 1) R = 1;
    if (R > (1u << 30)) return TR_ERR_ARG;
    o->rows_per_step = (int)R;
    o->budget = in->mem_budget;
    /* world > 1: each rank takes its share of the step's rows, so a
     * micro-batch is never longer than ceil(R / world) rows */
    uint64_t share = (R + world_of(in) - 1) / world_of(in);
    int Bt = max_rows_tokens(in, (int)share);
    /* linear model of the total in B */
    tr_plan_out t1, t2;
    uint64_t c1 = eval_acc(in, &mc, 1, &t1, 1), c2 = eval_acc(in, &mc, 2, &t2, 1);
    o->per_row_bytes = c2 - c1;
    o->fixed_bytes = c1 - o->per_row_bytes;
    int B = Bt;
    /* no plan beyond 2^62 bytes: keeps every product below in 64 bits (such
     * a plan cannot be allocated anyway; the allocation then fails cleanly) */
    if (o->per_row_bytes && o->fixed_bytes < (1ull << 62) &&
        (uint64_t)B > ((1ull << 62) - o->fixed_bytes) / o->per_row_bytes)
        B = (int)(((1ull << 62) - o->fixed_bytes) / o->per_row_bytes);
    if (in->force_micro_rows > 0) B = in->force_micro_rows;
    else if (in->mem_budget && B > 0) {
        uint64_t room = in->mem_budget > o->fixed_bytes ? in->mem_budget - o->fixed_bytes : 0;
        uint64_t bm = o->per_row_bytes ? room / o->per_row_bytes : (uint64_t)B;
        if (bm < (uint64_t)B) B = (int)bm;
        /* exact check (loader buffers round per array) */
        while (B > 0) {
            tr_plan_out tt;
            if (eval(in, &mc, B, &tt) <= in->mem_budget) break;
            B--;
        }
    }
    int show = B > 0 ? B : 1;
    uint64_t tot = eval(in, &mc, show, o);
    o->params = (uint64_t)tr_model_param_count(&mc);
    o->micro_rows = B;
    o->rows_per_step = (int)R;
    o->n_micro = B > 0 ? (int)((R + (uint64_t)B - 1) / (uint64_t)B) : 0;
    o->rank_micro = (int)(((uint64_t)o->n_micro + world_of(in) - 1) / world_of(in));
    o->micro_tokens = (uint64_t)B * (uint64_t)in->seq_len;
    o->step_tokens = R * (uint64_t)in->seq_len;
    o->total_bytes = tot;
    o->budget = in->mem_budget;
    o->fits = 1;
    if (Bt < 1) {
        o->fits = 0;
        snprintf(o->reason, sizeof o->reason,
                 "one row of %d tokens exceeds the token budget of %" PRIu64 " tokens per micro-batch", in->seq_len,
                 in->token_budget);
    } else if (in->force_micro_rows > 0 && (uint64_t)in->force_micro_rows * (uint64_t)in->seq_len >
                                               (in->token_budget ? in->token_budget : UINT64_MAX)) {
        o->fits = 0;
        snprintf(o->reason, sizeof o->reason, "%d rows x %d tokens exceed the token budget of %" PRIu64,
                 in->force_micro_rows, in->seq_len, in->token_budget);
    } else if (in->mem_budget && tot > in->mem_budget) {
        o->fits = 0;
        char a[32], b[32], c[32], d[32];
        human(a, sizeof a, tot);
        human(b, sizeof b, o->fixed_bytes);
        human(c, sizeof c, o->per_row_bytes);
        human(d, sizeof d, in->mem_budget);
        snprintf(o->reason, sizeof o->reason,
                 "%s needed for %d row(s) of %d tokens (%s fixed + %s per row) > budget %s", a, show, in->seq_len, b, c,
                 d);
    }
    if (!o->fits) advise(in, o, o->fixed_bytes + o->per_row_bytes);
    return o->fits ? TR_OK : TR_ERR_NOFIT;
}

void tr_plan_print(FILE *f, const tr_plan_in *in, const tr_plan_out *o) {
    char h[32];
    fprintf(f, "memory plan: model %dL %dH C=%d V=%u (%" PRIu64 " params), T=%d, device %s, %s, recompute %d\n",
            in->n_layer, in->n_head, in->n_embd, in->vocab_size, o->params, in->seq_len, tr_device_name(in->device),
            tr_precision_name(in->precision), in->recompute);
    fprintf(f,
            "  micro-batch %d rows x %d = %" PRIu64 " tokens (token budget %" PRIu64 "), %d micro-batches x %d "
            "rows = %" PRIu64 " tokens per step\n",
            o->micro_rows, in->seq_len, o->micro_tokens, in->token_budget, o->n_micro, o->rows_per_step,
            o->step_tokens);
    if (in->world > 1)
        fprintf(f, "  per rank of %d (ZeRO-%d): up to %d micro-batches per step; every line below is one rank's\n",
                in->world, in->zero, o->rank_micro);
    fprintf(f, "  %-58s %6s %16s %12s\n", "item", "where", "bytes", "");
    for (int i = 0; i < o->n_items; i++) {
        human(h, sizeof h, o->items[i].bytes);
        fprintf(f, "  %-58s %6s %16" PRIu64 " %12s\n", o->items[i].name, o->items[i].where, o->items[i].bytes, h);
    }
    human(h, sizeof h, o->total_bytes);
    fprintf(f, "  %-58s %6s %16" PRIu64 " %12s\n", "total (budgeted side)",
            in->device == TR_DEV_CPU ? "host" : "device", o->total_bytes, h);
    human(h, sizeof h, o->fixed_bytes);
    fprintf(f, "  fixed %s", h);
    human(h, sizeof h, o->per_row_bytes);
    fprintf(f, " + %s per row", h);
    if (o->budget) {
        human(h, sizeof h, o->budget);
        fprintf(f, "; budget %s", h);
    }
    fprintf(f, "\n  %s\n", o->fits ? "fits" : "DOES NOT FIT");
    if (!o->fits) {
        fprintf(f, "  reason: %s\n", o->reason);
        fprintf(f, "  would fit with: %s\n", o->advice);
    }
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void tr_plan_print_json(FILE *f, const tr_plan_in *in, const tr_plan_out *o) {
    fprintf(f, "{\"fits\":%s,\"device\":\"%s\",\"precision\":\"%s\",\"recompute\":%d,", o->fits ? "true" : "false",
            tr_device_name(in->device), tr_precision_name(in->precision), in->recompute);
    fprintf(f, "\"n_layer\":%d,\"n_head\":%d,\"n_embd\":%d,\"vocab_size\":%u,\"params\":%" PRIu64 ",", in->n_layer,
            in->n_head, in->n_embd, in->vocab_size, o->params);
    fprintf(f,
            "\"seq_len\":%d,\"token_budget\":%" PRIu64 ",\"batch_tokens\":%" PRIu64 ",\"micro_rows\":%d,"
            "\"micro_tokens\":%" PRIu64 ",\"rows_per_step\":%d,\"n_micro\":%d,\"step_tokens\":%" PRIu64 ",",
            in->seq_len, in->token_budget, in->batch_tokens, o->micro_rows, o->micro_tokens, o->rows_per_step,
            o->n_micro, o->step_tokens);
    fprintf(f, "\"world\":%d,\"zero\":%d,\"rank_micro\":%d,", in->world > 1 ? in->world : 1, in->zero, o->rank_micro);
    fprintf(f,
            "\"mem_budget\":%" PRIu64 ",\"fixed_bytes\":%" PRIu64 ",\"per_row_bytes\":%" PRIu64
            ",\"total_bytes\":%" PRIu64 ",\"host_bytes\":%" PRIu64 ",\"device_bytes\":%" PRIu64 ",\"items\":[",
            o->budget, o->fixed_bytes, o->per_row_bytes, o->total_bytes, o->host_bytes, o->device_bytes);
    for (int i = 0; i < o->n_items; i++) {
        fprintf(f, "%s{\"name\":", i ? "," : "");
        json_str(f, o->items[i].name);
        fprintf(f, ",\"where\":\"%s\",\"bytes\":%" PRIu64 "}", o->items[i].where, o->items[i].bytes);
    }
    fprintf(f, "]");
    if (!o->fits) {
        fprintf(f, ",\"reason\":");
        json_str(f, o->reason);
        fprintf(f, ",\"advice\":");
        json_str(f, o->advice);
    }
    fprintf(f, "}\n");
}
