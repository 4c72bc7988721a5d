/* llama_cpu_ref.c - the CPU model's Llama-family kernels (kn_llama.h, "CPU
 * model kernels"): the same arithmetic as the references in llama_ref.c and
 * llama_gqa_ref.c, laid out for train/llama_model.c's one-block activations:
 * RoPE in place on strided rows from a per-batch cos/sin table, grouped-query
 * attention reading the packed [q | k | v] row directly (no K/V copies per
 * query head), SwiGLU on the packed [gate | up] row, and RMSNorm's backward
 * with cache-friendly column blocks. No allocation except the attention
 * backward's T floats per thread. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kn.h"
#include "kn_internal.h"
#include "kn_llama.h"

int kn_rope_cos_sin_cpu(float *cs, const int32_t *pos, const float *inv_freq, int N, int head_dim) {
    if (!cs || !pos || !inv_freq || N <= 0 || head_dim <= 0 || head_dim % 2) return KN_EINVAL;
    for (int n = 0; n < N; n++)
        if (pos[n] < 0) return KN_EINVAL;
    int h2 = head_dim / 2;
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++)
        for (int i = 0; i < h2; i++) {
            /* the angle, cos and sin exactly as kn_rope_forward_ref forms them */
            float a = (float)pos[n] * inv_freq[i];
            cs[((size_t)n * h2 + i) * 2] = (float)cos((double)a);
            cs[((size_t)n * h2 + i) * 2 + 1] = (float)sin((double)a);
        }
    return KN_OK;
}

KN_CLONES
static void rope_row(float *x, const float *cs, int n_heads, int head_dim, float dir) {
    int h2 = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *b = x + (size_t)h * head_dim;
        for (int i = 0; i < h2; i++) {
            float c = cs[2 * i], sn = cs[2 * i + 1] * dir;
            float x1 = b[i], x2 = b[i + h2];
            b[i] = x1 * c - x2 * sn;
            b[i + h2] = x2 * c + x1 * sn;
        }
    }
}

int kn_rope_rows_cpu(float *x, size_t row_stride, const float *cs, int N, int n_heads, int head_dim, int inverse) {
    if (!x || !cs || N <= 0 || n_heads <= 0 || head_dim <= 0 || head_dim % 2 || row_stride < (size_t)n_heads * head_dim)
        return KN_EINVAL;
    float dir = inverse ? -1.0f : 1.0f;
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++) rope_row(x + (size_t)n * row_stride, cs + (size_t)n * head_dim, n_heads, head_dim, dir);
    return KN_OK;
}

static int gqa_ok(int B, int T, int NH, int NKV, int HS) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || HS <= 0 || NH % NKV) return 0;
    return (size_t)(NH + 2 * NKV) * (size_t)HS <= ((size_t)1 << 30);
}

int kn_gqa_attention_forward_cpu(float *out, float *att, const float *qkv, const int32_t *doc, int B, int T, int NH,
                                 int NKV, int HS) {
    if (!out || !att || !qkv || !gqa_ok(B, T, NH, NKV, HS)) return KN_EINVAL;
    /* the matmul's FMA numerics: attention as blocked matmuls on them too */
    if (kn_matmul_is_fma()) return kn_gqa_attention_forward_fma(out, att, qkv, doc, B, T, NH, NKV, HS);
    size_t C = (size_t)NH * HS, KVd = (size_t)NKV * HS, RS = C + 2 * KVd;
    int rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HS);
    long rows = (long)B * NH * T;
    KN_OMP(parallel for schedule(dynamic, 16))
    for (long r = 0; r < rows; r++) {
        int t = (int)(r % T), h = (int)(r / T % NH), b = (int)(r / ((long)T * NH));
        size_t g = (size_t)(h / rep);
        kn_attn_row_fwd(att + (size_t)r * T, out + ((size_t)b * T + t) * C + (size_t)h * HS, qkv + (size_t)b * T * RS,
                        doc ? doc + (size_t)b * T : NULL, t, T, RS, (size_t)h * HS, C + g * HS, C + KVd + g * HS, HS,
                        scale);
    }
    return KN_OK;
}

/* Query head h of one batch row, as attention_ref.c's attn_bh_bwd: dq of h
 * written, dK/dV of its KV head accumulated (the caller zeroes them once
 * for the group, then runs the group's query heads in order). */
KN_CLONES
static void gqa_head_bwd(float *dbase, const float *dout_b, const float *base, const float *att_bh,
                         const int32_t *docrow, float *datt, int T, size_t RS, size_t C, size_t qo, size_t ko,
                         size_t vo, int hs, float scale) {
    for (int t = 0; t < T; t++) memset(dbase + (size_t)t * RS + qo, 0, sizeof(float) * hs);
    for (int t = 0; t < T; t++) {
        const float *a = att_bh + (size_t)t * T;
        const float *dO = dout_b + (size_t)t * C + qo;
        const float *q = base + (size_t)t * RS + qo;
        float *dq = dbase + (size_t)t * RS + qo;
        double dot = 0.0;
        for (int t2 = 0; t2 <= t; t2++) {
            if (!kn_attn_visible(docrow, t, t2)) continue;
            const float *v = base + (size_t)t2 * RS + vo;
            float *dv = dbase + (size_t)t2 * RS + vo;
            float at = a[t2];
            for (int i = 0; i < hs; i++) dv[i] += at * dO[i];
            float s = kn_dot(v, dO, hs);
            datt[t2] = s;
            dot += (double)at * s;
        }
        float fdot = (float)dot;
        for (int t2 = 0; t2 <= t; t2++) {
            if (!kn_attn_visible(docrow, t, t2)) continue;
            float dpre = a[t2] * (datt[t2] - fdot) * scale;
            const float *k = base + (size_t)t2 * RS + ko;
            float *dk = dbase + (size_t)t2 * RS + ko;
            for (int i = 0; i < hs; i++) {
                dq[i] += dpre * k[i];
                dk[i] += dpre * q[i];
            }
        }
    }
}

int kn_gqa_attention_backward_cpu(float *dqkv, const float *dout, const float *out, const float *qkv, const float *att,
                                  const int32_t *doc, int B, int T, int NH, int NKV, int HS) {
    if (!dqkv || !dout || !out || !qkv || !att || !gqa_ok(B, T, NH, NKV, HS)) return KN_EINVAL;
    if (kn_matmul_is_fma()) return kn_gqa_attention_backward_fma(dqkv, dout, out, qkv, att, doc, B, T, NH, NKV, HS);
    size_t C = (size_t)NH * HS, KVd = (size_t)NKV * HS, RS = C + 2 * KVd;
    int rep = NH / NKV, err = 0;
    float scale = 1.0f / sqrtf((float)HS);
    long groups = (long)B * NKV;
    KN_OMP(parallel) {
        float *datt = malloc(sizeof(float) * (size_t)T);
        if (!datt) {
            KN_OMP(atomic write)
            err = 1;
        }
        /* one (b, KV head) per iteration: it owns that KV head's k/v channels
         * and its query heads' q channels in batch row b */
        KN_OMP(for schedule(dynamic, 1))
        for (long bg = 0; bg < groups; bg++) {
            if (!datt) continue;
            int b = (int)(bg / NKV), g = (int)(bg % NKV);
            float *db = dqkv + (size_t)b * T * RS;
            size_t ko = C + (size_t)g * HS, vo = C + KVd + (size_t)g * HS;
            for (int t = 0; t < T; t++) {
                memset(db + (size_t)t * RS + ko, 0, sizeof(float) * HS);
                memset(db + (size_t)t * RS + vo, 0, sizeof(float) * HS);
            }
            for (int h = g * rep; h < (g + 1) * rep; h++)
                gqa_head_bwd(db, dout + (size_t)b * T * C, qkv + (size_t)b * T * RS, att + ((size_t)b * NH + h) * T * T,
                             doc ? doc + (size_t)b * T : NULL, datt, T, RS, C, (size_t)h * HS, ko, vo, HS, scale);
        }
        free(datt);
    }
    return err ? KN_ENOMEM : KN_OK;
}

KN_CLONES
static void swiglu_row_fwd(float *o, const float *g, const float *u, int F) {
    for (int i = 0; i < F; i++) o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

int kn_swiglu_packed_forward_cpu(float *out, const float *gu, int N, int F) {
    if (!out || !gu || N <= 0 || F <= 0) return KN_EINVAL;
    if (kn_matmul_is_fma()) return kn_swiglu_packed_forward_fma(out, gu, N, F);
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F;
        swiglu_row_fwd(out + (size_t)n * F, g, g + F, F);
    }
    return KN_OK;
}

KN_CLONES
static void swiglu_row_bwd(float *dg, float *du, const float *dy, const float *gt, const float *up, int F) {
    for (int i = 0; i < F; i++) {
        float g = gt[i], s = 1.0f / (1.0f + expf(-g)), d = dy[i], u = up[i];
        du[i] = d * g * s;
        dg[i] = d * u * s * (1.0f + g * (1.0f - s));
    }
}

int kn_swiglu_packed_backward_cpu(float *dgu, const float *dout, const float *gu, int N, int F) {
    if (!dgu || !dout || !gu || N <= 0 || F <= 0) return KN_EINVAL;
    if (kn_matmul_is_fma()) return kn_swiglu_packed_backward_fma(dgu, dout, gu, N, F);
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F;
        float *d = dgu + (size_t)n * 2 * F;
        swiglu_row_bwd(d, d + F, dout + (size_t)n * F, g, g + F, F);
    }
    return KN_OK;
}

int kn_rmsnorm_backward_cpu(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                            const float *rstd, int N, int C) {
    if (!dinp || !dweight || !dout || !inp || !weight || !rstd || N <= 0 || C <= 0) return KN_EINVAL;
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C, r = rstd[n];
        double dot = 0;
        for (int c = 0; c < C; c++) dot += (double)dy[c] * weight[c] * x[c];
        float k = (float)(dot / C) * r * r;
        for (int c = 0; c < C; c++) dx[c] += r * (dy[c] * weight[c] - x[c] * k);
    }
    /* dweight: each column summed in row order as the reference does (the
     * same bits), 64 columns at a time so each row's read is contiguous */
    enum { CB = 64 };
    int nb = (C + CB - 1) / CB;
    KN_OMP(parallel for schedule(static))
    for (int blk = 0; blk < nb; blk++) {
        int c0 = blk * CB, cc = C - c0 < CB ? C - c0 : CB;
        float s[CB] = {0};
        for (int n = 0; n < N; n++) {
            const float *dy = dout + (size_t)n * C + c0, *x = inp + (size_t)n * C + c0;
            float r = rstd[n];
            for (int j = 0; j < cc; j++) s[j] += dy[j] * (x[j] * r);
        }
        for (int j = 0; j < cc; j++) dweight[c0 + j] += s[j];
    }
    return KN_OK;
}

int kn_softmax_xent_forward_cpu(float *losses, float *probs, const float *logits, const int32_t *targets, int N,
                                int V) {
    if (!kn_matmul_is_fma()) return kn_softmax_xent_forward_ref(losses, probs, logits, targets, N, V, V);
    if (!logits || N <= 0 || V <= 0 || (losses && !targets)) return KN_EINVAL;
    if (targets)
        for (int n = 0; n < N; n++)
            if (targets[n] >= V) return KN_EINVAL;
    return kn_softmax_xent_forward_fma(losses, probs, logits, targets, N, V);
}
