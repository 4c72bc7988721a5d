/* ops_ref.c - element-wise / row-wise reference kernels: encoder, layernorm,
 * GELU, fused softmax + cross-entropy, AdamW, gradient norm and clipping. */
#include "kn.h"
#include "kn_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- encoder ------------------------------------------------------------- */

static int check_ids(const uint32_t *inp, const int32_t *pos, int B, int T, int V, int maxT) {
    for (long i = 0; i < (long)B * T; i++) {
        if (inp[i] >= (uint32_t)V) return KN_EINVAL;
        int p = pos ? pos[i] : (int)(i % T);
        if (p < 0 || p >= maxT) return KN_EINVAL;
    }
    return KN_OK;
}

int kn_encoder_forward_ref(float *out, const uint32_t *inp, const int32_t *pos, const float *wte, const float *wpe,
                           int B, int T, int C, int V, int maxT) {
    if (!out || !inp || !wte || !wpe || B <= 0 || T <= 0 || C <= 0 || V <= 0 || maxT <= 0) return KN_EINVAL;
    if (check_ids(inp, pos, B, T, V, maxT)) return KN_EINVAL;
    long BT = (long)B * T;
    KN_OMP(parallel for schedule(static))
    for (long i = 0; i < BT; i++) {
        int p = pos ? pos[i] : (int)(i % T);
        const float *te = wte + (size_t)inp[i] * C, *pe = wpe + (size_t)p * C;
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
    }
    return KN_OK;
}

int kn_encoder_backward_ref(float *dwte, float *dwpe, const float *dout, const uint32_t *inp, const int32_t *pos, int B,
                            int T, int C, int V, int maxT) {
    if (!dwte || !dwpe || !dout || !inp || B <= 0 || T <= 0 || C <= 0 || V <= 0 || maxT <= 0) return KN_EINVAL;
    if (check_ids(inp, pos, B, T, V, maxT)) return KN_EINVAL;
    long BT = (long)B * T;
    enum { CB = 32 };
    int nb = (C + CB - 1) / CB;
    /* each thread owns a channel slice of every row: no races, fixed order */
    KN_OMP(parallel for schedule(static))
    for (int blk = 0; blk < nb; blk++) {
        int c0 = blk * CB, cn = C - c0 < CB ? C - c0 : CB;
        for (long i = 0; i < BT; i++) {
            int p = pos ? pos[i] : (int)(i % T);
            const float *d = dout + (size_t)i * C + c0;
            float *te = dwte + (size_t)inp[i] * C + c0, *pe = dwpe + (size_t)p * C + c0;
            for (int c = 0; c < cn; c++) {
                te[c] += d[c];
                pe[c] += d[c];
            }
        }
    }
    return KN_OK;
}

/* ---- residual ------------------------------------------------------------ */

int kn_residual_forward_ref(float *out, const float *a, const float *b, size_t n) {
    if (!out || !a || !b) return KN_EINVAL;
    KN_OMP(parallel for schedule(static))
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
    return KN_OK;
}

/* ---- layernorm ----------------------------------------------------------- */

int kn_layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                             const float *bias, int N, int C) {
    if (!out || !inp || !weight || !bias || N <= 0 || C <= 0) return KN_EINVAL;
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double s = 0.0;
        for (int c = 0; c < C; c++) s += x[c];
        float m = (float)(s / C);
        double v = 0.0;
        for (int c = 0; c < C; c++) {
            double d = (double)x[c] - m;
            v += d * d;
        }
        float r = (float)(1.0 / sqrt(v / C + (double)KN_LN_EPS));
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * weight[c] + bias[c];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = r;
    }
    return KN_OK;
}

int kn_layernorm_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                              const float *weight, const float *mean, const float *rstd, int N, int C) {
    if (!dout || !inp || !weight || !mean || !rstd || N <= 0 || C <= 0) return KN_EINVAL;
    if (dinp) {
        KN_OMP(parallel for schedule(static))
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
            float m = mean[n], r = rstd[n];
            double a = 0.0, b = 0.0;
            for (int c = 0; c < C; c++) {
                float norm = (x[c] - m) * r;
                float dn = weight[c] * d[c];
                a += dn;
                b += (double)dn * norm;
            }
            float dmean = (float)(a / C), dnm = (float)(b / C);
            float *di = dinp + (size_t)n * C;
            for (int c = 0; c < C; c++) {
                float norm = (x[c] - m) * r;
                float dn = weight[c] * d[c];
                di[c] += (dn - dmean - norm * dnm) * r;
            }
        }
    }
    if (dweight || dbias) {
        enum { CB = 64 };
        int nb = (C + CB - 1) / CB;
        KN_OMP(parallel for schedule(static))
        for (int blk = 0; blk < nb; blk++) {
            int c0 = blk * CB, cn = C - c0 < CB ? C - c0 : CB;
            float aw[CB] = {0}, ab[CB] = {0};
            for (int n = 0; n < N; n++) {
                const float *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
                float m = mean[n], r = rstd[n];
                for (int c = 0; c < cn; c++) {
                    aw[c] += (x[c] - m) * r * d[c];
                    ab[c] += d[c];
                }
            }
            for (int c = 0; c < cn; c++) {
                if (dweight) dweight[c0 + c] += aw[c];
                if (dbias) dbias[c0 + c] += ab[c];
            }
        }
    }
    return KN_OK;
}

/* ---- GELU (tanh) --------------------------------------------------------- */

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K 0.044715f

int kn_gelu_forward_ref(float *out, const float *inp, size_t n) {
    if (!out || !inp) return KN_EINVAL;
    KN_OMP(parallel for schedule(static))
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_S * (x + GELU_K * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
    return KN_OK;
}

int kn_gelu_backward_ref(float *dinp, const float *inp, const float *dout, size_t n) {
    if (!dinp || !inp || !dout) return KN_EINVAL;
    KN_OMP(parallel for schedule(static))
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_S * (x + GELU_K * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_S * (1.0f + 3.0f * GELU_K * x * x);
        dinp[i] = dout[i] * g;
    }
    return KN_OK;
}

/* ---- fused softmax + cross-entropy ---------------------------------------- */

static int check_targets(const int32_t *targets, int N, int V) {
    if (!targets) return KN_OK;
    for (int n = 0; n < N; n++)
        if (targets[n] >= V) return KN_EINVAL;
    return KN_OK;
}

int kn_softmax_xent_forward_ref(float *losses, float *probs, const float *logits, const int32_t *targets, int N, int V,
                                int Vp) {
    if (!logits || N <= 0 || V <= 0 || Vp < V) return KN_EINVAL;
    if (losses && !targets) return KN_EINVAL;
    if (check_targets(targets, N, V)) return KN_EINVAL;
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * Vp;
        float mx = -INFINITY;
        for (int v = 0; v < V; v++)
            if (l[v] > mx) mx = l[v];
        /* read the target logit before probs (maybe == logits) is written */
        int t = targets ? targets[n] : -1;
        float lt = t >= 0 ? l[t] : 0.0f;
        double s = 0.0; /* float exponentials, double sum */
        if (probs) {
            float *p = probs + (size_t)n * Vp;
            for (int v = 0; v < V; v++) {
                float e = expf(l[v] - mx);
                p[v] = e;
                s += e;
            }
            float inv = (float)(1.0 / s);
            for (int v = 0; v < V; v++) p[v] *= inv;
            for (int v = V; v < Vp; v++) p[v] = 0.0f;
        } else {
            for (int v = 0; v < V; v++) s += expf(l[v] - mx);
        }
        if (losses) losses[n] = t < 0 ? 0.0f : (float)(log(s) + mx - lt);
    }
    return KN_OK;
}

int kn_softmax_xent_backward_ref(float *dlogits, const float *probs, const int32_t *targets, const float *dloss,
                                 float dloss_scale, int N, int V, int Vp) {
    if (!dlogits || !probs || !targets || N <= 0 || V <= 0 || Vp < V) return KN_EINVAL;
    if (check_targets(targets, N, V)) return KN_EINVAL;
    KN_OMP(parallel for schedule(static))
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * Vp;
        float *d = dlogits + (size_t)n * Vp;
        int t = targets[n];
        if (t < 0) {
            memset(d, 0, sizeof(float) * (size_t)Vp);
            continue;
        }
        float s = dloss ? dloss[n] : dloss_scale;
        for (int v = 0; v < V; v++) d[v] = s * (p[v] - (v == t ? 1.0f : 0.0f));
        for (int v = V; v < Vp; v++) d[v] = 0.0f;
    }
    return KN_OK;
}

/* ---- AdamW ------------------------------------------------------------- */

int kn_adamw_step_ref(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int decay, int t) {
    if (!params || !grads || !m || !v || t < 1) return KN_EINVAL;
    double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    float step_size = (float)(lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float shrink = decay ? 1.0f - lr * weight_decay : 1.0f;
    KN_OMP(parallel for schedule(static))
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = params[i] * shrink;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        params[i] = p - step_size * (mi / denom);
    }
    return KN_OK;
}

/* ---- gradient norm / clipping -------------------------------------------- */

#define NORM_PARTS 256

int kn_sumsq_ref(const float *g, size_t n, double *out) {
    if (!g || !out) return KN_EINVAL;
    double part[NORM_PARTS];
    size_t per = (n + NORM_PARTS - 1) / NORM_PARTS;
    /* fixed split into NORM_PARTS contiguous ranges, summed in order */
    KN_OMP(parallel for schedule(static))
    for (int p = 0; p < NORM_PARTS; p++) {
        size_t a = (size_t)p * per, b = a + per;
        if (a > n) a = n;
        if (b > n) b = n;
        double s = 0.0;
        for (size_t i = a; i < b; i++) s += (double)g[i] * g[i];
        part[p] = s;
    }
    double s = 0.0;
    for (int p = 0; p < NORM_PARTS; p++) s += part[p];
    *out = s;
    return KN_OK;
}

int kn_scale_ref(float *g, size_t n, float s) {
    if (!g) return KN_EINVAL;
    KN_OMP(parallel for schedule(static))
    for (size_t i = 0; i < n; i++) g[i] *= s;
    return KN_OK;
}

int kn_clip_grad_norm_ref(float *g, size_t n, float max_norm, float *norm_out) {
    double ss;
    int rc = kn_sumsq_ref(g, n, &ss);
    if (rc) return rc;
    double norm = sqrt(ss);
    if (norm_out) *norm_out = (float)norm;
    if (max_norm > 0.0f) {
        double coef = max_norm / (norm + 1e-6); /* torch: clamp(coef, max=1) */
        if (coef < 1.0) return kn_scale_ref(g, n, (float)coef);
    }
    return KN_OK;
}
