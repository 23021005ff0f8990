// RoPE in the Hugging Face rotate_half convention: dim i pairs with dim i + d/2 and both use
// the angle of column i of the f32 tables. One thread per (token, head, pair) rotates its pair
// in place, so no two threads touch the same element.

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void rope_kernel(T* x, std::int64_t n, std::int64_t heads, std::int64_t half,
                            const std::int32_t* positions, const float* cos_table,
                            const float* sin_table, std::int64_t max_positions) {
    const std::int64_t count = n * heads * half;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         idx < count; idx += stride) {
        const std::int64_t i = idx % half;
        const std::int64_t th = idx / half;  // token * heads + head
        const std::int64_t t = th / heads;
        const std::int32_t pos = positions[t];
        if (pos < 0 || pos >= max_positions) __trap();  // beyond the tables: a bug upstream
        const float c = cos_table[pos * half + i];
        const float s = sin_table[pos * half + i];
        T* v = x + th * 2 * half;
        const float a = to_f32(v[i]);
        const float b = to_f32(v[i + half]);
        v[i] = from_f32<T>(a * c - b * s);
        v[i + half] = from_f32<T>(b * c + a * s);
    }
}

}  // namespace

void launch_rope(void* x, DType dtype, std::int64_t n, std::int64_t heads, std::int64_t head_dim,
                 const std::int32_t* positions, const float* cos, const float* sin,
                 std::int64_t max_positions, cudaStream_t stream) {
    const std::int64_t half = head_dim / 2;
    const std::int64_t count = n * heads * half;
    if (count == 0) return;
    const unsigned grid = grid_for(count, kThreads);
    if (dtype == DType::BF16) {
        rope_kernel<<<grid, kThreads, 0, stream>>>(static_cast<bf16*>(x), n, heads, half,
                                                   positions, cos, sin, max_positions);
    } else {
        IS_CHECK(dtype == DType::F32) << "rope dtype " << tensor::dtype_name(dtype);
        rope_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float*>(x), n, heads, half,
                                                   positions, cos, sin, max_positions);
    }
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace inferscale::backends::cuda
