/* family.h - model families of the trainer (internal header of the train
 * module; issue 30).
 *
 * A family is one architecture: GPT-2 (train/model.c, family "gpt2") or
 * the Llama family (train/llama_model.c: Llama, Qwen2, Mistral shapes,
 * family "llama"). Each is a const tr_family_ops tr_family_<name> in
 * train/family_<name>.c plus one line in train/family.c's table and its
 * TR_FAMILY_* id in model.h (the id checkpoints and plans record);
 * train/CMakeLists.txt compiles family_*.c into tr and tr_plan by name.
 * family.c also answers the tr_model_* functions that serve any family
 * (config check, tensor table, readiness groups, memory) through the table.
 *
 * What keeps the rest of the trainer family-agnostic: every family holds
 * its parameters in ONE contiguous fp32 buffer (and its gradients in a
 * second of the same layout), described by a tensor table (name, element
 * count, weight decay, per-layer slices for the gradient-readiness hook).
 * The host model tr_model (model.h) is that buffer for every family: the
 * optimizer (optim.c), checkpoints, data-parallel all-reduce and ZeRO-1
 * shards (dist.c, dp.c) walk the table through tr_model_n_tensors /
 * tr_model_tensor and never see a family. tr_model_config.family says
 * which family a configuration is; model.c hands a non-GPT-2 host model's
 * math (create, forward, backward, logits) to its family's instance ops.
 *
 * Every int function returns TR_OK or a negative TR_ERR_* (tr.h) unless
 * said otherwise; none exits. */
#ifndef TR_FAMILY_H
#define TR_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "tr.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tr_optim_ops;
struct tr_gpu_model_ops;

/* One row of a GPU model's device memory (gpu_plan below). */
typedef struct {
    const char *name;
    uint64_t fixed, per_row;
} tr_gpu_plan_row;

/* One tensor of the table. */
typedef struct {
    char name[96]; /* the family's own name (Hugging Face names for llama) */
    size_t size;   /* elements */
    int decay;     /* 1: weight decay applies (matrices and embeddings) */
    int layers;    /* >1: the tensor is `layers` equal per-layer slices (readiness groups) */
} tr_tensor_info;

typedef struct tr_family_ops {
    const char *name; /* "gpt2", "llama" */
    int id;           /* TR_FAMILY_*: tr_model_config.family */
    /* --model NAME: TR_OK when NAME is one of this family's presets, else
     * TR_ERR_ARG; vocab and max_seq are the run's. */
    int (*preset)(const char *name, int vocab, int max_seq, tr_model_config *out);
    const char *(*preset_name)(int i); /* NULL past the last */
    /* A Hugging Face config.json (untrusted, len bytes) of this family:
     * TR_OK; TR_ERR_ARG: not this family's model_type (another family may
     * take it); TR_ERR_CORRUPT / TR_ERR_DATA with err as
     * tr_llama_config_from_json. NULL: the family reads none. */
    int (*from_json)(const char *text, size_t len, int vocab, int max_seq, tr_model_config *out, char *err,
                     size_t errlen);
    int (*check)(const tr_model_config *c); /* TR_MODEL_OK or TR_MODEL_EINVAL */
    size_t (*param_count)(const tr_model_config *c);
    int (*n_tensors)(const tr_model_config *c);
    void (*tensor)(const tr_model_config *c, int i, tr_tensor_info *out);
    /* readiness groups of the backward (model.h, tr_model_grad_groups) and
     * the group of tensor i's slice of layer l */
    int (*grad_groups)(const tr_model_config *c);
    int (*grad_group_of)(const tr_model_config *c, int i, int l);
    /* Exact bytes of a host model for micro-batch (B, T) (model.h's
     * tr_model_mem: the planner's CPU rows). */
    int (*memory)(const tr_model_config *c, int B, int T, tr_model_mem *out);

    /* ---- an instance (NULL for GPT-2, whose instance is model.c itself) --
     * create: parameters initialised from seed (deterministic), gradients
     * zeroed; *params / *grads: the family's two contiguous buffers
     * (param_count floats each, the tensor table's layout), owned by impl.
     * All return TR_MODEL_OK or TR_MODEL_E* (model.h). */
    int (*create)(const tr_model_config *c, uint64_t seed, void **impl, float **params, float **grads);
    void (*destroy)(void *impl);
    int (*reserve)(void *impl, int B, int T);
    /* as tr_model_fwd_bwd / tr_model_forward (model.h) */
    int (*fwd_bwd)(void *impl, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                   const int32_t *doc, float grad_scale, double *loss_sum, uint64_t *n_targets);
    int (*forward)(void *impl, int B, int T, const uint32_t *inputs, const int32_t *targets, const int32_t *pos,
                   const int32_t *doc, double *loss_sum, uint64_t *n_targets);
    /* (B, T, vocab_padded) logits of the last forward, NULL before one */
    const float *(*logits)(const void *impl);

    /* ---- the GPU (issue 30 item 3) -------------------------------------------------
     * gpu_plan: the GPU model's own device rows for the planner (train/plan.c
     * adds the run's rows around them: input batch, CUDA context, loader,
     * host model copy, NCCL), for micro-batches of B rows of T tokens at
     * precision p and recompute level r: the rows' fixed bytes and bytes per
     * row (their sum at B equals the model's arena carve), their count (<=
     * max), 0 for a shape or level the GPU model refuses (why says which).
     * NULL: GPT-2's rows, written in plan.c. In tr_plan and tr. */
    int (*gpu_plan)(const tr_model_config *c, int B, int T, tr_precision p, int r, const struct tr_optim_ops *opt,
                    tr_gpu_plan_row *rows, int max, char *why, size_t whylen);
    /* gpu: the family's GPU model (train/gpu_family.h), what the CUDA
     * backend's session drives; set in tr where the build has CUDA
     * (TR_HAVE_CUDA), NULL elsewhere (the backend then refuses the family). */
    const struct tr_gpu_model_ops *gpu;
} tr_family_ops;

/* The families (family.c), NULL-terminated; the first is the default. */
extern const tr_family_ops *const tr_family_table[];
/* The family of a configuration (NULL for an unknown id). */
const tr_family_ops *tr_family_of(const tr_model_config *c);

/* --model SPEC: a preset name of any family, or the path of a Hugging Face
 * config.json (SPEC ends in ".json"; read bounded, regular files only).
 * TR_ERR_ARG: unknown name (err lists the presets); else as from_json /
 * TR_ERR_IO. */
int tr_family_model(const char *spec, int vocab, int max_seq, tr_model_config *out, char *err, size_t errlen);

/* --model SPEC into the plan's input: GPT-2 presets as n_layer, n_head,
 * n_embd (model_family 0, as before families); another family's model as
 * model_family + model_cfg with its shape mirrored. vocab, max_seq: the
 * run's. Errors as tr_family_model. */
int tr_family_plan_in(const char *spec, int vocab, int max_seq, tr_plan_in *pi, char *err, size_t errlen);

/* The configuration as text (one "key value" line each, checkpoints'
 * "model" section) and back. to_text: bytes written (< cap, NUL-ended),
 * 0 when it does not fit. from_text: TR_OK or TR_ERR_CORRUPT. */
size_t tr_family_config_to_text(const tr_model_config *c, char *buf, size_t cap);
int tr_family_config_from_text(const char *text, size_t len, tr_model_config *out);

/* A checkpoint folder's record of a non-GPT-2 family's configuration:
 * DIR/model.txt (the text above, written atomically; ckpt.bin's header only
 * has the GPT-2 shape fields). read: *present = 0 when there is none (a
 * GPT-2 checkpoint); TR_ERR_CORRUPT for a malformed one. */
int tr_family_ckpt_write(const char *dir, const tr_model_config *c, char *err, size_t errlen);
int tr_family_ckpt_read(const char *dir, tr_model_config *out, int *present, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* TR_FAMILY_H */
