/* dp_buckets.c - how data parallelism cuts a gradient into buckets
 * (tr_dp_buckets, dist.h): shared by the CPU wrapper (dist.c, MPI) and the
 * CUDA backend (backend_cuda.cu, NCCL), so both reduce the same ranges in
 * the same order. */
#include "dist.h"

#include <stdlib.h>

static int cmp_bucket(const void *x, const void *y)
{
    const tr_dp_bucket *a = x, *b = y;
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    return a->a < b->a ? -1 : a->a > b->a;
}

int tr_dp_buckets(const tr_model_config *mc, size_t el, tr_dp_bucket **out, int *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (el == 0)
        return TR_ERR_ARG;
    size_t sizes[TR_NUM_PARAM_TENSORS];
    tr_model_param_sizes(mc, sizes);
    size_t cap = 16;
    for (int t = 0; t < TR_NUM_PARAM_TENSORS; t++)
        cap += (size_t)tr_model_param_layers(mc, t) + sizes[t] / el + 2;
    tr_dp_bucket *bk = calloc(cap, sizeof *bk);
    if (!bk)
        return TR_ERR_NOMEM;
    int n = 0;
    size_t off = 0;
    for (int t = 0; t < TR_NUM_PARAM_TENSORS; t++) {
        int nl = tr_model_param_layers(mc, t);
        size_t per = sizes[t] / (size_t)nl;
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
        off += sizes[t];
    }
    qsort(bk, (size_t)n, sizeof *bk, cmp_bucket);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && bk[m - 1].group == bk[i].group && bk[m - 1].b == bk[i].a &&
            bk[i].b - bk[m - 1].a <= el)
            bk[m - 1].b = bk[i].b;
        else
            bk[m++] = bk[i];
    }
    *out = bk;
    *n_out = m;
    return TR_OK;
}
