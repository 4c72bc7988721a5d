/* kn_gpu_check.cuh - what the kernel GPU tests share (test_kernels_gpu.cu,
 * test_kn_llama_gpu.cu, test_kn_cudnn_gpu.cu): the seeded generator, the
 * CK/KN/REF call macros, a device buffer of any kn_dtype, check(), which
 * compares a kernel's output with its C reference (max and L2 relative
 * error against a tolerance) and prints one table row, and expect(), a
 * yes-or-no row. A test that defines
 * KN_CHECK_SHAPE_FIRST before including it prints the shape column before
 * the dtype. Included once per test program, after the CUDA headers,
 * <vector>, kn.h and kn_cuda.h. */
#ifndef KN_GPU_CHECK_CUH
#define KN_GPU_CHECK_CUH

static int g_fail = 0, g_checks = 0;
static uint64_t g_rng;

static uint64_t rnd64(void) {
    g_rng += 0x9E3779B97F4A7C15ull;
    uint64_t z = g_rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float urand(void) { return (float)((rnd64() >> 40) * (1.0 / 16777216.0)); }
static float nrand(void) {
    float u1 = urand() + 1e-7f, u2 = urand();
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

#define CK(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                     \
            exit(2);                                                                                                   \
        }                                                                                                              \
    } while (0)

#define KN(call)                                                                                                       \
    do {                                                                                                               \
        int r_ = (call);                                                                                               \
        if (r_ != KN_OK) { /* report, count, go on with the next check */                                              \
            printf("| %-28s | %-4s | returned %d: %s | FAIL |\n", #call, "", r_, kn_cuda_last_error());                \
            g_fail++;                                                                                                  \
            g_checks++;                                                                                                \
            return;                                                                                                    \
        }                                                                                                              \
        cudaError_t e_ = cudaDeviceSynchronize();                                                                      \
        if (e_ == cudaSuccess) e_ = cudaGetLastError();                                                                \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: after %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));               \
            exit(2);                                                                                                   \
        }                                                                                                              \
    } while (0)

#define REF(call)                                                                                                      \
    do {                                                                                                               \
        int r_ = (call);                                                                                               \
        if (r_ != KN_OK) {                                                                                             \
            fprintf(stderr, "%s:%d: reference %s returned %d\n", __FILE__, __LINE__, #call, r_);                       \
            exit(2);                                                                                                   \
        }                                                                                                              \
    } while (0)

typedef std::vector<float> vf;

static vf randn(size_t n, float scale = 1.0f) {
    vf v(n);
    for (auto &x : v) x = nrand() * scale;
    return v;
}
static inline float bf16_round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
static inline float f16_round(float x) { return __half2float(__float2half_rn(x)); }
static void round_to(vf &v, kn_dtype dt) {
    if (dt == KN_BF16)
        for (auto &x : v) x = bf16_round(x);
    else if (dt == KN_F16)
        for (auto &x : v) x = f16_round(x);
}

/* A device buffer of n elements of dt. */
struct dbuf {
    void *p = nullptr;
    size_t n = 0;
    kn_dtype dt = KN_F32;
    dbuf(size_t n_, kn_dtype dt_) : n(n_), dt(dt_) {
        CK(cudaMalloc(&p, bytes() ? bytes() : 1));
        poison();
    }
    ~dbuf() { cudaFree(p); }
    dbuf(const dbuf &) = delete;
    dbuf &operator=(const dbuf &) = delete;
    size_t bytes() const { return n * kn_dtype_size(dt); }
    void poison() { CK(cudaMemset(p, 0xFF, bytes())); } /* NaN in fp32 and in bf16 */
    void put(const vf &v) {
        if (dt == KN_F32) {
            CK(cudaMemcpy(p, v.data(), bytes(), cudaMemcpyHostToDevice));
        } else if (dt == KN_F16) {
            std::vector<__half> h(n);
            for (size_t i = 0; i < n; i++) h[i] = __float2half_rn(v[i]);
            CK(cudaMemcpy(p, h.data(), bytes(), cudaMemcpyHostToDevice));
        } else {
            std::vector<__nv_bfloat16> h(n);
            for (size_t i = 0; i < n; i++) h[i] = __float2bfloat16_rn(v[i]);
            CK(cudaMemcpy(p, h.data(), bytes(), cudaMemcpyHostToDevice));
        }
    }
    vf get() const {
        vf v(n);
        if (dt == KN_F32) {
            CK(cudaMemcpy(v.data(), p, bytes(), cudaMemcpyDeviceToHost));
        } else if (dt == KN_F16) {
            std::vector<__half> h(n);
            CK(cudaMemcpy(h.data(), p, bytes(), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < n; i++) v[i] = __half2float(h[i]);
        } else {
            std::vector<__nv_bfloat16> h(n);
            CK(cudaMemcpy(h.data(), p, bytes(), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < n; i++) v[i] = __bfloat162float(h[i]);
        }
        return v;
    }
    float *f() const { return (float *)p; }
};

template <typename T> static T *dput(const std::vector<T> &v) {
    T *p;
    CK(cudaMalloc(&p, v.size() * sizeof(T) + 1));
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

static const char *dtn(kn_dtype dt) { return dt == KN_BF16 ? "bf16" : (dt == KN_F16 ? "fp16" : "fp32"); }

static void check(const char *op, kn_dtype dt, const char *shape, const vf &got, const vf &ref,
                  double tol_override = 0) {
    double tol = tol_override > 0 ? tol_override : (dt == KN_F32 ? 1e-5 : 1e-2);
    double maxd = 0, maxr = 0, sd = 0, sr = 0;
    size_t bad = 0, first_bad = (size_t)-1;
    bool sizes_ok = got.size() == ref.size();
    for (size_t i = 0; sizes_ok && i < got.size(); i++) {
        double g = got[i], r = ref[i];
        if (!isfinite(g) || !isfinite(r)) {
            if (bad++ == 0) first_bad = i;
            continue;
        }
        double d = fabs(g - r);
        maxd = fmax(maxd, d);
        maxr = fmax(maxr, fabs(r));
        sd += d * d;
        sr += r * r;
    }
    double rel_max = maxd / (maxr > 0 ? maxr : 1e-30);
    double rel_2 = sqrt(sd) / (sr > 0 ? sqrt(sr) : 1e-30);
    if (maxr == 0 && maxd == 0) rel_max = rel_2 = 0;
    bool pass = sizes_ok && bad == 0 && rel_max <= tol && rel_2 <= tol;
    g_checks++;
    if (!pass) g_fail++;
#ifdef KN_CHECK_SHAPE_FIRST
    /* shape before dtype: tests/gpu/run.sh reads "| op | bf16 |" rows as the GPT-2 tests' */
    printf("| %-28s | %-24s | %-4s | %9.2e | %9.2e | %7.0e | %s", op, shape, dtn(dt), rel_max, rel_2, tol,
#else
    printf("| %-28s | %-4s | %-22s | %9.2e | %9.2e | %7.0e | %s", op, dtn(dt), shape, rel_max, rel_2, tol,
#endif
           pass ? "PASS" : "FAIL");
    if (!sizes_ok) printf(" (size %zu vs %zu)", got.size(), ref.size());
    if (bad) printf(" (%zu non-finite, first at %zu: got %g ref %g)", bad, first_bad, got[first_bad], ref[first_bad]);
    printf(" |\n");
    fflush(stdout);
}

/* A check that is a yes or no (bit-for-bit repeats, refusals): one counted row. */
static inline void expect(bool ok, const char *what) {
    g_checks++;
    if (!ok) g_fail++;
    printf("| %-63s | %s |\n", what, ok ? "PASS" : "FAIL");
}

#endif
