// KV page write: token t's K and V rows ([kv_heads, head_dim], contiguous) go to flat slot
// slots[t] = block * block_size + offset of the bf16 pages (slot -1: padding, skipped). One
// block per token.

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

template <class T>
__global__ void write_kv_kernel(const T* k, const T* v, const std::int32_t* slots,
                                std::int64_t num_slots, std::int64_t row, bf16* k_pages,
                                bf16* v_pages) {
    allow_next_launch();
    wait_for_inputs();
    const std::int64_t t = blockIdx.x;
    const std::int32_t slot = slots[t];
    if (slot == -1) return;  // a padding row of a replayable decode batch: nothing to write
    if (slot < 0 || slot >= num_slots) __trap();  // slot outside the pages: a bug upstream
    const T* ks = k + t * row;
    const T* vs = v + t * row;
    bf16* kd = k_pages + slot * row;
    bf16* vd = v_pages + slot * row;
    for (std::int64_t i = threadIdx.x; i < row; i += blockDim.x) {
        kd[i] = from_f32<bf16>(to_f32(ks[i]));
        vd[i] = from_f32<bf16>(to_f32(vs[i]));
    }
}

}  // namespace

void launch_write_kv(const void* k, const void* v, DType dtype, std::int64_t n,
                     const std::int32_t* slots, const PagedKvView& pages, cudaStream_t stream) {
    if (n == 0) return;
    IS_CHECK(n <= 0x7fffffff) << "write_kv rows " << n;
    const std::int64_t row = static_cast<std::int64_t>(pages.kv_heads) * pages.head_dim;
    const std::int64_t num_slots = pages.num_blocks * pages.block_size;
    const int threads = row >= 512 ? 256 : 128;
    const auto grid = static_cast<unsigned>(n);
    auto* kp = static_cast<bf16*>(pages.k);
    auto* vp = static_cast<bf16*>(pages.v);
    if (dtype == DType::BF16) {
        launch_dependent(write_kv_kernel<bf16>, grid, threads, 0, stream,
                         static_cast<const bf16*>(k), static_cast<const bf16*>(v), slots,
                         num_slots, row, kp, vp);
    } else {
        IS_CHECK(dtype == DType::F32) << "write_kv dtype " << tensor::dtype_name(dtype);
        launch_dependent(write_kv_kernel<float>, grid, threads, 0, stream,
                         static_cast<const float*>(k), static_cast<const float*>(v), slots,
                         num_slots, row, kp, vp);
    }
}

}  // namespace inferscale::backends::cuda
