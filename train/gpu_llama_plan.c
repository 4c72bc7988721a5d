/* gpu_llama_plan.c - the GPU Llama model's device memory as planner rows
 * (gpu_llama.h: tr_llama_gpu_plan_rows), plain C in tr_plan so the memory
 * planner (train/plan.c, `mkshards plan`) has them without CUDA. The same
 * formulas as train/gpu_llama.cu's carve, piece for piece: the kernel
 * scratch is one function both call (tr_llama_gpu_scratch_bytes), and
 * tests/test_llama_gpu_plan.c holds the rows' sum equal to
 * tr_cuda_llama_arena_bytes over a grid of shapes and dtypes. */
#include <stddef.h>
#include <stdint.h>

#include "gpu_attention.h"
#include "gpu_llama.h"
#include "gpu_step.h"
#include "gpu_lmhead.h"
#include "kn_cuda_size.h"

/* the shape checks of gpu_llama.cu's init_shape */
static int shape_ok(const tr_llama_config *c, int B, int T) {
    if (!c || B <= 0 || T <= 0 || T > c->max_seq) return 0;
    if (c->n_layer <= 0 || c->n_layer > 1024 || c->n_head <= 0 || c->n_kv_head <= 0 || c->n_head % c->n_kv_head ||
        c->d_model <= 0 || c->d_model % c->n_head || c->d_ff <= 0 || c->vocab <= 0 || !(c->norm_eps > 0))
        return 0;
    int hd = c->d_model / c->n_head;
    if (hd != 16 && hd != 32 && hd != 64 && hd != 128) return 0;
    if ((size_t)B * T > (size_t)INT32_MAX / 8 || (size_t)c->d_model + 2 * (size_t)c->n_kv_head * hd > 1u << 20)
        return 0;
    return 1;
}

size_t tr_llama_gpu_param_count(const tr_llama_config *c) {
    size_t C = (size_t)c->d_model, hd = C / (size_t)c->n_head, KVd = (size_t)c->n_kv_head * hd, F = (size_t)c->d_ff,
           V = (size_t)c->vocab, RS = C + 2 * KVd;
    size_t layer = RS * C + (c->qkv_bias ? RS : 0) + C * C + 3 * F * C + 2 * C;
    return V * C * (c->tied ? 1 : 2) + (size_t)c->n_layer * layer + C;
}

size_t tr_llama_gpu_tensor_count(const tr_llama_config *c) {
    /* embeddings; per layer q, k, v (+ their biases), o, gate, up, down, two norms; the final norm; an untied head */
    return 1 + (size_t)c->n_layer * (c->qkv_bias ? 12 : 9) + 1 + (c->tied ? 0 : 1);
}

size_t tr_llama_gpu_scratch_bytes(const tr_llama_config *c, size_t B, size_t T) {
    size_t N = B * T, C = (size_t)c->d_model, hd = C / (size_t)c->n_head, RS = C + 2 * (size_t)c->n_kv_head * hd, s, x;
    s = kn_matmul_backward_scratch_bytes(N, RS); /* the q/k/v bias gradient (Qwen2) */
    if ((x = kn_rmsnorm_backward_scratch_bytes(N, C)) > s) s = x;
    if ((x = tr_gpu_attention_scratch_bytes(B, T, (size_t)c->n_head, hd)) > s) s = x; /* + cuDNN's workspace if asked */
    if ((x = kn_encoder_backward_scratch_bytes(N)) > s) s = x;
    if ((x = kn_sumsq_scratch_bytes(tr_llama_gpu_param_count(c))) > s) s = x;
    return s;
}

int tr_llama_gpu_plan_rows(const tr_llama_config *c, int B, int T, int esz, const tr_optim_ops *opt,
                           tr_llama_gpu_row rows[TR_LLAMA_GPU_ROWS]) {
    if (!opt || !rows || (esz != 2 && esz != 4) || !shape_ok(c, B, T)) return 0;
    const uint64_t C = (uint64_t)c->d_model, H = (uint64_t)c->n_head, hd = C / H, KVd = (uint64_t)c->n_kv_head * hd,
                   RS = C + 2 * KVd, F = (uint64_t)c->d_ff, V = (uint64_t)c->vocab, L = (uint64_t)c->n_layer,
                   e = (uint64_t)esz, t = (uint64_t)T, P = tr_llama_gpu_param_count(c);
    int n = 0, pieces = 0;
#define ROW(nm_, fixed_, per_row_, pieces_)                                                                            \
    do {                                                                                                               \
        rows[n].name = (nm_);                                                                                          \
        rows[n].fixed = (fixed_);                                                                                      \
        rows[n].per_row = (per_row_);                                                                                  \
        n++;                                                                                                           \
        pieces += (pieces_);                                                                                           \
    } while (0)
    ROW("parameters (fp32 master)", P * 4, 0, 1);
    if (esz != 4) ROW("parameters (compute copy, 16-bit)", P * e, 0, 1);
    ROW("gradients (fp32)", P * 4, 0, 1);
    ROW(opt->plan_row, tr_optim_state_bytes(opt, P), 0, opt->n_state);
    /* per layer: input, two norms, attention out, mid residual (5C), the packed rotated q/k/v
     * (RS), gate, up, swiglu (3F) in the compute dtype; two rstd and H lse values in fp32 */
    ROW("activations: layers (residuals, norms, qkv, attn out, gate/up/swiglu; rstd, lse)", 0,
        t * L * ((5 * C + RS + 3 * F) * e + (2 + H) * 4), 12);
    /* the logits buffer: every row's, or one chunk's (MKS_LMHEAD_CHUNK; the carve's own function) */
    const uint64_t lm = tr_lmhead_chunk_rows(tr_lmhead_chunk_request(), (size_t)B * (size_t)T, (size_t)C);
    if (lm >= (uint64_t)B * t) {
        ROW("activations: final norm (+rstd), projection, logits / dlogits (V), losses", 0, t * ((3 * C + V) * e + 8),
            6);
    } else {
        ROW("activations: final norm (+rstd), projection, losses", 0, t * (3 * C * e + 8), 5);
        ROW("logits / dlogits (V): one chunk (MKS_LMHEAD_CHUNK)", lm * V * e, 0, 1);
    }
    ROW("backward buffers (dresidual, dnorm x2, dgate, dup, dqkv)", 0, t * (3 * C + 2 * F + RS) * e, 6);
    ROW("rotary cos/sin table + inverse frequencies", (uint64_t)c->max_seq * hd * 4 + hd / 2 * 4, 0, 2);
    ROW("kernel scratch (largest backward op)", tr_llama_gpu_scratch_bytes(c, (size_t)B, (size_t)T), 0, 1);
    ROW("cuBLAS workspace", KN_CUBLASLT_WORKSPACE, 0, 1);
    pieces += TR_GPU_TAIL_SMALL_PIECES; /* loss sums, grad sumsq, clip scale, grad norm, optimizer tensor table */
    ROW("small buffers + arena alignment",
        tr_gpu_tail_small_bytes(tr_llama_gpu_tensor_count(c)) + (uint64_t)pieces * TR_CUDA_ALIGN, 0, 0);
#undef ROW
    return n;
}
