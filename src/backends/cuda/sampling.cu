// Greedy sampling: a block per logits row scans it with a stride, then reduces (value, index)
// pairs through warp shuffles and shared memory, preferring the lower index on ties. Rows of a
// multiple of 4 logits at 16-byte alignment (every shipped vocabulary) are read 16 bytes a load,
// four loads in flight a thread: one SM reads the 0.5 MB row of a 128K vocabulary.

#include <climits>
#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_sampling.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ bool better(float v, int i, float best_v, int best_i) {
    return v > best_v || (v == best_v && i < best_i);
}

// Masked: only tokens whose bit in `allowed` (row stride (vocab + 31) / 32 words) is set are
// candidates; a row that allows none gives -1.
template <bool Masked>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* __restrict__ logits, const std::uint32_t* __restrict__ allowed,
                  std::int64_t vocab, std::int32_t* ids) {
    allow_next_launch();
    wait_for_inputs();
    __shared__ float best_v_s[kThreads / 32];
    __shared__ int best_i_s[kThreads / 32];
    const float* row = logits + blockIdx.x * vocab;
    const std::uint32_t* bits = Masked ? allowed + blockIdx.x * ((vocab + 31) / 32) : nullptr;
    float best_v = -INFINITY;
    int best_i = INT_MAX;
    int any = !Masked;
    const auto consider = [&](float v, int i) {
        if (Masked) {
            if (((bits[i >> 5] >> (i & 31)) & 1u) == 0) return;
            any = 1;
        }
        if (better(v, i, best_v, best_i)) {  // false for NaN
            best_v = v;
            best_i = i;
        }
    };
    if (vocab % 4 == 0 && reinterpret_cast<std::uintptr_t>(row) % 16 == 0) {
        const auto* row4 = reinterpret_cast<const float4*>(row);
        const int quads = static_cast<int>(vocab / 4);
#pragma unroll 4
        for (int i = threadIdx.x; i < quads; i += kThreads) {
            const float4 v = row4[i];
            consider(v.x, 4 * i);
            consider(v.y, 4 * i + 1);
            consider(v.z, 4 * i + 2);
            consider(v.w, 4 * i + 3);
        }
    } else {
        for (std::int64_t i = threadIdx.x; i < vocab; i += kThreads) {
            consider(row[i], static_cast<int>(i));
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best_v, offset);
        const int i = __shfl_xor_sync(0xffffffffu, best_i, offset);
        if (better(v, i, best_v, best_i)) {
            best_v = v;
            best_i = i;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        best_v_s[warp] = best_v;
        best_i_s[warp] = best_i;
    }
    any = Masked ? __syncthreads_or(any) : 1;
    if (!Masked) __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kThreads / 32; ++w) {
            if (better(best_v_s[w], best_i_s[w], best_v, best_i)) {
                best_v = best_v_s[w];
                best_i = best_i_s[w];
            }
        }
        ids[blockIdx.x] = !any ? -1 : best_i == INT_MAX ? 0 : best_i;
    }
}

}  // namespace

void argmax_rows(const float* logits, const std::uint32_t* allowed, std::int64_t rows,
                 std::int64_t vocab, std::int32_t* ids, cudaStream_t stream) {
    if (rows == 0) return;
    IS_CHECK(rows <= 0x7fffffff && vocab > 0 && vocab < INT_MAX)
        << "argmax " << rows << "x" << vocab;
    if (allowed != nullptr) {
        launch_dependent(argmax_kernel<true>, static_cast<unsigned>(rows), kThreads, 0, stream,
                         logits, allowed, vocab, ids);
    } else {
        launch_dependent(argmax_kernel<false>, static_cast<unsigned>(rows), kThreads, 0, stream,
                         logits, allowed, vocab, ids);
    }
}

}  // namespace inferscale::backends::cuda
