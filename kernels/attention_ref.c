/* attention_ref.c - causal multi-head self-attention with an optional
 * document mask, storing the (B,NH,T,T) probability matrix. */
#include "kn.h"
#include "kn_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* one (b, h, t) row: scores, softmax into a (T floats), output o (hs) */
KN_CLONES
void kn_attn_row_fwd(float *a, float *o, const float *base, const int32_t *docrow, int t, int T, size_t RS, size_t qo,
                     size_t ko, size_t vo, int hs, float scale) {
    const float *q = base + (size_t)t * RS + qo;
    float mx = -INFINITY;
    for (int t2 = 0; t2 <= t; t2++) {
        if (!kn_attn_visible(docrow, t, t2)) {
            a[t2] = 0.0f;
            continue;
        }
        float s = kn_dot(q, base + (size_t)t2 * RS + ko, hs) * scale;
        a[t2] = s;
        if (s > mx) mx = s;
    }
    double sum = 0.0;
    for (int t2 = 0; t2 <= t; t2++) {
        if (!kn_attn_visible(docrow, t, t2)) continue;
        float e = expf(a[t2] - mx);
        a[t2] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv;
    for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        float w = a[t2];
        if (w == 0.0f) continue;
        const float *v = base + (size_t)t2 * RS + vo;
        for (int i = 0; i < hs; i++) o[i] += w * v[i];
    }
}

int kn_attention_forward_ref(float *out, float *att, const float *qkv, const int32_t *doc, int B, int T, int C,
                             int NH) {
    if (!out || !att || !qkv || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return KN_EINVAL;
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    long rows = (long)B * NH * T;
    KN_OMP(parallel for schedule(dynamic, 16))
    for (long r = 0; r < rows; r++) {
        int t = (int)(r % T), h = (int)(r / T % NH), b = (int)(r / ((long)T * NH));
        size_t hd = (size_t)h * hs, C_ = (size_t)C;
        kn_attn_row_fwd(att + (size_t)r * T, out + ((size_t)b * T + t) * C + h * hs, qkv + (size_t)b * T * 3 * C,
                        doc ? doc + (size_t)b * T : NULL, t, T, 3 * C_, hd, C_ + hd, 2 * C_ + hd, hs, scale);
    }
    return KN_OK;
}

/* one (b, h): dqkv slice of head h (q, k, v channels) for all t */
KN_CLONES
static void attn_bh_bwd(float *dbase, const float *dout_b, const float *base, const float *att_bh,
                        const int32_t *docrow, float *datt, int T, int C, int h, int hs, float scale) {
    int C3 = 3 * C;
    for (int t = 0; t < T; t++) {
        float *d = dbase + (size_t)t * C3 + h * hs;
        memset(d, 0, sizeof(float) * hs);
        memset(d + C, 0, sizeof(float) * hs);
        memset(d + 2 * C, 0, sizeof(float) * hs);
    }
    for (int t = 0; t < T; t++) {
        const float *a = att_bh + (size_t)t * T;
        const float *dO = dout_b + (size_t)t * C + h * hs;
        const float *q = base + (size_t)t * C3 + h * hs;
        float *dq = dbase + (size_t)t * C3 + h * hs;
        double dot = 0.0;
        for (int t2 = 0; t2 <= t; t2++) {
            if (!kn_attn_visible(docrow, t, t2)) continue;
            const float *v = base + (size_t)t2 * C3 + 2 * C + h * hs;
            float *dv = dbase + (size_t)t2 * C3 + 2 * C + h * hs;
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
            const float *k = base + (size_t)t2 * C3 + C + h * hs;
            float *dk = dbase + (size_t)t2 * C3 + C + h * hs;
            for (int i = 0; i < hs; i++) {
                dq[i] += dpre * k[i];
                dk[i] += dpre * q[i];
            }
        }
    }
}

int kn_attention_backward_ref(float *dqkv, const float *dout, const float *qkv, const float *att, const int32_t *doc,
                              int B, int T, int C, int NH) {
    if (!dqkv || !dout || !qkv || !att || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH) return KN_EINVAL;
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    int err = 0;
    long pairs = (long)B * NH;
    KN_OMP(parallel) {
        float *datt = malloc(sizeof(float) * (size_t)T);
        if (!datt) {
            KN_OMP(atomic write)
            err = 1;
        }
        /* one (b, h) per iteration: it owns the q/k/v channels of head h in
         * batch row b, so no two threads write the same dqkv element */
        KN_OMP(for schedule(static))
        for (long bh = 0; bh < pairs; bh++) {
            if (!datt) continue;
            int b = (int)(bh / NH), h = (int)(bh % NH);
            attn_bh_bwd(dqkv + (size_t)b * T * C3, dout + (size_t)b * T * C, qkv + (size_t)b * T * C3,
                        att + (size_t)bh * T * T, doc ? doc + (size_t)b * T : NULL, datt, T, C, h, hs, scale);
        }
        free(datt);
    }
    return err ? KN_ENOMEM : KN_OK;
}
