/* dp.c - the data-parallel policy (dp.h): the environment knobs, the
 * gradient's buckets and the loss reduction, shared by the CPU wrapper
 * (dist.c, MPI) and the CUDA backend (backend_cuda.cu, NCCL), so both
 * reduce the same ranges in the same order. */
#include "dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_BUCKET_MB 25.0

/* A switch: set, not empty and not "0". */
static int env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* MKS_DP_BUCKET_MB: bucket size in MiB (default 25; 0: no overlap, the
 * whole gradient reduced after backward). Not a number in [0, 1e6]: the
 * default. */
static double bucket_mb(void) {
    const char *v = getenv("MKS_DP_BUCKET_MB");
    if (v && *v) {
        char *end;
        double x = strtod(v, &end);
        if (!*end && x >= 0 && x <= 1e6) return x;
    }
    return DEFAULT_BUCKET_MB;
}

size_t tr_dp_overlap_bucket(const tr_dp_caps *caps) {
    if (!caps->hook || !caps->async || (caps->opt_in && !env_on("MKS_GPU_OVERLAP"))) return 0;
    double mb = bucket_mb();
    if (mb <= 0) return 0;
    size_t el = (size_t)(mb * 1048576.0 / sizeof(float));
    return el > 0 ? el : 1;
}

int tr_dp_device_world1(void) { return env_on("MKS_GPU_NCCL"); }

int tr_dp_stats(void) {
    const char *v = getenv("MKS_DP_STATS");
    return v && *v && *v != '0';
}

int tr_dp_exact_loss(int n_micro, int world) {
    return n_micro <= 4096 &&
           (uint64_t)n_micro * sizeof(double) * (uint64_t)world <= tr_comm_buffer_bytes(world, TR_COMM_DEFAULT_BUCKET);
}

int tr_dp_reduce_loss(tr_comm *c, double *mloss, int n_micro, int exact, double *loss_sum, uint64_t *n_targets,
                      char *err, size_t errlen) {
    if (tr_comm_world(c) == 1) return TR_OK;
    int rc = tr_comm_allreduce_u64(c, n_targets, 1);
    if (rc) return tr_comm_failed(c, rc, "target count all-reduce", err, errlen);
    if (exact) {
        /* each micro-batch's loss is non-zero on one rank only: the fold
         * leaves it unchanged; then add them in micro-batch order like the
         * one-process loop (0 + l_0 + l_1 + ...) */
        rc = tr_comm_allreduce_f64(c, mloss, (size_t)n_micro);
        if (rc) return tr_comm_failed(c, rc, "loss all-reduce", err, errlen);
        double s = 0;
        for (int j = 0; j < n_micro; j++) s += mloss[j];
        *loss_sum = s;
        return TR_OK;
    }
    rc = tr_comm_allreduce_f64(c, loss_sum, 1);
    return rc ? tr_comm_failed(c, rc, "loss all-reduce", err, errlen) : TR_OK;
}

/* ---- buckets ------------------------------------------------------------- */

static int cmp_bucket(const void *x, const void *y) {
    const tr_dp_bucket *a = x, *b = y;
    if (a->group != b->group) return a->group < b->group ? -1 : 1;
    return a->a < b->a ? -1 : a->a > b->a;
}

int tr_dp_buckets(const tr_model_config *mc, size_t el, tr_dp_bucket **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    if (el == 0) return TR_ERR_ARG;
    int nt = tr_model_n_tensors(mc); /* any family's tensor table */
    size_t cap = 16;
    for (int t = 0; t < nt; t++) cap += (size_t)tr_model_param_layers(mc, t) + tr_model_tensor_size(mc, t) / el + 2;
    tr_dp_bucket *bk = calloc(cap, sizeof *bk);
    if (!bk) return TR_ERR_NOMEM;
    int n = 0;
    size_t off = 0;
    for (int t = 0; t < nt; t++) {
        int nl = tr_model_param_layers(mc, t);
        size_t sz = tr_model_tensor_size(mc, t), per = sz / (size_t)nl;
        size_t k = per >= el ? 1 : el / per; /* layers per bucket */
        for (long hiL = nl; hiL > 0;) {
            long loL = hiL - (long)k > 0 ? hiL - (long)k : 0;
            size_t a = off + (size_t)loL * per, e = off + (size_t)hiL * per;
            int g = tr_model_grad_group_of(mc, t, (int)loL);
            for (size_t x = a; x < e; x += el) { /* a layer over the bucket: pieces */
                if ((size_t)n >= cap) {
                    free(bk);
                    return TR_ERR_INTERNAL;
                }
                bk[n].a = x;
                bk[n].b = e - x < el ? e : x + el;
                bk[n].group = g;
                n++;
            }
            hiL = loL;
        }
        off += sz;
    }
    qsort(bk, (size_t)n, sizeof *bk, cmp_bucket);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && bk[m - 1].group == bk[i].group && bk[m - 1].b == bk[i].a && bk[i].b - bk[m - 1].a <= el)
            bk[m - 1].b = bk[i].b;
        else bk[m++] = bk[i];
    }
    *out = bk;
    *n_out = m;
    return TR_OK;
}
