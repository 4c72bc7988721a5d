/* dist.h - data-parallel training on top of a compute backend (internal
 * header of the train module; issue 16, docs/cluster.md).
 *
 * The process's launcher communicator: llmtrain's main calls tr_dist_init
 * before anything else (MPI when started by mpirun / srun, world 1
 * otherwise: then nothing changes) and tr_dist_finish at exit; tr_train
 * takes it (tr_dist_of) unless tr_train_opts.comm names another.
 *
 * The data-parallel backend wraps the CPU backend (backend_cpu.c, whose
 * state is the host model itself), on the policy of train/dp.h:
 *   micro   the step's micro-batches are dealt in contiguous blocks
 *           (tr_dp_owner); a rank hands the others' back to the loader
 *           unread (every rank's loader walks the same rows, so the data
 *           order is the one-process order). The rank's last micro-batch of
 *           the step is armed with the backend's grad_hook: as backward
 *           finishes each group of the gradient, the buckets it completed
 *           (tr_dp_overlap_bucket: MKS_DP_BUCKET_MB, default 25 MiB; 0: no
 *           overlap) are handed to a communication thread that reduces them
 *           in rank order while backward goes on (comm.h range
 *           collectives);
 *   reduce  waits for the buckets (or, without overlap, reduces the whole
 *           gradient: rank-order all-reduce, or with ZeRO-1 a reduce-scatter
 *           on whole gradient-norm parts); then tr_dp_reduce_loss: the
 *           step's loss sum re-added per micro-batch in micro-batch order
 *           and the target counts summed, so both equal the one-process
 *           values;
 *   step    without ZeRO: the CPU step on every rank (same gradient -> same
 *           parameters); ZeRO-1: 1/targets, the clip norm from the 256 fixed
 *           parts (kn_sumsq_ref's split: the same bits), AdamW on the rank's
 *           shard only, then an all-gather of the parameters;
 *   ZeRO-1  the rank holds only its shard of the AdamW moments (own_moments:
 *           the host model has none); save_ckpt streams the full moments to
 *           rank 0's checkpoint shard by shard; set_state reads the rank's
 *           shard of the full moments, so a checkpoint resumes on any world
 *           size.
 * Rank 0 alone prints, logs, samples and writes checkpoints; every rank
 * then agrees on the outcome (tr_dist_agree), so a checkpoint on disk is one
 * every rank has passed. Validation batches are shared over the ranks
 * (tr_dist_val_mine / tr_dist_val_sum). */
#ifndef TR_DIST_H
#define TR_DIST_H

#include <stddef.h>

#include "backend.h"
#include "comm.h"
#include "model.h"
#include "tr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tr_dist_init / tr_dist_finish (the process communicator): tr.h. */

/* The communicator of a run: o->comm, else the process's (NULL before
 * tr_dist_init); NULL = world 1. */
tr_comm *tr_dist_of(const tr_train_opts *o);
int tr_dist_rank(const tr_train_opts *o);
int tr_dist_world(const tr_train_opts *o);

/* Every rank's rc of one phase (e.g. rank 0 writing a checkpoint): rc when
 * it failed here, TR_ERR_INTERNAL with a message when it failed on another
 * rank, TR_OK when it succeeded everywhere. Also a barrier, whose deadline
 * is at least MKS_COMM_CKPT_TIMEOUT seconds (default 1800: rank 0 may be
 * writing a large checkpoint meanwhile). */
int tr_dist_agree(const tr_train_opts *o, int rc, const char *what, char *err, size_t errlen);

/* Validation shared over the ranks: batch k of n is evaluated by one rank
 * (contiguous blocks, as the micro-batches); tr_dist_val_sum gathers the
 * per-batch loss sums l[0..n) and target counts k[0..n) (0 on the ranks
 * that did not evaluate a batch) and adds them to *ls, *nt in batch order:
 * the one-process sum bit for bit. n <= TR_DIST_VAL_GROUP per call (the
 * caller adds group after group, in order). */
#define TR_DIST_VAL_GROUP 256
int tr_dist_val_mine(const tr_train_opts *o, int k, int n);
int tr_dist_val_sum(const tr_train_opts *o, double *l, uint64_t *k, int n, double *ls, uint64_t *nt, char *err,
                    size_t errlen);

/* The backend a run uses: inner itself at world 1; the data-parallel
 * wrapper at world > 1 for the CPU backend; the CUDA backend itself at
 * world > 1 (it deals the micro-batches and all-reduces over NCCL: its
 * reduce; --zero 1 refused, TR_ERR_ARG); TR_ERR_NODEVICE with a message for
 * any other backend. */
int tr_dist_backend(const tr_train_opts *o, const tr_backend_ops *inner, const tr_backend_ops **out, char *err,
                    size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
