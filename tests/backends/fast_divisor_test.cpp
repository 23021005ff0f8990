// FastDivisor (backends/cuda/fast_divisor.h) against the hardware's own division: the head
// groups and tile sizes the kernels divide by, powers of two and their neighbours, and divisors
// near 2^31, each over small numerators, numerators around multiples of the divisor and the
// largest numerators the contract allows.

#include "backends/cuda/fast_divisor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace inferscale::backends::cuda {
namespace {

void expect_exact(std::uint32_t d, int n) {
    const FastDivisor f(d);
    ASSERT_EQ(f.div(n), n / static_cast<int>(d)) << n << " / " << d;
    const FastDivisor::Split s = f.split(n);
    ASSERT_EQ(s.quot, n / static_cast<int>(d)) << n << " / " << d;
    ASSERT_EQ(s.rem, n % static_cast<int>(d)) << n << " % " << d;
}

TEST(FastDivisorTest, MatchesIntegerDivision) {
    std::vector<std::uint32_t> divisors;
    for (std::uint32_t d = 1; d <= 300; ++d) divisors.push_back(d);
    for (int b = 9; b <= 30; ++b) {
        const std::uint32_t p = 1u << b;
        divisors.insert(divisors.end(), {p - 1, p, p + 1});
    }
    divisors.insert(divisors.end(), {0x7ffffffdu, 0x7ffffffeu, 0x7fffffffu});
    constexpr int kMax = 0x7fffffff;
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> any(0, kMax);
    for (const std::uint32_t d : divisors) {
        for (int n = 0; n < 1024; ++n) expect_exact(d, n);
        for (int k = 1; k < 64; ++k) {
            const std::int64_t m = static_cast<std::int64_t>(d) * k;
            for (std::int64_t n = m - 2; n <= m + 2; ++n) {
                if (n >= 0 && n <= kMax) expect_exact(d, static_cast<int>(n));
            }
        }
        for (int n = kMax; n > kMax - 64; --n) expect_exact(d, n);
        for (int i = 0; i < 2000; ++i) expect_exact(d, any(rng));
    }
}

}  // namespace
}  // namespace inferscale::backends::cuda
