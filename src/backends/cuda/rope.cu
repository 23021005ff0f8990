// RoPE in the Hugging Face rotate_half convention: dim i pairs with dim i + d/2 and both use
// the angle of column i of the f32 tables. One thread per (token, head, pair) rotates its pair
// in place, so no two threads touch the same element.
// When d/2 is a multiple of 8 (every model head_dim) and the pointers are aligned, a thread
// rotates 8 pairs instead: 16-byte loads of both halves and of the cos/sin rows, and one index
// decomposition per 8 pairs rather than per pair (decode rotates 32 heads x 64 pairs per call,
// 256 threads in 128-thread blocks).

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVecThreads = 128;

template <class T>
__global__ void rope_vec_kernel(T* x, std::int64_t n, int heads, int half,
                                const std::int32_t* positions, const float* cos_table,
                                const float* sin_table, std::int64_t max_positions) {
    const int groups = half / 8;
    const std::int64_t count = n * heads * groups;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         idx < count; idx += stride) {
        const int i = static_cast<int>(idx % groups) * 8;
        const std::int64_t th = idx / groups;  // token * heads + head
        const std::int64_t t = th / heads;
        const std::int32_t pos = positions[t];
        if (pos < 0 || pos >= max_positions) __trap();  // beyond the tables: a bug upstream
        float c[8], sn[8], a[8], b[8];
        load8(cos_table + static_cast<std::int64_t>(pos) * half + i, c);
        load8(sin_table + static_cast<std::int64_t>(pos) * half + i, sn);
        T* v = x + th * 2 * half;
        load8(v + i, a);
        load8(v + i + half, b);
        float ra[8], rb[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            ra[e] = a[e] * c[e] - b[e] * sn[e];
            rb[e] = b[e] * c[e] + a[e] * sn[e];
        }
        store8(v + i, ra);
        store8(v + i + half, rb);
    }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

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

template <class T>
void rope_typed(T* x, std::int64_t n, std::int64_t heads, std::int64_t half,
                const std::int32_t* positions, const float* cos, const float* sin,
                std::int64_t max_positions, cudaStream_t stream) {
    if (half % 8 == 0 && heads <= 0x7fffffff && half <= 0x7fffffff && aligned16(x) &&
        aligned16(cos) && aligned16(sin)) {
        const std::int64_t count = n * heads * (half / 8);
        rope_vec_kernel<<<grid_for(count, kVecThreads), kVecThreads, 0, stream>>>(
            x, n, static_cast<int>(heads), static_cast<int>(half), positions, cos, sin,
            max_positions);
    } else {
        const std::int64_t count = n * heads * half;
        rope_kernel<<<grid_for(count, kThreads), kThreads, 0, stream>>>(
            x, n, heads, half, positions, cos, sin, max_positions);
    }
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_rope(void* x, DType dtype, std::int64_t n, std::int64_t heads, std::int64_t head_dim,
                 const std::int32_t* positions, const float* cos, const float* sin,
                 std::int64_t max_positions, cudaStream_t stream) {
    const std::int64_t half = head_dim / 2;
    const std::int64_t count = n * heads * half;
    if (count == 0) return;
    if (dtype == DType::BF16) {
        rope_typed(static_cast<bf16*>(x), n, heads, half, positions, cos, sin, max_positions,
                   stream);
    } else {
        IS_CHECK(dtype == DType::F32) << "rope dtype " << tensor::dtype_name(dtype);
        rope_typed(static_cast<float*>(x), n, heads, half, positions, cos, sin, max_positions,
                   stream);
    }
}

}  // namespace inferscale::backends::cuda
