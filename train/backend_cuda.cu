/* backend_cuda.cu - the CUDA backend (train/backend.h): an adapter from the
 * backend operations to the GPU session of train/gpu_session.h (implemented
 * in train/gpu_session.cu).  Built into tr_cuda only with MKS_ENABLE_CUDA;
 * train/CMakeLists.txt then adds "cuda" to the generated backend table.
 *
 * The host model is a staging copy here: create uploads its params (initial
 * or resumed), set_state the resumed optimizer state and optimiser
 * counters, get_state copies the device's fp32 master params (and the
 * optimizer state and counters for a checkpoint) back into it.
 *
 * Data parallel (issue 16, docs/cluster.md): with more than one rank (or
 * MKS_GPU_NCCL=1 at world 1: the same path over a one-rank NCCL
 * communicator, tests/gpu/run.sh) the backend is its own data-parallel
 * wrapper, on the policy of train/dp.h that train/dist.c's CPU one uses:
 *   probe   rank uses GPU local_rank (GPU 0 when the launcher shows each
 *           rank one GPU); no NCCL engine in the build -> refused;
 *   create  the GPU model, then every rank agrees it succeeded, then the
 *           device communicator (tr_comm_open_device "nccl",
 *           train/comm_nccl.cu, bootstrapped over the host communicator:
 *           MPI);
 *   micro   micro j of n belongs to rank tr_dp_owner (the one-process data
 *           order); the others' go back to the loader unread; with overlap
 *           (tr_dp_overlap_bucket: MKS_GPU_OVERLAP=1, MKS_DP_BUCKET_MB > 0)
 *           the rank's last one starts each bucket's all-reduce on the NCCL
 *           stream as backward enqueues its last kernels;
 *   reduce  after the rank's last backward: the buckets waited for, or one
 *           in-place all-reduce (NCCL's sum) over the contiguous fp32
 *           gradient, then tr_dp_reduce_loss (the per-micro-batch loss sums
 *           and the target count over the host communicator), so step
 *           divides by the global count and every rank takes the same AdamW
 *           step (fp16: the same skip).
 * ZeRO-1 is not implemented on the GPU (refused in train/dist.c). */
#include "mks_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "backend.h"
#include "comm.h"
#include "dist.h"
#include "dp.h"
#include "gpu_session.h"
#include "gpu_step.h"
#include "model.h"
#include "tr.h"
}

static_assert((int)TR_GPU_EXTRA == (int)TR_BACKEND_EXTRA, "checkpoint optimiser words");

struct tr_backend {
    tr_gpu *g;
    tr_backend_mem mem;
    int measured; /* peak measured after the first step */
    /* data parallel (nc != NULL) */
    tr_comm *c; /* host communicator (the run's; own_c: opened here at world 1) */
    int own_c;
    tr_comm *nc; /* device communicator (NCCL) */
    int W, rank, dev;
    double *mloss; /* loss sum per micro-batch of the step (exact fold, as dist.c) */
    int nmloss, exact_loss;
    double t_reduce; /* seconds in reduce (MKS_DP_STATS) */
    uint64_t steps;
    /* overlap (MKS_GPU_OVERLAP=1): gradient buckets all-reduced on the NCCL
     * stream as backward enqueues their last kernels */
    int ovl_on;
    tr_dp_bucket *bk;
    int nbk, released, ovl_rc;
    char ovl_err[512];
    int step_sync; /* MKS_GPU_STEP_SYNC=1 (train/gpu_step.h) */
};

/* Enqueue buckets [released, upto) on the NCCL stream, each after the
 * compute stream's work so far. After a failure nothing more is enqueued
 * (the peers then fail at their deadline). */
static void release_upto(tr_backend *b, int upto) {
    size_t n = 0;
    float *dg = tr_gpu_grads_nowait(b->g, &n);
    for (; b->released < upto; b->released++) {
        if (b->ovl_rc) continue;
        const tr_dp_bucket *k = &b->bk[b->released];
        int rc = tr_comm_allreduce_range_async_f32(b->nc, dg, k->a, k->b, tr_gpu_stream(b->g));
        if (rc) {
            b->ovl_rc = rc;
            snprintf(b->ovl_err, sizeof b->ovl_err, "%s", tr_comm_error(b->nc));
        }
    }
}

/* The readiness hook (the rank's last micro-batch of the step): every
 * bucket that group g completed. */
static void on_ready(void *ctx, int g) {
    tr_backend *b = (tr_backend *)ctx;
    int r = b->released;
    while (r < b->nbk && b->bk[r].group <= g) r++;
    release_upto(b, r);
}

static int run_world(const tr_train_opts *o) {
    tr_comm *c = tr_dist_of(o);
    return c ? tr_comm_world(c) : 1;
}

/* The GPU of this rank: its local rank, or GPU 0 when the launcher shows
 * each rank a single GPU (srun --gpus-per-task=1, CUDA_VISIBLE_DEVICES per
 * rank). -1 with a message when the host has fewer GPUs than ranks. */
static int rank_device(const tr_train_opts *o, char *err, size_t errlen) {
    tr_comm *c = tr_dist_of(o);
    int lr = c ? tr_comm_local_rank(c) : 0, ls = c ? tr_comm_local_size(c) : 1;
    int n = tr_gpu_count();
    if (lr < 0) lr = 0;
    if (n < 1) {
        snprintf(err, errlen, "--device cuda: rank %d sees no CUDA GPU; use --device cpu", c ? tr_comm_rank(c) : 0);
        return -1;
    }
    if (n == 1 || lr < n) return n == 1 ? 0 : lr;
    snprintf(err, errlen,
             "--device cuda: rank %d is local rank %d of %d on its host, which shows %d GPU(s): start at "
             "most one rank per GPU (mpirun -np N with N <= GPUs per host, or one GPU per task)",
             c ? tr_comm_rank(c) : 0, lr, ls, n);
    return -1;
}

static int cuda_probe(const tr_train_opts *o, tr_backend_info *info, char *err, size_t errlen) {
    memset(info, 0, sizeof *info);
    uint64_t fr = 0;
    char why[256] = "";
    int W = run_world(o);
    if (W > 1 || tr_dp_device_world1()) {
        if (!tr_comm_have("nccl")) {
            snprintf(err, errlen,
                     "--device cuda with %d rank(s)%s: this build has no NCCL (configure with "
                     "-DMKS_NCCL_ROOT=DIR holding include/nccl.h and lib/libnccl.so*); use one rank",
                     W, W > 1 ? "" : " and MKS_GPU_NCCL=1");
            return TR_ERR_NODEVICE;
        }
        if (o->zero) {
            snprintf(err, errlen,
                     "--zero 1 --device cuda: ZeRO-1 is implemented on the CPU backend only (the GPU "
                     "backend all-reduces the whole gradient); drop --zero or use --device cpu");
            return TR_ERR_ARG;
        }
        int dev = tr_gpu_count() < 1 ? 0 : rank_device(o, err, errlen); /* no GPU: tr_gpu_device says why */
        if (dev < 0) return TR_ERR_NODEVICE;
        if (tr_gpu_count() >= 1 && tr_gpu_select(dev, why, sizeof why) != TR_OK) {
            snprintf(err, errlen, "--device cuda: rank %d cannot use GPU %d: %s", tr_dist_rank(o), dev, why);
            return TR_ERR_NODEVICE;
        }
    }
    if (tr_gpu_device(info->device_name, sizeof info->device_name, &info->device_total, &fr, why, sizeof why) !=
        TR_OK) {
        snprintf(err, errlen,
                 "--device cuda: no usable CUDA GPU on this machine (%s); use --device cpu, or "
                 "--plan to see the GPU memory plan",
                 why);
        return TR_ERR_NODEVICE;
    }
    info->device_capacity = tr_plan_device_capacity(fr);
    if (o->recompute > TR_GPU_RECOMPUTE_MAX) {
        snprintf(err, errlen,
                 "--recompute %d: the GPU model recomputes up to level %d (the GELU output); use "
                 "--recompute %d or less",
                 o->recompute, TR_GPU_RECOMPUTE_MAX, TR_GPU_RECOMPUTE_MAX);
        return TR_ERR_ARG;
    }
    return TR_OK;
}

static void cuda_destroy(tr_backend *b) {
    if (!b) return;
    if (b->nc) {
        if (tr_dp_stats())
            fprintf(stderr,
                    "dp stats: rank %d/%d (GPU %d, NCCL): overlap %s (%d buckets), %llu steps, %.3f s of "
                    "gradient reduction after backward\n",
                    b->rank, b->W, b->dev, b->ovl_on ? "on" : "off", b->nbk, (unsigned long long)b->steps, b->t_reduce);
    }
    tr_comm_close(b->nc);
    tr_gpu_close(b->g);
    if (b->own_c) tr_comm_close(b->c);
    free(b->mloss);
    free(b->bk);
    free(b);
}

/* Data-parallel setup after the GPU model: every rank agrees that its
 * setup succeeded (rc: this rank's), then the NCCL communicator. */
static int dp_open(tr_backend *b, const tr_backend_args *a, int rc, char *err, size_t errlen) {
    b->c = tr_dist_of(a->opts);
    if (!b->c) { /* a library caller at world 1 with MKS_GPU_NCCL: a one-rank host communicator */
        char e2[256];
        int orc = tr_comm_open("single", &b->c, e2, sizeof e2);
        if (orc) {
            if (!rc) snprintf(err, errlen, "NCCL bootstrap: %s", e2);
            return rc ? rc : orc;
        }
        b->own_c = 1;
    }
    b->W = tr_comm_world(b->c);
    b->rank = tr_comm_rank(b->c);
    if (b->W > 1) {
        uint64_t bad = rc != TR_OK;
        int crc = tr_comm_allreduce_u64(b->c, &bad, 1);
        if (crc) {
            if (!rc) snprintf(err, errlen, "agreeing on the GPU setup: %s", tr_comm_error(b->c));
            return rc ? rc : TR_ERR_INTERNAL;
        }
        if (rc) return rc;
        if (bad) {
            snprintf(err, errlen, "rank %d: the GPU setup failed on %llu other rank(s) (see their messages)", b->rank,
                     (unsigned long long)bad);
            return TR_ERR_INTERNAL;
        }
    } else if (rc) {
        return rc;
    }
    char why[256] = "";
    b->dev = 0;
    int dev = rank_device(a->opts, why, sizeof why);
    if (dev >= 0) b->dev = dev;
    b->nmloss = a->plan && a->plan->n_micro > 0 ? a->plan->n_micro : 1;
    b->exact_loss = tr_dp_exact_loss(b->nmloss, b->W);
    b->mloss = (double *)calloc((size_t)b->nmloss, sizeof(double));
    if (!b->mloss) {
        snprintf(err, errlen, "cannot allocate the data-parallel loss table");
        return TR_ERR_NOMEM; /* the other ranks fail in the NCCL bootstrap (deadline) */
    }
    /* overlap: the GPU model's readiness hook, NCCL's own stream */
    tr_dp_caps caps = {1, 1, 1};
    size_t el = tr_dp_overlap_bucket(&caps);
    if (el > 0 && tr_gpu_has_grad_hook(b->g)) { /* a model without the hook: one all-reduce after backward */
        if (tr_dp_buckets(a->mc, el, &b->bk, &b->nbk) != TR_OK) {
            snprintf(err, errlen, "cannot allocate the gradient buckets");
            return TR_ERR_NOMEM;
        }
        b->ovl_on = 1;
    }
    char e2[1024];
    rc = tr_comm_open_device(b->c, "nccl", b->dev, &b->nc, e2, sizeof e2);
    if (rc) {
        snprintf(err, errlen, "NCCL setup (world %d): %s", b->W, e2);
        return rc == TR_ERR_NOMEM || rc == TR_ERR_ARG ? rc : TR_ERR_INTERNAL;
    }
    return TR_OK;
}

static int cuda_create(const tr_backend_args *a, tr_backend **out, char *err, size_t errlen) {
    *out = NULL;
    tr_backend *b = (tr_backend *)calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "cannot allocate the GPU backend");
        return TR_ERR_NOMEM;
    }
    b->mem.source = "cudaMemGetInfo";
    b->step_sync = tr_gpu_step_sync_wanted();
    /* the family's GPU model (train/family.h gpu), at this recompute level */
    int crc = tr_gpu_model_check(a->mc, a->opts->recompute, err, errlen);
    if (crc) {
        free(b);
        return crc;
    }
    tr_gpu_mem_used(&b->mem.baseline_bytes);
    b->mem.arena_need = tr_gpu_arena_need(a->mc, a->B, a->T, a->opts->precision, a->opts->recompute, a->optim);
    int rc = tr_gpu_open(&b->g, a->mc, a->B, a->T, a->opts->precision, a->plan, tr_model_params(a->host),
                         &b->mem.arena_bytes, err, errlen, a->opts->recompute, a->optim);
    if (run_world(a->opts) > 1 || tr_dp_device_world1()) rc = dp_open(b, a, rc, err, errlen);
    if (rc) {
        cuda_destroy(b);
        return rc;
    }
    *out = b;
    return TR_OK;
}

static void cuda_loader_hooks(tr_backend *b, tr_loader_opts *lo) {
    (void)b;
    tr_gpu_loader_hooks(lo); /* pinned host buffers: asynchronous copies */
}

/* The host model's optimizer state tensors (NULL past the optimizer's count):
 * the staging copy of the device's. */
static void *const *host_state(tr_model *host, void *st[TR_OPTIM_MAX_STATE]) {
    for (int k = 0; k < TR_OPTIM_MAX_STATE; k++) st[k] = tr_model_state(host, k);
    return st;
}

static int cuda_set_state(tr_backend *b, tr_model *host, const uint64_t *extra, uint64_t opt_step, char *err,
                          size_t errlen) {
    void *st[TR_OPTIM_MAX_STATE];
    int rc = tr_gpu_set_state(b->g, tr_model_params(host), host_state(host, st), extra, opt_step);
    if (rc) snprintf(err, errlen, "cannot restore the checkpoint on the GPU: %s", tr_gpu_last_error());
    return rc;
}

static int cuda_zero_grad(tr_backend *b, char *err, size_t errlen) {
    if (b->mloss) memset(b->mloss, 0, sizeof(double) * (size_t)b->nmloss);
    int rc = tr_gpu_zero_grad(b->g);
    if (rc) snprintf(err, errlen, "cannot clear the GPU gradients: %s", tr_gpu_last_error());
    return rc;
}

static int cuda_micro(tr_backend *b, tr_loader *ld, const tr_batch *bt, int doc_mask, double *loss_sum,
                      uint64_t *n_targets, double *wait_s, char *err, size_t errlen) {
    if (b->nc && tr_dp_owner(bt->micro, bt->n_micro, b->W) != b->rank) {
        *loss_sum = 0;
        *n_targets = 0;
        tr_loader_release(ld); /* another rank's micro-batch */
        return TR_OK;
    }
    /* this rank's last micro-batch of the step: buckets start as backward
     * enqueues them */
    int j = bt->micro, n = bt->n_micro;
    int arm = b->nc && b->ovl_on && tr_dp_last_of_rank(j, n, b->W);
    if (arm) tr_gpu_set_grad_hook(b->g, on_ready, b);
    /* upload, hand the buffer back, forward + backward (summed loss). One
     * GPU: the loss stays on the device (no wait here: the host queues the
     * next micro-step while this one runs), reduce reads the step's sum once;
     * data parallel: each micro-batch's loss is read (the exact fold of
     * tr_dp_reduce_loss needs them one by one) */
    int defer = !b->nc && !b->step_sync; /* MKS_GPU_STEP_SYNC=1: read each (the switch back) */
    if (defer) *loss_sum = 0;
    int rc = tr_gpu_micro(b->g, ld, bt, doc_mask, defer ? NULL : loss_sum, n_targets, wait_s, err, errlen);
    if (arm) tr_gpu_set_grad_hook(b->g, NULL, NULL);
    if (!rc && b->mloss && bt->micro >= 0 && bt->micro < b->nmloss) b->mloss[bt->micro] = *loss_sum;
    return rc;
}

/* One GPU: the step's loss sum, summed on the device, read once (the
 * target count was the host batches'). Data parallel: gradient sums over
 * NCCL, then the loss sums and target counts over the host communicator
 * (identical on every rank). */
static int cuda_reduce(tr_backend *b, double *loss_sum, uint64_t *n_targets, char *err, size_t errlen) {
    if (!b->nc) {
        if (b->step_sync) return TR_OK; /* each micro-batch's was read */
        int rc = tr_gpu_step_loss(b->g, loss_sum, NULL);
        if (rc) snprintf(err, errlen, "GPU forward/backward failed: %s", tr_gpu_last_error());
        return rc;
    }
    double t0 = mc_now_s();
    float *dg = NULL;
    size_t n = 0;
    int rc;
    if (b->ovl_on) {
        /* the buckets not started by backward (all of them on a rank
         * without a micro-batch this step), then wait for every one */
        release_upto(b, b->nbk);
        b->released = 0;
        rc = b->ovl_rc ? b->ovl_rc : tr_comm_wait(b->nc);
        if (rc) {
            snprintf(err, errlen, "gradient all-reduce (NCCL buckets): %s",
                     b->ovl_rc ? b->ovl_err : tr_comm_error(b->nc));
            return TR_ERR_INTERNAL;
        }
    } else {
        rc = tr_gpu_grads(b->g, &dg, &n);
        if (rc) {
            snprintf(err, errlen, "GPU backward failed: %s", tr_gpu_last_error());
            return rc;
        }
        rc = tr_comm_allreduce_f32(b->nc, dg, n);
        if (rc) {
            snprintf(err, errlen, "gradient all-reduce (NCCL): %s", tr_comm_error(b->nc));
            return TR_ERR_INTERNAL;
        }
    }
    rc = tr_dp_reduce_loss(b->c, b->mloss, b->nmloss, b->exact_loss, loss_sum, n_targets, err, errlen);
    if (rc) return rc;
    b->t_reduce += mc_now_s() - t0;
    b->steps++;
    return TR_OK;
}

static int cuda_step(tr_backend *b, const tr_optim_hparams *h, float grad_clip, uint64_t n_targets, uint64_t opt_step,
                     float *gnorm, int *skipped, float *scale, char *err, size_t errlen) {
    (void)opt_step; /* the GPU counts its optimiser steps (fp16 skips do not advance it) */
    /* 1/targets and the clip folded into the optimizer's step; fp16: loss scaling */
    int rc = tr_gpu_step(b->g, h, grad_clip, n_targets, gnorm, skipped, scale, err, errlen);
    if (rc == TR_OK && !b->measured) {
        tr_gpu_mem_used(&b->mem.peak_bytes); /* measured peak: device memory in use after step 1 */
        b->measured = 1;
    }
    return rc;
}

static int cuda_eval(tr_backend *b, const tr_batch *bt, int doc_mask, double *loss_sum, uint64_t *n_targets, char *err,
                     size_t errlen) {
    return tr_gpu_eval(b->g, bt, doc_mask, loss_sum, n_targets, err, errlen);
}

static int cuda_get_state(tr_backend *b, tr_model *host, int moments, uint64_t *extra, char *err, size_t errlen) {
    /* device -> the host model's buffers (master fp32 params, the optimizer's state) */
    void *st[TR_OPTIM_MAX_STATE];
    int rc =
        tr_gpu_get_state(b->g, tr_model_params(host), moments ? host_state(host, st) : NULL, moments ? extra : NULL);
    if (rc)
        snprintf(err, errlen,
                 moments ? "cannot read the GPU state for the checkpoint: %s" : "cannot read the GPU parameters: %s",
                 tr_gpu_last_error());
    return rc;
}

static void cuda_mem_report(tr_backend *b, tr_backend_mem *out) { *out = b->mem; }

static tr_backend_ops make_ops(void) {
    tr_backend_ops o;
    memset(&o, 0, sizeof o);
    o.name = "cuda";
    o.device = TR_DEV_CUDA;
    o.device_memory = 1;
    o.ckpt_extra = 1;
    o.loss_scale = 1;
    o.probe = cuda_probe;
    o.create = cuda_create;
    o.destroy = cuda_destroy;
    o.loader_hooks = cuda_loader_hooks;
    o.set_state = cuda_set_state;
    o.zero_grad = cuda_zero_grad;
    o.micro = cuda_micro;
    o.reduce = cuda_reduce; /* one GPU: the step's loss read once; data parallel: NCCL all-reduce */
    o.step = cuda_step;
    o.eval = cuda_eval;
    o.get_state = cuda_get_state;
    o.mem_report = cuda_mem_report;
    return o;
}

extern "C" const tr_backend_ops tr_backend_cuda = make_ops();
