/* kn_cuda_err.h - how a failed CUDA / cuBLAS call reaches the user (kernels/kn_cuda_err.c).
 *
 * Plain C, no CUDA header: the message path is built into the CPU library kn
 * and unit-tested without a GPU (tests/test_cuda_msg.c feeds it a fake
 * failing API through the same KN_API_CHECK macro the .cu files use).
 *
 * Every failure is recorded as one line holding the call's text, file:line
 * (the path shortened to its last two parts), the error's name and number
 * and its text, e.g.
 *   cudaMalloc(&p, bytes) failed at train/gpu_arena.cu:71: cudaErrorMemoryAllocation (2): out of memory
 *   kernel attention_forward (kernels/kn_attention.cu:259) failed: cudaErrorIllegalAddress (700): an illegal
 *     memory access was encountered [MKS_SYNC_DEBUG=1: synchronised after this launch]
 * Errors that a kernel raises asynchronously (illegal address, launch
 * failure, device assert, ...) surface at the next call that synchronises;
 * without sync-debug their message says so and names MKS_SYNC_DEBUG=1, which
 * makes every launch wait for its kernel so the failing kernel is named.
 *
 * Per thread: the FIRST error since kn_cuda_clear_error() (the cause; what
 * the trainer reports) and the LAST one (kn_cuda_last_error()).  Neither
 * is ever "no error": when nothing was recorded both are "". */
#ifndef KN_CUDA_ERR_H
#define KN_CUDA_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KN_ERR_MSG_MAX 640

/* Pure formatting (no state): the line described above into buf (always
 * NUL-terminated when n > 0); returns strlen(buf).  api: "CUDA" / "cuBLAS"
 * (unused in the text, kept for the hint); file NULL: no call site (then
 * "call: NAME (code): text"); kernel != NULL: a kernel launch
 * named kernel (call is then ignored); sync_debug: the launch was followed by
 * a synchronisation (the kernel named is the one that failed). */
size_t kn_cuda_format_error(char *buf, size_t n, const char *api, const char *call, const char *kernel,
                            const char *file, int line, int code, const char *name, const char *str, int sync_debug);
/* 1 when an error of that name is raised asynchronously by a kernel (so it
 * may be reported by a later, innocent call). */
int kn_cuda_error_is_async(const char *name);
/* "kernels/kn_matmul.cu" from ".../kernels/kn_matmul.cu" (last two parts). */
const char *kn_cuda_short_file(const char *file);

/* Record a failed API call / kernel launch (formats as above). */
void kn_cuda_record(const char *api, const char *call, const char *file, int line, int code, const char *name,
                    const char *str);
void kn_cuda_record_kernel(const char *kernel, const char *file, int line, int code, const char *name, const char *str,
                           int sync_debug);
/* Record a free-form failure (bad argument, no cuBLASLt algorithm, ...). */
void kn_cuda_recordf(const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Append " <- call (file:line)" once to the first error (a caller naming
 * where a failed library call came from); records a plain failure of call
 * with status code when nothing is recorded yet. */
void kn_cuda_add_context(const char *call, const char *file, int line, int code);

const char *kn_cuda_first_error(void); /* "" when none */
/* What a caller reports for a failed call: the first recorded error; else,
 * when pending_code != 0 (cudaPeekAtLastError), that error formatted with
 * its name; else a text saying that nothing was recorded - never "no
 * error".  buf: KN_ERR_MSG_MAX bytes is enough.  Returns buf or the record. */
const char *kn_cuda_failure_message(char *buf, size_t n, int pending_code, const char *pending_name,
                                    const char *pending_str);
int kn_cuda_has_error(void);
void kn_cuda_clear_error(void);
/* Declared in kn_cuda.h too: the last error recorded ("" when none). */
const char *kn_cuda_last_error(void);

/* cuBLAS / cuBLASLt status names and texts (cublasStatus_t values; no
 * cuBLAS library call needed). */
const char *kn_cublas_status_name(int status);
const char *kn_cublas_status_string(int status);

/* Sync-debug mode: MKS_SYNC_DEBUG=1 in the environment (read once), or
 * kn_cuda_set_sync_debug(1) (bench_train_gpu --sync-debug). */
int kn_cuda_sync_debug(void);
void kn_cuda_set_sync_debug(int on);

/* The one check used for every API call (CUDA runtime, cuBLASLt, and the
 * fake API of the CPU test): T is the call's status type, ok its success
 * value, namefn/strfn turn a status into its name / text; onfail runs after
 * the record (e_ holds the status there). */
#define KN_API_CHECK(api, T, call, ok, namefn, strfn, onfail)                                                          \
    do {                                                                                                               \
        T e_ = (call);                                                                                                 \
        if (e_ != (ok)) {                                                                                              \
            kn_cuda_record((api), #call, __FILE__, __LINE__, (int)e_, namefn(e_), strfn(e_));                          \
            onfail;                                                                                                    \
        }                                                                                                              \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif /* KN_CUDA_ERR_H */
