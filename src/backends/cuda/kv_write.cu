// KV page write: token t's K and V rows ([kv_heads, head_dim], contiguous) go to flat slot
// slots[t] = block * block_size + offset of the pages (slot -1: padding, skipped): bf16 pages
// take the values rounded to bf16, FP8 pages each value over its head's scale rounded to E4M3
// (the CPU backend's rounding, so both write the same bytes). One block per token.

#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

template <class T, class P>
__global__ void write_kv_kernel(const T* k, const T* v, const std::int32_t* slots,
                                std::int64_t num_slots, std::int64_t row, P* k_pages, P* v_pages,
                                int head_dim, const float* k_scale, const float* v_scale) {
    allow_next_launch();
    wait_for_inputs();
    const std::int64_t t = blockIdx.x;
    const std::int32_t slot = slots[t];
    if (slot == -1) return;  // a padding row of a replayable decode batch: nothing to write
    if (slot < 0 || slot >= num_slots) __trap();  // slot outside the pages: a bug upstream
    const T* ks = k + t * row;
    const T* vs = v + t * row;
    P* kd = k_pages + slot * row;
    P* vd = v_pages + slot * row;
    for (std::int64_t i = threadIdx.x; i < row; i += blockDim.x) {
        if constexpr (std::is_same_v<P, bf16>) {
            kd[i] = from_f32<bf16>(to_f32(ks[i]));
            vd[i] = from_f32<bf16>(to_f32(vs[i]));
        } else {
            const std::int64_t h = i / head_dim;
            kd[i] = f32_to_e4m3(to_f32(ks[i]) / k_scale[h]);
            vd[i] = f32_to_e4m3(to_f32(vs[i]) / v_scale[h]);
        }
    }
}

template <class T>
void launch_typed(const void* k, const void* v, std::int64_t n, const std::int32_t* slots,
                  const PagedKvView& pages, cudaStream_t stream) {
    const std::int64_t row = static_cast<std::int64_t>(pages.kv_heads) * pages.head_dim;
    const std::int64_t num_slots = pages.num_blocks * pages.block_size;
    const int threads = row >= 512 ? 256 : 128;
    const auto grid = static_cast<unsigned>(n);
    const auto* ks = static_cast<const T*>(k);
    const auto* vs = static_cast<const T*>(v);
    if (pages.fp8) {
        launch_dependent(write_kv_kernel<T, std::uint8_t>, grid, threads, 0, stream, ks, vs, slots,
                         num_slots, row, static_cast<std::uint8_t*>(pages.k),
                         static_cast<std::uint8_t*>(pages.v), pages.head_dim, pages.k_scale,
                         pages.v_scale);
    } else {
        launch_dependent(write_kv_kernel<T, bf16>, grid, threads, 0, stream, ks, vs, slots,
                         num_slots, row, static_cast<bf16*>(pages.k), static_cast<bf16*>(pages.v),
                         pages.head_dim, pages.k_scale, pages.v_scale);
    }
}

}  // namespace

void launch_write_kv(const void* k, const void* v, DType dtype, std::int64_t n,
                     const std::int32_t* slots, const PagedKvView& pages, cudaStream_t stream) {
    if (n == 0) return;
    IS_CHECK(n <= 0x7fffffff) << "write_kv rows " << n;
    if (dtype == DType::BF16) {
        launch_typed<bf16>(k, v, n, slots, pages, stream);
    } else {
        IS_CHECK(dtype == DType::F32) << "write_kv dtype " << tensor::dtype_name(dtype);
        launch_typed<float>(k, v, n, slots, pages, stream);
    }
}

}  // namespace inferscale::backends::cuda
