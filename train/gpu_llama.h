/* gpu_llama.h - the Llama-family model on the GPU (issue 30 item 3): the
 * CUDA twin of train/llama_model.h's tr_llama_fwd_bwd (RMSNorm, rotary
 * embeddings with Llama 3 scaling, grouped-query attention, SwiGLU, tied or
 * untied head, Qwen2's q/k/v biases) plus the clipped optimizer step, built
 * from kernels/kn_cuda.h (kernels/kn_llama.cu for the Llama ops, cuBLASLt
 * for the matmuls), every byte carved from the trainer's arena
 * (train/gpu_arena.h), as train/gpu_model.h does for GPT-2.  Library
 * tr_cuda; identifiers tr_cuda_llama_*.
 *
 * Parameters: the tensors of tr_llama (transformers' names), fp32 master
 * weights on the device in one buffer whose order is llama_model.c's except
 * that each layer's q, k and v projections (and their biases) are stacked
 * into one [q; k; v] matrix so one matmul fills the packed row the GQA kernel
 * reads: without q/k/v biases the two orders are the same bytes; with them
 * set_params / get permute tensor by tensor (tr_cuda_llama_tensor says where
 * each tensor lives in both).  Gradients fp32, optimizer state per
 * train/optim.h, a 16-bit compute copy of the weights in bf16/fp16 runs;
 * activations in the compute dtype; RMSNorm statistics, attention lse and
 * losses fp32; the rotary cos/sin table (max_seq x head_dim/2 pairs, fp32)
 * built once at create.
 *
 * Head size 16, 32, 64 or 128 (the GQA kernels'); logits are V columns wide (the
 * vocabulary as configured: a config padded to a multiple of 8 lets the
 * 16-bit cross-entropy use its 16-byte kernel).
 *
 * tests/test_tr_cuda_llama_gpu.cu (label gpu) compares loss and every
 * gradient with the CPU model (tr_llama_fwd_bwd); tests/bench_llama_gpu.cu
 * times it at a Llama shape (tests/gpu/run.sh step 10b). */
#ifndef TR_GPU_LLAMA_H
#define TR_GPU_LLAMA_H

#include "gpu_arena.h"
#include "kn_cuda.h"
#include "llama_model.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_cuda_llama tr_cuda_llama;

/* Exact arena bytes tr_cuda_llama_create takes for micro-batches up to
 * (B, T), TR_CUDA_ALIGN slack per piece included (0: a config or shape the
 * GPU model refuses). opt NULL: tr_optim_default(). */
size_t tr_cuda_llama_arena_bytes(const tr_llama_config *c, int B, int T, kn_dtype dt, const tr_optim_ops *opt);
/* Carves everything from a (not sealed), creates the cuBLASLt context on
 * stream s and the rotary table. Parameters are uninitialised until
 * set_params / init_random. TR_ERR_ARG for a config it cannot run (head size
 * not 64/128, ...: kn_cuda_last_error() says which). */
int tr_cuda_llama_create(tr_cuda_llama **out, const tr_llama_config *c, int B, int T, kn_dtype dt, tr_cuda_arena *a,
                         tr_cuda_stream s, const tr_optim_ops *opt);
void tr_cuda_llama_destroy(tr_cuda_llama *m);
/* Parameter count, tensor count, and tensor i: its transformers name, its
 * offset in tr_llama's buffer (*cpu_off), in the device buffer (*dev_off),
 * its elements (*n) and whether weight decay applies (2-D matrices). */
size_t tr_cuda_llama_num_params(const tr_cuda_llama *m);
int tr_cuda_llama_n_tensors(const tr_cuda_llama *m);
const char *tr_cuda_llama_tensor(const tr_cuda_llama *m, int i, size_t *cpu_off, size_t *dev_off, size_t *n,
                                 int *decay);
/* Host fp32 parameters in tr_llama's order -> master (+ compute copy);
 * zeroes the gradients and the optimizer state. */
int tr_cuda_llama_set_params(tr_cuda_llama *m, const float *host_params);
/* Resume: as set_params, then the optimizer's state tensors (host buffers in
 * tr_llama's order; state NULL or state[k] NULL: left zero). */
int tr_cuda_llama_set_state(tr_cuda_llama *m, const float *host_params, void *const state[]);
/* Device-side init for throughput runs: matrices uniform with std 0.02,
 * norm weights 1, biases 0; grads and state zeroed. Deterministic in seed. */
int tr_cuda_llama_init_random(tr_cuda_llama *m, uint64_t seed);
/* Device -> host in tr_llama's order (either may be NULL); synchronises. */
int tr_cuda_llama_get(tr_cuda_llama *m, float *params, float *grads);
/* The same with the optimizer's state (state NULL or state[k] NULL: not copied). */
int tr_cuda_llama_get_state(tr_cuda_llama *m, float *params, float *grads, void *const state[]);
/* The device fp32 gradient (device order, *n floats; no synchronisation):
 * the data-parallel all-reduce sums it in place. */
float *tr_cuda_llama_grads(tr_cuda_llama *m, size_t *n);
int tr_cuda_llama_zero_grad(tr_cuda_llama *m);
/* As tr_llama_fwd_bwd, on DEVICE batch arrays (pos/doc may be NULL), with
 * the loss gradient scale grad_scale (1 / targets for the mean loss);
 * gradients accumulate. *loss_sum / *n_targets (host, may be NULL) wait for
 * the step. grad_scale 0: forward only (evaluation), gradients untouched.
 * The lm head runs whole or in row chunks (MKS_LMHEAD_CHUNK, read at
 * create: train/gpu_lmhead.h). */
int tr_cuda_llama_fwd_bwd(tr_cuda_llama *m, int B, int T, const uint32_t *inputs, const int32_t *targets,
                          const int32_t *pos, const int32_t *doc, float grad_scale, double *loss_sum,
                          uint64_t *n_targets);
/* Clip (max_norm > 0) then the optimizer's GPU step at step t over every
 * tensor; refreshes the compute copy. *norm_out (host, may be NULL; waits). */
int tr_cuda_llama_step(tr_cuda_llama *m, const tr_optim_hparams *h, int t, float max_norm, float *norm_out);
/* As tr_cuda_model_step_scaled (gpu_model.h): gradients of the loss times
 * loss_scale (the session's 1/targets, fp16's scaler), a non-finite gradient
 * skips the update (*skipped = 1). */
int tr_cuda_llama_step_scaled(tr_cuda_llama *m, const tr_optim_hparams *h, int t, float max_norm, float loss_scale,
                              float *norm_out, int *skipped);

/* ---- the planner's view (train/gpu_llama_plan.c: plain C, in tr_plan) ------------------
 * The device rows of tr_cuda_llama_create's carve for micro-batches of B rows
 * of T tokens in a dtype of esz bytes (4 fp32, 2 bf16/fp16): fixed bytes and
 * bytes per row; their sum fixed + B per_row over the rows equals
 * tr_cuda_llama_arena_bytes (tests/test_llama_gpu_plan.c). Returns the
 * number of rows, 0 for a config or shape the GPU model refuses. The scratch
 * row is the value at this B (it is not linear in B). */
#define TR_LLAMA_GPU_ROWS 16
typedef struct {
    const char *name;
    uint64_t fixed, per_row;
} tr_llama_gpu_row;
int tr_llama_gpu_plan_rows(const tr_llama_config *c, int B, int T, int esz, const tr_optim_ops *opt,
                           tr_llama_gpu_row rows[TR_LLAMA_GPU_ROWS]);
/* Parameters of the config (tr_llama's count) and the kernel scratch the
 * model carves for (B, T): the largest backward op's, from kn_cuda_size.h. */
size_t tr_llama_gpu_param_count(const tr_llama_config *c);
/* Tensors of the GPU model's table (the optimizer's step walks them). */
size_t tr_llama_gpu_tensor_count(const tr_llama_config *c);
size_t tr_llama_gpu_scratch_bytes(const tr_llama_config *c, size_t B, size_t T);

#ifdef __cplusplus
}
#endif
#endif /* TR_GPU_LLAMA_H */
