// dtype conversion for upload_weight: checkpoints arrive as f32, f16 or bf16 and the backend
// stores bf16 (matrices) or keeps the values as f32.

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

template <class From, class To>
__global__ void convert_kernel(const From* src, To* dst, std::int64_t count) {
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < count; i += stride) {
        dst[i] = from_f32<To>(to_f32(src[i]));
    }
}

template <class To>
void convert_to(const void* src, DType from, To* dst, std::int64_t count, cudaStream_t stream) {
    constexpr int kThreads = 256;
    const unsigned grid = grid_for(count, kThreads);
    switch (from) {
        case DType::F32:
            convert_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const float*>(src), dst,
                                                          count);
            break;
        case DType::F16:
            convert_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __half*>(src), dst,
                                                          count);
            break;
        case DType::BF16:
            convert_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const bf16*>(src), dst,
                                                          count);
            break;
        default: IS_UNREACHABLE() << "convert from " << tensor::dtype_name(from);
    }
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_convert(const void* src, DType from, void* dst, DType to, std::int64_t count,
                    cudaStream_t stream) {
    if (count == 0) return;
    if (to == DType::F32) {
        convert_to(src, from, static_cast<float*>(dst), count, stream);
    } else {
        IS_CHECK(to == DType::BF16) << "convert to " << tensor::dtype_name(to);
        convert_to(src, from, static_cast<bf16*>(dst), count, stream);
    }
}

}  // namespace inferscale::backends::cuda
