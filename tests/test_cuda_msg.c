/* test_cuda_msg.c - the CUDA / cuBLAS error-message path (kernels/kn_cuda_err.h)
 * without a GPU (issue 14, item 3).
 *
 * A fake CUDA runtime (fake_cudaMalloc, fake_cudaStreamSynchronize, ...) and a
 * fake cuBLASLt call fail through KN_API_CHECK, the very macro the .cu files
 * expand (KN_CU_CHECK, KN_LT_TRY, the trainer's CU): the message that reaches
 * the user must hold the call's text, file:line, the error's name, number and
 * text, and never read "no error".  Also: first vs last error, the call-site
 * context the trainer adds, the asynchronous-fault hint, sync-debug
 * (MKS_SYNC_DEBUG), the message when nothing was recorded, cuBLAS status
 * names, truncation of long texts, and that errors are per thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cuda_err.h"
#include "test_check.h"

/* ---- a fake CUDA runtime ---------------------------------------------------------------- */
typedef enum {
    fakeSuccess = 0,
    fakeErrorMemoryAllocation = 2,
    fakeErrorIllegalAddress = 700,
} fakeError_t;

static const char *fakeGetErrorName(fakeError_t e) {
    switch (e) {
    case fakeSuccess: return "cudaSuccess";
    case fakeErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case fakeErrorIllegalAddress: return "cudaErrorIllegalAddress";
    }
    return "cudaErrorUnknown";
}
static const char *fakeGetErrorString(fakeError_t e) {
    switch (e) {
    case fakeSuccess: return "no error"; /* what cudaGetErrorString(cudaSuccess) says */
    case fakeErrorMemoryAllocation: return "out of memory";
    case fakeErrorIllegalAddress: return "an illegal memory access was encountered";
    }
    return "unknown error";
}
static fakeError_t fake_cudaMalloc(void **p, size_t bytes) {
    (void)bytes;
    *p = NULL;
    return fakeErrorMemoryAllocation;
}
static fakeError_t fake_cudaStreamSynchronize(void *s) {
    (void)s;
    return fakeErrorIllegalAddress; /* a kernel before it faulted */
}
static fakeError_t fake_cudaMemsetAsync(void *p, int v, size_t n) {
    (void)p, (void)v, (void)n;
    return fakeSuccess;
}
static int fake_cublasLtMatmul(int m) { return m > 0 ? 13 : 0; } /* CUBLAS_STATUS_EXECUTION_FAILED */

#define FAKE_CU(call, onfail)                                                                                          \
    KN_API_CHECK("CUDA", fakeError_t, call, fakeSuccess, fakeGetErrorName, fakeGetErrorString, onfail)

enum { ERR_NODEVICE = -7, ERR_NOMEM = -2 };

/* shaped like gpu_model.cu's functions */
static int model_alloc(void) {
    void *p = NULL;
    FAKE_CU(fake_cudaMemsetAsync(p, 0, 16), return ERR_NODEVICE);
    FAKE_CU(fake_cudaMalloc(&p, (size_t)1 << 40), return e_ == fakeErrorMemoryAllocation ? ERR_NOMEM : ERR_NODEVICE);
    return 0;
}
static int model_sync(void) {
    void *stream = NULL;
    FAKE_CU(fake_cudaStreamSynchronize(stream), return ERR_NODEVICE);
    return 0;
}
static int matmul_op(void) {
    int rc = 0;
    KN_API_CHECK("cuBLAS", int, fake_cublasLtMatmul(64), 0, kn_cublas_status_name, kn_cublas_status_string, rc = -3;
                 goto done);
done:
    return rc;
}

static int has(const char *hay, const char *needle) { return hay && needle && strstr(hay, needle) != NULL; }

static void *other_thread(void *arg) {
    (void)arg;
    int *clean = malloc(sizeof *clean);
    *clean = !kn_cuda_has_error() && kn_cuda_last_error()[0] == 0;
    kn_cuda_recordf(__FILE__, __LINE__, "thread-local failure");
    return clean;
}

int main(void) {
    char buf[KN_ERR_MSG_MAX];
    /* sync-debug: the environment is read once, at the first use */
    setenv("MKS_SYNC_DEBUG", "1", 1);
    CHECK(kn_cuda_sync_debug() == 1);
    kn_cuda_set_sync_debug(0);
    CHECK(kn_cuda_sync_debug() == 0);
    setenv("MKS_SYNC_DEBUG", "1", 1);
    CHECK(kn_cuda_sync_debug() == 0, "read once: a later change of the environment does not count");

    /* before anything: "" (never "no error"), and a caller's message says nothing was recorded */
    kn_cuda_clear_error();
    CHECK(!kn_cuda_has_error());
    CHECK(strcmp(kn_cuda_last_error(), "") == 0);
    const char *m0 = kn_cuda_failure_message(buf, sizeof buf, 0, NULL, NULL);
    CHECK(has(m0, "no CUDA error was recorded"), "%s", m0);
    CHECK(!has(m0, "no error:") && strcmp(m0, "no error") != 0, "%s", m0);

    /* a pending error nobody recorded (cudaPeekAtLastError) is formatted with its name */
    const char *mp = kn_cuda_failure_message(buf, sizeof buf, 700, "cudaErrorIllegalAddress",
                                             "an illegal memory access was encountered");
    CHECK(has(mp, "cudaErrorIllegalAddress (700)") && has(mp, "illegal memory access"), "%s", mp);
    CHECK(has(mp, "MKS_SYNC_DEBUG=1"), "async fault without sync-debug names the env: %s", mp);

    /* 1. an allocation fails: call text, file:line, name, number, text, the OOM hint, and the return code */
    int rc = model_alloc();
    CHECK(rc == ERR_NOMEM, "rc %d", rc);
    const char *m1 = kn_cuda_failure_message(buf, sizeof buf, 0, NULL, NULL);
    printf("OOM message: %s\n", m1);
    CHECK(has(m1, "fake_cudaMalloc(&p, (size_t)1 << 40) failed at tests/test_cuda_msg.c:"), "%s", m1);
    CHECK(has(m1, "cudaErrorMemoryAllocation (2): out of memory"), "%s", m1);
    CHECK(has(m1, "device memory exhausted"), "%s", m1);
    {
        /* the line number is the FAKE_CU line in model_alloc */
        const char *c = strstr(m1, "test_cuda_msg.c:");
        int ln = c ? atoi(c + strlen("test_cuda_msg.c:")) : 0;
        CHECK(ln > 60 && ln < 80, "line %d", ln);
    }
    CHECK(strcmp(kn_cuda_first_error(), kn_cuda_last_error()) == 0);

    /* 2. a later failure does not hide the cause: first stays, last moves */
    rc = model_sync();
    CHECK(rc == ERR_NODEVICE);
    CHECK(has(kn_cuda_first_error(), "fake_cudaMalloc"), "%s", kn_cuda_first_error());
    CHECK(has(kn_cuda_last_error(), "fake_cudaStreamSynchronize(stream) failed at tests/test_cuda_msg.c:"), "%s",
          kn_cuda_last_error());
    CHECK(has(kn_cuda_last_error(), "cudaErrorIllegalAddress (700): an illegal memory access was encountered"));
    CHECK(has(kn_cuda_last_error(), "raised asynchronously by an earlier kernel; run again with MKS_SYNC_DEBUG=1"),
          "%s", kn_cuda_last_error());

    /* 3. the trainer adds where it called from, once */
    kn_cuda_add_context("kn_matmul_forward_cuda(m->ctx, qkv, nullptr, ln1, w, b, N, C, 3 * C, dt)",
                        "/abs/path/train/gpu_model.cu", 321, -3);
    kn_cuda_add_context("tr_cuda_model_fwd_bwd(...)", "/abs/path/train/gpu_session.cu", 99, -7);
    CHECK(has(kn_cuda_first_error(), " <- kn_matmul_forward_cuda (train/gpu_model.cu:321)"), "%s",
          kn_cuda_first_error());
    CHECK(!has(kn_cuda_first_error(), "gpu_session.cu:99"), "context is added once");
    {
        char user[1024];
        snprintf(user, sizeof user, "GPU forward/backward failed: %s",
                 kn_cuda_failure_message(buf, sizeof buf, 0, NULL, NULL));
        printf("user sees: %s\n", user);
        CHECK(!has(user, "failed: no error"), "%s", user);
        CHECK(has(user, "cudaErrorMemoryAllocation"));
    }

    /* 4. a bad-argument return with nothing recorded still says what and where */
    kn_cuda_clear_error();
    kn_cuda_add_context("kn_layernorm_backward_cuda(dres, ...)", "/x/train/gpu_model.cu", 400, -1);
    CHECK(has(kn_cuda_first_error(), "kn_layernorm_backward_cuda(dres, ...) failed at train/gpu_model.cu:400"), "%s",
          kn_cuda_first_error());
    CHECK(has(kn_cuda_first_error(), "bad argument"));

    /* 5. a kernel launch: named; with sync-debug, said to be the failing one */
    kn_cuda_clear_error();
    kn_cuda_record_kernel("attention_forward", "/src/kernels/kn_attention.cu", 259, 700, "cudaErrorIllegalAddress",
                          "an illegal memory access was encountered", 1);
    const char *mk = kn_cuda_first_error();
    printf("sync-debug kernel message: %s\n", mk);
    CHECK(has(mk, "kernel attention_forward (kernels/kn_attention.cu:259) failed: cudaErrorIllegalAddress (700)"), "%s",
          mk);
    CHECK(has(mk, "synchronised after this launch"), "%s", mk);
    kn_cuda_clear_error();
    kn_cuda_record_kernel("gelu_forward", "kn_elementwise.cu", 113, 209, "cudaErrorNoKernelImageForDevice",
                          "no kernel image is available for execution on the device", 0);
    CHECK(has(kn_cuda_first_error(), "kernel gelu_forward (kn_elementwise.cu:113) failed: "
                                     "cudaErrorNoKernelImageForDevice (209): no kernel image"),
          "%s", kn_cuda_first_error());

    /* 6. cuBLASLt: status name and text from the table */
    kn_cuda_clear_error();
    rc = matmul_op();
    CHECK(rc == -3);
    CHECK(has(kn_cuda_first_error(), "fake_cublasLtMatmul(64) failed at tests/test_cuda_msg.c:"), "%s",
          kn_cuda_first_error());
    CHECK(has(kn_cuda_first_error(), "CUBLAS_STATUS_EXECUTION_FAILED (13): the GPU program failed to execute"), "%s",
          kn_cuda_first_error());
    CHECK(strcmp(kn_cublas_status_name(3), "CUBLAS_STATUS_ALLOC_FAILED") == 0);
    CHECK(strcmp(kn_cublas_status_name(12345), "CUBLAS_STATUS_UNKNOWN") == 0);

    /* 7. free-form failures carry file:line too */
    kn_cuda_clear_error();
    kn_cuda_recordf("/a/b/kernels/kn_matmul.cu", 104, "cublasLt: no algorithm for m=%d n=%d k=%d", 8, 9, 10);
    CHECK(has(kn_cuda_first_error(), "cublasLt: no algorithm for m=8 n=9 k=10 (at kernels/kn_matmul.cu:104)"), "%s",
          kn_cuda_first_error());

    /* 8. long texts are cut, never overrun */
    {
        char longcall[2000];
        memset(longcall, 'x', sizeof longcall - 1);
        longcall[sizeof longcall - 1] = 0;
        char small[48];
        memset(small, '#', sizeof small);
        size_t n = kn_cuda_format_error(small, 40, "CUDA", longcall, NULL, "f.cu", 1, 2, "n", "s", 0);
        CHECK(n == 39 && small[39] == 0 && small[40] == '#', "n %zu", n);
        kn_cuda_clear_error();
        kn_cuda_record("CUDA", longcall, "f.cu", 1, 2, "cudaErrorMemoryAllocation", "out of memory");
        CHECK(strlen(kn_cuda_first_error()) == KN_ERR_MSG_MAX - 1);
        CHECK(kn_cuda_format_error(small, 0, "CUDA", "c", NULL, "f", 1, 1, "n", "s", 0) == 0);
    }
    CHECK(strcmp(kn_cuda_short_file("/a/b/c/kernels/kn_x.cu"), "kernels/kn_x.cu") == 0);
    CHECK(strcmp(kn_cuda_short_file("kn_x.cu"), "kn_x.cu") == 0);
    CHECK(strcmp(kn_cuda_short_file("/kn_x.cu"), "/kn_x.cu") == 0);
    CHECK(kn_cuda_error_is_async("cudaErrorLaunchFailure") && !kn_cuda_error_is_async("cudaErrorMemoryAllocation"));

    /* 9. per thread */
    kn_cuda_clear_error();
    kn_cuda_recordf(__FILE__, __LINE__, "main thread failure");
    pthread_t th;
    void *res = NULL;
    CHECK(pthread_create(&th, NULL, other_thread, NULL) == 0);
    pthread_join(th, &res);
    CHECK(res && *(int *)res == 1, "another thread sees a clean slate");
    free(res);
    CHECK(has(kn_cuda_first_error(), "main thread failure"));

    if (failures) fprintf(stderr, "test_cuda_msg: %d check(s) failed\n", failures);
    else printf("test_cuda_msg: all checks passed\n");
    return failures ? 1 : 0;
}
