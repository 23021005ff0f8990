#pragma once
// Checks for the CUDA backend, all of which abort with file:line through IS_CHECK:
// - return codes of the CUDA runtime and cuBLASLt. A failing call inside the backend is a bug or
//   a broken device (an earlier kernel faulted), neither of which the caller can handle.
//   Expected failures (no device, out of memory) are checked by hand where they can happen and
//   become Result errors instead;
// - shapes and placement of the CudaBackend ops' operands. A failure is a caller bug.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "base/check.h"
#include "tensor/tensor.h"

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

namespace inferscale::backends::cuda {

inline void check_on_device(const tensor::Tensor& t, const char* what) {
    IS_CHECK(t.device == tensor::Device::Cuda) << what << " is not CUDA memory";
    IS_CHECK(t.data != nullptr || t.numel() == 0) << what << " is null";
}

inline void check_device(const tensor::Tensor& t, int rank, const char* what) {
    check_on_device(t, what);
    IS_CHECK(t.rank == rank) << what << " rank " << t.rank << " expected " << rank;
}

inline void check_device(const tensor::Tensor& t, tensor::DType dtype, int rank, const char* what) {
    check_device(t, rank, what);
    IS_CHECK(t.dtype == dtype) << what << " dtype " << tensor::dtype_name(t.dtype) << " expected "
                               << tensor::dtype_name(dtype);
}

// Activations: bf16 normally, f32 accepted by the element-wise families.
inline void check_activation(const tensor::Tensor& t, const char* what) {
    IS_CHECK(t.dtype == tensor::DType::BF16 || t.dtype == tensor::DType::F32)
        << what << " dtype " << tensor::dtype_name(t.dtype);
}

// The rotation's operands: q [n, heads, d] (an activation), k [n, kv_heads, d] of q's dtype
// or empty, positions [n] i32, cos/sin tables [max_positions, d/2] f32.
inline void check_rope(const tensor::Tensor& q, const tensor::Tensor& k,
                       const tensor::Tensor& positions, const tensor::Tensor& cos,
                       const tensor::Tensor& sin) {
    check_device(q, 3, "rope q");
    check_activation(q, "rope q");
    check_device(positions, tensor::DType::I32, 1, "rope positions");
    check_device(cos, tensor::DType::F32, 2, "rope cos");
    check_device(sin, tensor::DType::F32, 2, "rope sin");
    IS_CHECK(positions.shape[0] == q.shape[0] && cos.shape[1] * 2 == q.shape[2] &&
             cos.shape == sin.shape)
        << "rope shapes";
    if (!k.empty()) {
        check_device(k, q.dtype, 3, "rope k");
        IS_CHECK(k.shape[0] == q.shape[0] && k.shape[2] == q.shape[2]) << "rope k shape";
    }
}

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace inferscale::backends::cuda
