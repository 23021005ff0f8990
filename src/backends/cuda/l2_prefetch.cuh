#pragma once
// The device side of L2Prefetch: one prefetch.global.L2 a 128-byte line, spread over the grid.

#include <cstdint>

#include "backends/cuda/l2_prefetch.h"

namespace inferscale::backends::cuda {

__device__ __forceinline__ void issue_l2_prefetch(const L2Prefetch& p) {
    if (p.weights == 0) return;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    for (int w = 0; w < p.weights; ++w) {
        const auto* base = static_cast<const char*>(p.first_row[w]);
        const std::int64_t count = p.rows[w] * p.lines;
        for (; i < count; i += stride) {
            const char* line = base + i / p.lines * p.row_bytes + i % p.lines * 128;
            asm volatile("prefetch.global.L2 [%0];\n" ::"l"(line) : "memory");
        }
        i -= count;
    }
}

}  // namespace inferscale::backends::cuda
