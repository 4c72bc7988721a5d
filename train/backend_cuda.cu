/* backend_cuda.cu - the CUDA backend (train/backend.h): an adapter from the
 * backend operations to the GPU step of train/tr_gpu.h (implemented in
 * train/trainer_cuda.cu).  Built into tr_cuda only with MKS_ENABLE_CUDA;
 * train/CMakeLists.txt then adds "cuda" to the generated backend table.
 *
 * The host model is a staging copy here: create uploads its params (initial
 * or resumed), set_state the resumed moments and optimiser counters,
 * get_state copies the device's fp32 master params (and m, v, counters for a
 * checkpoint) back into it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend.h"
#include "model.h"
#include "tr.h"
#include "tr_gpu.h"
}

static_assert((int)TR_GPU_EXTRA == (int)TR_BACKEND_EXTRA, "checkpoint optimiser words");

struct tr_backend {
    tr_gpu *g;
    tr_backend_mem mem;
    int measured; /* peak measured after the first step */
};

static int cuda_probe(const tr_train_opts *o, tr_backend_info *info, char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    uint64_t fr = 0;
    char why[256] = "";
    if (tr_gpu_device(info->device_name, sizeof info->device_name, &info->device_total, &fr, why, sizeof why) !=
        TR_OK) {
        snprintf(err, errlen, "--device cuda: no usable CUDA GPU on this machine (%s); use --device cpu, or "
                              "--plan to see the GPU memory plan", why);
        return TR_ERR_NODEVICE;
    }
    if (o->recompute) {
        snprintf(err, errlen, "--recompute %d: the GPU model stores every activation (recompute is not "
                              "implemented on the GPU yet); drop --recompute", o->recompute);
        return TR_ERR_ARG;
    }
    return TR_OK;
}

static void cuda_destroy(tr_backend *b)
{
    if (!b)
        return;
    tr_gpu_close(b->g);
    free(b);
}

static int cuda_create(const tr_backend_args *a, tr_backend **out, char *err, size_t errlen)
{
    *out = NULL;
    tr_backend *b = (tr_backend *)calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "cannot allocate the GPU backend");
        return TR_ERR_NOMEM;
    }
    b->mem.source = "cudaMemGetInfo";
    tr_gpu_mem_used(&b->mem.baseline_bytes);
    b->mem.arena_need = tr_gpu_arena_need(a->mc, a->B, a->T, a->opts->precision);
    int rc = tr_gpu_open(&b->g, a->mc, a->B, a->T, a->opts->precision, a->plan, tr_model_params(a->host),
                         &b->mem.arena_bytes, err, errlen);
    if (rc) {
        free(b);
        return rc;
    }
    *out = b;
    return TR_OK;
}

static void cuda_loader_hooks(tr_backend *b, tr_loader_opts *lo)
{
    (void)b;
    tr_gpu_loader_hooks(lo); /* pinned host buffers: asynchronous copies */
}

static int cuda_set_state(tr_backend *b, tr_model *host, const uint64_t *extra, uint64_t opt_step, char *err,
                          size_t errlen)
{
    int rc = tr_gpu_set_state(b->g, tr_model_params(host), tr_model_adam_m(host), tr_model_adam_v(host), extra,
                              opt_step);
    if (rc)
        snprintf(err, errlen, "cannot restore the checkpoint on the GPU: %s", tr_gpu_last_error());
    return rc;
}

static int cuda_zero_grad(tr_backend *b, char *err, size_t errlen)
{
    int rc = tr_gpu_zero_grad(b->g);
    if (rc)
        snprintf(err, errlen, "cannot clear the GPU gradients: %s", tr_gpu_last_error());
    return rc;
}

static int cuda_micro(tr_backend *b, tr_loader *ld, const tr_batch *bt, int doc_mask, double *loss_sum,
                      uint64_t *n_targets, double *wait_s, char *err, size_t errlen)
{
    /* upload, hand the buffer back, forward + backward (summed loss) */
    return tr_gpu_micro(b->g, ld, bt, doc_mask, loss_sum, n_targets, wait_s, err, errlen);
}

static int cuda_step(tr_backend *b, const tr_adamw_hparams *h, float grad_clip, uint64_t n_targets,
                     uint64_t opt_step, float *gnorm, int *skipped, float *scale, char *err, size_t errlen)
{
    (void)opt_step; /* the GPU counts its AdamW steps (fp16 skips do not advance it) */
    /* 1/targets and the clip folded into AdamW; fp16: loss scaling */
    int rc = tr_gpu_step(b->g, h, grad_clip, n_targets, gnorm, skipped, scale, err, errlen);
    if (rc == TR_OK && !b->measured) {
        tr_gpu_mem_used(&b->mem.peak_bytes); /* measured peak: device memory in use after step 1 */
        b->measured = 1;
    }
    return rc;
}

static int cuda_eval(tr_backend *b, const tr_batch *bt, int doc_mask, double *loss_sum, uint64_t *n_targets,
                     char *err, size_t errlen)
{
    return tr_gpu_eval(b->g, bt, doc_mask, loss_sum, n_targets, err, errlen);
}

static int cuda_get_state(tr_backend *b, tr_model *host, int moments, uint64_t *extra, char *err, size_t errlen)
{
    /* device -> the host model's buffers (master fp32 params, m, v) */
    int rc = tr_gpu_get_state(b->g, tr_model_params(host), moments ? tr_model_adam_m(host) : NULL,
                              moments ? tr_model_adam_v(host) : NULL, moments ? extra : NULL);
    if (rc)
        snprintf(err, errlen, moments ? "cannot read the GPU state for the checkpoint: %s"
                                      : "cannot read the GPU parameters: %s",
                 tr_gpu_last_error());
    return rc;
}

static void cuda_mem_report(tr_backend *b, tr_backend_mem *out) { *out = b->mem; }

static tr_backend_ops make_ops(void)
{
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
    o.reduce = NULL; /* one GPU; a data-parallel backend all-reduces here */
    o.step = cuda_step;
    o.eval = cuda_eval;
    o.get_state = cuda_get_state;
    o.mem_report = cuda_mem_report;
    return o;
}

extern "C" const tr_backend_ops tr_backend_cuda = make_ops();
