/* attention_ref.c - causal multi-head self-attention with an optional
 * document mask, storing the (B,NH,T,T) probability matrix. */
#include "kn.h"
#include "kn_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* t attends t2 iff t2 <= t and (no doc mask or same document) */
static inline int visible(const int32_t *docrow, int t, int t2)
{
    return !docrow || docrow[t2] == docrow[t];
}

int kn_attention_forward_ref(float *out, float *att, const float *qkv,
                             const int32_t *doc, int B, int T, int C, int NH)
{
    if (!out || !att || !qkv || B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH)
        return KN_EINVAL;
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    long rows = (long)B * NH * T;
    KN_OMP(parallel for schedule(static))
    for (long r = 0; r < rows; r++) {
        int t = (int)(r % T), h = (int)(r / T % NH), b = (int)(r / ((long)T * NH));
        const int32_t *docrow = doc ? doc + (size_t)b * T : NULL;
        const float *base = qkv + (size_t)b * T * C3;
        const float *q = base + (size_t)t * C3 + h * hs;
        float *a = att + (size_t)r * T;
        float mx = -INFINITY;
        for (int t2 = 0; t2 <= t; t2++) {
            if (!visible(docrow, t, t2)) {
                a[t2] = 0.0f;
                continue;
            }
            const float *k = base + (size_t)t2 * C3 + C + h * hs;
            float s = 0.0f;
            for (int i = 0; i < hs; i++) s += q[i] * k[i];
            s *= scale;
            a[t2] = s;
            if (s > mx) mx = s;
        }
        double sum = 0.0;
        for (int t2 = 0; t2 <= t; t2++) {
            if (!visible(docrow, t, t2)) continue;
            float e = expf(a[t2] - mx);
            a[t2] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int t2 = 0; t2 <= t; t2++) a[t2] *= inv; /* masked stay 0 */
        for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
        float *o = out + ((size_t)b * T + t) * C + h * hs;
        for (int i = 0; i < hs; i++) o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            float w = a[t2];
            if (w == 0.0f) continue;
            const float *v = base + (size_t)t2 * C3 + 2 * C + h * hs;
            for (int i = 0; i < hs; i++) o[i] += w * v[i];
        }
    }
    return KN_OK;
}

int kn_attention_backward_ref(float *dqkv, const float *dout, const float *qkv,
                              const float *att, const int32_t *doc,
                              int B, int T, int C, int NH)
{
    if (!dqkv || !dout || !qkv || !att || B <= 0 || T <= 0 || C <= 0 ||
        NH <= 0 || C % NH)
        return KN_EINVAL;
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    int err = 0;
    long pairs = (long)B * NH;
    KN_OMP(parallel)
    {
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
            const int32_t *docrow = doc ? doc + (size_t)b * T : NULL;
            const float *base = qkv + (size_t)b * T * C3;
            float *dbase = dqkv + (size_t)b * T * C3;
            for (int t = 0; t < T; t++) {
                float *d = dbase + (size_t)t * C3 + h * hs;
                memset(d, 0, sizeof(float) * hs);
                memset(d + C, 0, sizeof(float) * hs);
                memset(d + 2 * C, 0, sizeof(float) * hs);
            }
            for (int t = 0; t < T; t++) {
                const float *a = att + ((size_t)bh * T + t) * T;
                const float *dO = dout + ((size_t)b * T + t) * C + h * hs;
                const float *q = base + (size_t)t * C3 + h * hs;
                float *dq = dbase + (size_t)t * C3 + h * hs;
                double dot = 0.0;
                for (int t2 = 0; t2 <= t; t2++) {
                    if (!visible(docrow, t, t2)) continue;
                    const float *v = base + (size_t)t2 * C3 + 2 * C + h * hs;
                    float *dv = dbase + (size_t)t2 * C3 + 2 * C + h * hs;
                    float s = 0.0f;
                    for (int i = 0; i < hs; i++) {
                        s += v[i] * dO[i];
                        dv[i] += a[t2] * dO[i];
                    }
                    datt[t2] = s;
                    dot += (double)a[t2] * s;
                }
                float fdot = (float)dot;
                for (int t2 = 0; t2 <= t; t2++) {
                    if (!visible(docrow, t, t2)) continue;
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
        free(datt);
    }
    return err ? KN_ENOMEM : KN_OK;
}
