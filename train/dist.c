/* dist.c - data-parallel training: the process communicator and the
 * data-parallel wrapper of the CPU backend (see dist.h). */
#include "dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn.h"
#include "model.h"

/* ---- the process communicator ------------------------------------------ */

static tr_comm *g_comm;

int tr_dist_init(char *err, size_t errlen)
{
    if (g_comm)
        return TR_OK;
    return tr_comm_open(TR_COMM_AUTO, &g_comm, err, errlen);
}

tr_comm *tr_dist_comm(void) { return g_comm; }

void tr_dist_finish(int ok)
{
    if (!g_comm)
        return;
    if (!ok && tr_comm_world(g_comm) > 1)
        tr_comm_abort(g_comm, 1); /* does not return under MPI */
    tr_comm_close(g_comm);
    g_comm = NULL;
}

tr_comm *tr_dist_of(const tr_train_opts *o)
{
    if (o && o->comm)
        return (tr_comm *)o->comm;
    return g_comm;
}

int tr_dist_rank(const tr_train_opts *o)
{
    tr_comm *c = tr_dist_of(o);
    return c ? tr_comm_rank(c) : 0;
}

int tr_dist_world(const tr_train_opts *o)
{
    tr_comm *c = tr_dist_of(o);
    return c ? tr_comm_world(c) : 1;
}

/* A failed collective: the communicator's message; TR_ERR_INTERNAL so the
 * CLI exits 1 (a failure, not bad input). */
static int comm_fail(tr_comm *c, int rc, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: %s", what, tr_comm_error(c)[0] ? tr_comm_error(c) : tr_strerror(rc));
    return rc == TR_ERR_NOMEM || rc == TR_ERR_ARG ? rc : TR_ERR_INTERNAL;
}

int tr_dist_barrier(const tr_train_opts *o, char *err, size_t errlen)
{
    tr_comm *c = tr_dist_of(o);
    if (!c || tr_comm_world(c) == 1)
        return TR_OK;
    int rc = tr_comm_barrier(c);
    return rc ? comm_fail(c, rc, "barrier", err, errlen) : TR_OK;
}

/* ---- the data-parallel CPU backend --------------------------------------- */

extern const tr_backend_ops tr_backend_cpu;

#define NORM_PARTS 256 /* kn_sumsq_ref's fixed split of the gradient */

struct tr_backend {
    const tr_backend_ops *in;
    tr_backend *ib;      /* the wrapped CPU backend instance */
    tr_comm *c;
    tr_model *m;         /* the host model: params, grads, AdamW moments */
    int W, rank, zero;
    size_t P;
    size_t unit, lo, hi; /* ZeRO-1: this rank's shard of whole norm parts */
    size_t sizes[TR_NUM_PARAM_TENSORS];
    double *mloss;       /* loss sum per micro-batch of the step (exact fold) */
    int nmloss;
    int exact_loss;      /* mloss fits the small reductions */
    double parts[NORM_PARTS];
};

static int owner(int j, int n, int W) { return n > 0 ? (int)((long long)j * W / n) : 0; }

static int d_probe(const tr_train_opts *o, tr_backend_info *info, char *err, size_t errlen)
{
    return tr_backend_cpu.probe(o, info, err, errlen);
}

static void d_destroy(tr_backend *b)
{
    if (!b)
        return;
    if (b->ib)
        b->in->destroy(b->ib);
    free(b->mloss);
    free(b);
}

static int d_create(const tr_backend_args *a, tr_backend **out, char *err, size_t errlen)
{
    *out = NULL;
    tr_backend *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "cannot allocate the data-parallel backend");
        return TR_ERR_NOMEM;
    }
    b->in = &tr_backend_cpu;
    b->c = tr_dist_of(a->opts);
    b->m = a->host;
    b->W = tr_comm_world(b->c);
    b->rank = tr_comm_rank(b->c);
    b->zero = a->opts->zero;
    b->P = tr_model_param_count(a->mc);
    tr_model_param_sizes(a->mc, b->sizes);
    b->unit = b->P / NORM_PARTS + (b->P % NORM_PARTS != 0);
    tr_comm_shard_units(b->P, b->unit, b->W, b->rank, &b->lo, &b->hi);
    b->nmloss = a->plan->n_micro > 0 ? a->plan->n_micro : 1;
    /* the per-micro-batch losses travel through the communication buffer */
    b->exact_loss = b->nmloss <= 4096 &&
                    (uint64_t)b->nmloss * sizeof(double) * (uint64_t)b->W <= tr_comm_buffer_bytes(b->W, TR_COMM_DEFAULT_BUCKET);
    b->mloss = calloc((size_t)b->nmloss, sizeof(double));
    if (!b->mloss) {
        free(b);
        snprintf(err, errlen, "cannot allocate the data-parallel backend");
        return TR_ERR_NOMEM;
    }
    int rc = b->in->create(a, &b->ib, err, errlen);
    if (rc) {
        d_destroy(b);
        return rc;
    }
    if (b->zero && (!tr_model_adam_m(b->m) || !tr_model_adam_v(b->m))) {
        d_destroy(b);
        snprintf(err, errlen, "internal: ZeRO-1 without AdamW moments");
        return TR_ERR_INTERNAL;
    }
    *out = b;
    return TR_OK;
}

static void d_loader_hooks(tr_backend *b, tr_loader_opts *lo)
{
    if (b->in->loader_hooks)
        b->in->loader_hooks(b->ib, lo);
}

static int d_set_state(tr_backend *b, tr_model *host, const uint64_t *extra, uint64_t opt_step, char *err,
                       size_t errlen)
{
    return b->in->set_state(b->ib, host, extra, opt_step, err, errlen);
}

static int d_zero_grad(tr_backend *b, char *err, size_t errlen)
{
    memset(b->mloss, 0, sizeof(double) * (size_t)b->nmloss);
    return b->in->zero_grad(b->ib, err, errlen);
}

static int d_micro(tr_backend *b, tr_loader *ld, const tr_batch *bt, int doc_mask, double *loss_sum,
                   uint64_t *n_targets, double *wait_s, char *err, size_t errlen)
{
    *loss_sum = 0;
    *n_targets = 0;
    if (owner(bt->micro, bt->n_micro, b->W) != b->rank) {
        tr_loader_release(ld); /* another rank's micro-batch */
        return TR_OK;
    }
    int rc = b->in->micro(b->ib, ld, bt, doc_mask, loss_sum, n_targets, wait_s, err, errlen);
    if (!rc && bt->micro >= 0 && bt->micro < b->nmloss)
        b->mloss[bt->micro] = *loss_sum;
    return rc;
}

static int d_reduce(tr_backend *b, double *loss_sum, uint64_t *n_targets, char *err, size_t errlen)
{
    float *g = tr_model_grads(b->m);
    int rc = b->zero ? tr_comm_reduce_scatter_units_f32(b->c, g, b->P, b->unit) : tr_comm_allreduce_f32(b->c, g, b->P);
    if (rc)
        return comm_fail(b->c, rc, b->zero ? "gradient reduce-scatter" : "gradient all-reduce", err, errlen);
    rc = tr_comm_allreduce_u64(b->c, n_targets, 1);
    if (rc)
        return comm_fail(b->c, rc, "target count all-reduce", err, errlen);
    if (b->exact_loss) {
        /* each micro-batch's loss is non-zero on one rank only: the fold
         * leaves it unchanged; then add them in micro-batch order like the
         * one-process loop (0 + l_0 + l_1 + ...) */
        rc = tr_comm_allreduce_f64(b->c, b->mloss, (size_t)b->nmloss);
        if (rc)
            return comm_fail(b->c, rc, "loss all-reduce", err, errlen);
        double s = 0;
        for (int j = 0; j < b->nmloss; j++)
            s += b->mloss[j];
        *loss_sum = s;
    } else {
        rc = tr_comm_allreduce_f64(b->c, loss_sum, 1);
        if (rc)
            return comm_fail(b->c, rc, "loss all-reduce", err, errlen);
    }
    return TR_OK;
}

/* ZeRO-1: the CPU step (backend_cpu.c: 1/targets, clip, AdamW) on this
 * rank's shard, with the norm summed over kn_sumsq_ref's parts in its order,
 * then the parameters all-gathered. Every operation is elementwise or the
 * same per-part sum, so the result equals the unsharded step bit for bit. */
static int zero_step(tr_backend *b, const tr_adamw_hparams *h, float grad_clip, uint64_t n_targets,
                     uint64_t opt_step, float *gnorm, char *err, size_t errlen)
{
    float *g = tr_model_grads(b->m), *p = tr_model_params(b->m);
    float *mm = tr_model_adam_m(b->m), *vv = tr_model_adam_v(b->m);
    size_t lo = b->lo, n = b->hi - b->lo;
    if (n_targets && n)
        kn_scale_ref(g + lo, n, (float)(1.0 / (double)n_targets));
    for (int q = 0; q < NORM_PARTS; q++) {
        size_t a = (size_t)q * b->unit, e = a + b->unit;
        if (a > b->P)
            a = b->P;
        if (e > b->P)
            e = b->P;
        double s = 0.0;
        if (a >= b->lo && a < b->hi)
            for (size_t i = a; i < e; i++)
                s += (double)g[i] * g[i];
        b->parts[q] = s;
    }
    int rc = tr_comm_allreduce_f64(b->c, b->parts, NORM_PARTS);
    if (rc)
        return comm_fail(b->c, rc, "gradient norm all-reduce", err, errlen);
    double ss = 0.0;
    for (int q = 0; q < NORM_PARTS; q++)
        ss += b->parts[q];
    double norm = sqrt(ss);
    *gnorm = (float)norm;
    if (grad_clip > 0.0f) {
        double coef = grad_clip / (norm + 1e-6);
        if (coef < 1.0 && n)
            kn_scale_ref(g + lo, n, (float)coef);
    }
    size_t off = 0;
    for (int t = 0; t < TR_NUM_PARAM_TENSORS; t++) {
        size_t a = off > b->lo ? off : b->lo, e = off + b->sizes[t] < b->hi ? off + b->sizes[t] : b->hi;
        if (a < e && kn_adamw_step_ref(p + a, g + a, mm + a, vv + a, e - a, h->lr, h->beta1, h->beta2, h->eps,
                                       h->weight_decay, tr_model_param_decay(t), (int)opt_step)) {
            snprintf(err, errlen, "optimiser step failed");
            return TR_ERR_INTERNAL;
        }
        off += b->sizes[t];
    }
    rc = tr_comm_allgather_units_f32(b->c, p, b->P, b->unit);
    if (rc)
        return comm_fail(b->c, rc, "parameter all-gather", err, errlen);
    return TR_OK;
}

static int d_step(tr_backend *b, const tr_adamw_hparams *h, float grad_clip, uint64_t n_targets, uint64_t opt_step,
                  float *gnorm, int *skipped, float *scale, char *err, size_t errlen)
{
    if (!b->zero)
        return b->in->step(b->ib, h, grad_clip, n_targets, opt_step, gnorm, skipped, scale, err, errlen);
    *skipped = 0;
    *scale = 1.0f;
    return zero_step(b, h, grad_clip, n_targets, opt_step, gnorm, err, errlen);
}

static int d_eval(tr_backend *b, const tr_batch *bt, int doc_mask, double *loss_sum, uint64_t *n_targets, char *err,
                  size_t errlen)
{
    return b->in->eval(b->ib, bt, doc_mask, loss_sum, n_targets, err, errlen);
}

static int d_get_state(tr_backend *b, tr_model *host, int moments, uint64_t *extra, char *err, size_t errlen)
{
    if (b->zero && moments) {
        /* the checkpoint holds the full moments (any world size resumes) */
        int rc = tr_comm_allgather_units_f32(b->c, tr_model_adam_m(b->m), b->P, b->unit);
        if (!rc)
            rc = tr_comm_allgather_units_f32(b->c, tr_model_adam_v(b->m), b->P, b->unit);
        if (rc)
            return comm_fail(b->c, rc, "AdamW state all-gather", err, errlen);
    }
    return b->in->get_state(b->ib, host, moments, extra, err, errlen);
}

static void d_mem_report(tr_backend *b, tr_backend_mem *out) { b->in->mem_report(b->ib, out); }

static const tr_backend_ops dist_cpu = {
    .name = "cpu (data-parallel)",
    .device = TR_DEV_CPU,
    .device_memory = 0,
    .ckpt_extra = 0,
    .loss_scale = 0,
    .probe = d_probe,
    .create = d_create,
    .destroy = d_destroy,
    .loader_hooks = d_loader_hooks,
    .set_state = d_set_state,
    .zero_grad = d_zero_grad,
    .micro = d_micro,
    .reduce = d_reduce,
    .step = d_step,
    .eval = d_eval,
    .get_state = d_get_state,
    .mem_report = d_mem_report,
};

int tr_dist_backend(const tr_train_opts *o, const tr_backend_ops *inner, const tr_backend_ops **out, char *err,
                    size_t errlen)
{
    *out = inner;
    if (tr_dist_world(o) == 1) {
        if (o->zero) {
            snprintf(err, errlen, "--zero 1 needs more than one rank (start llmtrain with mpirun -np N or srun)");
            return TR_ERR_ARG;
        }
        return TR_OK;
    }
    if (inner != &tr_backend_cpu) {
        snprintf(err, errlen, "--device %s with %d ranks: data-parallel training runs on the CPU backend so far "
                              "(the NCCL engine, train/comm_nccl.h, is not wired into the %s backend yet); use "
                              "--device cpu or one rank",
                 tr_device_name(inner->device), tr_dist_world(o), inner->name);
        return TR_ERR_NODEVICE;
    }
    *out = &dist_cpu;
    return TR_OK;
}

int tr_dist_agree(const tr_train_opts *o, int rc, const char *what, char *err, size_t errlen)
{
    tr_comm *c = tr_dist_of(o);
    if (!c || tr_comm_world(c) == 1)
        return rc;
    uint64_t failed = rc != 0;
    /* rank 0 may write a large checkpoint while the others wait here: the
     * deadline of this wait is max(the deadline, MKS_COMM_CKPT_TIMEOUT or
     * 1800 s) */
    double old = tr_comm_timeout(c), slow = 1800;
    const char *v = getenv("MKS_COMM_CKPT_TIMEOUT");
    if (v && *v) {
        char *end;
        double t = strtod(v, &end);
        if (!*end && t > 0 && t <= 1e7)
            slow = t;
    }
    if (slow > old)
        tr_comm_set_timeout(c, slow);
    int crc = tr_comm_allreduce_u64(c, &failed, 1);
    tr_comm_set_timeout(c, old);
    if (crc)
        return comm_fail(c, crc, what, err, errlen);
    if (rc)
        return rc;
    if (failed) {
        snprintf(err, errlen, "rank %d: %s failed on %llu other rank(s) (see their messages)", tr_comm_rank(c), what,
                 (unsigned long long)failed);
        return TR_ERR_INTERNAL;
    }
    return TR_OK;
}
