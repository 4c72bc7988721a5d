/* gpu_common.cuh - what every GPU model of a family shares (train/gpu_model.cu
 * for GPT-2, train/gpu_llama.cu for the Llama family; issue 26: the two had
 * their own copies of each piece): the carving pass over the arena, the
 * error macros, the parameter block (fp32 master weights, fp32 gradients, the
 * optimizer's state, the 16-bit compute copy and the step's small buffers)
 * with its zeroing, init fill, loss read-back and the clipped, loss-scaled
 * optimizer step over a tensor table (one launch per tensor, or one launch
 * over the table: MKS_ADAMW_MULTI=1, train/gpu_step.h).  Internal to library tr_cuda
 * (included by .cu files only); every function keeps the arithmetic the
 * GPT-2 model had before the split (same kernels, same order). */
#ifndef TR_GPU_COMMON_CUH
#define TR_GPU_COMMON_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "gpu_arena.h"
#include "gpu_attention.h"
#include "gpu_step.h"
#include "kn_cuda.h"
#include "optim.h"
#include "tr.h"
}
#include "kn_cuda_check.h" /* KN_CU_CHECK, KN_LAUNCH_CHECK (kernels/kn_cuda_err.h) */

/* Both families' choice of attention kernels: the tensor-core ones
 * (kernels/kn_attention_tc*.cu) for bf16 with heads of 64 or 128 (128: Llama 3,
 * Qwen2.5 1.5B+, Mistral; checked on the CPU emulator, test_attn_tc_emu, not
 * yet on a GPU), unless MKS_CUDA_ATTENTION=simt keeps the SIMT kernels (every
 * dtype and head size). */
static inline int tr_gpu_attention_tc(kn_dtype dt, int head_size) {
    return tr_gpu_attention_request() != TR_GPU_ATT_SIMT && dt == KN_BF16 && (head_size == 64 || head_size == 128);
}

/* MKS_CUDA_ATTENTION=cudnn / cudnn-fast (gpu_attention.h): cuDNN's fused
 * attention for the micro-batch shape B x T, prepared once when a model is
 * created: its mode (TR_GPU_CUDNN_*) when cuDNN builds both graphs within
 * the model's kernel scratch (its workspace), else 0 with one line saying
 * why (the own kernels run).  Only calls of exactly this shape without a
 * document mask take it. */
static inline int tr_gpu_attention_cudnn_setup(int B, int T, int NH, int NKV, int HS, kn_dtype dt,
                                               size_t scratch_bytes) {
    int mode = tr_gpu_attention_cudnn_wanted();
    if (!mode) return 0;
    const int det = mode == TR_GPU_CUDNN_DETERMINISTIC;
    const char *name = det ? "cudnn" : "cudnn-fast";
    char why[512];
    size_t fw = 0, bw = 0;
    if (kn_cudnn_attention_prepare(&fw, &bw, B, T, NH, NKV, HS, scratch_bytes, det, dt, why, sizeof why) != KN_OK) {
        fprintf(stderr, "attention: MKS_CUDA_ATTENTION=%s not taken: %s; the own kernels run\n", name, why);
        return 0;
    }
    fprintf(stderr,
            "attention: cuDNN %d fused attention, %s backward (B %d T %d NH %d NKV %d HS %d; workspace forward "
            "%.2f MiB, backward %.2f MiB, of the %.2f MiB kernel scratch)\n",
            kn_cudnn_attention_version(), det ? "deterministic" : "atomic (not bit-reproducible)", B, T, NH, NKV, HS,
            fw / 1048576.0, bw / 1048576.0, scratch_bytes / 1048576.0);
    return mode;
}

/* Whether one attention call takes cuDNN's engine (mode: the model's
 * tr_gpu_attention_cudnn_setup result): the shape it was prepared for, no
 * document mask. */
static inline bool tr_gpu_cudnn_call(int mode, const void *doc, int B, int T, int Bmax, int Tmax) {
    return mode && !doc && B == Bmax && T == Tmax;
}

/* A CUDA call: on failure the call text, file:line, error name and text are
 * recorded (kernels/kn_cuda_err.h; tr_gpu_last_error() reports them). */
#define CU(call) KN_CU_CHECK(call, return e_ == cudaErrorMemoryAllocation ? TR_ERR_NOMEM : TR_ERR_NODEVICE)
/* A kn_cuda op: it records its own failure; this adds where the model called
 * it from (or records a bad-argument return, which the op does not). */
#define KC(call)                                                                                                       \
    do {                                                                                                               \
        int k_ = (call);                                                                                               \
        if (k_ != KN_OK) {                                                                                             \
            kn_cuda_add_context(#call, __FILE__, __LINE__, k_);                                                        \
            return TR_ERR_NODEVICE;                                                                                    \
        }                                                                                                              \
    } while (0)
/* After a launch of a model's own kernels (sync-debug aware). */
#define LAUNCHED(what) KN_LAUNCH_CHECK(what, return TR_ERR_NODEVICE)

/* Counting (a == NULL) or carving pass over every piece, in one order: the
 * count is the model's arena_bytes, the carve its create. */
struct tr_gpu_carver {
    tr_cuda_arena *a;
    size_t total;
    int failed;
    void *take(size_t bytes, const char *what) {
        total += bytes + TR_CUDA_ALIGN;
        if (!a) return (void *)(uintptr_t)TR_CUDA_ALIGN; /* counting: any non-NULL */
        void *p = tr_cuda_arena_take(a, bytes, what);
        if (!p) failed = 1;
        return p;
    }
};

static inline void *tr_gpu_ep(void *base, size_t elems, size_t esz) { return (char *)base + elems * esz; }

/* The parameter block of a GPU model: P parameters in one device layout. */
struct tr_gpu_params {
    size_t P;
    kn_dtype dt;
    size_t esz;              /* compute dtype bytes */
    const tr_optim_ops *opt; /* the optimizer (train/optim.h) */
    cudaStream_t s;
    float *master, *grads;
    void *state[TR_OPTIM_MAX_STATE]; /* opt->state_bytes per element */
    void *wc;                        /* compute weights: == master (fp32) or the 16-bit copy */
    void *scratch;                   /* the model's kernel scratch (sumsq uses it too) */
    size_t scratch_bytes;
    /* [0] loss sum, [1] target count (as double) of the last forward; [2],
     * [3] the same summed over the micro-batches since zero_grad (the step's
     * logged loss, read once per optimizer step: tr_gpu_params_read_step_loss) */
    double *lossacc;
    double *sumsq;
    float *clip_scale, *gnorm;
    int nt;             /* tensors the optimizer step walks (set by the model before carving) */
    int multi;          /* 1: one launch over mt_table (opt->step_cuda_multi; MKS_ADAMW_MULTI=1) */
    void *mt_table;     /* kn_adamw_multi_table_bytes(nt): the step's tensor table, device */
    unsigned mt_blocks; /* its grid */
    int mt_ready;       /* uploaded (once, at the first multi step) */
};

/* The optimizer and dtype checks every model's init_shape starts with. */
static inline int tr_gpu_params_init(tr_gpu_params *p, kn_dtype dt, const tr_optim_ops *opt) {
    p->opt = opt ? opt : tr_optim_default();
    if (p->opt->n_state < 1 || p->opt->n_state > TR_OPTIM_MAX_STATE || p->opt->state_bytes < 1) return TR_ERR_ARG;
    if (dt != KN_F32 && dt != KN_BF16 && dt != KN_F16) return TR_ERR_ARG;
    p->dt = dt;
    p->esz = kn_dtype_size(dt);
    p->multi = p->opt->step_cuda_multi && tr_gpu_adamw_multi_wanted();
    return TR_OK;
}

/* The first pieces of every model's carve (P set). */
static inline void tr_gpu_params_carve(tr_gpu_params *p, tr_gpu_carver *cv) {
    size_t P = p->P;
    p->master = (float *)cv->take(P * 4, "master weights (fp32)");
    p->wc = p->dt == KN_F32 ? (void *)p->master : cv->take(P * p->esz, "parameters (compute copy)");
    p->grads = (float *)cv->take(P * 4, "gradients (fp32)");
    for (int k = 0; k < p->opt->n_state; k++) {
        char what[64];
        snprintf(what, sizeof what, "optimizer state %s", p->opt->section[k]);
        p->state[k] = cv->take(P * (size_t)p->opt->state_bytes, what);
    }
}

/* The last pieces of every model's carve: scratch (bytes set), cuBLASLt
 * workspace (*ws), the loss and norm accumulators, the optimizer's tensor
 * table (nt set; carved whatever the switch says, so the plan does not
 * depend on the environment). The planners count these pieces with
 * tr_gpu_tail_small_bytes / TR_GPU_TAIL_SMALL_PIECES (gpu_step.h). */
static inline void tr_gpu_params_carve_tail(tr_gpu_params *p, tr_gpu_carver *cv, void **ws) {
    p->scratch = cv->take(p->scratch_bytes, "kernel scratch");
    *ws = cv->take(KN_CUBLASLT_WORKSPACE, "cuBLASLt workspace");
    p->lossacc = (double *)cv->take(4 * sizeof(double), "loss sums (forward, step)");
    p->sumsq = (double *)cv->take(sizeof(double), "grad sumsq");
    p->clip_scale = (float *)cv->take(sizeof(float), "clip scale");
    p->gnorm = (float *)cv->take(sizeof(float), "grad norm");
    p->mt_table = cv->take(kn_adamw_multi_table_bytes((size_t)(p->nt > 0 ? p->nt : 0)), "optimizer tensor table");
}

/* Zero the gradients and the step's loss sums ([2], [3]). */
static inline int tr_gpu_params_zero_grad(tr_gpu_params *p) {
    CU(cudaMemsetAsync(p->grads, 0, p->P * 4, p->s));
    CU(cudaMemsetAsync(p->lossacc + 2, 0, 2 * sizeof(double), p->s));
    return TR_OK;
}

/* After the master weights changed: the compute copy, zero gradients and
 * optimizer state, then wait. */
static inline int tr_gpu_params_reset(tr_gpu_params *p) {
    if (p->dt != KN_F32) KC(kn_cast_cuda(p->wc, p->dt, p->master, KN_F32, p->P, p->s));
    CU(cudaMemsetAsync(p->grads, 0, p->P * 4, p->s));
    CU(cudaMemsetAsync(p->lossacc, 0, 4 * sizeof(double), p->s));
    for (int k = 0; k < p->opt->n_state; k++)
        CU(cudaMemsetAsync(p->state[k], 0, p->P * (size_t)p->opt->state_bytes, p->s));
    CU(cudaStreamSynchronize(p->s));
    return TR_OK;
}

/* init_random's fill: uniform(lo, hi) from seed, or the constant lo. */
static __global__ void tr_gpu_fill_kernel(float *p, size_t n, uint64_t seed, float lo, float hi, int constant) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        if (constant) {
            p[i] = lo;
            continue;
        }
        uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        p[i] = lo + (hi - lo) * (float)((z >> 40) * (1.0 / 16777216.0));
    }
}

/* loss sum over target tokens, fixed order (one block of 1024): out[0], [1]
 * this forward's; added to out[2], [3], the step's (zeroed by zero_grad), so
 * the step's sum is 0 + l0 + l1 + ... in micro-batch order, the same double
 * additions the trainer made on the host when it read each micro-batch */
static __global__ void tr_gpu_loss_sum_kernel(double *out, const float *losses, const int32_t *targets, int N) {
    __shared__ double s[1024], k[1024];
    double a = 0, n = 0;
    for (int i = threadIdx.x; i < N; i += 1024)
        if (targets[i] >= 0) {
            a += losses[i];
            n += 1;
        }
    s[threadIdx.x] = a;
    k[threadIdx.x] = n;
    __syncthreads();
    for (int o = 512; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) {
            s[threadIdx.x] += s[threadIdx.x + o];
            k[threadIdx.x] += k[threadIdx.x + o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[0] = s[0];
        out[1] = k[0];
        out[2] += s[0];
        out[3] += k[0];
    }
}

static inline int tr_gpu_params_loss_sum(tr_gpu_params *p, const float *losses, const int32_t *targets, int N) {
    tr_gpu_loss_sum_kernel<<<1, 1024, 0, p->s>>>(p->lossacc, losses, targets, N);
    LAUNCHED("loss_sum");
    return TR_OK;
}

/* The last forward's loss sum and target count (host, either may be NULL:
 * then nothing waits). */
static inline int tr_gpu_params_read_loss(tr_gpu_params *p, double *loss_sum, uint64_t *n_targets) {
    if (!loss_sum && !n_targets) return TR_OK;
    double h[2];
    CU(cudaMemcpyAsync(h, p->lossacc, sizeof h, cudaMemcpyDeviceToHost, p->s));
    CU(cudaStreamSynchronize(p->s));
    if (loss_sum) *loss_sum = h[0];
    if (n_targets) *n_targets = (uint64_t)h[1];
    return TR_OK;
}

/* The loss sum and target count of every forward since zero_grad (one wait
 * for the device; either may be NULL). */
static inline int tr_gpu_params_read_step_loss(tr_gpu_params *p, double *loss_sum, uint64_t *n_targets) {
    if (!loss_sum && !n_targets) return TR_OK;
    double h[2];
    CU(cudaMemcpyAsync(h, p->lossacc + 2, sizeof h, cudaMemcpyDeviceToHost, p->s));
    CU(cudaStreamSynchronize(p->s));
    if (loss_sum) *loss_sum = h[0];
    if (n_targets) *n_targets = (uint64_t)h[1];
    return TR_OK;
}

/* factor = clip(unscaled norm) / loss_scale; norm = unscaled norm.
 * tr_gpu_params_step_scaled computes the same norm on the host from the
 * sumsq it reads (tr_gpu_scaled_norm): keep the two expressions equal. */
static __global__ void tr_gpu_scaled_clip_kernel(float *factor, float *norm_out, const double *sumsq, float max_norm,
                                                 float inv_ls) {
    float norm = (float)(sqrt(*sumsq) * (double)inv_ls);
    *norm_out = norm;
    float clip = (max_norm > 0.0f && norm > max_norm) ? max_norm / (norm + 1e-6f) : 1.0f;
    *factor = clip * inv_ls;
}

/* The unscaled norm exactly as tr_gpu_scaled_clip_kernel computes it (IEEE
 * double sqrt and product on both sides, then one rounding to float). */
static inline float tr_gpu_scaled_norm(double sumsq, float inv_ls) { return (float)(sqrt(sumsq) * (double)inv_ls); }

/* The multi-tensor step's table from the model's tensor(): built on the
 * host (kn_adamw_multi_layout, plain C) and copied into the arena piece
 * once. The copy is ordered on p->s before the step's launch. */
template <typename F> static int tr_gpu_params_mt_upload(tr_gpu_params *p, int nt, F tensor) {
    if (nt != p->nt || nt < 1) {
        kn_cuda_set_error("multi-tensor step: %d tensors, the table was carved for %d", nt, p->nt);
        return TR_ERR_INTERNAL;
    }
    /* one host buffer: the table as uploaded (bytes), then, 8-aligned, the
     * tensors' offsets and counts (size_t) and decay flags (int) */
    size_t bytes = kn_adamw_multi_table_bytes((size_t)nt), at = (bytes + 7) & ~(size_t)7;
    char *host = (char *)malloc(at + (size_t)nt * (2 * sizeof(size_t) + sizeof(int)));
    if (!host) return TR_ERR_NOMEM;
    kn_adamw_tensor *tab = (kn_adamw_tensor *)(void *)host;
    uint32_t *bstart = (uint32_t *)(void *)(tab + nt);
    size_t *offs = (size_t *)(void *)(host + at), *ns = offs + nt;
    int *decay = (int *)(void *)(ns + nt);
    for (int i = 0; i < nt; i++) tensor(i, &offs[i], &ns[i], &decay[i]);
    size_t blocks = kn_adamw_multi_layout(nt, offs, ns, decay, tab, bstart);
    int rc = TR_OK;
    if (blocks == (size_t)-1) {
        kn_cuda_set_error("multi-tensor step: %d tensors need more blocks than one launch has", nt);
        rc = TR_ERR_ARG;
    } else {
        /* pageable source: cudaMemcpyAsync returns once it is staged, so
         * the buffer may be freed right after */
        KN_CU_CHECK(cudaMemcpyAsync(p->mt_table, host, bytes, cudaMemcpyHostToDevice, p->s), rc = TR_ERR_NODEVICE);
    }
    free(host);
    if (rc != TR_OK) return rc;
    p->mt_blocks = (unsigned)blocks;
    p->mt_ready = 1;
    return TR_OK;
}

/* The optimizer's GPU step over tensor i = 0 .. nt-1 of the device layout,
 * where tensor(i, &off, &n, &decay) says where each lives (n 0: skipped),
 * the gradient scaled by the factor in p->clip_scale: one launch over the
 * table (p->multi) or one per tensor. */
template <typename F>
static int tr_gpu_params_optim(tr_gpu_params *p, const tr_optim_hparams *h, int t, int nt, F tensor) {
    if (p->multi) {
        if (!p->mt_ready) {
            int rc = tr_gpu_params_mt_upload(p, nt, tensor);
            if (rc != TR_OK) return rc;
        }
        KC(p->opt->step_cuda_multi(h, t, p->mt_table, nt, p->mt_blocks, p->master, p->dt == KN_F32 ? nullptr : p->wc,
                                   (int)p->dt, p->grads, p->state, p->clip_scale, (void *)p->s));
        return TR_OK;
    }
    for (int i = 0; i < nt; i++) {
        size_t off = 0, n = 0;
        int decay = 0;
        tensor(i, &off, &n, &decay);
        if (!n) continue;
        void *lp = p->dt == KN_F32 ? nullptr : tr_gpu_ep(p->wc, off, p->esz);
        void *st[TR_OPTIM_MAX_STATE];
        for (int k = 0; k < p->opt->n_state; k++) st[k] = tr_gpu_ep(p->state[k], off, (size_t)p->opt->state_bytes);
        KC(p->opt->step_cuda(h, t, decay, p->master + off, lp, (int)p->dt, p->grads + off, st, n, p->clip_scale,
                             (void *)p->s));
    }
    return TR_OK;
}

static inline int tr_gpu_params_norm_out(tr_gpu_params *p, float *norm_out) {
    if (!norm_out) return TR_OK;
    CU(cudaMemcpyAsync(norm_out, p->gnorm, sizeof(float), cudaMemcpyDeviceToHost, p->s));
    CU(cudaStreamSynchronize(p->s));
    return TR_OK;
}

/* Clip then step, gradients computed with the loss multiplied by loss_scale:
 * the norm is unscaled, clipping and 1/loss_scale folded into the update; a
 * non-finite gradient skips the update (*skipped = 1; this waits for the
 * device to decide). */
template <typename F>
static int tr_gpu_params_step_scaled(tr_gpu_params *p, const tr_optim_hparams *h, int t, float max_norm,
                                     float loss_scale, float *norm_out, int *skipped, int nt, F tensor) {
    if (!h || t < 1 || !(loss_scale > 0.0f)) return TR_ERR_ARG;
    KC(kn_sumsq_cuda(p->sumsq, p->grads, p->P, p->scratch, p->scratch_bytes, p->s));
    double ss = 0;
    CU(cudaMemcpyAsync(&ss, p->sumsq, sizeof ss, cudaMemcpyDeviceToHost, p->s));
    CU(cudaStreamSynchronize(p->s));
    int skip = !isfinite(ss);
    if (skipped) *skipped = skip;
    if (skip) {
        if (norm_out) *norm_out = NAN;
        return TR_OK; /* no update: parameters and optimizer state untouched */
    }
    const float inv_ls = 1.0f / loss_scale;
    tr_gpu_scaled_clip_kernel<<<1, 1, 0, p->s>>>(p->clip_scale, p->gnorm, p->sumsq, max_norm, inv_ls);
    LAUNCHED("scaled_clip");
    int rc = tr_gpu_params_optim(p, h, t, nt, tensor);
    /* the norm from the sumsq already read, the kernel's expression: no
     * second wait, so the update runs while the host goes on to the next
     * step (the logged scalars are the one read per optimizer step) */
    if (rc == TR_OK && norm_out) *norm_out = tr_gpu_scaled_norm(ss, inv_ls);
    return rc;
}

/* Clip (max_norm > 0) then step, gradients of the loss itself. */
template <typename F>
static int tr_gpu_params_step(tr_gpu_params *p, const tr_optim_hparams *h, int t, float max_norm, float *norm_out,
                              int nt, F tensor) {
    if (!h || t < 1) return TR_ERR_ARG;
    KC(kn_sumsq_cuda(p->sumsq, p->grads, p->P, p->scratch, p->scratch_bytes, p->s));
    KC(kn_clip_scale_cuda(p->clip_scale, p->gnorm, p->sumsq, max_norm, p->s));
    int rc = tr_gpu_params_optim(p, h, t, nt, tensor);
    return rc == TR_OK ? tr_gpu_params_norm_out(p, norm_out) : rc;
}

#endif /* TR_GPU_COMMON_CUH */
