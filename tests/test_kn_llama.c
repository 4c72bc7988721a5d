/* test_kn_llama.c - the Llama-family C references (kernels/llama_ref.c,
 * kn_llama.h) against transformers' fp32 ops: values and gradients from
 * tests/data/hf/llama_ops.json (tests/hf/make_llama_ops_fixture.py), to
 * 1e-5 relative (largest difference over the largest magnitude). RoPE's
 * inv_freq (default and Llama 3's rope_scaling) must match torch's to 1 ulp,
 * and the rotation at positions up to 8000 is checked with torch's and with
 * our inv_freq. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn.h"
#include "kn_llama.h"
#include "test_check.h"

static float *arr(json_t *o, const char *k, size_t *n) {
    json_t *a = json_object_get(o, k);
    size_t m = json_array_size(a);
    float *v = calloc(m ? m : 1, sizeof *v);
    for (size_t i = 0; i < m; i++) v[i] = (float)json_number_value(json_array_get(a, i));
    if (n) *n = m;
    return v;
}

/* max |a - b| / max |b| */
static double rel(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

static void rmsnorm(json_t *o) {
    int N = (int)json_integer_value(json_object_get(o, "N")), C = (int)json_integer_value(json_object_get(o, "C"));
    size_t n;
    float *x = arr(o, "x", &n), *w = arr(o, "w", NULL), *dy = arr(o, "dy", NULL), *y = arr(o, "y", NULL),
          *dx = arr(o, "dx", NULL), *dw = arr(o, "dw", NULL);
    CHECK(n == (size_t)N * C && N > 0);
    float *oy = calloc(n, 4), *r = calloc((size_t)N, 4), *odx = calloc(n, 4), *odw = calloc((size_t)C, 4);
    CHECK(kn_rmsnorm_forward_ref(oy, r, x, w, N, C, 1e-5f) == KN_OK);
    CHECK(kn_rmsnorm_backward_ref(odx, odw, dy, x, w, r, N, C) == KN_OK);
    double e1 = rel(oy, y, n), e2 = rel(odx, dx, n), e3 = rel(odw, dw, (size_t)C);
    CHECK(e1 <= 1e-5 && e2 <= 1e-5 && e3 <= 1e-5, "rmsnorm: y %.2e dx %.2e dw %.2e", e1, e2, e3);
    printf("rmsnorm: y %.2e, dx %.2e, dw %.2e\n", e1, e2, e3);
    CHECK(kn_rmsnorm_forward_ref(oy, r, x, w, N, C, 0) == KN_EINVAL);
    free(x), free(w), free(dy), free(y), free(dx), free(dw), free(oy), free(r), free(odx), free(odw);
}

static void rope(json_t *o, const char *name) {
    int hd = (int)json_integer_value(json_object_get(o, "head_dim"));
    int H = (int)json_integer_value(json_object_get(o, "heads"));
    json_t *pj = json_object_get(o, "pos");
    int N = (int)json_array_size(pj);
    int32_t *pos = calloc((size_t)N, sizeof *pos);
    for (int i = 0; i < N; i++) pos[i] = (int32_t)json_integer_value(json_array_get(pj, i));
    kn_rope_scaling sc = {8.0f, 1.0f, 4.0f, 8192};
    int l3 = json_is_true(json_object_get(o, "llama3"));
    float theta = (float)json_number_value(json_object_get(o, "theta"));
    CHECK(json_number_value(json_object_get(o, "attention_scaling")) == 1.0, "%s: attention scaling 1", name);
    size_t nf, n;
    float *tf = arr(o, "inv_freq", &nf), *x = arr(o, "x", &n), *dy = arr(o, "dy", NULL), *y = arr(o, "y", NULL),
          *dx = arr(o, "dx", NULL);
    CHECK(nf == (size_t)hd / 2 && n == (size_t)N * H * hd);
    float *f = calloc(nf, 4), *oy = calloc(n, 4), *odx = calloc(n, 4);
    CHECK(kn_rope_inv_freq_ref(f, hd, theta, l3 ? &sc : NULL) == KN_OK);
    int ulp = 0;
    for (size_t i = 0; i < nf; i++) {
        float lo = nextafterf(tf[i], 0), hi = nextafterf(tf[i], INFINITY);
        ulp += f[i] < lo || f[i] > hi;
    }
    CHECK(ulp == 0, "%s: %d inv_freq values over 1 ulp from torch's", name, ulp);
    /* with torch's frequencies: the rotation alone; then with ours */
    for (int k = 0; k < 2; k++) {
        const float *fr = k ? f : tf;
        CHECK(kn_rope_forward_ref(oy, x, pos, fr, N, H, hd) == KN_OK);
        CHECK(kn_rope_backward_ref(odx, dy, pos, fr, N, H, hd) == KN_OK);
        double e1 = rel(oy, y, n), e2 = rel(odx, dx, n);
        CHECK(e1 <= 1e-5 && e2 <= 1e-5, "%s (%s inv_freq): y %.2e dx %.2e", name, k ? "our" : "torch's", e1, e2);
        printf("%s (%s inv_freq): y %.2e, dx %.2e\n", name, k ? "our" : "torch's", e1, e2);
    }
    pos[0] = -1;
    CHECK(kn_rope_forward_ref(oy, x, pos, f, N, H, hd) == KN_EINVAL);
    free(pos), free(tf), free(x), free(dy), free(y), free(dx), free(f), free(oy), free(odx);
}

static void swiglu(json_t *o) {
    size_t n;
    float *g = arr(o, "gate", &n), *u = arr(o, "up", NULL), *dy = arr(o, "dy", NULL), *y = arr(o, "y", NULL),
          *dg = arr(o, "dgate", NULL), *du = arr(o, "dup", NULL);
    float *oy = calloc(n, 4), *odg = calloc(n, 4), *odu = calloc(n, 4);
    CHECK(n > 0 && kn_swiglu_forward_ref(oy, g, u, n) == KN_OK &&
          kn_swiglu_backward_ref(odg, odu, dy, g, u, n) == KN_OK);
    double e1 = rel(oy, y, n), e2 = rel(odg, dg, n), e3 = rel(odu, du, n);
    CHECK(e1 <= 1e-5 && e2 <= 1e-5 && e3 <= 1e-5, "swiglu: y %.2e dgate %.2e dup %.2e", e1, e2, e3);
    printf("swiglu: y %.2e, dgate %.2e, dup %.2e\n", e1, e2, e3);
    free(g), free(u), free(dy), free(y), free(dg), free(du), free(oy), free(odg), free(odu);
}

int main(void) {
    json_error_t je;
    json_t *fx = json_load_file(MKS_TEST_DATA "/hf/llama_ops.json", 0, &je);
    if (!fx) {
        fprintf(stderr, "llama_ops.json: %s\n", je.text);
        return 1;
    }
    rmsnorm(json_object_get(fx, "rmsnorm"));
    rope(json_object_get(fx, "rope_default"), "rope_default");
    rope(json_object_get(fx, "rope_llama3"), "rope_llama3");
    swiglu(json_object_get(fx, "swiglu"));
    json_decref(fx);
    return failures ? 1 : 0;
}
