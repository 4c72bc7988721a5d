/* kn_cuda_err.c - the CUDA / cuBLAS error messages of kn_cuda and tr_cuda
 * (kernels/kn_cuda_err.h).  Plain C in the CPU library kn, so the whole
 * message path is tested without a GPU (tests/test_cuda_msg.c). */
#include "kn_cuda_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char g_first[KN_ERR_MSG_MAX];
static _Thread_local char g_last[KN_ERR_MSG_MAX];
static _Thread_local int g_context_added;

const char *kn_cuda_short_file(const char *file) {
    if (!file) return "?";
    const char *last = strrchr(file, '/');
    if (!last) return file;
    const char *p = last;
    while (p > file && p[-1] != '/') p--;
    /* p: start of the parent folder's name (or of file) */
    return p;
}

int kn_cuda_error_is_async(const char *name) {
    static const char *const async_names[] = {
        "cudaErrorIllegalAddress",     "cudaErrorLaunchFailure",        "cudaErrorAssert",
        "cudaErrorMisalignedAddress",  "cudaErrorInvalidAddressSpace",  "cudaErrorInvalidPc",
        "cudaErrorIllegalInstruction", "cudaErrorHardwareStackError",   "cudaErrorLaunchTimeout",
        "cudaErrorECCUncorrectable",   "CUBLAS_STATUS_EXECUTION_FAILED"};
    if (!name) return 0;
    for (size_t i = 0; i < sizeof async_names / sizeof async_names[0]; i++)
        if (!strcmp(name, async_names[i])) return 1;
    return 0;
}

size_t kn_cuda_format_error(char *buf, size_t n, const char *api, const char *call, const char *kernel,
                            const char *file, int line, int code, const char *name, const char *str, int sync_debug) {
    if (!buf || n == 0) return 0;
    const char *nm = name && name[0] ? name : "unknown error";
    const char *tx = str && str[0] ? str : "(no description)";
    int u;
    if (kernel)
        u = snprintf(buf, n, "kernel %s (%s:%d) failed: %s (%d): %s", kernel, kn_cuda_short_file(file), line, nm, code,
                     tx);
    else if (file)
        u = snprintf(buf, n, "%s failed at %s:%d: %s (%d): %s", call && call[0] ? call : "(call)",
                     kn_cuda_short_file(file), line, nm, code, tx);
    else /* no call site known */
        u = snprintf(buf, n, "%s: %s (%d): %s", call && call[0] ? call : "CUDA error", nm, code, tx);
    if (u < 0) {
        buf[0] = 0;
        return 0;
    }
    size_t len = (size_t)u < n ? (size_t)u : n - 1;
    const char *hint = NULL;
    if (kernel && sync_debug)
        hint = " [MKS_SYNC_DEBUG=1: synchronised after this launch, so this kernel is the one that failed]";
    else if (kn_cuda_error_is_async(nm))
        hint = sync_debug ? " [MKS_SYNC_DEBUG=1: raised by the last kernel before this call]"
                          : " [raised asynchronously by an earlier kernel; run again with MKS_SYNC_DEBUG=1 to name it]";
    else if (!strcmp(nm, "cudaErrorMemoryAllocation") || !strcmp(nm, "CUBLAS_STATUS_ALLOC_FAILED"))
        hint = " [device memory exhausted: the memory plan (llmtrain --plan) is short, or another process holds "
               "memory]";
    (void)api;
    if (hint && len + 1 < n) {
        u = snprintf(buf + len, n - len, "%s", hint);
        if (u > 0) len += (size_t)u < n - len ? (size_t)u : n - len - 1;
    }
    return len;
}

static void store(const char *msg) {
    snprintf(g_last, sizeof g_last, "%s", msg);
    if (!g_first[0]) {
        snprintf(g_first, sizeof g_first, "%s", msg);
        g_context_added = 0;
    }
}

void kn_cuda_record(const char *api, const char *call, const char *file, int line, int code, const char *name,
                    const char *str) {
    char m[KN_ERR_MSG_MAX];
    kn_cuda_format_error(m, sizeof m, api, call, NULL, file, line, code, name, str, kn_cuda_sync_debug());
    store(m);
}

void kn_cuda_record_kernel(const char *kernel, const char *file, int line, int code, const char *name, const char *str,
                           int sync_debug) {
    char m[KN_ERR_MSG_MAX];
    kn_cuda_format_error(m, sizeof m, "CUDA", NULL, kernel ? kernel : "?", file, line, code, name, str, sync_debug);
    store(m);
}

void kn_cuda_recordf(const char *file, int line, const char *fmt, ...) {
    char m[KN_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int u = vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    size_t len = u < 0 ? 0 : ((size_t)u < sizeof m ? (size_t)u : sizeof m - 1);
    if (u < 0) m[0] = 0;
    snprintf(m + len, sizeof m - len, " (at %s:%d)", kn_cuda_short_file(file), line);
    store(m);
}

void kn_cuda_add_context(const char *call, const char *file, int line, int code) {
    if (!g_first[0]) {
        char m[KN_ERR_MSG_MAX];
        snprintf(m, sizeof m, "%s failed at %s:%d: status %d (%s) with no CUDA error recorded", call ? call : "(call)",
                 kn_cuda_short_file(file), line, code,
                 code == -1   ? "bad argument"
                 : code == -2 ? "out of host memory"
                              : "library failure");
        store(m);
        g_context_added = 1;
        return;
    }
    if (g_context_added) return;
    g_context_added = 1;
    size_t len = strlen(g_first);
    /* the call text can be long: its name up to '(' is enough */
    char nm[96];
    snprintf(nm, sizeof nm, "%s", call ? call : "?");
    char *paren = strchr(nm, '(');
    if (paren) *paren = 0;
    if (len + 1 < sizeof g_first)
        snprintf(g_first + len, sizeof g_first - len, " <- %s (%s:%d)", nm, kn_cuda_short_file(file), line);
}

const char *kn_cuda_first_error(void) { return g_first; }

const char *kn_cuda_failure_message(char *buf, size_t n, int pending_code, const char *pending_name,
                                    const char *pending_str) {
    if (g_first[0]) return g_first;
    if (!buf || n == 0) return "no CUDA error recorded";
    if (pending_code != 0)
        kn_cuda_format_error(buf, n, "CUDA", "pending CUDA error (no failing call was recorded)", NULL, NULL, 0,
                             pending_code, pending_name, pending_str, kn_cuda_sync_debug());
    else
        snprintf(buf, n,
                 "no CUDA error was recorded for this failure (an internal error: please report it; "
                 "MKS_SYNC_DEBUG=1 may say more)");
    return buf;
}
const char *kn_cuda_last_error(void) { return g_last; }
int kn_cuda_has_error(void) { return g_first[0] != 0; }

void kn_cuda_clear_error(void) {
    g_first[0] = 0;
    g_last[0] = 0;
    g_context_added = 0;
}

const char *kn_cublas_status_name(int status) {
    switch (status) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char *kn_cublas_status_string(int status) {
    switch (status) {
    case 0: return "success";
    case 1: return "the cuBLAS library was not initialized (no usable GPU or driver)";
    case 3: return "resource allocation failed inside the cuBLAS library (device memory)";
    case 7: return "an unsupported value or parameter was passed to the function";
    case 8: return "the function requires a feature absent from the device architecture";
    case 11: return "an access to GPU memory space failed";
    case 13: return "the GPU program failed to execute";
    case 14: return "an internal cuBLAS operation failed";
    case 15: return "the functionality requested is not supported";
    case 16: return "the functionality requested requires some license";
    default: return "unknown cuBLAS status";
    }
}

static int g_sync_debug = -1; /* -1: not read yet */

int kn_cuda_sync_debug(void) {
    if (g_sync_debug < 0) {
        const char *e = getenv("MKS_SYNC_DEBUG");
        g_sync_debug = e && e[0] && strcmp(e, "0") != 0;
    }
    return g_sync_debug;
}

void kn_cuda_set_sync_debug(int on) { g_sync_debug = on ? 1 : 0; }
