// fill_random: the counter-based generator of tensor/random_fill.h, one element per thread
// step of a grid-stride loop, so the values match the CPU backend's and do not depend on the
// launch shape. Writing 16 GB of bf16 weights takes milliseconds.

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_utils.cuh"
#include "tensor/random_fill.h"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__device__ __forceinline__ T round_to(float x);
template <>
__device__ __forceinline__ float round_to<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 round_to<bf16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half round_to<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ std::uint8_t round_to<std::uint8_t>(float x) {
    return f32_to_e4m3(x);
}

template <class T>
__global__ void fill_random_kernel(T* out, std::int64_t count, std::uint64_t seed, float scale,
                                   float offset) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < count; i += stride) {
        out[i] = round_to<T>(
            tensor::random_uniform(seed, static_cast<std::uint64_t>(i), scale, offset));
    }
}

__global__ void fill_random_blocks_kernel(std::uint8_t* out, std::int64_t bytes, DType dtype,
                                          std::uint64_t seed, std::uint16_t scale_bits) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < bytes; i += stride) {
        out[i] = tensor::random_block_byte(seed, static_cast<std::uint64_t>(i), dtype, scale_bits);
    }
}

}  // namespace

void launch_fill_random_blocks(void* out, DType dtype, std::int64_t bytes, std::uint64_t seed,
                               std::uint16_t scale_bits, cudaStream_t stream) {
    if (bytes == 0) return;
    fill_random_blocks_kernel<<<grid_for(bytes, kThreads), kThreads, 0, stream>>>(
        static_cast<std::uint8_t*>(out), bytes, dtype, seed, scale_bits);
    IS_CUDA_CHECK_LAUNCH();
}

void launch_fill_random(void* out, DType dtype, std::int64_t count, std::uint64_t seed,
                        float scale, float offset, cudaStream_t stream) {
    if (count == 0) return;
    const unsigned grid = grid_for(count, kThreads);
    switch (dtype) {
        case DType::F32:
            fill_random_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float*>(out), count,
                                                              seed, scale, offset);
            break;
        case DType::BF16:
            fill_random_kernel<<<grid, kThreads, 0, stream>>>(static_cast<bf16*>(out), count,
                                                              seed, scale, offset);
            break;
        case DType::F16:
            fill_random_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__half*>(out), count,
                                                              seed, scale, offset);
            break;
        case DType::F8_E4M3:
            fill_random_kernel<<<grid, kThreads, 0, stream>>>(static_cast<std::uint8_t*>(out),
                                                              count, seed, scale, offset);
            break;
        default:
            IS_CHECK(false) << "fill_random dtype " << tensor::dtype_name(dtype);
    }
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace inferscale::backends::cuda
