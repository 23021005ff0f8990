// RMSNorm, one block per row. The sum of squares is taken in f32 from the stored values, then
// each element is normalized and scaled in f32 and rounded once (the CPU backend's order:
// weight * (x * inv_rms)).

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

template <class T, class W>
__global__ void rms_norm_kernel(const T* x, const W* weight, float eps, std::int64_t hidden,
                                T* out) {
    __shared__ float scratch[32];
    const T* row = x + blockIdx.x * hidden;
    T* dst = out + blockIdx.x * hidden;
    float sum = 0.0f;
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
        const float v = to_f32(row[i]);
        sum += v * v;
    }
    sum = block_sum(sum, scratch);
    const float inv = 1.0f / sqrtf(sum / static_cast<float>(hidden) + eps);
    // Each thread rewrites only the elements it read, so out may alias x.
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
        dst[i] = from_f32<T>(to_f32(weight[i]) * (to_f32(row[i]) * inv));
    }
}

template <class T>
void rms_norm_typed(const T* x, const void* weight, DType weight_dtype, float eps, std::int64_t n,
                    std::int64_t hidden, T* out, cudaStream_t stream) {
    const int threads = hidden >= 1024 ? 256 : 128;
    const auto grid = static_cast<unsigned>(n);
    if (weight_dtype == DType::BF16) {
        rms_norm_kernel<<<grid, threads, 0, stream>>>(x, static_cast<const bf16*>(weight), eps,
                                                      hidden, out);
    } else {
        IS_CHECK(weight_dtype == DType::F32) << "rms_norm weight " << tensor::dtype_name(weight_dtype);
        rms_norm_kernel<<<grid, threads, 0, stream>>>(x, static_cast<const float*>(weight), eps,
                                                      hidden, out);
    }
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_rms_norm(const void* x, DType dtype, const void* weight, DType weight_dtype,
                     float eps, std::int64_t n, std::int64_t hidden, void* out,
                     cudaStream_t stream) {
    if (n == 0) return;
    IS_CHECK(n <= 0x7fffffff) << "rms_norm rows " << n;
    if (dtype == DType::BF16) {
        rms_norm_typed(static_cast<const bf16*>(x), weight, weight_dtype, eps, n, hidden,
                       static_cast<bf16*>(out), stream);
    } else {
        IS_CHECK(dtype == DType::F32) << "rms_norm dtype " << tensor::dtype_name(dtype);
        rms_norm_typed(static_cast<const float*>(x), weight, weight_dtype, eps, n, hidden,
                       static_cast<float*>(out), stream);
    }
}

}  // namespace inferscale::backends::cuda
