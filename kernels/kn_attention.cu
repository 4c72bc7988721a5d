/* kn_attention.cu - causal self-attention with the document mask, flash-style:
 * O(T) memory (the row log-sum-exp is all that is saved), never a T x T
 * matrix (CUDA twin of attention_ref; see kn_cuda.h).
 *
 * SIMT fp32 arithmetic (one thread per query row in the forward and dq
 * kernels, one per key row in the dk/dv kernel, tiles in shared memory,
 * online softmax), deterministic (no atomics: dq and dk/dv are separate
 * kernels): the kernels of kn_attention_simt.cuh on GPT-2's row; the
 * tensor-core versions (kn_attention_tc*.cu) are the bf16 default. */
#include <math.h>

#include "kn_attention_simt.cuh" /* the SIMT kernels, shared with the Llama family's GQA (kn_llama.cu) */

/* GPT-2's tiling, as validated on the H200: 64 query rows per forward / dq
 * block, keys in tiles of 32, 64 key rows per dk/dv block over query tiles of
 * 16 (hs 64) or 32 (hs 32); the forward rescales with __expf; dq keeps its
 * dout rows in shared memory. */
template <int HS> struct att_gpt2_cfg {
    static constexpr int BQ = 64, BK = 32, KB = 64, QB = HS >= 64 ? 16 : 32;
    static constexpr bool FAST_CORR = true, DO_SHARED = true;
};

template <int HS, typename T>
static int att_fwd_launch(T *out, float *lse, const T *qkv, const int32_t *doc, int B, int Tn, int C, int NH,
                          cudaStream_t s) {
    return kn_att_fwd_launch<HS, att_gpt2_cfg<HS>, T>(out, lse, qkv, doc, B, kn_att_geo_gpt2(Tn, C, NH), s,
                                                      "attention_forward");
}

extern "C" int kn_attention_forward_cuda(void *out, float *lse, const void *qkv, const int32_t *doc, int B, int T,
                                         int C, int NH, kn_dtype dt, kn_stream s) {
    if (!out || !lse || !qkv || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return KN_EINVAL;
    if (B > 65535 || NH > 65535) return KN_EINVAL;
    int hs = C / NH;
    switch (hs) {
    case 32: KN_DISPATCH(dt, return att_fwd_launch<32, DT>((DT *)out, lse, (const DT *)qkv, doc, B, T, C, NH, s));
    case 64: KN_DISPATCH(dt, return att_fwd_launch<64, DT>((DT *)out, lse, (const DT *)qkv, doc, B, T, C, NH, s));
    default: kn_cuda_set_error("attention: head size %d not supported (32 or 64)", hs); return KN_EINVAL;
    }
}

template <int HS, typename T>
static int att_bwd_launch(T *dqkv, const T *dout, const T *qkv, const T *out, const float *lse, const int32_t *doc,
                          int B, int Tn, int C, int NH, float *Dsum, cudaStream_t s) {
    return kn_att_bwd_launch<HS, att_gpt2_cfg<HS>, T>(dqkv, dout, qkv, out, lse, doc, B, kn_att_geo_gpt2(Tn, C, NH),
                                                      Dsum, s, "attention_backward");
}

extern "C" int kn_attention_backward_cuda(void *dqkv, const void *dout, const void *qkv, const void *out,
                                          const float *lse, const int32_t *doc, int B, int T, int C, int NH,
                                          void *scratch, size_t scratch_bytes, kn_dtype dt, kn_stream s) {
    if (!dqkv || !dout || !qkv || !out || !lse || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return KN_EINVAL;
    if (B > 65535 || NH > 65535) return KN_EINVAL;
    if (!scratch || scratch_bytes < kn_attention_backward_scratch_bytes(B, T, NH)) return KN_EINVAL;
    float *Dsum = (float *)scratch;
    int hs = C / NH;
    switch (hs) {
    case 32:
        KN_DISPATCH(dt, return att_bwd_launch<32, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out,
                                                      lse, doc, B, T, C, NH, Dsum, s));
    case 64:
        KN_DISPATCH(dt, return att_bwd_launch<64, DT>((DT *)dqkv, (const DT *)dout, (const DT *)qkv, (const DT *)out,
                                                      lse, doc, B, T, C, NH, Dsum, s));
    default: kn_cuda_set_error("attention: head size %d not supported (32 or 64)", hs); return KN_EINVAL;
    }
}
