// RMSNorm, one block per row. The sum of squares is taken in f32 from the stored values, then
// each element is normalized and scaled in f32 and rounded once (the CPU backend's order:
// weight * (x * inv_rms)). The residual form first adds y into x (x = round(x + y), stored) and
// normalizes what it stored, so it equals add followed by rms_norm exactly, in one pass and one
// launch instead of two.
//
// Decode and short prefill run this on 1..64 rows, where each call is one memory round trip
// plus a block reduction: the vector kernel gives every thread 8 elements per 16-byte load
// (a 4096-wide bf16 row is 512 threads, one load each of x and of the weight, both issued
// before the reduction), keeps them in registers between the two passes instead of reading
// the row twice, and reduces with warp shuffles. Rows that are not a multiple of 8 wide or not
// 16-byte aligned take the scalar kernel.
//
// Each thread writes only the elements it read, and every read comes before the reduction's
// barrier, so out may alias x or y.

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

// residual == nullptr: plain RMSNorm of x. Otherwise x += residual first (stored in x).
template <class T, class W, int kPer>
__global__ void __launch_bounds__(1024)
    rms_norm_vec_kernel(T* x, const T* residual, const W* weight, float eps, int hidden, T* out) {
    __shared__ float scratch[32];
    allow_next_launch();
    const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * hidden;
    const int groups = hidden / 8;
    float v[kPer][8], w[kPer][8];
    // The weight is no kernel's output: it loads while the kernel before finishes.
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
        const int g = threadIdx.x + k * blockDim.x;
        if (g < groups) load8(weight + g * 8, w[k]);
    }
    wait_for_inputs();
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
        const int g = threadIdx.x + k * blockDim.x;
        if (g < groups) {
            load8(x + base + g * 8, v[k]);
            if (residual != nullptr) {
                float r[8];
                load8(residual + base + g * 8, r);
#pragma unroll
                for (int e = 0; e < 8; ++e) v[k][e] = rounded<T>(v[k][e] + r[e]);
                store8(x + base + g * 8, v[k]);
            }
#pragma unroll
            for (int e = 0; e < 8; ++e) sum += v[k][e] * v[k][e];
        }
    }
    sum = block_sum(sum, scratch);
    const float inv = 1.0f / sqrtf(sum / static_cast<float>(hidden) + eps);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
        const int g = threadIdx.x + k * blockDim.x;
        if (g < groups) {
            float o[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) o[e] = w[k][e] * (v[k][e] * inv);
            store8(out + base + g * 8, o);
        }
    }
}

template <class T, class W>
__global__ void rms_norm_kernel(T* x, const T* residual, const W* weight, float eps,
                                std::int64_t hidden, T* out) {
    __shared__ float scratch[32];
    allow_next_launch();
    wait_for_inputs();
    T* row = x + blockIdx.x * hidden;
    const T* res = residual != nullptr ? residual + blockIdx.x * hidden : nullptr;
    T* dst = out + blockIdx.x * hidden;
    float sum = 0.0f;
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
        float v = to_f32(row[i]);
        if (res != nullptr) {
            v = rounded<T>(v + to_f32(res[i]));
            row[i] = from_f32<T>(v);
        }
        sum += v * v;
    }
    sum = block_sum(sum, scratch);
    const float inv = 1.0f / sqrtf(sum / static_cast<float>(hidden) + eps);
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
        dst[i] = from_f32<T>(to_f32(weight[i]) * (to_f32(row[i]) * inv));
    }
}

template <class T, class W>
void rms_norm_launch(T* x, const T* residual, const W* weight, float eps, std::int64_t n,
                     std::int64_t hidden, T* out, cudaStream_t stream) {
    const auto grid = static_cast<unsigned>(n);
    const std::int64_t groups = hidden / 8;
    if (hidden % 8 == 0 && groups <= 4096 && aligned16(x) && aligned16(weight) &&
        aligned16(out) && (residual == nullptr || aligned16(residual))) {
        const int per = groups <= 1024 ? 1 : groups <= 2048 ? 2 : 4;
        const int threads = static_cast<int>(((groups + per - 1) / per + 31) / 32 * 32);
        const int h = static_cast<int>(hidden);
        const auto kernel = per == 1   ? rms_norm_vec_kernel<T, W, 1>
                            : per == 2 ? rms_norm_vec_kernel<T, W, 2>
                                       : rms_norm_vec_kernel<T, W, 4>;
        launch_dependent(kernel, grid, threads, 0, stream, x, residual, weight, eps, h, out);
    } else {
        const int threads = hidden >= 1024 ? 256 : 128;
        launch_dependent(rms_norm_kernel<T, W>, grid, threads, 0, stream, x, residual, weight, eps,
                         hidden, out);
    }
}

template <class T>
void rms_norm_typed(T* x, const T* residual, const void* weight, DType weight_dtype, float eps,
                    std::int64_t n, std::int64_t hidden, T* out, cudaStream_t stream) {
    if (weight_dtype == DType::BF16) {
        rms_norm_launch(x, residual, static_cast<const bf16*>(weight), eps, n, hidden, out, stream);
    } else {
        IS_CHECK(weight_dtype == DType::F32)
            << "rms_norm weight " << tensor::dtype_name(weight_dtype);
        rms_norm_launch(x, residual, static_cast<const float*>(weight), eps, n, hidden, out,
                        stream);
    }
}

}  // namespace

void launch_rms_norm(void* x, const void* residual, DType dtype, const void* weight,
                     DType weight_dtype, float eps, std::int64_t n, std::int64_t hidden, void* out,
                     cudaStream_t stream) {
    if (n == 0) return;
    IS_CHECK(n <= 0x7fffffff) << "rms_norm rows " << n;
    if (dtype == DType::BF16) {
        rms_norm_typed(static_cast<bf16*>(x), static_cast<const bf16*>(residual), weight,
                       weight_dtype, eps, n, hidden, static_cast<bf16*>(out), stream);
    } else {
        IS_CHECK(dtype == DType::F32) << "rms_norm dtype " << tensor::dtype_name(dtype);
        rms_norm_typed(static_cast<float*>(x), static_cast<const float*>(residual), weight,
                       weight_dtype, eps, n, hidden, static_cast<float*>(out), stream);
    }
}

}  // namespace inferscale::backends::cuda
