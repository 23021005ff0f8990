#pragma once
// Return-code checks for the CUDA runtime and cuBLASLt. A failing call inside the backend is a
// bug or a broken device (an earlier kernel faulted), neither of which the caller can handle,
// so it aborts with file:line through IS_CHECK. Expected failures (no device, out of memory)
// are checked by hand where they can happen and become Result errors instead.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "base/check.h"

#define IS_CUDA_CHECK(expr)                                                                \
    do {                                                                                   \
        const cudaError_t is_cuda_err_ = (expr);                                           \
        IS_CHECK(is_cuda_err_ == cudaSuccess)                                              \
            << #expr << ": " << cudaGetErrorName(is_cuda_err_) << " ("                     \
            << cudaGetErrorString(is_cuda_err_) << ")";                                    \
    } while (0)

// After a kernel launch: catches bad launch configurations without synchronizing, so it is
// legal during stream capture. Faults inside the kernel surface at the next synchronize.
#define IS_CUDA_CHECK_LAUNCH() IS_CUDA_CHECK(cudaGetLastError())

#define IS_CUBLAS_CHECK(expr)                                                              \
    do {                                                                                   \
        const cublasStatus_t is_cublas_status_ = (expr);                                   \
        IS_CHECK(is_cublas_status_ == CUBLAS_STATUS_SUCCESS)                               \
            << #expr << ": cublas status " << static_cast<int>(is_cublas_status_);         \
    } while (0)
