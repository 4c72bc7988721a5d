/* llama_ref.c - fp32 C references of the Llama-family ops (kn_llama.h). */
#include "kn_llama.h"

#include <math.h>

#include "kn.h"

int kn_rmsnorm_forward_ref(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps) {
    if (!out || !rstd || !inp || !weight || N <= 0 || C <= 0 || !(eps > 0)) return KN_EINVAL;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
        float r = (float)(1.0 / sqrt(ss / C + (double)eps));
        for (int c = 0; c < C; c++) o[c] = weight[c] * (x[c] * r);
        rstd[n] = r;
    }
    return KN_OK;
}

int kn_rmsnorm_backward_ref(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                            const float *rstd, int N, int C) {
    if (!dinp || !dweight || !dout || !inp || !weight || !rstd || N <= 0 || C <= 0) return KN_EINVAL;
        /* dinp row by row (parallel); dweight column sums in row order (serial
     * over rows, so bitwise the same for any thread count) */
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C, r = rstd[n];
        double dot = 0; /* sum_c dy * w * x */
        for (int c = 0; c < C; c++) dot += (double)dy[c] * weight[c] * x[c];
        float k = (float)(dot / C) * r * r;
        for (int c = 0; c < C; c++) dx[c] += r * (dy[c] * weight[c] - x[c] * k);
    }
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float s = 0;
        for (int n = 0; n < N; n++) s += dout[(size_t)n * C + c] * (inp[(size_t)n * C + c] * rstd[n]);
        dweight[c] += s;
    }
    return KN_OK;
}

int kn_rope_inv_freq_ref(float *inv_freq, int head_dim, float theta, const kn_rope_scaling *s) {
    if (!inv_freq || head_dim <= 0 || head_dim % 2 || !(theta > 1)) return KN_EINVAL;
    if (s && s->factor > 0 &&
        (!(s->low_freq_factor > 0) || !(s->high_freq_factor > s->low_freq_factor) ||
         s->original_max_position_embeddings <= 0))
        return KN_EINVAL;
    const float two_pi = (float)(2.0 * M_PI);
    for (int i = 0; i < head_dim / 2; i++) {
        /* torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), fp32 */
        float e = (float)(2 * i) / (float)head_dim;
        float f = 1.0f / (float)pow((double)theta, (double)e);
        if (s && s->factor > 0) { /* _compute_llama3_parameters, in its fp32 order */
            float old = (float)s->original_max_position_embeddings;
            float low_wl = old / s->low_freq_factor, high_wl = old / s->high_freq_factor;
            float wl = two_pi / f;
            float fl = wl > low_wl ? f / s->factor : f;
            if (!(wl < high_wl) && !(wl > low_wl)) {
                float sm = (old / wl - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
                fl = (1 - sm) * fl / s->factor + sm * fl;
            }
            f = fl;
        }
        inv_freq[i] = f;
    }
    return KN_OK;
}

/* dir +1: forward rotation, -1: its inverse (the backward). */
static int rope(float *out, const float *x, const int32_t *pos, const float *inv_freq, int N, int n_heads, int head_dim,
                int dir) {
    if (!out || !x || !pos || !inv_freq || N <= 0 || n_heads <= 0 || head_dim <= 0 || head_dim % 2) return KN_EINVAL;
    for (int n = 0; n < N; n++)
        if (pos[n] < 0) return KN_EINVAL;
    int h2 = head_dim / 2;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < h2; i++) {
            /* torch: freqs = inv_freq @ position (one fp32 product), cos/sin in fp32 */
            float a = (float)pos[n] * inv_freq[i];
            float c = (float)cos((double)a), sn = (float)sin((double)a) * (float)dir;
            for (int h = 0; h < n_heads; h++) {
                size_t b = ((size_t)n * n_heads + h) * head_dim;
                float x1 = x[b + i], x2 = x[b + i + h2];
                out[b + i] = x1 * c - x2 * sn;
                out[b + i + h2] = x2 * c + x1 * sn;
            }
        }
    }
    return KN_OK;
}

int kn_rope_forward_ref(float *out, const float *x, const int32_t *pos, const float *inv_freq, int N, int n_heads,
                        int head_dim) {
    return rope(out, x, pos, inv_freq, N, n_heads, head_dim, 1);
}

int kn_rope_backward_ref(float *dx, const float *dout, const int32_t *pos, const float *inv_freq, int N, int n_heads,
                         int head_dim) {
    return rope(dx, dout, pos, inv_freq, N, n_heads, head_dim, -1);
}

int kn_swiglu_forward_ref(float *out, const float *gate, const float *up, size_t n) {
    if (!out || !gate || !up || !n) return KN_EINVAL;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
    return KN_OK;
}

int kn_swiglu_backward_ref(float *dgate, float *dup, const float *dout, const float *gate, const float *up, size_t n) {
    if (!dgate || !dup || !dout || !gate || !up || !n) return KN_EINVAL;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], s = 1.0f / (1.0f + expf(-g)), dy = dout[i], u = up[i];
        dup[i] = dy * g * s;
        dgate[i] = dy * u * s * (1.0f + g * (1.0f - s));
    }
    return KN_OK;
}
