/* dist.c - data-parallel training: the process communicator and the
 * data-parallel wrapper of the CPU backend (see dist.h). */
#include "mks_common.h"
#include "dist.h"

#include "dp.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kn.h"
#include "model.h"
#include "optim.h"

/* ---- the process communicator ------------------------------------------ */

static tr_comm *g_comm;

int tr_dist_init(char *err, size_t errlen) {
    if (g_comm) return TR_OK;
    return tr_comm_open(NULL, &g_comm, err, errlen);
}

int tr_dist_finish(int status) {
    if (!g_comm) return status;
    if (status != 0 && tr_comm_world(g_comm) > 1) {
        /* MPI_Abort(..., 1) made every refusal under mpirun exit 1 (issue 32) */
        int agreed = tr_comm_exit_agree(g_comm, status, TR_DIST_EXIT_AGREE_S);
        if (agreed <= 0) tr_comm_abort(g_comm, status); /* does not return under MPI */
        else status = agreed;
    }
    tr_comm_close(g_comm);
    g_comm = NULL;
    return status;
}

tr_comm *tr_dist_of(const tr_train_opts *o) {
    if (o && o->comm) return (tr_comm *)o->comm;
    return g_comm;
}

int tr_dist_rank(const tr_train_opts *o) {
    tr_comm *c = tr_dist_of(o);
    return c ? tr_comm_rank(c) : 0;
}

int tr_dist_world(const tr_train_opts *o) {
    tr_comm *c = tr_dist_of(o);
    return c ? tr_comm_world(c) : 1;
}

/* ---- the data-parallel CPU backend --------------------------------------- */

extern const tr_backend_ops tr_backend_cpu;

#define NORM_PARTS TR_DP_NORM_PARTS /* kn_sumsq_ref's fixed split of the gradient */

typedef tr_dp_bucket bucket;

/* The communication thread: reduces buckets in order while the main thread
 * runs backward (the main thread releases them from the readiness hook and
 * waits for all of them in reduce). Only one thread uses the communicator
 * at a time: the main thread calls no collective between the first release
 * of a step and the end of the wait (tr_comm_serialized). */
typedef struct {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, quit;
    int released, done, rc; /* buckets released / reduced this step; first failure */
    char err[1024];
    double t_comm, t_wait; /* seconds in collectives (thread), waiting in reduce (main) */
    uint64_t steps;
} overlap;

struct tr_backend {
    const tr_backend_ops *in;
    tr_backend *ib; /* the wrapped CPU backend instance */
    tr_comm *c;
    tr_model *m;               /* the host model: params, grads (and no optimizer state with ZeRO-1) */
    const tr_optim_ops *optim; /* the run's optimizer (train/optim.h) */
    const tr_train_opts *o;
    int W, rank, zero;
    size_t P;
    size_t unit, lo, hi;           /* ZeRO-1: this rank's shard of whole norm parts */
    float *sh[TR_OPTIM_MAX_STATE]; /* ZeRO-1: this rank's shard [lo, hi) of each optimizer state tensor */
    double *mloss;                 /* loss sum per micro-batch of the step (exact fold) */
    int nmloss;
    int exact_loss; /* mloss fits the small reductions */
    double parts[NORM_PARTS];
    /* overlap of the gradient reduction with backward */
    int ovl_on;
    bucket *bk;
    int nbk;
    overlap ov;
};

static void *comm_thread(void *arg) {
    tr_backend *b = arg;
    overlap *ov = &b->ov;
    float *g = tr_model_grads(b->m);
    pthread_mutex_lock(&ov->mu);
    for (;;) {
        while (!ov->quit && ov->done >= ov->released) pthread_cond_wait(&ov->cv, &ov->mu);
        if (ov->quit) break; /* the run ends (on a failure: buckets may be left) */
        int i = ov->done, failed = ov->rc != 0;
        pthread_mutex_unlock(&ov->mu);
        int rc = TR_OK;
        double t0 = mc_now_s();
        if (!failed) /* after a failure the communicator is not used again */
            rc = b->zero ? tr_comm_reduce_scatter_units_range_f32(b->c, g, b->P, b->unit, b->bk[i].a, b->bk[i].b)
                         : tr_comm_allreduce_range_f32(b->c, g, b->bk[i].a, b->bk[i].b);
        double dt = mc_now_s() - t0;
        pthread_mutex_lock(&ov->mu);
        ov->t_comm += dt;
        if (rc && !ov->rc) {
            ov->rc = rc;
            snprintf(ov->err, sizeof ov->err, "%s", tr_comm_error(b->c));
        }
        ov->done++;
        pthread_cond_broadcast(&ov->cv);
    }
    pthread_mutex_unlock(&ov->mu);
    return NULL;
}

/* The readiness hook (rank's last micro-batch): release every bucket that
 * group g made final. */
static void on_ready(void *ctx, int g) {
    tr_backend *b = ctx;
    overlap *ov = &b->ov;
    pthread_mutex_lock(&ov->mu);
    int r = ov->released;
    while (r < b->nbk && b->bk[r].group <= g) r++;
    if (r != ov->released) {
        ov->released = r;
        pthread_cond_broadcast(&ov->cv);
    }
    pthread_mutex_unlock(&ov->mu);
}

/* Release what is left and wait for every bucket of the step. */
static int overlap_wait(tr_backend *b, char *err, size_t errlen) {
    overlap *ov = &b->ov;
    double t0 = mc_now_s();
    pthread_mutex_lock(&ov->mu);
    ov->released = b->nbk;
    pthread_cond_broadcast(&ov->cv);
    while (ov->done < b->nbk) pthread_cond_wait(&ov->cv, &ov->mu);
    int rc = ov->rc;
    ov->released = ov->done = 0;
    ov->t_wait += mc_now_s() - t0;
    ov->steps++;
    if (rc) {
        snprintf(err, errlen, "%s: %s", b->zero ? "gradient reduce-scatter" : "gradient all-reduce", ov->err);
        rc = rc == TR_ERR_NOMEM || rc == TR_ERR_ARG ? rc : TR_ERR_INTERNAL;
    }
    pthread_mutex_unlock(&ov->mu);
    return rc;
}

static void d_destroy(tr_backend *b) {
    if (!b) return;
    if (b->ov.started) {
        pthread_mutex_lock(&b->ov.mu);
        b->ov.quit = 1;
        pthread_cond_broadcast(&b->ov.cv);
        pthread_mutex_unlock(&b->ov.mu);
        pthread_join(b->ov.th, NULL);
        pthread_mutex_destroy(&b->ov.mu);
        pthread_cond_destroy(&b->ov.cv);
    }
    if (tr_dp_stats())
        fprintf(stderr,
                "dp stats: rank %d/%d: overlap %s (%d buckets), %llu steps, %.3f s in bucket collectives (comm "
                "thread), %.3f s of gradient reduction after backward; peak RSS %.1f MiB\n",
                b->rank, b->W, b->ovl_on ? "on" : "off", b->nbk, (unsigned long long)b->ov.steps, b->ov.t_comm,
                b->ov.t_wait, (double)tr_peak_rss() / 1048576.0);
    if (b->ib) b->in->destroy(b->ib);
    free(b->bk);
    for (int k = 0; k < TR_OPTIM_MAX_STATE; k++) free(b->sh[k]);
    free(b->mloss);
    free(b);
}

static int d_create(const tr_backend_args *a, tr_backend **out, char *err, size_t errlen) {
    *out = NULL;
    tr_backend *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "cannot allocate the data-parallel backend");
        return TR_ERR_NOMEM;
    }
    b->in = &tr_backend_cpu;
    b->c = tr_dist_of(a->opts);
    b->m = a->host;
    b->optim = a->optim;
    b->o = a->opts;
    b->W = tr_comm_world(b->c);
    b->rank = tr_comm_rank(b->c);
    b->zero = a->opts->zero;
    b->P = tr_model_param_count(a->mc);
    b->unit = tr_dp_zero_unit(b->P);
    tr_dp_zero_shard(b->P, b->W, b->rank, &b->lo, &b->hi);
    b->nmloss = a->plan->n_micro > 0 ? a->plan->n_micro : 1;
    b->exact_loss = tr_dp_exact_loss(b->nmloss, b->W);
    b->mloss = calloc((size_t)b->nmloss, sizeof(double));
    int rc = b->mloss ? TR_OK : TR_ERR_NOMEM;
    if (!rc && b->zero && b->optim->state_bytes != sizeof(float)) {
        /* the shards travel and are checkpointed as fp32 (tr_comm_send_f32) */
        snprintf(err, errlen, "--zero 1: the optimizer %s keeps %d-byte state; ZeRO-1 shards fp32 state only",
                 b->optim->name, b->optim->state_bytes);
        d_destroy(b);
        return TR_ERR_ARG;
    }
    if (!rc && b->zero) {
        /* ZeRO-1: only this rank's shard of the optimizer state (the host model has none) */
        size_t ns = b->hi - b->lo ? b->hi - b->lo : 1;
        for (int k = 0; k < b->optim->n_state && !rc; k++)
            if (!(b->sh[k] = calloc(ns, sizeof(float)))) rc = TR_ERR_NOMEM;
    }
    /* overlap: the communication thread drives the communicator while
     * backward runs */
    tr_dp_caps caps = {b->in->grad_hook != NULL, tr_comm_serialized(b->c), 0};
    size_t el = tr_dp_overlap_bucket(&caps);
    b->ovl_on = el > 0;
    if (!rc && b->ovl_on) rc = tr_dp_buckets(a->mc, el, &b->bk, &b->nbk);
    if (rc) {
        d_destroy(b);
        snprintf(err, errlen, "cannot allocate the data-parallel backend");
        return rc;
    }
    rc = b->in->create(a, &b->ib, err, errlen);
    if (rc) {
        d_destroy(b);
        return rc;
    }
    if (b->ovl_on) {
        if (pthread_mutex_init(&b->ov.mu, NULL) || pthread_cond_init(&b->ov.cv, NULL) ||
            pthread_create(&b->ov.th, NULL, comm_thread, b)) {
            d_destroy(b);
            snprintf(err, errlen, "cannot start the communication thread");
            return TR_ERR_INTERNAL;
        }
        b->ov.started = 1;
    }
    *out = b;
    return TR_OK;
}

static void d_loader_hooks(tr_backend *b, tr_loader_opts *lo) {
    if (b->in->loader_hooks) b->in->loader_hooks(b->ib, lo);
}

/* The checkpoint's deadline for waits that follow rank 0's disk writes:
 * max(the deadline, MKS_COMM_CKPT_TIMEOUT or 1800 s). Returns the old one. */
static double slow_timeout(tr_comm *c) {
    double old = tr_comm_timeout(c), slow = 1800;
    const char *v = getenv("MKS_COMM_CKPT_TIMEOUT");
    if (v && *v) {
        char *end;
        double t = strtod(v, &end);
        if (!*end && t > 0 && t <= 1e7) slow = t;
    }
    if (slow > old) tr_comm_set_timeout(c, slow);
    return old;
}

/* ZeRO-1 checkpoint I/O: an optimizer state section's bytes in pieces. Load:
 * this rank's shard lands in sh[k], the rest is skipped through the
 * gradient buffer (not in use outside a step). Save (rank 0): its own shard
 * directly, every other rank's shard received whole into the gradient
 * buffer; `pulled` counts the (section, rank) shards received, in the order
 * the other ranks send them. */
typedef struct {
    tr_backend *b;
    int sec; /* state tensor k (section 1 + k) */
    int save;
    int *pulled;
    int failed;
} zio;

static void *zio_fn(void *ctx, uint64_t off, uint64_t *len) {
    zio *z = ctx;
    tr_backend *b = z->b;
    float *mine = b->sh[z->sec], *g = tr_model_grads(b->m);
    size_t e = (size_t)(off / sizeof(float));
    if (off % sizeof(float) || e >= b->P) return NULL;
    if (!z->save) {
        size_t end = e < b->lo ? b->lo : e < b->hi ? b->hi : b->P;
        *len = (uint64_t)(end - e) * sizeof(float);
        return e >= b->lo && e < b->hi ? (void *)(mine + (e - b->lo)) : (void *)(g + e);
    }
    int r = 0;
    size_t lo = 0, hi = 0;
    for (r = 0; r < b->W; r++) {
        tr_comm_shard_units(b->P, b->unit, b->W, r, &lo, &hi);
        if (e >= lo && e < hi) break;
    }
    if (r == b->W || e != lo) /* pieces start at shard starts */
        return NULL;
    *len = (uint64_t)(hi - lo) * sizeof(float);
    if (r == 0) return mine;
    if (tr_comm_recv_f32(b->c, g + lo, hi - lo, r)) {
        z->failed = 1;
        return NULL;
    }
    (*z->pulled)++;
    return g + lo;
}

static int d_set_state(tr_backend *b, tr_model *host, const uint64_t *extra, uint64_t opt_step, char *err,
                       size_t errlen) {
    int rc = b->in->set_state(b->ib, host, extra, opt_step, err, errlen);
    if (rc || !b->zero) return rc;
    /* ZeRO-1 resume: this rank's shard of the optimizer state from the full
     * tensors in the checkpoint (any world size wrote it: the shards are
     * re-cut) */
    tr_ckpt_meta km;
    rc = tr_ckpt_load_io(b->o->ckpt_dir, &km, NULL, NULL, 0, err, errlen);
    if (rc) return rc;
    if (km.step != opt_step) {
        snprintf(err, errlen, "%s/ckpt.bin changed while resuming (step %llu, then %llu)", b->o->ckpt_dir,
                 (unsigned long long)opt_step, (unsigned long long)km.step);
        return TR_ERR_CORRUPT;
    }
    tr_ckpt_section sec[TR_OPTIM_MAX_SECTIONS];
    int ns = tr_optim_ckpt_sections(b->optim, NULL, b->P, NULL, TR_BACKEND_EXTRA * sizeof(uint64_t), 1, sec);
    zio z[TR_OPTIM_MAX_STATE];
    tr_ckpt_io io[TR_OPTIM_MAX_SECTIONS] = {{NULL, NULL}};
    for (int k = 0; k < b->optim->n_state; k++) {
        z[k] = (zio){b, k, 0, NULL, 0};
        io[1 + k] = (tr_ckpt_io){zio_fn, &z[k]};
    }
    return tr_ckpt_load_io(b->o->ckpt_dir, &km, sec, io, km.n_sections == (uint64_t)ns ? ns : ns - 1, err, errlen);
}

static int d_save_ckpt(tr_backend *b, const char *dir, const tr_ckpt_meta *km, const tr_ckpt_section *sec, int n,
                       char *err, size_t errlen) {
    if (!b->zero) /* the host model holds everything: rank 0 writes it */
        return b->rank == 0 ? tr_ckpt_save(dir, km, sec, n, err, errlen) : TR_OK;
    double old = slow_timeout(b->c);
    int rc = TR_OK;
    if (b->rank != 0) {
        /* serve: this rank's shards to rank 0, state tensor 0 first */
        for (int k = 0; k < b->optim->n_state && !rc; k++) rc = tr_comm_send_f32(b->c, b->sh[k], b->hi - b->lo, 0);
        if (rc) rc = tr_comm_failed(b->c, rc, "sending the optimizer state shards to rank 0", err, errlen);
        tr_comm_set_timeout(b->c, old);
        return rc;
    }
    int pulled = 0, failed = 0;
    zio z[TR_OPTIM_MAX_STATE];
    tr_ckpt_io io[TR_OPTIM_MAX_SECTIONS] = {{NULL, NULL}};
    for (int k = 0; k < b->optim->n_state; k++) {
        z[k] = (zio){b, k, 1, &pulled, 0};
        io[1 + k] = (tr_ckpt_io){zio_fn, &z[k]};
    }
    rc = tr_ckpt_save_io(dir, km, sec, io, n, err, errlen);
    for (int k = 0; k < b->optim->n_state; k++) failed |= z[k].failed;
    if (failed) {
        rc = tr_comm_failed(b->c, TR_ERR_IO, "gathering the optimizer state shards", err, errlen);
    } else {
        /* the write failed before every shard was pulled: take the rest, so
         * no rank waits for rank 0 */
        int k = 0;
        for (int s2 = 0; s2 < b->optim->n_state; s2++)
            for (int r = 1; r < b->W; r++) {
                size_t lo, hi;
                tr_comm_shard_units(b->P, b->unit, b->W, r, &lo, &hi);
                if (hi == lo) continue;
                if (k++ < pulled) continue;
                int crc = tr_comm_recv_f32(b->c, tr_model_grads(b->m) + lo, hi - lo, r);
                if (crc) {
                    char e2[512];
                    tr_comm_failed(b->c, crc, "draining the optimizer state shards", e2, sizeof e2);
                    if (!rc) {
                        snprintf(err, errlen, "%s", e2);
                        rc = TR_ERR_INTERNAL;
                    }
                    s2 = b->optim->n_state;
                    break;
                }
            }
    }
    tr_comm_set_timeout(b->c, old);
    return rc;
}

static int d_zero_grad(tr_backend *b, char *err, size_t errlen) {
    memset(b->mloss, 0, sizeof(double) * (size_t)b->nmloss);
    return b->in->zero_grad(b->ib, err, errlen);
}

static int d_micro(tr_backend *b, tr_loader *ld, const tr_batch *bt, int doc_mask, double *loss_sum,
                   uint64_t *n_targets, double *wait_s, char *err, size_t errlen) {
    *loss_sum = 0;
    *n_targets = 0;
    int j = bt->micro, n = bt->n_micro;
    if (tr_dp_owner(j, n, b->W) != b->rank) {
        tr_loader_release(ld); /* another rank's micro-batch */
        return TR_OK;
    }
    /* this rank's last micro-batch of the step: buckets start as backward
     * finishes them */
    int arm = b->ovl_on && tr_dp_last_of_rank(j, n, b->W);
    if (arm) b->in->grad_hook(b->ib, on_ready, b);
    int rc = b->in->micro(b->ib, ld, bt, doc_mask, loss_sum, n_targets, wait_s, err, errlen);
    if (arm) b->in->grad_hook(b->ib, NULL, NULL);
    if (!rc && bt->micro >= 0 && bt->micro < b->nmloss) b->mloss[bt->micro] = *loss_sum;
    return rc;
}

static int d_reduce(tr_backend *b, double *loss_sum, uint64_t *n_targets, char *err, size_t errlen) {
    float *g = tr_model_grads(b->m);
    int rc;
    if (b->ovl_on) {
        rc = overlap_wait(b, err, errlen);
        if (rc) return rc;
    } else {
        double t0 = mc_now_s();
        rc = b->zero ? tr_comm_reduce_scatter_units_f32(b->c, g, b->P, b->unit) : tr_comm_allreduce_f32(b->c, g, b->P);
        if (rc)
            return tr_comm_failed(b->c, rc, b->zero ? "gradient reduce-scatter" : "gradient all-reduce", err, errlen);
        b->ov.t_wait += mc_now_s() - t0; /* all of it is waited for (MKS_DP_STATS) */
        b->ov.steps++;
    }
    return tr_dp_reduce_loss(b->c, b->mloss, b->nmloss, b->exact_loss, loss_sum, n_targets, err, errlen);
}

/* ZeRO-1: the CPU step (backend_cpu.c: 1/targets, clip, the optimizer's
 * step_cpu) on this rank's shard, with the norm summed over kn_sumsq_ref's
 * parts in its order, then the parameters all-gathered. Every operation is
 * elementwise or the same per-part sum, so the result equals the unsharded
 * step bit for bit. */
static int zero_step(tr_backend *b, const tr_optim_hparams *h, float grad_clip, uint64_t n_targets, uint64_t opt_step,
                     float *gnorm, char *err, size_t errlen) {
    float *g = tr_model_grads(b->m), *p = tr_model_params(b->m);
    size_t lo = b->lo, n = b->hi - b->lo;
    if (n_targets && n) kn_scale_ref(g + lo, n, (float)(1.0 / (double)n_targets));
    for (int q = 0; q < NORM_PARTS; q++) {
        size_t a = (size_t)q * b->unit, e = a + b->unit;
        if (a > b->P) a = b->P;
        if (e > b->P) e = b->P;
        double s = 0.0;
        if (a >= b->lo && a < b->hi)
            for (size_t i = a; i < e; i++) s += (double)g[i] * g[i];
        b->parts[q] = s;
    }
    int rc = tr_comm_allreduce_f64(b->c, b->parts, NORM_PARTS);
    if (rc) return tr_comm_failed(b->c, rc, "gradient norm all-reduce", err, errlen);
    double ss = 0.0;
    for (int q = 0; q < NORM_PARTS; q++) ss += b->parts[q];
    double norm = sqrt(ss);
    *gnorm = (float)norm;
    if (grad_clip > 0.0f) {
        double coef = grad_clip / (norm + 1e-6);
        if (coef < 1.0 && n) kn_scale_ref(g + lo, n, (float)coef);
    }
    size_t off = 0;
    const tr_model_config *mc = tr_model_get_config(b->m);
    for (int t = 0, nt = tr_model_n_tensors(mc); t < nt; t++) { /* any family's tensor table */
        size_t sz = tr_model_tensor_size(mc, t);
        size_t a = off > b->lo ? off : b->lo, e = off + sz < b->hi ? off + sz : b->hi;
        void *st[TR_OPTIM_MAX_STATE];
        for (int k = 0; k < b->optim->n_state; k++) st[k] = b->sh[k] + (a - lo);
        if (a < e && b->optim->step_cpu(h, (int)opt_step, tr_model_tensor_decay(mc, t), p + a, g + a, st, e - a)) {
            snprintf(err, errlen, "optimiser step failed");
            return TR_ERR_INTERNAL;
        }
        off += sz;
    }
    rc = tr_comm_allgather_units_f32(b->c, p, b->P, b->unit);
    if (rc) return tr_comm_failed(b->c, rc, "parameter all-gather", err, errlen);
    return TR_OK;
}

static int d_step(tr_backend *b, const tr_optim_hparams *h, float grad_clip, uint64_t n_targets, uint64_t opt_step,
                  float *gnorm, int *skipped, float *scale, char *err, size_t errlen) {
    if (!b->zero) return b->in->step(b->ib, h, grad_clip, n_targets, opt_step, gnorm, skipped, scale, err, errlen);
    *skipped = 0;
    *scale = 1.0f;
    return zero_step(b, h, grad_clip, n_targets, opt_step, gnorm, err, errlen);
}

static int d_eval(tr_backend *b, const tr_batch *bt, int doc_mask, double *loss_sum, uint64_t *n_targets, char *err,
                  size_t errlen) {
    return b->in->eval(b->ib, bt, doc_mask, loss_sum, n_targets, err, errlen);
}

static int d_get_state(tr_backend *b, tr_model *host, int moments, uint64_t *extra, char *err, size_t errlen) {
    /* ZeRO-1 moments reach the checkpoint through save_ckpt */
    return b->in->get_state(b->ib, host, moments, extra, err, errlen);
}

static void d_mem_report(tr_backend *b, tr_backend_mem *out) { b->in->mem_report(b->ib, out); }

#define DIST_OPS(zero_)                                                                                                \
    {                                                                                                                  \
        .name = "cpu (data-parallel)", .device = TR_DEV_CPU, .device_memory = 0, .ckpt_extra = 0, .loss_scale = 0,     \
        .own_moments = zero_, .probe = d_probe, .create = d_create, .destroy = d_destroy,                              \
        .loader_hooks = d_loader_hooks, .set_state = d_set_state, .zero_grad = d_zero_grad, .micro = d_micro,          \
        .reduce = d_reduce, .step = d_step, .eval = d_eval, .get_state = d_get_state, .mem_report = d_mem_report,      \
        .grad_hook = NULL, .save_ckpt = d_save_ckpt,                                                                   \
    }

static int d_probe(const tr_train_opts *o, tr_backend_info *info, char *err, size_t errlen) {
    return tr_backend_cpu.probe(o, info, err, errlen);
}

static const tr_backend_ops dist_cpu = DIST_OPS(0);
static const tr_backend_ops dist_cpu_zero = DIST_OPS(1);

int tr_dist_backend(const tr_train_opts *o, const tr_backend_ops *inner, const tr_backend_ops **out, char *err,
                    size_t errlen) {
    *out = inner;
    if (tr_dist_world(o) == 1) {
        if (o->zero) {
            snprintf(err, errlen, "--zero 1 needs more than one rank (start llmtrain with mpirun -np N or srun)");
            return TR_ERR_ARG;
        }
        return TR_OK;
    }
    if (inner != &tr_backend_cpu && inner->device == TR_DEV_CUDA && inner->reduce) {
        /* the CUDA backend is its own data-parallel wrapper (NCCL,
         * train/backend_cuda.cu): dealing, all-reduce, loss/target sums */
        if (o->zero) {
            snprintf(err, errlen,
                     "--zero 1 --device cuda: ZeRO-1 is implemented on the CPU backend only (the GPU "
                     "backend all-reduces the whole gradient over NCCL); drop --zero or use --device cpu");
            return TR_ERR_ARG;
        }
        return TR_OK;
    }
    if (inner != &tr_backend_cpu) {
        snprintf(err, errlen,
                 "--device %s with %d ranks: data-parallel training runs on the CPU backend so far "
                 "(the NCCL engine, train/comm_nccl.cu, is not wired into the %s backend yet); use "
                 "--device cpu or one rank",
                 tr_device_name(inner->device), tr_dist_world(o), inner->name);
        return TR_ERR_NODEVICE;
    }
    *out = o->zero ? &dist_cpu_zero : &dist_cpu;
    return TR_OK;
}

int tr_dist_agree(const tr_train_opts *o, int rc, const char *what, char *err, size_t errlen) {
    tr_comm *c = tr_dist_of(o);
    if (!c || tr_comm_world(c) == 1) return rc;
    uint64_t failed = rc != 0;
    /* rank 0 may write a large checkpoint while the others wait here */
    double old = slow_timeout(c);
    int crc = tr_comm_allreduce_u64(c, &failed, 1);
    /* on a failure every rank learns the first failing rank's message: the
     * launcher may end that rank before it prints its own */
    enum { MSG = 384 };
    int W = tr_comm_world(c), first = -1;
    char msg[MSG] = "";
    if (!crc && failed) {
        uint8_t mine = rc != 0, *all = calloc((size_t)W, 1);
        crc = all ? tr_comm_allgather_bytes(c, &mine, all, 1) : TR_ERR_NOMEM;
        for (int r = 0; !crc && r < W && first < 0; r++)
            if (all[r]) first = r;
        free(all);
        if (!crc && first == tr_comm_rank(c))
            snprintf(msg, sizeof msg, "%s", err && errlen && err[0] ? err : tr_strerror(rc));
        if (!crc && first >= 0) crc = tr_comm_bcast(c, msg, sizeof msg, first);
    }
    tr_comm_set_timeout(c, old);
    if (crc) return tr_comm_failed(c, crc, what, err, errlen);
    if (rc) return rc;
    if (failed) {
        snprintf(err, errlen, "rank %d: %s failed on %llu other rank(s); rank %d: %s", tr_comm_rank(c), what,
                 (unsigned long long)failed, first, msg);
        return TR_ERR_INTERNAL;
    }
    return TR_OK;
}

/* ---- validation shared over the ranks ------------------------------------ */

int tr_dist_val_mine(const tr_train_opts *o, int k, int n) {
    return tr_dp_owner(k, n, tr_dist_world(o)) == tr_dist_rank(o);
}

int tr_dist_val_sum(const tr_train_opts *o, double *l, uint64_t *k, int n, double *ls, uint64_t *nt, char *err,
                    size_t errlen) {
    tr_comm *c = tr_dist_of(o);
    if (c && tr_comm_world(c) > 1 && n > 0) {
        /* each value is non-zero on its owner only: the rank-order fold
         * leaves it as computed. The world's copies pass through the
         * communication buffer: pieces that fit it. */
        size_t per = tr_comm_buffer_bytes(tr_comm_world(c), TR_COMM_DEFAULT_BUCKET) / 8 / (size_t)tr_comm_world(c);
        if (per < 1) per = 1;
        for (size_t a = 0; a < (size_t)n; a += per) {
            size_t m = (size_t)n - a < per ? (size_t)n - a : per;
            int rc = tr_comm_allreduce_f64(c, l + a, m);
            if (!rc) rc = tr_comm_allreduce_u64(c, k + a, m);
            if (rc) return tr_comm_failed(c, rc, "validation loss all-reduce", err, errlen);
        }
    }
    for (int i = 0; i < n; i++) {
        *ls += l[i];
        *nt += k[i];
    }
    return TR_OK;
}
