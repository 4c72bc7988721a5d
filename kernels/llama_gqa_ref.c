/* llama_gqa_ref.c - fp32 C references of the two Llama-family ops that only
 * the CUDA backend needed spelled out (kn_llama.h): grouped-query attention
 * on the packed [q | k | v] row of one fused q/k/v projection, and the rotary
 * cos/sin table the CUDA kernels read instead of calling cos/sin per step.
 *
 * The attention reference is the MHA reference (attention_ref.c) on K/V
 * expanded to one copy per query head, which is what transformers'
 * repeat_kv does and what train/llama_model.c does: the backward sums each
 * expanded copy's dK/dV back into its KV head, in query-head order. It
 * allocates the expanded buffers (KN_ENOMEM when that fails). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn.h"
#include "kn_llama.h"

int kn_rope_table_ref(float *table, const float *inv_freq, int max_pos, int head_dim) {
    if (!table || !inv_freq || max_pos <= 0 || head_dim <= 0 || head_dim % 2) return KN_EINVAL;
    int h2 = head_dim / 2;
    for (int p = 0; p < max_pos; p++)
        for (int i = 0; i < h2; i++) {
            /* the rotation angle exactly as kn_rope_forward_ref forms it */
            float a = (float)p * inv_freq[i];
            table[((size_t)p * h2 + i) * 2] = (float)cos((double)a);
            table[((size_t)p * h2 + i) * 2 + 1] = (float)sin((double)a);
        }
    return KN_OK;
}

static int gqa_shape_ok(int B, int T, int NH, int NKV, int HS) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || HS <= 0 || NH % NKV) return 0;
    /* every index below is a size_t product of these; bound the row width */
    return (size_t)(NH + 2 * NKV) * (size_t)HS <= ((size_t)1 << 30) && (size_t)NH * HS <= ((size_t)1 << 30);
}

/* packed GQA rows -> MHA rows [q | k(h / rep) | v(h / rep)] */
static void expand(float *mha, const float *qkv, size_t N, int NH, int NKV, int HS) {
    size_t RS = (size_t)(NH + 2 * NKV) * HS, C = (size_t)NH * HS;
    int rep = NH / NKV;
    for (size_t n = 0; n < N; n++) {
        const float *src = qkv + n * RS;
        float *dst = mha + n * 3 * C;
        memcpy(dst, src, C * sizeof *dst);
        for (int h = 0; h < NH; h++) {
            size_t g = (size_t)(h / rep);
            memcpy(dst + C + (size_t)h * HS, src + C + g * HS, (size_t)HS * sizeof *dst);
            memcpy(dst + 2 * C + (size_t)h * HS, src + C + (size_t)NKV * HS + g * HS, (size_t)HS * sizeof *dst);
        }
    }
}

int kn_gqa_attention_forward_ref(float *out, float *att, const float *qkv, const int32_t *doc, int B, int T, int NH,
                                 int NKV, int HS) {
    if (!out || !att || !qkv || !gqa_shape_ok(B, T, NH, NKV, HS)) return KN_EINVAL;
    size_t N = (size_t)B * T, C = (size_t)NH * HS;
    float *mha = malloc(N * 3 * C * sizeof *mha);
    if (!mha) return KN_ENOMEM;
    expand(mha, qkv, N, NH, NKV, HS);
    int rc = kn_attention_forward_ref(out, att, mha, doc, B, T, (int)C, NH);
    free(mha);
    return rc;
}

int kn_gqa_attention_backward_ref(float *dqkv, const float *dout, const float *qkv, const float *att,
                                  const int32_t *doc, int B, int T, int NH, int NKV, int HS) {
    if (!dqkv || !dout || !qkv || !att || !gqa_shape_ok(B, T, NH, NKV, HS)) return KN_EINVAL;
    size_t N = (size_t)B * T, C = (size_t)NH * HS, RS = (size_t)(NH + 2 * NKV) * HS, KVd = (size_t)NKV * HS;
    int rep = NH / NKV;
    float *mha = malloc(N * 3 * C * sizeof *mha), *dmha = malloc(N * 3 * C * sizeof *dmha);
    int rc = KN_ENOMEM;
    if (!mha || !dmha) goto done;
    expand(mha, qkv, N, NH, NKV, HS);
    rc = kn_attention_backward_ref(dmha, dout, mha, att, doc, B, T, (int)C, NH);
    if (rc != KN_OK) goto done;
    for (size_t n = 0; n < N; n++) {
        const float *src = dmha + n * 3 * C;
        float *dst = dqkv + n * RS;
        memcpy(dst, src, C * sizeof *dst);
        memset(dst + C, 0, 2 * KVd * sizeof *dst);
        for (int h = 0; h < NH; h++) { /* query-head order: the CUDA kernel sums in the same order */
            size_t g = (size_t)(h / rep);
            float *dk = dst + C + g * HS, *dv = dst + C + KVd + g * HS;
            const float *sk = src + C + (size_t)h * HS, *sv = src + 2 * C + (size_t)h * HS;
            for (int e = 0; e < HS; e++) {
                dk[e] += sk[e];
                dv[e] += sv[e];
            }
        }
    }
done:
    free(mha);
    free(dmha);
    return rc;
}
