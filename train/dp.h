/* dp.h - the data-parallel policy (internal header of the train module;
 * docs/cluster.md): who computes what, how the gradient is cut and when its
 * reduction overlaps backward, and the environment knobs of both. One
 * policy, used by the CPU data-parallel wrapper (train/dist.c, host
 * communicator: MPI) and the CUDA backend (train/backend_cuda.cu, device
 * communicator: NCCL), so both deal, cut and reduce alike.
 *
 *   dealing   micro-batch (and validation batch) j of n goes to rank
 *             j * world / n: contiguous blocks, so the ranks' work in rank
 *             order is the one-process order (tr_dp_owner);
 *   overlap   a rank's last micro-batch of a step is armed with the
 *             backend's gradient-readiness hook; the buckets each group
 *             completes are reduced while backward goes on;
 *   buckets   the gradient cut along tensors and layers into buckets of at
 *             most MKS_DP_BUCKET_MB MiB (tr_dp_buckets);
 *   loss      per-micro-batch loss sums re-added in micro-batch order and
 *             target counts summed over the host communicator: both equal
 *             the one-process values (tr_dp_reduce_loss);
 *   ZeRO-1    (CPU) a rank owns whole parts of the gradient norm's
 *             TR_DP_NORM_PARTS fixed parts (tr_dp_zero_shard), so its
 *             shard's norm is exact.
 *
 * Environment (read here only):
 *   MKS_DP_BUCKET_MB  bucket size in MiB (default 25); 0: no overlap, the
 *                     whole gradient reduced after backward (CPU and GPU);
 *   MKS_GPU_OVERLAP   1: overlap on the GPU (opt-in until a multi-GPU run
 *                     has checked it; the CPU overlaps by default);
 *   MKS_GPU_NCCL      1: the GPU's NCCL path even at world 1 (a one-rank
 *                     communicator, tests/gpu/run.sh);
 *   MKS_DP_STATS      1: each rank prints its reduction times at the end. */
#ifndef TR_DP_H
#define TR_DP_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "model.h"
#include "tr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The rank that computes item j of n (micro-batch, validation batch). */
static inline int tr_dp_owner(int j, int n, int world) { return n > 0 ? (int)((long long)j * world / n) : 0; }
/* 1 when micro-batch j of n is its rank's last of the step (arm the
 * readiness hook there). */
static inline int tr_dp_last_of_rank(int j, int n, int world) {
    return j + 1 >= n || tr_dp_owner(j + 1, n, world) != tr_dp_owner(j, n, world);
}

/* ZeRO-1 (CPU): the shard of P parameters rank r of world owns, in whole
 * parts of kn_sumsq_ref's TR_DP_NORM_PARTS (unit = ceil(P / parts) elements;
 * the layout of tr_comm_shard_units). Inline: the planner counts it without
 * linking the communicator. */
#define TR_DP_NORM_PARTS 256
static inline size_t tr_dp_zero_unit(size_t P) { return P / TR_DP_NORM_PARTS + (P % TR_DP_NORM_PARTS != 0); }
static inline void tr_dp_zero_shard(size_t P, int world, int r, size_t *lo, size_t *hi) {
    tr_comm_shard_units(P, tr_dp_zero_unit(P), world, r, lo, hi);
}

/* What a backend can do for overlap. */
typedef struct {
    int hook;   /* it reports gradient groups as backward completes them (grad_hook) */
    int async;  /* the communicator can reduce while backward runs (a communication
                    * thread on a tr_comm_serialized host communicator, or a device
                    * engine's own stream) */
    int opt_in; /* overlap only with MKS_GPU_OVERLAP=1 (the GPU backend) */
} tr_dp_caps;
/* Elements per gradient bucket when this backend overlaps the reduction
 * with backward, 0 when it does not (MKS_DP_BUCKET_MB=0, or caps lacking). */
size_t tr_dp_overlap_bucket(const tr_dp_caps *caps);

/* A gradient bucket: elements [a, b) of the flat gradient (whole layers of
 * a per-layer tensor, or a piece of one), final once backward has finished
 * group `group` (tr_model_grad_group_of). */
typedef struct {
    size_t a, b;
    int group;
} tr_dp_bucket;
/* The gradient of a model cut into buckets of at most el elements along
 * tensors and layers (a per-layer tensor: runs of whole layers from the
 * last one down, so the first bucket is ready after a few layers), sorted
 * by the group that makes them final; neighbours of one group that touch
 * in memory merged up to el. A pure function: every rank computes the same
 * list, so the collectives (MPI or NCCL) match. *out: free(). */
int tr_dp_buckets(const tr_model_config *mc, size_t el, tr_dp_bucket **out, int *n_out);

/* 1 when the step's per-micro-batch loss sums (n_micro doubles per rank)
 * fit the host communicator's small reductions: the loss is then re-added
 * in micro-batch order (exact), else summed per rank. */
int tr_dp_exact_loss(int n_micro, int world);
/* After the gradient: the step's target count summed over the ranks and
 * its loss sum, from mloss[0..n_micro) (each micro-batch's sum, 0 on the
 * ranks that did not compute it) added in micro-batch order when exact,
 * else *loss_sum summed in rank order. World 1: nothing to do. */
int tr_dp_reduce_loss(tr_comm *c, double *mloss, int n_micro, int exact, double *loss_sum, uint64_t *n_targets,
                      char *err, size_t errlen);

/* MKS_GPU_NCCL: the GPU's data-parallel path at world 1. */
int tr_dp_device_world1(void);
/* MKS_DP_STATS: print each rank's reduction figures at the end. */
int tr_dp_stats(void);

#ifdef __cplusplus
}
#endif
#endif
