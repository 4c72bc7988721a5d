/* backend_cpu.c - the CPU reference backend (train/backend.h): the math of
 * train/model.h on the trainer's host model itself (no copy: params, grads
 * and AdamW moments are the buffers checkpoints read and write).
 *
 * Gradient accumulation: every micro-batch's gradient of its summed
 * per-token loss (grad_scale 1) is computed on its own, from zero, and then
 * added to the step's sum in micro-batch order: g = ((g_0 + g_1) + g_2) ...
 * (the kernels' own += inside one micro-batch never mixes with another's).
 * That makes the step's gradient the one a data-parallel run gets by adding
 * its ranks' gradients in rank order (train/dist.h): 2 ranks equal one
 * process with 2 micro-batches bit for bit. The sum is held in the
 * "gradient accumulator" of the plan (P floats, only when a step has more
 * than one micro-batch). With grad_hook armed (the data-parallel wrapper,
 * on a rank's last micro-batch) that add is done group by group inside the
 * model's readiness hook, before the caller hears of the group.
 * step divides the step's gradient by the number of
 * target tokens in the whole step (token-mean loss of the step, not the
 * mean of micro-batch means), clips, then the run's optimizer (train/optim.h)
 * over the host model's state. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "kn.h"
#include "model.h"
#include "optim.h"
#include "tr.h"

struct tr_backend {
    tr_model *m; /* borrowed: the trainer's host model */
    const tr_optim_ops *optim;
    float *acc; /* the step's sum while a micro-batch is computed (NULL: one micro-batch per step) */
    size_t P;
    int nacc; /* micro-batches added since zero_grad */
    /* gradient readiness (grad_hook): the caller's hook, and whether this
     * micro-batch adds the sum aside group by group inside the hook */
    tr_model_grad_hook hook;
    void *hook_ctx;
    int sep_now;
    int nt;               /* tensors of the model's family (train/family.h) */
    size_t *sizes, *offs; /* their sizes and offsets */
};

/* g[i] = acc[i] + g[i] over [a, a + n) (the accumulation order of the
 * whole-gradient add: the same bits). */
static void add_acc(float *g, const float *acc, size_t a, size_t n) {
    long long e = (long long)(a + n);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
    for (long long i = (long long)a; i < e; i++) g[i] = acc[i] + g[i];
}

/* The model's readiness hook during an armed micro-batch: group g is final
 * for this micro-batch; add the step's earlier sum to it, then tell the
 * caller. */
static void on_group(void *ctx, int g) {
    tr_backend *b = ctx;
    if (b->sep_now) {
        const tr_model_config *c = tr_model_get_config(b->m);
        float *gr = tr_model_grads(b->m);
        for (int t = 0; t < b->nt; t++) {
            int nl = tr_model_param_layers(c, t);
            size_t per = b->sizes[t] / (size_t)nl;
            for (int l = 0; l < nl; l++)
                if (tr_model_grad_group_of(c, t, l) == g) add_acc(gr, b->acc, b->offs[t] + (size_t)l * per, per);
        }
    }
    b->hook(b->hook_ctx, g);
}

int tr_backend_model_err(int rc) {
    return rc == TR_MODEL_ENOMEM ? TR_ERR_NOMEM : rc == TR_MODEL_EINVAL ? TR_ERR_ARG : TR_ERR_INTERNAL;
}

static int cpu_probe(const tr_train_opts *o, tr_backend_info *info, char *err, size_t errlen) {
    memset(info, 0, sizeof *info);
    if (o->precision != TR_FP32) {
        snprintf(err, errlen,
                 "--precision %s: the CPU reference trains in fp32 (bf16/fp16 are GPU precisions; "
                 "--plan accounts for them)",
                 tr_precision_name(o->precision));
        return TR_ERR_ARG;
    }
    return TR_OK;
}

static int cpu_create(const tr_backend_args *a, tr_backend **out, char *err, size_t errlen) {
    *out = NULL;
    tr_backend *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "cannot allocate the model");
        return TR_ERR_NOMEM;
    }
    b->m = a->host;
    b->optim = a->optim;
    b->P = tr_model_param_count(a->mc);
    b->nt = tr_model_n_tensors(a->mc);
    b->sizes = malloc((size_t)b->nt * sizeof *b->sizes);
    b->offs = malloc((size_t)b->nt * sizeof *b->offs);
    int mr = b->sizes && b->offs ? TR_MODEL_OK : TR_MODEL_ENOMEM;
    for (int t = 0; !mr && t < b->nt; t++) {
        b->sizes[t] = tr_model_tensor_size(a->mc, t);
        b->offs[t] = t ? b->offs[t - 1] + b->sizes[t - 1] : 0;
    }
    /* activations for the planned micro-batch now: nothing grows later */
    if (!mr) mr = tr_model_reserve(b->m, a->B, a->T);
    if (!mr && a->plan->rank_micro > 1 && !(b->acc = malloc(b->P * sizeof(float)))) mr = TR_MODEL_ENOMEM;
    if (mr) {
        free(b->acc);
        free(b->sizes);
        free(b->offs);
        free(b);
        snprintf(err, errlen, "cannot allocate the model");
        return tr_backend_model_err(mr);
    }
    *out = b;
    return TR_OK;
}

static void cpu_destroy(tr_backend *b) {
    if (b) {
        free(b->acc);
        free(b->sizes);
        free(b->offs);
    }
    free(b);
}

static int cpu_set_state(tr_backend *b, tr_model *host, const uint64_t *extra, uint64_t opt_step, char *err,
                         size_t errlen) {
    /* the checkpoint was loaded into the host model, which is ours */
    (void)b, (void)host, (void)extra, (void)opt_step, (void)err, (void)errlen;
    return TR_OK;
}

static int cpu_zero_grad(tr_backend *b, char *err, size_t errlen) {
    (void)err, (void)errlen;
    tr_model_zero_grad(b->m);
    b->nacc = 0;
    return TR_OK;
}

static int cpu_micro(tr_backend *b, tr_loader *ld, const tr_batch *bt, int doc_mask, double *loss_sum,
                     uint64_t *n_targets, double *wait_s, char *err, size_t errlen) {
    (void)wait_s; /* computed from the loader's buffer: no upload */
    float *g = tr_model_grads(b->m);
    int sep = b->nacc > 0 && b->acc; /* keep the sum aside, this micro-batch from zero */
    if (sep) {
        memcpy(b->acc, g, b->P * sizeof(float));
        tr_model_zero_grad(b->m);
    }
    /* armed (grad_hook): the sum aside is added group by group as backward
     * finishes each, and the caller hears of it at once */
    b->sep_now = sep;
    if (b->hook) tr_model_set_grad_hook(b->m, on_group, b);
    int mr = tr_model_fwd_bwd(b->m, bt->rows, bt->T, bt->inputs, bt->targets, bt->pos, doc_mask ? bt->seg : NULL, 1.0f,
                              loss_sum, n_targets);
    tr_model_set_grad_hook(b->m, NULL, NULL);
    tr_loader_release(ld);
    if (sep && !mr && !b->hook) add_acc(g, b->acc, 0, b->P);
    b->nacc++;
    if (mr) {
        snprintf(err, errlen, "model step failed");
        return tr_backend_model_err(mr);
    }
    return TR_OK;
}

static int cpu_step(tr_backend *b, const tr_optim_hparams *h, float grad_clip, uint64_t n_targets, uint64_t opt_step,
                    float *gnorm, int *skipped, float *scale, char *err, size_t errlen) {
    const tr_model_config *c = tr_model_get_config(b->m);
    if (n_targets) kn_scale_ref(tr_model_grads(b->m), tr_model_param_count(c), (float)(1.0 / (double)n_targets));
    tr_model_clip_grad_norm(b->m, grad_clip, gnorm);
    int mr = tr_optim_host_step(b->optim, b->m, h, (int)opt_step);
    if (mr) {
        snprintf(err, errlen, "optimiser step failed");
        return tr_backend_model_err(mr);
    }
    *skipped = 0;
    *scale = 1.0f;
    return TR_OK;
}

static int cpu_eval(tr_backend *b, const tr_batch *bt, int doc_mask, double *loss_sum, uint64_t *n_targets, char *err,
                    size_t errlen) {
    int mr = tr_model_forward(b->m, bt->rows, bt->T, bt->inputs, bt->targets, bt->pos, doc_mask ? bt->seg : NULL,
                              loss_sum, n_targets);
    if (mr) {
        snprintf(err, errlen, "validation forward failed");
        return tr_backend_model_err(mr);
    }
    return TR_OK;
}

static int cpu_get_state(tr_backend *b, tr_model *host, int moments, uint64_t *extra, char *err, size_t errlen) {
    (void)b, (void)host, (void)moments, (void)extra, (void)err, (void)errlen; /* host model = our state */
    return TR_OK;
}

static void cpu_grad_hook(tr_backend *b, tr_model_grad_hook fn, void *ctx) {
    b->hook = fn;
    b->hook_ctx = ctx;
}

static void cpu_mem_report(tr_backend *b, tr_backend_mem *out) {
    (void)b;
    memset(out, 0, sizeof *out);
}

const tr_backend_ops tr_backend_cpu = {
    .name = "cpu",
    .device = TR_DEV_CPU,
    .device_memory = 0,
    .ckpt_extra = 0,
    .loss_scale = 0,
    .probe = cpu_probe,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .loader_hooks = NULL,
    .set_state = cpu_set_state,
    .zero_grad = cpu_zero_grad,
    .micro = cpu_micro,
    .reduce = NULL,
    .step = cpu_step,
    .eval = cpu_eval,
    .get_state = cpu_get_state,
    .mem_report = cpu_mem_report,
    .grad_hook = cpu_grad_hook,
};
