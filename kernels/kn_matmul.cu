/* kn_matmul.cu - linear layers through cuBLASLt (bias / GELU epilogues) and a
 * deterministic bias gradient (CUDA twin of matmul_ref; see kn_cuda.h).
 *
 * Row-major (N,C) is column-major (C,N), so out^T (OC,N) = W^T... each call
 * below is written as the column-major product cuBLASLt sees. */
#include <cublasLt.h>
#include <stdlib.h>

#include "kn_cuda_common.cuh"

struct kn_cuda_ctx {
    cublasLtHandle_t lt;
    cudaStream_t stream;
    void *ws;
    size_t ws_bytes;
};

static const char *lt_name(cublasStatus_t st) { return kn_cublas_status_name((int)st); }
static const char *lt_str(cublasStatus_t st) { return kn_cublas_status_string((int)st); }

/* a cuBLASLt call: on failure the call text, file:line, status name and text
 * are recorded (kernels/kn_cuda_err.h) */
#define KN_LT_TRY(call)                                                                                                \
    KN_API_CHECK("cuBLAS", cublasStatus_t, call, CUBLAS_STATUS_SUCCESS, lt_name, lt_str, rc = KN_ECUDA; goto done)

extern "C" int kn_cuda_ctx_create(kn_cuda_ctx **out, kn_stream stream, void *workspace, size_t workspace_bytes) {
    if (!out) return KN_EINVAL;
    kn_cuda_ctx *c = (kn_cuda_ctx *)calloc(1, sizeof *c);
    if (!c) return KN_ENOMEM;
    KN_API_CHECK("cuBLAS", cublasStatus_t, cublasLtCreate(&c->lt), CUBLAS_STATUS_SUCCESS, lt_name, lt_str, free(c);
                 return KN_ECUDA);
    c->stream = stream;
    c->ws = workspace;
    c->ws_bytes = workspace ? workspace_bytes : 0;
    *out = c;
    return KN_OK;
}

extern "C" void kn_cuda_ctx_destroy(kn_cuda_ctx *ctx) {
    if (!ctx) return;
    cublasLtDestroy(ctx->lt);
    free(ctx);
}

extern "C" kn_stream kn_cuda_ctx_stream(const kn_cuda_ctx *ctx) { return ctx ? ctx->stream : nullptr; }

static uint32_t ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a % al)) al >>= 1;
    return al;
}

/* D (m,n) = alpha op(A) op(B) + beta C, column-major, C == D.
 * a_t / b_t: transpose flags; epilogue with optional bias / aux. */
static int lt_matmul(kn_cuda_ctx *ctx, cudaDataType_t ab_type, cudaDataType_t d_type, int m, int n, int k,
                     const void *A, int lda, bool a_t, const void *B, int ldb, bool b_t, void *D, int ldd, float beta,
                     cublasLtEpilogue_t epi, const void *bias, void *aux, int ldaux) {
    int rc = KN_OK;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    float alpha = 1.0f;
    cublasOperation_t ta = a_t ? CUBLAS_OP_T : CUBLAS_OP_N, tb = b_t ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint32_t al_a = ptr_align(A), al_b = ptr_align(B), al_d = ptr_align(D);
    size_t ws = ctx->ws_bytes;

    KN_LT_TRY(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    KN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    KN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    KN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias) {
        cudaDataType_t bt = d_type;
        KN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        KN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    if (aux) {
        int64_t ldx = ldaux;
        KN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        KN_LT_TRY(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldx, sizeof ldx));
    }
    KN_LT_TRY(cublasLtMatrixLayoutCreate(&la, ab_type, a_t ? k : m, a_t ? m : k, lda));
    KN_LT_TRY(cublasLtMatrixLayoutCreate(&lb, ab_type, b_t ? n : k, b_t ? k : n, ldb));
    KN_LT_TRY(cublasLtMatrixLayoutCreate(&ld, d_type, m, n, ldd));
    KN_LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    KN_LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    KN_LT_TRY(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    KN_LT_TRY(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    KN_LT_TRY(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof al_d));
    KN_LT_TRY(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d));
    KN_LT_TRY(cublasLtMatmulAlgoGetHeuristic(ctx->lt, op, la, lb, ld, ld, pref, 1, &heur, &found));
    if (found == 0) {
        kn_cuda_set_error("cublasLt: no algorithm for m=%d n=%d k=%d epilogue=%d", m, n, k, (int)epi);
        rc = KN_ECUDA;
        goto done;
    }
    KN_LT_TRY(cublasLtMatmul(ctx->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &heur.algo, ctx->ws, ctx->ws_bytes,
                             ctx->stream));
    if (kn_cuda_sync_debug()) { /* name the product that faulted */
        char what[128];
        snprintf(what, sizeof what, "cublasLtMatmul (m=%d n=%d k=%d epilogue=%d)", m, n, k, (int)epi);
        KN_LAUNCH_CHECK(what, rc = KN_ECUDA; goto done);
    }
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return rc;
}

static cudaDataType_t cu_type(kn_dtype dt) {
    return dt == KN_BF16 ? CUDA_R_16BF : (dt == KN_F16 ? CUDA_R_16F : CUDA_R_32F);
}

extern "C" int kn_matmul_forward_cuda(kn_cuda_ctx *ctx, void *out, void *gelu_pre, const void *inp, const void *weight,
                                      const void *bias, int N, int C, int OC, kn_dtype dt) {
    if (!ctx || !out || !inp || !weight || N <= 0 || C <= 0 || OC <= 0) return KN_EINVAL;
    if (dt != KN_F32 && dt != KN_BF16 && dt != KN_F16) return KN_EINVAL;
    cublasLtEpilogue_t epi = gelu_pre ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                                      : (bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    /* out^T (OC,N) = W (OC,C) [col-major (C,OC), transposed] x inp^T (C,N) */
    return lt_matmul(ctx, cu_type(dt), cu_type(dt), OC, N, C, weight, C, true, inp, C, false, out, OC, 0.0f, epi, bias,
                     gelu_pre, OC);
}

/* ---- bias gradient: column sums of dout (N,OC), deterministic ----------------------------- */
/* KN_BIAS_ROWS rows per partial sum: kn_cuda_size.h, where
 * kn_matmul_backward_scratch_bytes sizes the partials from it */
static int bias_chunks(int N) { return (N + KN_BIAS_ROWS - 1) / KN_BIAS_ROWS; }

template <typename T> __global__ void bias_partial_kernel(float *partial, const T *dout, int N, int OC) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    int r0 = blockIdx.y * KN_BIAS_ROWS;
    float acc = 0.0f;
    for (int r = r0; r < r0 + KN_BIAS_ROWS && r < N; r++) acc += kn_ld(dout + (size_t)r * OC + c);
    partial[(size_t)blockIdx.y * OC + c] = acc;
}

__global__ void bias_reduce_kernel(float *dbias, const float *partial, int nchunks, int OC) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC) return;
    float acc = 0.0f;
    for (int k = 0; k < nchunks; k++) acc += partial[(size_t)k * OC + c];
    dbias[c] += acc;
}

/* gelu_pre != NULL: dinp = (dout @ weight) * gelu'(gelu_pre), cuBLASLt's DGELU
 * epilogue reading the pre-activation (N,C) as its aux matrix */
static int matmul_backward(kn_cuda_ctx *ctx, void *dinp, float *dweight, float *dbias, const void *dout,
                           const void *inp, const void *weight, const void *gelu_pre, int N, int C, int OC,
                           void *scratch, size_t scratch_bytes, kn_dtype dt) {
    if (!ctx || !dout || N <= 0 || C <= 0 || OC <= 0) return KN_EINVAL;
    if (dt != KN_F32 && dt != KN_BF16 && dt != KN_F16) return KN_EINVAL;
    int rc;
    if (dinp) {
        if (!weight) return KN_EINVAL;
        /* dinp^T (C,N) = W^T [col-major (C,OC)] x dout^T (OC,N) */
        rc = lt_matmul(ctx, cu_type(dt), cu_type(dt), C, N, OC, weight, C, false, dout, OC, false, dinp, C, 0.0f,
                       gelu_pre ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT, nullptr, (void *)gelu_pre,
                       gelu_pre ? C : 0);
        if (rc != KN_OK) return rc;
    }
    if (dweight) {
        if (!inp) return KN_EINVAL;
        /* dweight^T (C,OC) += inp^T (C,N) x dout (N,OC) [col-major (OC,N), transposed]; fp32 output */
        rc = lt_matmul(ctx, cu_type(dt), CUDA_R_32F, C, OC, N, inp, C, false, dout, OC, true, dweight, C, 1.0f,
                       CUBLASLT_EPILOGUE_DEFAULT, nullptr, nullptr, 0);
        if (rc != KN_OK) return rc;
    }
    if (dbias) {
        if (!scratch || scratch_bytes < kn_matmul_backward_scratch_bytes(N, OC)) return KN_EINVAL;
        dim3 grid((unsigned)((OC + 255) / 256), (unsigned)bias_chunks(N));
        KN_DISPATCH(
            dt, (bias_partial_kernel<DT><<<grid, 256, 0, ctx->stream>>>((float *)scratch, (const DT *)dout, N, OC)));
        KN_CUDA_LAUNCHED("matmul_backward bias partial");
        bias_reduce_kernel<<<(OC + 255) / 256, 256, 0, ctx->stream>>>(dbias, (const float *)scratch, bias_chunks(N),
                                                                      OC);
        KN_CUDA_LAUNCHED("matmul_backward bias reduce");
    }
    return KN_OK;
}

extern "C" int kn_matmul_backward_cuda(kn_cuda_ctx *ctx, void *dinp, float *dweight, float *dbias, const void *dout,
                                       const void *inp, const void *weight, int N, int C, int OC, void *scratch,
                                       size_t scratch_bytes, kn_dtype dt) {
    return matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, nullptr, N, C, OC, scratch, scratch_bytes, dt);
}

extern "C" int kn_matmul_backward_dgelu_cuda(kn_cuda_ctx *ctx, void *dinp, float *dweight, float *dbias,
                                             const void *dout, const void *inp, const void *weight,
                                             const void *gelu_pre, int N, int C, int OC, void *scratch,
                                             size_t scratch_bytes, kn_dtype dt) {
    if (!gelu_pre || !dinp) return KN_EINVAL;
    return matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, gelu_pre, N, C, OC, scratch, scratch_bytes,
                           dt);
}
