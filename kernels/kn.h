/* kn.h - fp32 compute kernels of the GPT-2 trainer.
 *
 * Every op has a C reference (kernels/<op>_ref.c files, suffix _ref) that is the
 * numerical specification; CUDA versions (kernels/ .cu files) must match them.
 *
 * Conventions
 *  - All tensors are flat, row-major, fp32 (token ids uint32, ids int32).
 *  - B = batch, T = sequence length, C = channels (d_model), NH = heads,
 *    hs = C / NH, V = real vocabulary, Vp = V padded up to a multiple of 128,
 *    N = number of rows (usually B*T), OC = output channels.
 *  - Gradient accumulation rule:
 *      * parameter gradients (dweight, dbias, dwte, dwpe) are ALWAYS
 *        accumulated (+=) - the caller zeroes them once per optimiser step;
 *      * activation gradients are OVERWRITTEN (=), except
 *        kn_layernorm_backward_ref's dinp, which is accumulated (+=) because
 *        it is the residual-stream gradient.
 *  - Every function returns KN_OK (0) or a negative KN_E* code; invalid
 *    arguments (NULL required pointers, non-positive sizes, ids out of range)
 *    are reported, never asserted.  Kernels never allocate unless stated.
 *  - Threading: OpenMP when the library was built with it (results are
 *    bitwise identical for any thread count: every output element is
 *    produced by one thread in a fixed order).
 */
#ifndef KN_H
#define KN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KN_OK 0
#define KN_EINVAL (-1) /* bad argument (NULL, size <= 0, id out of range) */
#define KN_ENOMEM (-2) /* allocation failed (only ops that say they allocate) */

#define KN_LN_EPS 1e-5f /* LayerNorm epsilon (same as GPT-2 / PyTorch default) */

/* Vocabulary padding: smallest multiple of 128 >= v (v > 0). */
int kn_pad_vocab(int v);

/* ---- encoder: token + learned position embedding -------------------------
 * out[b,t,:] = wte[inp[b,t],:] + wpe[p,:],   p = pos ? pos[b,t] : t
 *   out (B,T,C)  inp (B,T) < V  pos (B,T) in [0,maxT) or NULL
 *   wte (V or Vp, C) (only rows < V are read)  wpe (maxT, C)
 * backward: dwte[inp[b,t],:] += dout[b,t,:];  dwpe[p,:] += dout[b,t,:]   */
int kn_encoder_forward_ref(float *out, const uint32_t *inp, const int32_t *pos, const float *wte, const float *wpe,
                           int B, int T, int C, int V, int maxT);
int kn_encoder_backward_ref(float *dwte, float *dwpe, const float *dout, const uint32_t *inp, const int32_t *pos, int B,
                            int T, int C, int V, int maxT);

/* ---- residual add: out = a + b (n elements; out may alias a or b) -------- */
int kn_residual_forward_ref(float *out, const float *a, const float *b, size_t n);

/* ---- layernorm over the last dim (eps KN_LN_EPS, biased variance) ---------
 *   inp/out (N,C)  weight/bias (C)  mean/rstd (N) saved for backward
 * backward: dinp (N,C) +=, dweight (C) +=, dbias (C) += ; dout (N,C)   */
int kn_layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                             const float *bias, int N, int C);
int kn_layernorm_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                              const float *weight, const float *mean, const float *rstd, int N, int C);

/* ---- matmul (linear layer) ------------------------------------------------
 * out (N,OC) = inp (N,C) @ weight(OC,C)^T + bias(OC)     (bias may be NULL)
 * backward:
 *   dinp    (N,C)  =  dout (N,OC) @ weight        (overwritten; may be NULL)
 *   dweight (OC,C) += dout^T @ inp                (may be NULL)
 *   dbias   (OC)   += sum_n dout[n,:]             (may be NULL)
 * Cache-blocked, packed, register-tiled; allocates per-thread packing
 * buffers (KN_ENOMEM on failure).  out/dinp must not alias any input.   */
int kn_matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
int kn_matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, int N, int C, int OC);
/* The micro-kernel the matmuls use. Two numerics: PORTABLE and AVX512 do a
 * rounded multiply then a rounded add (no FMA) and agree bitwise; AVX2_FMA
 * and AVX512_FMA do a fused multiply-add and agree bitwise with each other,
 * not with the first two (last bits). AUTO picks the fastest the CPU has
 * (AVX-512 FMA, AVX2 FMA, portable), or the one MKS_MATMUL_ISA names
 * (portable, avx512, avx2-fma, avx512-fma) when the CPU has it. Returns the
 * kernel now in use, or KN_EINVAL (one this CPU cannot run). Not
 * thread-safe: call between matmuls. */
enum {
    KN_MATMUL_ISA_AUTO = -1,
    KN_MATMUL_ISA_PORTABLE = 0,
    KN_MATMUL_ISA_AVX512 = 1,
    KN_MATMUL_ISA_AVX2_FMA = 2,
    KN_MATMUL_ISA_AVX512_FMA = 3
};
int kn_matmul_set_isa(int isa);

/* ---- causal multi-head self-attention --------------------------------------
 *   qkv (B,T,3C): [q | k | v], head h occupies channels h*hs..h*hs+hs-1
 *   out (B,T,C)   att (B,NH,T,T) softmax probabilities, saved for backward
 *   doc (B,T) document id per position or NULL.  Position t attends to
 *   t2 <= t with doc[b,t2] == doc[b,t] (just t2 <= t when doc is NULL).
 *   Masked entries of att are stored as 0.  Scale 1/sqrt(hs).
 * backward: dqkv (B,T,3C) overwritten; dout (B,T,C); allocates a T-float
 *   scratch row per thread (KN_ENOMEM on failure).                       */
int kn_attention_forward_ref(float *out, float *att, const float *qkv, const int32_t *doc, int B, int T, int C, int NH);
int kn_attention_backward_ref(float *dqkv, const float *dout, const float *qkv, const float *att, const int32_t *doc,
                              int B, int T, int C, int NH);

/* ---- GELU, tanh approximation (PyTorch approximate='tanh') ----------------
 *   out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))     n elements
 * backward: dinp = dout * gelu'(inp)  (overwritten; dinp may alias dout) */
int kn_gelu_forward_ref(float *out, const float *inp, size_t n);
int kn_gelu_backward_ref(float *dinp, const float *inp, const float *dout, size_t n);

/* ---- fused softmax + cross-entropy over a padded vocabulary ---------------
 *   logits (N,Vp); columns >= V are padding: treated as -inf (probability 0,
 *   never predicted, gradient 0).  targets (N): target < 0 = no loss here,
 *   else must be < V.
 * forward:  losses[n] = -log softmax(logits[n,:V])[targets[n]] (0 when
 *           target < 0).  probs (N,Vp) receives the softmax (0 in padding
 *           columns); probs may be NULL (loss only) or alias logits
 *           (in place).  losses may be NULL.
 * backward: dlogits[n,v] = dloss[n] * (probs[n,v] - [v == target[n]]) for
 *           v < V, 0 for padding columns and for rows with target < 0.
 *           dloss (N) or NULL meaning a constant dloss_scale for every row.
 *           dlogits may alias probs (in place).                          */
int kn_softmax_xent_forward_ref(float *losses, float *probs, const float *logits, const int32_t *targets, int N, int V,
                                int Vp);
int kn_softmax_xent_backward_ref(float *dlogits, const float *probs, const int32_t *targets, const float *dloss,
                                 float dloss_scale, int N, int V, int Vp);

/* ---- AdamW (PyTorch semantics, decoupled weight decay) -------------------
 * For one tensor of n elements at step t (1-based):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   p = p - lr * wd * p            (only when decay != 0)
 *   p = p - lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * Caller passes decay = 1 for 2-D weight matrices (embeddings, linear
 * weights) and 0 for biases / LayerNorm parameters.                      */
int kn_adamw_step_ref(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int decay, int t);

/* ---- global gradient L2 norm and clipping -------------------------------
 * kn_sumsq_ref: *out = sum g^2, accumulated in double over 256 fixed
 *   contiguous ranges summed in order (deterministic for any thread count).
 * kn_scale_ref: g *= s.
 * kn_clip_grad_norm_ref: norm = sqrt(sumsq(g)); if max_norm > 0 and
 *   norm > max_norm, g *= max_norm / (norm + 1e-6) (PyTorch
 *   clip_grad_norm_: coefficient max_norm/(norm+1e-6) applied when < 1).
 *   *norm_out (may be NULL) = the pre-clip norm.       */
int kn_sumsq_ref(const float *g, size_t n, double *out);
int kn_scale_ref(float *g, size_t n, float s);
int kn_clip_grad_norm_ref(float *g, size_t n, float max_norm, float *norm_out);

/* Threads used by the reference kernels (OpenMP max threads, 1 without). */
int kn_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif /* KN_H */
