#pragma once
// Weights asked into L2 by a small kernel for the cuBLASLt GEMM after it (experiment).

#include <cstdint>

namespace inferscale::backends::cuda {

inline constexpr int kL2PrefetchMaxWeights = 3;

struct L2Prefetch {
    const void* first_row[kL2PrefetchMaxWeights];
    std::int64_t rows[kL2PrefetchMaxWeights];
    int weights;             // 0: nothing to prefetch
    std::int64_t row_bytes;  // a multiple of 128
    int lines;               // 128-byte lines from each row's start
};

}  // namespace inferscale::backends::cuda
