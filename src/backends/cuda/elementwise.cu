// Element-wise ops: residual add, scaling, SwiGLU / GeGLU and the bias add that backs linear when
// cuBLASLt cannot fuse the bias. Grid-stride loops, f32 math, one rounding per output.
// Add and the gated products take 8 elements per thread through 16-byte accesses when the count
// is a multiple of 8 and the pointers are aligned (always, for model activations): at decode sizes
// (4096 elements) that is 512 threads, one load per operand each, instead of 16 scalar
// iterations of 256 threads; small blocks of 128 spread those over several SMs.

#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVecThreads = 128;

__device__ __forceinline__ std::int64_t first_index() {
    return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_stride() {
    return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

template <class T>
__global__ void add_kernel(T* x, const T* y, std::int64_t count) {
    allow_next_launch();
    wait_for_inputs();
    for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
        x[i] = from_f32<T>(to_f32(x[i]) + to_f32(y[i]));
    }
}

template <class T>
__global__ void add_vec_kernel(T* x, const T* y, std::int64_t groups) {
    allow_next_launch();
    wait_for_inputs();
    for (std::int64_t g = first_index(); g < groups; g += grid_stride()) {
        float a[8], b[8];
        load8(x + g * 8, a);
        load8(y + g * 8, b);
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] += b[e];
        store8(x + g * 8, a);
    }
}

template <GateActivation A>
__device__ __forceinline__ float gate_mul(float g, float u) {
    if constexpr (A == GateActivation::Silu) {
        return silu_mul(g, u);
    } else {
        return gelu_tanh_mul(g, u);
    }
}

template <class T, GateActivation A>
__global__ void gated_vec_kernel(const T* gate, const T* up, T* out, std::int64_t groups) {
    allow_next_launch();
    wait_for_inputs();
    for (std::int64_t g = first_index(); g < groups; g += grid_stride()) {
        float a[8], b[8];
        load8(gate + g * 8, a);
        load8(up + g * 8, b);
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] = gate_mul<A>(a[e], b[e]);
        store8(out + g * 8, a);
    }
}

template <class T, GateActivation A>
__global__ void gated_kernel(const T* gate, const T* up, T* out, std::int64_t count) {
    allow_next_launch();
    wait_for_inputs();
    for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
        out[i] = from_f32<T>(gate_mul<A>(to_f32(gate[i]), to_f32(up[i])));
    }
}

template <class T>
__global__ void scale_kernel(T* x, std::int64_t count, float factor) {
    allow_next_launch();
    wait_for_inputs();
    for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
        x[i] = from_f32<T>(to_f32(x[i]) * factor);
    }
}

template <class T>
void add_typed(T* x, const T* y, std::int64_t count, cudaStream_t stream) {
    if (count % 8 == 0 && aligned16(x) && aligned16(y)) {
        const std::int64_t groups = count / 8;
        launch_dependent(add_vec_kernel<T>, grid_for(groups, kVecThreads), kVecThreads, 0, stream,
                         x, y, groups);
    } else {
        launch_dependent(add_kernel<T>, grid_for(count, kThreads), kThreads, 0, stream, x, y,
                         count);
    }
}

template <class T, GateActivation A>
void gated_typed(const T* gate, const T* up, T* out, std::int64_t count, cudaStream_t stream) {
    if (count % 8 == 0 && aligned16(gate) && aligned16(up) && aligned16(out)) {
        const std::int64_t groups = count / 8;
        launch_dependent(gated_vec_kernel<T, A>, grid_for(groups, kVecThreads), kVecThreads, 0,
                         stream, gate, up, out, groups);
    } else {
        launch_dependent(gated_kernel<T, A>, grid_for(count, kThreads), kThreads, 0, stream, gate,
                         up, out, count);
    }
}

template <class T>
void gated_typed(GateActivation act, const void* gate, const void* up, void* out,
                 std::int64_t count, cudaStream_t stream) {
    const auto* g = static_cast<const T*>(gate);
    const auto* u = static_cast<const T*>(up);
    auto* o = static_cast<T*>(out);
    if (act == GateActivation::Silu) {
        gated_typed<T, GateActivation::Silu>(g, u, o, count, stream);
    } else {
        gated_typed<T, GateActivation::GeluTanh>(g, u, o, count, stream);
    }
}

template <class T, class B>
__global__ void add_bias_kernel(T* y, const B* bias, std::int64_t n, std::int64_t out) {
    allow_next_launch();
    wait_for_inputs();
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
        launch_dependent(add_bias_kernel<T, bf16>, grid, kThreads, 0, stream, y,
                         static_cast<const bf16*>(bias), n, out);
    } else {
        IS_CHECK(bias_dtype == DType::F32) << "bias dtype " << tensor::dtype_name(bias_dtype);
        launch_dependent(add_bias_kernel<T, float>, grid, kThreads, 0, stream, y,
                         static_cast<const float*>(bias), n, out);
    }
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_add(void* x, const void* y, DType dtype, std::int64_t count, cudaStream_t stream) {
    if (count == 0) return;
    if (dtype == DType::BF16) {
        add_typed(static_cast<bf16*>(x), static_cast<const bf16*>(y), count, stream);
    } else {
        IS_CHECK(dtype == DType::F32) << "add dtype " << tensor::dtype_name(dtype);
        add_typed(static_cast<float*>(x), static_cast<const float*>(y), count, stream);
    }
}

void launch_gated(GateActivation act, const void* gate, const void* up, void* out, DType dtype,
                  std::int64_t count, cudaStream_t stream) {
    if (count == 0) return;
    if (dtype == DType::BF16) {
        gated_typed<bf16>(act, gate, up, out, count, stream);
    } else {
        IS_CHECK(dtype == DType::F32) << "gated activation dtype " << tensor::dtype_name(dtype);
        gated_typed<float>(act, gate, up, out, count, stream);
    }
}

void launch_scale(void* x, DType dtype, std::int64_t count, float factor, cudaStream_t stream) {
    if (count == 0) return;
    const unsigned grid = grid_for(count, kThreads);
    if (dtype == DType::BF16) {
        launch_dependent(scale_kernel<bf16>, grid, kThreads, 0, stream, static_cast<bf16*>(x),
                         count, factor);
    } else {
        IS_CHECK(dtype == DType::F32) << "scale dtype " << tensor::dtype_name(dtype);
        launch_dependent(scale_kernel<float>, grid, kThreads, 0, stream, static_cast<float*>(x),
                         count, factor);
    }
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
