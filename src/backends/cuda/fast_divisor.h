#pragma once
// Division by a divisor fixed for a whole launch, for index math in kernels whose critical path
// is a few hundred instructions: a 32-bit integer division is a ~20-instruction sequence on the
// GPU, this one a multiply-high, an add and a shift (Granlund and Montgomery's round-up method:
// multiplier 2^32 + magic = ceil(2^(32 + shift) / d)). Exact for 0 <= n < 2^31 and 1 <= d < 2^31.
// Plain C++ where no CUDA compiler reads it, so the host builds and tests it.

#include <cstdint>

#if defined(__CUDACC__)
#define IS_FAST_DIVISOR_FN __host__ __device__ __forceinline__
#else
#define IS_FAST_DIVISOR_FN inline
#endif

namespace inferscale::backends::cuda {

struct FastDivisor {
    std::uint32_t divisor = 1, magic = 0, shift = 0;

    FastDivisor() = default;
    explicit FastDivisor(std::uint32_t d) : divisor(d) {
        while ((std::uint64_t{1} << shift) < d) ++shift;
        const std::uint64_t above = (std::uint64_t{1} << shift) - d;
        magic = static_cast<std::uint32_t>((above << 32) / d + 1);
    }

    IS_FAST_DIVISOR_FN int div(int n) const {
        const auto u = static_cast<std::uint32_t>(n);
        const auto high = static_cast<std::uint32_t>((std::uint64_t{u} * magic) >> 32);
        return static_cast<int>((high + u) >> shift);
    }
    // n / d and n % d from one quotient.
    struct Split {
        int quot, rem;
    };
    IS_FAST_DIVISOR_FN Split split(int n) const {
        const int q = div(n);
        return {q, n - q * static_cast<int>(divisor)};
    }
};

}  // namespace inferscale::backends::cuda

#undef IS_FAST_DIVISOR_FN
