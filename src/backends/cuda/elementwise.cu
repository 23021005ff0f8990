// Element-wise ops: residual add, SwiGLU and the bias add that backs linear when cuBLASLt
// cannot fuse the bias. Grid-stride loops, f32 math, one rounding per output.

#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ std::int64_t first_index() {
    return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_stride() {
    return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

template <class T>
__global__ void add_kernel(T* x, const T* y, std::int64_t count) {
    for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
        x[i] = from_f32<T>(to_f32(x[i]) + to_f32(y[i]));
    }
}

template <class T>
__global__ void swiglu_kernel(const T* gate, const T* up, T* out, std::int64_t count) {
    for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
        const float g = to_f32(gate[i]);
        // expf rather than __expf: the silu of large negative gates must still go to 0 cleanly.
        out[i] = from_f32<T>(g / (1.0f + expf(-g)) * to_f32(up[i]));
    }
}

template <class T, class B>
__global__ void add_bias_kernel(T* y, const B* bias, std::int64_t n, std::int64_t out) {
    const std::int64_t count = n * out;
    for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
        y[i] = from_f32<T>(to_f32(y[i]) + to_f32(bias[i % out]));
    }
}

template <class T>
void add_bias_typed(T* y, const void* bias, DType bias_dtype, std::int64_t n, std::int64_t out,
                    cudaStream_t stream) {
    const unsigned grid = grid_for(n * out, kThreads);
    if (bias_dtype == DType::BF16) {
        add_bias_kernel<<<grid, kThreads, 0, stream>>>(y, static_cast<const bf16*>(bias), n, out);
    } else {
        IS_CHECK(bias_dtype == DType::F32) << "bias dtype " << tensor::dtype_name(bias_dtype);
        add_bias_kernel<<<grid, kThreads, 0, stream>>>(y, static_cast<const float*>(bias), n, out);
    }
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_add(void* x, const void* y, DType dtype, std::int64_t count, cudaStream_t stream) {
    if (count == 0) return;
    const unsigned grid = grid_for(count, kThreads);
    if (dtype == DType::BF16) {
        add_kernel<<<grid, kThreads, 0, stream>>>(static_cast<bf16*>(x),
                                                  static_cast<const bf16*>(y), count);
    } else {
        IS_CHECK(dtype == DType::F32) << "add dtype " << tensor::dtype_name(dtype);
        add_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float*>(x),
                                                  static_cast<const float*>(y), count);
    }
    IS_CUDA_CHECK_LAUNCH();
}

void launch_swiglu(const void* gate, const void* up, void* out, DType dtype, std::int64_t count,
                   cudaStream_t stream) {
    if (count == 0) return;
    const unsigned grid = grid_for(count, kThreads);
    if (dtype == DType::BF16) {
        swiglu_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const bf16*>(gate),
                                                     static_cast<const bf16*>(up),
                                                     static_cast<bf16*>(out), count);
    } else {
        IS_CHECK(dtype == DType::F32) << "swiglu dtype " << tensor::dtype_name(dtype);
        swiglu_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const float*>(gate),
                                                     static_cast<const float*>(up),
                                                     static_cast<float*>(out), count);
    }
    IS_CUDA_CHECK_LAUNCH();
}

void launch_add_bias(void* y, DType y_dtype, const void* bias, DType bias_dtype, std::int64_t n,
                     std::int64_t out, cudaStream_t stream) {
    if (n == 0 || out == 0) return;
    if (y_dtype == DType::BF16) {
        add_bias_typed(static_cast<bf16*>(y), bias, bias_dtype, n, out, stream);
    } else {
        IS_CHECK(y_dtype == DType::F32) << "bias add output " << tensor::dtype_name(y_dtype);
        add_bias_typed(static_cast<float*>(y), bias, bias_dtype, n, out, stream);
    }
}

}  // namespace inferscale::backends::cuda
