/* backend.h - the compute backend of a training run (internal header of the
 * train module; docs/trainer.md, "Backends").
 *
 * tr_train (train/trainer.c) owns everything that does not depend on where
 * the math runs: options, the row source, the plan, the loader, the host
 * model (the checkpoint layout: fp32 params + the optimizer's state tensors,
 * model.h, train/optim.h), logs, validation bookkeeping, checkpoints and
 * sampling.  A backend owns the parameters, gradients and optimiser state
 * *where they are computed* and does the per-step math, stepping with the
 * run's optimizer (tr_backend_args.optim: its state layout and its CPU or
 * GPU step).  The trainer calls, in this order:
 *
 *   probe         before planning: is the device usable, its name and
 *                 memory (the plan's default budget); option refusals that
 *                 depend on the backend (precision, recompute)
 *   create        after the plan and (on --resume) after the checkpoint was
 *                 loaded into the host model: allocate for micro-batches up to
 *                 (B, T) and take the host parameters
 *   set_state     on --resume: the host model's params and optimizer state
 *                 plus the checkpoint's optimiser words (extra) -> backend
 *   loader_hooks  (optional) buffer allocator for the loader (pinned memory)
 *   per step:     zero_grad; micro for each micro-batch; reduce (optional);
 *                 step
 *   eval          validation forward of a host batch
 *   get_state     backend -> host model (before a checkpoint, and the
 *                 params before --sample)
 *   mem_report    device memory figures for the messages and the log
 *   destroy       after the loader is closed (its buffers may be the
 *                 backend's)
 *
 * Every int function returns TR_OK or a negative TR_ERR_* and writes a
 * one-line message to err on failure.
 *
 * Registration: each backend is a const tr_backend_ops named
 * tr_backend_<name>, defined in train/backend_<name>.{c,cu}.
 * train/CMakeLists.txt lists the backends a build has (TR_BACKENDS: cpu,
 * plus cuda with MKS_ENABLE_CUDA) and generates tr_backends.c from
 * train/backends.c.in: the NULL-terminated table tr_backend_table.
 * tr_backend_find returns the first entry for a device.  trainer.c has no
 * knowledge of any particular backend. */
#ifndef TR_BACKEND_H
#define TR_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "optim.h"
#include "tr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Optimiser words a backend may keep in the checkpoint's last section
 * ("gpu_opt", after the optimizer's state sections: loss scale, clean steps,
 * skipped total, optimiser step count). */
enum { TR_BACKEND_EXTRA = 4 };

typedef struct tr_backend tr_backend; /* one backend instance (opaque) */

/* What probe finds (before the plan). */
typedef struct {
    char device_name[256];    /* "" : no separate device (the CPU) */
    uint64_t device_total;    /* device memory bytes (the plan's default budget); 0: none */
    uint64_t device_capacity; /* the largest budget the device can honour now (tr_plan_device_capacity
                               * of its free memory): a larger one is lowered to it; 0: no limit */
} tr_backend_info;

/* The memory budget a run on this device plans for: `asked` (0: the device's
 * memory), lowered to device_capacity when above it (nvidia-smi's total,
 * which CUDA never hands out whole; memory another process holds: the plan
 * would size an arena cudaMalloc refuses), with a note on `note` (NULL:
 * quiet).  Used by the run and by llmtrain --plan alike (train/trainer.c). */
uint64_t tr_backend_budget(const tr_backend_info *info, uint64_t asked, FILE *note);

/* What create gets. */
typedef struct {
    const tr_train_opts *opts;
    tr_model *host; /* host model: params (initial or resumed), optimizer state allocated
                                 (tr_optim_host_init) unless own_moments */
    const tr_model_config *mc;
    int B, T;                  /* planned micro-batch: rows, tokens per row */
    const tr_plan_out *plan;   /* the run's plan (device lines size a device arena) */
    const tr_optim_ops *optim; /* the run's optimizer (train/optim.h) */
} tr_backend_args;

/* Device memory figures (all 0 on a backend without device memory). */
typedef struct {
    uint64_t arena_bytes;    /* allocated by create */
    uint64_t arena_need;     /* what model + input batch need exactly */
    uint64_t baseline_bytes; /* in use on the device before create */
    uint64_t peak_bytes;     /* in use after the first optimiser step */
    const char *source;      /* how "in use" is measured (for the message), e.g. "cudaMemGetInfo" */
} tr_backend_mem;

typedef struct tr_backend_ops {
    const char *name;  /* "cpu", "cuda" */
    tr_device device;  /* what --device selects it */
    int device_memory; /* 1: runs in device memory: plan and device line printed before step 1,
                              device memory reported at the end */
    int ckpt_extra;    /* 1: checkpoints carry the TR_BACKEND_EXTRA optimiser words */
    int loss_scale;    /* 1: step reports a loss scale / skipped steps (logged per step) */
    int own_moments;   /* 1: the backend keeps the optimizer state itself (ZeRO-1 shards on the
                              CPU): the host model has none, a resume loads only the params into it
                              (set_state reads the backend's part of the checkpoint) and checkpoints are
                              written through save_ckpt */

    int (*probe)(const tr_train_opts *o, tr_backend_info *info, char *err, size_t errlen);
    int (*create)(const tr_backend_args *a, tr_backend **out, char *err, size_t errlen);
    void (*destroy)(tr_backend *b); /* NULL-safe */
    /* NULL: the loader's default buffers */
    void (*loader_hooks)(tr_backend *b, tr_loader_opts *lo);
    /* extra: the checkpoint's optimiser words or NULL (then: AdamW step =
     * opt_step, defaults for the rest). */
    int (*set_state)(tr_backend *b, tr_model *host, const uint64_t *extra, uint64_t opt_step, char *err, size_t errlen);

    int (*zero_grad)(tr_backend *b, char *err, size_t errlen);
    /* One micro-batch of the step: make bt the backend's input, hand bt
     * back with tr_loader_release(ld) (exactly once, as soon as it is no
     * longer read; *wait_s += time spent waiting for an upload), forward +
     * backward ADDING the gradient of the summed token loss.  *loss_sum,
     * *n_targets: as tr_model_fwd_bwd. */
    int (*micro)(tr_backend *b, tr_loader *ld, const tr_batch *bt, int doc_mask, double *loss_sum, uint64_t *n_targets,
                 double *wait_s, char *err, size_t errlen);
    /* Optional (NULL on a single device): after the last micro-batch of a
     * step, combine the gradients, loss sums and target counts of every
     * replica (data-parallel all-reduce: sums), so that step divides by the
     * global target count.  The hook for multi-GPU backends. */
    int (*reduce)(tr_backend *b, double *loss_sum, uint64_t *n_targets, char *err, size_t errlen);
    /* Scale the gradient by 1/n_targets, clip its global norm to grad_clip
     * (*gnorm: the norm before clipping), then the optimizer's update with h
     * at step opt_step (1-based; a backend that counts its own steps, e.g.
     * to skip fp16 overflows, may use its count).  *skipped = 1 when the
     * update was skipped, *scale = the loss scale used (1 without loss
     * scaling). */
    int (*step)(tr_backend *b, const tr_optim_hparams *h, float grad_clip, uint64_t n_targets, uint64_t opt_step,
                float *gnorm, int *skipped, float *scale, char *err, size_t errlen);
    /* Forward of a host batch (validation): summed loss, target count. */
    int (*eval)(tr_backend *b, const tr_batch *bt, int doc_mask, double *loss_sum, uint64_t *n_targets, char *err,
                size_t errlen);
    /* Backend -> host model: params always; the optimizer state and extra
     * (may be NULL) when moments is 1 (checkpoint). */
    int (*get_state)(tr_backend *b, tr_model *host, int moments, uint64_t *extra, char *err, size_t errlen);
    void (*mem_report)(tr_backend *b, tr_backend_mem *out);
    /* Optional: arm (fn != NULL) or disarm the gradient-readiness hook for
     * the following micro calls: during their backward, fn(ctx, g) is
     * called for the groups g of tr_model_grad_groups() in order, each as
     * soon as group g of the gradient holds its value for the whole step
     * (the sum over the step's earlier micro-batches included). The
     * data-parallel wrapper arms it for a rank's last micro-batch of a step
     * and starts the buckets' communication from it (overlap). */
    void (*grad_hook)(tr_backend *b, tr_model_grad_hook fn, void *ctx);
    /* Optional (own_moments backends): write the checkpoint. Called on
     * every rank with the sections the trainer would write (params from the
     * host model; the optimizer's state sections with data NULL); returns this rank's
     * status (the trainer then agrees over the ranks). NULL: rank 0 writes
     * the host sections (tr_ckpt_save). */
    int (*save_ckpt)(tr_backend *b, const char *dir, const tr_ckpt_meta *km, const tr_ckpt_section *sec, int n,
                     char *err, size_t errlen);
} tr_backend_ops;

/* The backends of this build (generated tr_backends.c), NULL-terminated. */
extern const tr_backend_ops *const tr_backend_table[];
/* First backend for device d, NULL when this build has none. */
const tr_backend_ops *tr_backend_find(tr_device d);

/* TR_MODEL_E* -> TR_ERR_* (backend_cpu.c). */
int tr_backend_model_err(int model_rc);

#ifdef __cplusplus
}
#endif
#endif /* TR_BACKEND_H */
