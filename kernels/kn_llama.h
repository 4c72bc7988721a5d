/* kn_llama.h - fp32 C references of the Llama-family ops (issue 30 step 4):
 * RMSNorm, rotary position embeddings (with Llama 3's rope_scaling) and the
 * SwiGLU gate. Conventions of kn.h (flat row-major fp32, KN_OK / KN_EINVAL,
 * parameter gradients accumulated, activation gradients overwritten except
 * where stated, OpenMP over rows: bitwise identical for any thread count).
 * Each matches transformers' fp32 implementation (LlamaRMSNorm,
 * LlamaRotaryEmbedding + apply_rotary_pos_emb, silu(gate) * up):
 * tests/test_kn_llama.c compares forward values and gradients with the
 * figures tests/hf/make_llama_ops_fixture.py computed with torch. */
#ifndef KN_LLAMA_H
#define KN_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- RMSNorm over the last dim ----------------------------------------------
 *   out = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps) (saved, (N))
 * backward: dinp (N,C) += (the residual stream's gradient, as layernorm's),
 *           dweight (C) += */
int kn_rmsnorm_forward_ref(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps);
int kn_rmsnorm_backward_ref(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                            const float *rstd, int N, int C);

/* ---- rotary embeddings ------------------------------------------------------
 * inv_freq (head_dim / 2): 1 / theta^(2i / head_dim), computed in fp32 as
 * torch does; with Llama 3 scaling (factor > 0) each frequency is divided
 * by factor below the low-frequency wavelength, kept above the
 * high-frequency one, and smoothly interpolated between
 * (transformers' _compute_llama3_parameters). */
typedef struct {
    float factor; /* 0: no scaling ("default" rope) */
    float low_freq_factor, high_freq_factor;
    int original_max_position_embeddings;
} kn_rope_scaling;
int kn_rope_inv_freq_ref(float *inv_freq, int head_dim, float theta, const kn_rope_scaling *scaling);
/* x (N, n_heads, head_dim), pos (N) position ids >= 0: the rotation of
 * transformers' rotate_half convention (pairs i and i + head_dim/2, angle
 * pos * inv_freq[i], cos/sin in fp32). out may alias x. backward: the
 * inverse rotation, dx (=, may alias dout). */
int kn_rope_forward_ref(float *out, const float *x, const int32_t *pos, const float *inv_freq, int N, int n_heads,
                        int head_dim);
int kn_rope_backward_ref(float *dx, const float *dout, const int32_t *pos, const float *inv_freq, int N, int n_heads,
                         int head_dim);

/* ---- SwiGLU gate: out = silu(gate) * up (n elements each) -------------------
 * backward: dgate = dout * up * silu'(gate), dup = dout * silu(gate) (=). */
int kn_swiglu_forward_ref(float *out, const float *gate, const float *up, size_t n);
int kn_swiglu_backward_ref(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n);

/* ---- the CUDA backend's two extra references (kernels/llama_gqa_ref.c) -----
 * kn_rope_table_ref: table (max_pos, head_dim / 2, 2) = {cos, sin} of the
 * angle p * inv_freq[i] exactly as kn_rope_forward_ref forms it (the CUDA
 * rotary kernels read this table, built once per run).
 * kn_gqa_attention_*_ref: grouped-query causal attention on packed rows
 * qkv (B, T, (NH + 2 NKV) HS) = [q heads | k heads | v heads] (one fused
 * q/k/v projection), query head h reading KV head h / (NH / NKV); out
 * (B, T, NH HS), att (B, NH, T, T) as kn_attention_forward_ref. The MHA
 * reference on K/V expanded per query head (transformers' repeat_kv); the
 * backward's dqkv (=) sums the expanded dK/dV into each KV head in
 * query-head order. Allocate the expanded copies (KN_ENOMEM). */
int kn_rope_table_ref(float *table, const float *inv_freq, int max_pos, int head_dim);
int kn_gqa_attention_forward_ref(float *out, float *att, const float *qkv, const int32_t *doc, int B, int T, int NH,
                                 int NKV, int HS);
int kn_gqa_attention_backward_ref(float *dqkv, const float *dout, const float *qkv, const float *att,
                                  const int32_t *doc, int B, int T, int NH, int NKV, int HS);

/* ---- CPU model kernels (kernels/llama_cpu_ref.c) ---------------------------
 * What train/llama_model.c runs: the references' arithmetic on its packed
 * layouts (tests/test_llama_cpu_kernels.c compares each with the reference).
 * kn_rope_cos_sin_cpu: cs (N, head_dim / 2, 2) = {cos, sin} of pos[n] *
 *   inv_freq[i] as kn_rope_forward_ref forms them (once per batch).
 * kn_rope_rows_cpu: in place on N rows row_stride floats apart, each
 *   starting with n_heads x head_dim values (e.g. the q or k part of a
 *   packed q/k/v row); inverse 1: the backward's inverse rotation.
 * kn_gqa_attention_*_cpu: as kn_gqa_attention_*_ref on the packed rows
 *   (B, T, (NH + 2 NKV) HS) without expanding K/V per query head; the
 *   backward sums a KV head's dK/dV over its query heads in one buffer (a
 *   different association than the reference's per-head copies) and
 *   allocates T floats per thread (KN_ENOMEM). The backward also takes the
 *   forward's out. On the matmul's exact numerics (MKS_MATMUL_ISA portable
 *   / avx512) they are the row loops above; on its FMA numerics (the
 *   default) blocked matmuls (kernels/llama_attn_fma_ref.c: FMA chains,
 *   last bits differ from the reference; per-thread workspace of HS x 128
 *   floats forward, 3 HS x 128 + 24 x 128 backward, KN_ENOMEM).
 * kn_swiglu_packed_*_cpu: gu (N, 2F) = [gate | up] per row (one matmul of
 *   the adjacent gate_proj and up_proj weights); out (N, F); the backward
 *   writes dgu (N, 2F) (=).
 * kn_rmsnorm_backward_cpu: kn_rmsnorm_backward_ref's result bit for bit.
 * kn_softmax_xent_forward_cpu: kn_softmax_xent_forward_ref with Vp = V; on
 *   the matmul's FMA numerics with vectorized exponentials and sums (last
 *   bits differ), on the exact ones the reference itself. */
int kn_rope_cos_sin_cpu(float *cs, const int32_t *pos, const float *inv_freq, int N, int head_dim);
int kn_rope_rows_cpu(float *x, size_t row_stride, const float *cs, int N, int n_heads, int head_dim, int inverse);
int kn_gqa_attention_forward_cpu(float *out, float *att, const float *qkv, const int32_t *doc, int B, int T, int NH,
                                 int NKV, int HS);
int kn_gqa_attention_backward_cpu(float *dqkv, const float *dout, const float *out, const float *qkv, const float *att,
                                  const int32_t *doc, int B, int T, int NH, int NKV, int HS);
int kn_swiglu_packed_forward_cpu(float *out, const float *gu, int N, int F);
int kn_swiglu_packed_backward_cpu(float *dgu, const float *dout, const float *gu, int N, int F);
int kn_rmsnorm_backward_cpu(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                            const float *rstd, int N, int C);
int kn_softmax_xent_forward_cpu(float *losses, float *probs, const float *logits, const int32_t *targets, int N, int V);

#ifdef __cplusplus
}
#endif
#endif /* KN_LLAMA_H */
