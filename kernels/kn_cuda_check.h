/* kn_cuda_check.h - checking CUDA runtime calls and kernel launches the way
 * the kernels do (public: the train/ .cu files use it too).
 *
 * Needs the CUDA runtime header (it includes <cuda_runtime.h>): include it
 * from .cu files.  A failure is recorded through kernels/kn_cuda_err.h (call
 * text, file:line, error name and number, its text; the first error since
 * kn_cuda_clear_error() is what a caller reports), then `onfail` runs. */
#ifndef KN_CUDA_CHECK_H
#define KN_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "kn_cuda_err.h"

/* Free-form failure (bad shape, no cuBLASLt algorithm, ...) with file:line. */
#define kn_cuda_set_error(...) kn_cuda_recordf(__FILE__, __LINE__, __VA_ARGS__)

/* A CUDA runtime call: on failure record call text, file:line, error name
 * and text, clear the non-sticky error, run onfail (e_ holds the status). */
#define KN_CU_CHECK(call, onfail)                                                                                      \
    KN_API_CHECK("CUDA", cudaError_t, call, cudaSuccess, cudaGetErrorName, cudaGetErrorString,                         \
                 (void)cudaGetLastError();                                                                             \
                 onfail)

/* After a kernel launch: a launch error (bad configuration, no kernel image
 * for this GPU) is caught here; with MKS_SYNC_DEBUG=1 the launch is also
 * waited for, so a fault inside the kernel is reported with its name here
 * instead of at a later, innocent call. */
#define KN_LAUNCH_CHECK(what, onfail)                                                                                  \
    do {                                                                                                               \
        cudaError_t e_ = cudaGetLastError();                                                                           \
        int sd_ = kn_cuda_sync_debug();                                                                                \
        if (e_ == cudaSuccess && sd_) {                                                                                \
            e_ = cudaDeviceSynchronize();                                                                              \
            if (e_ != cudaSuccess) (void)cudaGetLastError();                                                           \
        }                                                                                                              \
        if (e_ != cudaSuccess) {                                                                                       \
            kn_cuda_record_kernel((what), __FILE__, __LINE__, (int)e_, cudaGetErrorName(e_), cudaGetErrorString(e_),   \
                                  sd_);                                                                                \
            onfail;                                                                                                    \
        }                                                                                                              \
    } while (0)

#endif /* KN_CUDA_CHECK_H */
