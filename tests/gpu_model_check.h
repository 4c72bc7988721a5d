/* gpu_model_check.h - what the GPU model tests share (test_tr_cuda_model_gpu.cu
 * for GPT-2, test_tr_cuda_llama_gpu.cu for the Llama family; issue 26: each
 * had its own copy): the relative error of a GPU tensor against the CPU
 * model's, and one PASS/FAIL row of the printed table (failures counted in
 * g_fails). Header-only, for one test program each. */
#ifndef GPU_MODEL_CHECK_H
#define GPU_MODEL_CHECK_H

#include <math.h>
#include <stdio.h>

static int g_fails = 0;

/* max |a - r| / max |r| (the return) and the L2 ratio (*l2); INFINITY when a
 * holds a non-finite value */
static double relerr(const float *a, const float *r, size_t n, double *l2) {
    double md = 0, mr = 0, sd = 0, sr = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        double d = fabs((double)a[i] - r[i]);
        md = fmax(md, d);
        mr = fmax(mr, fabs((double)r[i]));
        sd += d * d;
        sr += (double)r[i] * r[i];
    }
    if (l2) *l2 = sr > 0 ? sqrt(sd / sr) : sqrt(sd);
    return mr > 0 ? md / mr : md;
}

/* | what | mode | rel | l2 | tol | PASS/FAIL |, the first two columns w1 and
 * w2 characters wide */
static void check_row(int w1, int w2, const char *what, const char *mode, double rel, double l2, double tol) {
    bool ok = rel <= tol && l2 <= tol;
    if (!ok) g_fails++;
    printf("| %-*s | %-*s | %9.2e | %9.2e | %7.0e | %s |\n", w1, what, w2, mode, rel, l2, tol, ok ? "PASS" : "FAIL");
}

#endif /* GPU_MODEL_CHECK_H */
