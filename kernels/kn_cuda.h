/* kn_cuda.h - CUDA twins of the kernels in kn.h (library kn_cuda, the .cu files in kernels/).
 *
 * Plain C API (callable from C and CUDA); CUDA types appear only as opaque
 * pointers, so including this header needs no CUDA headers.
 *
 * Conventions (in addition to kn.h's)
 *  - Every pointer is a DEVICE pointer unless it says host.  All work is
 *    enqueued on `stream` (NULL = the legacy default stream); nothing is
 *    synchronised and nothing is allocated: scratch buffers come from the
 *    caller (the trainer's one arena), sized by the *_scratch_bytes calls of
 *    kn_cuda_size.h (plain C: the planner computes the same sizes without CUDA).
 *  - Activation dtype `dt`: KN_F32 (float), KN_BF16 (__nv_bfloat16) or
 *    KN_F16 (__half; for --precision fp16 with loss scaling).
 *    Tensors typed `void *` are in dt; `float *` are always fp32.  Parameter
 *    gradients are always fp32 and accumulated (+=), as in kn.h; arithmetic
 *    is fp32 everywhere (bf16 is a storage format here).
 *  - Deterministic: no floating-point atomics; every sum has a fixed order,
 *    so a run repeats bit for bit on the same GPU (bit-exact resume).
 *  - Return KN_OK or KN_EINVAL (bad argument) or KN_ECUDA (a launch or
 *    library call failed; kn_cuda_last_error() says which call, where, and
 *    the error's name and text).
 *
 * Differences from the references, by design
 *  - attention never stores the (B,NH,T,T) probabilities: forward saves the
 *    log-sum-exp per row, lse (B,NH,T) fp32, and backward recomputes
 *    (flash-attention style, O(T) memory).  Head size 32 or 64.
 *  - softmax + cross-entropy never materialises probabilities: forward
 *    saves lse (N) fp32; backward writes dlogits from logits and lse, and
 *    may run in place over the logits.  kn_softmax_xent_fused_cuda does
 *    both in one launch when dloss is known before the forward (training).
 *  - matmuls go through cuBLASLt with bias / GELU epilogues; fp32 uses
 *    CUBLAS_COMPUTE_32F (no TF32) so it matches the C reference to 1e-5.
 */
#ifndef KN_CUDA_H
#define KN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kn.h"
#include "kn_cuda_size.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_ECUDA (-3)
/* An optional engine cannot run this call (not built in, or it refused the
 * shape): the caller runs its own kernels instead. */
#define KN_ENOTSUP (-4)

typedef enum { KN_F32 = 0, KN_BF16 = 1, KN_F16 = 2 } kn_dtype;
typedef struct CUstream_st *kn_stream; /* == cudaStream_t */

/* Size of one element of dt in bytes (4 or 2). */
size_t kn_dtype_size(kn_dtype dt);
/* Text of the last CUDA / cuBLAS error seen by this library (thread-local):
 * the call, file:line, error name and number and its text; "" when none was
 * recorded (never "no error").  kernels/kn_cuda_err.h: the first error since
 * kn_cuda_clear_error(), and MKS_SYNC_DEBUG=1 (every launch synchronised, so
 * a kernel fault names its kernel). */
const char *kn_cuda_last_error(void);

/* ---- context: cuBLASLt handle + caller-provided workspace ------------------ */
typedef struct kn_cuda_ctx kn_cuda_ctx;
/* Creates the cuBLASLt handle (host memory only).  workspace: device bytes
 * for cuBLASLt (KN_CUBLASLT_WORKSPACE, kn_cuda_size.h, recommended; may be 0/NULL). */
int kn_cuda_ctx_create(kn_cuda_ctx **out, kn_stream stream, void *workspace, size_t workspace_bytes);
void kn_cuda_ctx_destroy(kn_cuda_ctx *ctx);
kn_stream kn_cuda_ctx_stream(const kn_cuda_ctx *ctx);

/* ---- conversions ---------------------------------------------------------- */
int kn_cast_cuda(void *dst, kn_dtype dst_dt, const void *src, kn_dtype src_dt, size_t n, kn_stream s);
int kn_fill_cuda(float *dst, float value, size_t n, kn_stream s); /* also NaN poisoning */

/* ---- encoder ----------------------------------------------------------------
 * forward as kn_encoder_forward_ref; wte/wpe/out in dt.
 * backward: dwte/dwpe fp32 +=.  Deterministic: ids are sorted (stable radix
 * sort, CUB) into scratch and each vocabulary row sums its positions in
 * order.  scratch: kn_encoder_backward_scratch_bytes(B*T) bytes. */
int kn_encoder_forward_cuda(void *out, const uint32_t *inp, const int32_t *pos, const void *wte, const void *wpe, int B,
                            int T, int C, int V, int maxT, kn_dtype dt, kn_stream s);
int kn_encoder_backward_cuda(float *dwte, float *dwpe, const void *dout, const uint32_t *inp, const int32_t *pos, int B,
                             int T, int C, int V, int maxT, void *scratch, size_t scratch_bytes, kn_dtype dt,
                             kn_stream s);

/* ---- residual add: out = a + b (n elements, dt; out may alias a or b) --------
 * (the trainer normally fuses it into kn_layernorm_forward_cuda) */
int kn_residual_forward_cuda(void *out, const void *a, const void *b, size_t n, kn_dtype dt, kn_stream s);

/* ---- layernorm ----------------------------------------------------------------
 * forward: x = inp (+ inp2 when inp2 != NULL; then x is also written to
 * resid_out, the fused residual add), out = LN(x).  out/inp/inp2/resid_out
 * in dt; weight/bias/mean/rstd fp32.
 * backward as kn_layernorm_backward_ref (dinp += in dt; dweight/dbias fp32
 * +=), deterministic two-pass column sums through scratch
 * (kn_layernorm_backward_scratch_bytes(N, C)). */
int kn_layernorm_forward_cuda(void *out, float *mean, float *rstd, void *resid_out, const void *inp, const void *inp2,
                              const float *weight, const float *bias, int N, int C, kn_dtype dt, kn_stream s);
int kn_layernorm_backward_cuda(void *dinp, float *dweight, float *dbias, const void *dout, const void *inp,
                               const float *weight, const float *mean, const float *rstd, int N, int C, void *scratch,
                               size_t scratch_bytes, kn_dtype dt, kn_stream s);

/* ---- matmul (cuBLASLt) ----------------------------------------------------------
 * out (N,OC) = inp (N,C) @ weight(OC,C)^T (+ bias(OC)) ; all in dt.
 * gelu_pre != NULL: GELU epilogue: gelu_pre receives the pre-activation
 * (N,OC) and out = gelu(pre) (cuBLASLt GELU_AUX[_BIAS]).
 * backward: dinp (N,C) = dout @ weight (overwritten, dt, may be NULL);
 * dweight (OC,C) fp32 += dout^T @ inp (may be NULL); dbias (OC) fp32 +=
 * column sums of dout (may be NULL; deterministic, scratch
 * kn_matmul_backward_scratch_bytes(N, OC)). */
int kn_matmul_forward_cuda(kn_cuda_ctx *ctx, void *out, void *gelu_pre, const void *inp, const void *weight,
                           const void *bias, int N, int C, int OC, kn_dtype dt);
/* The backward of a layer whose input was gelu(gelu_pre) (GPT's fc projection):
 * as kn_matmul_backward_cuda, but dinp (required) = (dout @ weight) *
 * gelu'(gelu_pre), gelu_pre (N,C) the pre-activation, by cuBLASLt's DGELU
 * epilogue: kn_gelu_backward_cuda fused into the product. */
int kn_matmul_backward_dgelu_cuda(kn_cuda_ctx *ctx, void *dinp, float *dweight, float *dbias, const void *dout,
                                  const void *inp, const void *weight, const void *gelu_pre, int N, int C, int OC,
                                  void *scratch, size_t scratch_bytes, kn_dtype dt);
int kn_matmul_backward_cuda(kn_cuda_ctx *ctx, void *dinp, float *dweight, float *dbias, const void *dout,
                            const void *inp, const void *weight, int N, int C, int OC, void *scratch,
                            size_t scratch_bytes, kn_dtype dt);

/* ---- attention (flash-style: O(T) memory, never a T x T matrix) ----------------
 * qkv (B,T,3C) and out (B,T,C) in dt; lse (B,NH,T) fp32 saved for backward;
 * doc (B,T) or NULL as kn_attention_forward_ref.
 * backward: dqkv (B,T,3C) overwritten (dt); needs qkv, out, dout, lse;
 * scratch kn_attention_backward_scratch_bytes(B,T,NH) (fp32 row sums). */
int kn_attention_forward_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T, int C, int NH,
                              kn_dtype dt, kn_stream s);
/* The same forward on the tensor cores (mma.sync bf16, flash-attention-2
 * layout): bf16 and heads of 64 or 128 only (KN_EINVAL otherwise), qkv
 * 16-byte aligned.  The trainer's default for bf16 with heads of 64 since it
 * passed on an H200 (2026-12-04); heads of 128 (the pipelined kernels
 * whatever the variant) checked on the CPU emulator only so far. */
int kn_attention_forward_tc_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T, int C,
                                 int NH, kn_dtype dt, kn_stream s);
/* Which tensor-core kernels run: 0 "copy" (B operands that need a transpose
 * from transposed shared copies: the first version), 1 "ldsm" (the same by
 * ldmatrix .trans), 2 "pipe" (cp.async double-buffered tiles, every B operand
 * by ldmatrix, no per-element mask below the diagonal; the default;
 * kernels/kn_attention_tc_pipe.cu), 3 "pipe3" (pipe with its dk/dv kernel
 * held to 3 blocks per SM); -1 back to the environment (MKS_ATTN_TC=copy|
 * ldsm|pipe|pipe3, default pipe).  For tests and benchmarks: not thread-safe
 * against running kernels' launches. */
void kn_attention_tc_variant(int variant);
/* Backward on the tensor cores, same contract as kn_attention_backward_cuda
 * (bf16, heads of 64 or 128, qkv/dout/out 16-byte aligned). */
int kn_attention_backward_tc_cuda(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                  const int32_t *doc, int B, int T, int C, int NH, void *scratch, size_t scratch_bytes,
                                  kn_dtype dt, kn_stream s);
int kn_attention_backward_cuda(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                               const int32_t *doc, int B, int T, int C, int NH, void *scratch, size_t scratch_bytes,
                               kn_dtype dt, kn_stream s);

/* ---- GELU (tanh) ---------------------------------------------------------------- */
int kn_gelu_forward_cuda(void *out, const void *inp, size_t n, kn_dtype dt, kn_stream s);
int kn_gelu_backward_cuda(void *dinp, const void *inp, const void *dout, size_t n, kn_dtype dt, kn_stream s);

/* ---- softmax + cross-entropy over a padded vocabulary -------------------------
 * logits (N,Vp) in dt; targets (N) int32 (< 0: no loss); losses (N) fp32
 * (may be NULL); lse (N) fp32 (may be NULL in forward).
 * backward: dlogits[n,v] = dloss[n] * (softmax[n,v] - [v == target]) for
 * v < V, 0 for padding columns and rows with target < 0; dloss NULL means
 * dloss_scale for every row.  dlogits may alias logits.
 * fused: forward + backward in one pass pair per row, dlogits in place over
 * logits when dlogits == logits. */
int kn_softmax_xent_forward_cuda(float *losses, float *lse, const void *logits, const int32_t *targets, int N, int V,
                                 int Vp, kn_dtype dt, kn_stream s);
int kn_softmax_xent_backward_cuda(void *dlogits, const void *logits, const float *lse, const int32_t *targets,
                                  const float *dloss, float dloss_scale, int N, int V, int Vp, kn_dtype dt,
                                  kn_stream s);
/* Which fused softmax-xent kernel 16-bit logits take: 0 the scalar one, 1
 * 16-byte accesses (the default where Vp % 8 == 0; 2.9x the scalar one on an
 * H200); -1 back to the environment (MKS_XENT_SCALAR=1 picks 0). */
void kn_softmax_xent_variant(int vec);
int kn_softmax_xent_fused_cuda(float *losses, void *dlogits, const void *logits, const int32_t *targets,
                               const float *dloss, float dloss_scale, int N, int V, int Vp, kn_dtype dt, kn_stream s);

/* ---- AdamW on fp32 master weights ------------------------------------------------
 * As kn_adamw_step_ref on grads * (*grad_scale) (grad_scale: device float,
 * NULL = 1; the clip factor of kn_clip_scale_cuda).  params_lp != NULL
 * receives a copy of the updated params in lp_dt (the bf16 compute copy). */
int kn_adamw_step_cuda(float *params, void *params_lp, kn_dtype lp_dt, const float *grads, float *m, float *v, size_t n,
                       float lr, float beta1, float beta2, float eps, float weight_decay, int decay, int t,
                       const float *grad_scale, kn_stream s);
/* The same update over nt tensors of one parameter block in one launch
 * (blocks = bstart[nt]): tab/bstart the DEVICE copy of
 * kn_adamw_multi_layout's table (kn_cuda_size.h); params, params_lp, grads,
 * m, v the bases of the whole block (tensor k at element tab[k].off), decay
 * per tensor from the table.  Per element the same expression as
 * kn_adamw_step_cuda, so the result is bit-identical to one call per tensor. */
int kn_adamw_multi_cuda(const kn_adamw_tensor *tab, const uint32_t *bstart, int nt, unsigned blocks, float *params,
                        void *params_lp, kn_dtype lp_dt, const float *grads, float *m, float *v, float lr, float beta1,
                        float beta2, float eps, float weight_decay, int t, const float *grad_scale, kn_stream s);

/* ---- global gradient norm ---------------------------------------------------------
 * kn_sumsq_cuda: *out (device double) = sum g^2, in double over fixed
 * 4096-element chunks, then the chunk sums in order (deterministic; equals
 * kn_sumsq_ref up to double rounding).  scratch:
 * kn_sumsq_scratch_bytes(n).
 * kn_clip_scale_cuda: *scale = (max_norm > 0 && norm > max_norm) ?
 * max_norm / (norm + 1e-6) : 1, norm = sqrt(*sumsq); *norm_out (may be
 * NULL) = norm.  Both device pointers (no host sync).
 * kn_scale_cuda: g *= s (host float). */
int kn_sumsq_cuda(double *out, const float *g, size_t n, void *scratch, size_t scratch_bytes, kn_stream s);
int kn_clip_scale_cuda(float *scale, float *norm_out, const double *sumsq, float max_norm, kn_stream s);
int kn_scale_cuda(float *g, size_t n, float scale, kn_stream s);

/* ---- Llama family (kernels/kn_llama.cu; C references kernels/kn_llama.h) -------------
 * RMSNorm: x = inp (+ inp2; then x also to resid_out, which may alias inp:
 * the fused residual add), out = weight * (x * rstd), rstd (N) fp32 saved.
 * out/inp/inp2/resid_out in dt, weight fp32.  backward as
 * kn_rmsnorm_backward_ref: dinp += (dt), dweight fp32 += (may be NULL),
 * deterministic column sums through scratch
 * (kn_rmsnorm_backward_scratch_bytes(N, C)). */
int kn_rmsnorm_forward_cuda(void *out, float *rstd, void *resid_out, const void *inp, const void *inp2,
                            const float *weight, int N, int C, float eps, kn_dtype dt, kn_stream s);
int kn_rmsnorm_backward_cuda(void *dinp, float *dweight, const void *dout, const void *inp, const float *weight,
                             const float *rstd, int N, int C, void *scratch, size_t scratch_bytes, kn_dtype dt,
                             kn_stream s);
/* Rotary embeddings.  kn_rope_table_cuda fills table (max_pos, head_dim/2, 2)
 * fp32 = {cos, sin} of p * inv_freq[i] (inv_freq: device, head_dim/2, from
 * kn_rope_inv_freq_ref), as kn_rope_table_ref: once per run, not per step.
 * forward/backward rotate n_heads heads of head_dim in each of N rows that
 * are ld elements apart (ld >= n_heads * head_dim: the q and k heads of a
 * packed q/k/v row in one launch), as kn_rope_forward_ref / _backward_ref;
 * out may alias x.  pos (N) position ids or NULL (position n % T).  A
 * position outside [0, max_pos) rotates to NaN (the loader checks positions;
 * a kernel cannot report). */
int kn_rope_table_cuda(float *table, const float *inv_freq, int max_pos, int head_dim, kn_stream s);
int kn_rope_forward_cuda(void *out, const void *x, const int32_t *pos, const float *table, int N, int T, int n_heads,
                         int head_dim, int ld, int max_pos, kn_dtype dt, kn_stream s);
int kn_rope_backward_cuda(void *dx, const void *dout, const int32_t *pos, const float *table, int N, int T, int n_heads,
                          int head_dim, int ld, int max_pos, kn_dtype dt, kn_stream s);
/* SwiGLU gate, n elements, all dt: as kn_swiglu_forward_ref / _backward_ref
 * (dgate may alias dout). */
int kn_swiglu_forward_cuda(void *out, const void *gate, const void *up, size_t n, kn_dtype dt, kn_stream s);
int kn_swiglu_backward_cuda(void *dgate, void *dup, const void *dout, const void *gate, const void *up, size_t n,
                            kn_dtype dt, kn_stream s);
/* Grouped-query attention (flash-style as kn_attention_forward_cuda: lse
 * (B,NH,T) fp32 saved, nothing T x T) on packed rows qkv (B,T,(NH+2NKV)HS)
 * = [q heads | k heads | v heads] (one fused q/k/v projection; Qwen2's q/k/v
 * biases are that matmul's bias), query head h reading KV head
 * h / (NH / NKV) by index: K/V are never expanded.  out (B,T,NH HS).  HS 16,
 * 32, 64 or 128; NKV divides NH (NKV == NH is plain MHA).  backward: dqkv (=, same
 * packing), each KV head's dK/dV summed over its query heads in a fixed
 * order (deterministic); scratch kn_attention_backward_scratch_bytes(B,T,NH).
 * References: kn_gqa_attention_forward_ref / _backward_ref. */
int kn_gqa_attention_forward_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T, int NH,
                                  int NKV, int HS, kn_dtype dt, kn_stream s);
int kn_gqa_attention_backward_cuda(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                   const int32_t *doc, int B, int T, int NH, int NKV, int HS, void *scratch,
                                   size_t scratch_bytes, kn_dtype dt, kn_stream s);
/* The same on the tensor cores: GPT-2's pipelined kernels (kn_attention_tc_pipe.cu)
 * reading the grouped-query row; bf16 and HS 64 or 128 only (KN_EINVAL
 * otherwise), qkv / out / dout 16-byte aligned.  Each KV head's dK/dV is
 * summed over its query heads in registers by one block per 64 keys, walking
 * the heads in order (deterministic, no atomics).  The GPU Llama model's
 * attention for bf16 heads of 64 and 128 (MKS_CUDA_ATTENTION=simt: the SIMT
 * kernels above); 128 checked on the CPU emulator, not yet on a GPU. */
int kn_gqa_attention_forward_tc_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T, int NH,
                                     int NKV, int HS, kn_dtype dt, kn_stream s);
int kn_gqa_attention_backward_tc_cuda(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                      const int32_t *doc, int B, int T, int NH, int NKV, int HS, void *scratch,
                                      size_t scratch_bytes, kn_dtype dt, kn_stream s);

/* ---- attention through cuDNN (optional engine: kernels/kn_attention_cudnn.cu) ----
 * cuDNN's fused flash attention on the packed rows of kn_gqa_attention_*
 * (GPT-2's rows are NKV = NH): causal, no document mask, bf16 or fp16, HS a
 * multiple of 8 up to 256; out and lse as kn_gqa_attention_forward_cuda
 * (lse: natural-log log-sum-exp of the scaled scores); the backward
 * overwrites dqkv whole.  deterministic != 0: cuDNN's bit-reproducible
 * backward with a workspace linear in T (cuDNN >= 9.25; older ones would
 * need a T x T workspace, beyond any bound given here: KN_ENOTSUP);
 * 0: its default, dQ summed with atomics (not bit-reproducible).  Its
 * workspace is the caller's (ws, ws_bytes): plans that need more than
 * ws_bytes are never chosen.  Built only when CMake finds cuDNN and the
 * cudnn-frontend headers (MKS_CUDNN); otherwise every call answers
 * KN_ENOTSUP.  The own kernels stay the default until it has run on a GPU
 * (MKS_CUDA_ATTENTION=cudnn or cudnn-fast asks for it: train/gpu_attention.h). */
/* cudnnGetVersion() of the library loaded (e.g. 91900), 0 when built without cuDNN. */
int kn_cudnn_attention_version(void);
/* Build (and cache) the forward and backward graphs of one shape, with at
 * most ws_cap bytes of workspace each; their workspace sizes into *fwd_ws /
 * *bwd_ws.  KN_ENOTSUP with the reason in why when cuDNN cannot run it
 * (nothing recorded as a CUDA error: the caller falls back). */
int kn_cudnn_attention_prepare(size_t *fwd_ws, size_t *bwd_ws, int B, int T, int NH, int NKV, int HS, size_t ws_cap,
                               int deterministic, kn_dtype dt, char *why, size_t whylen);
int kn_cudnn_attention_forward(void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV, int HS, void *ws,
                               size_t ws_bytes, kn_dtype dt, kn_stream s);
int kn_cudnn_attention_backward(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, int B,
                                int T, int NH, int NKV, int HS, void *ws, size_t ws_bytes, int deterministic,
                                kn_dtype dt, kn_stream s);

#ifdef __cplusplus
}
#endif
#endif /* KN_CUDA_H */
