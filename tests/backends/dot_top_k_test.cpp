// CpuBackend::dot_top_k against a brute-force reference (double scores, fully sorted). Matrices of
// multiples of 1/8 make every f32 (and f16) dot product exact, so scores must match exactly and the
// many ties test the order by row; k > n tests the padding.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "retrieval/vector_index.h"
#include "tensor/dtype.h"

namespace inferscale {
namespace {

using tensor::DType;
using tensor::Tensor;

std::vector<float> eighths(std::size_t count, std::mt19937& rng) {
    std::uniform_int_distribution<int> dist(-3, 3);
    std::vector<float> v(count);
    for (float& x : v) x = static_cast<float>(dist(rng)) / 8.0f;
    return v;
}

struct TopK {
    std::vector<std::int32_t> rows;
    std::vector<float> scores;
};

TopK reference(const std::vector<float>& m, const std::vector<float>& q, std::int64_t n,
               std::int64_t k) {
    const auto dim = static_cast<std::int64_t>(q.size());
    std::vector<double> s(static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < n; ++r) {
        for (std::int64_t i = 0; i < dim; ++i) s[r] += double{m[r * dim + i]} * q[i];
    }
    std::vector<std::int32_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](std::int32_t a, std::int32_t b) { return s[a] != s[b] ? s[a] > s[b] : a < b; });
    TopK out{std::vector<std::int32_t>(k, -1),
             std::vector<float>(k, -std::numeric_limits<float>::infinity())};
    for (std::int64_t j = 0; j < std::min(k, n); ++j) {
        out.rows[j] = order[j];
        out.scores[j] = static_cast<float>(s[order[j]]);
    }
    return out;
}

TopK run(backends::cpu::CpuBackend& cpu, const std::vector<float>& m, DType dtype,
         std::vector<float> q, std::int64_t n, std::int64_t k) {
    const auto dim = static_cast<std::int64_t>(q.size());
    std::vector<std::uint16_t> narrow(m.size());
    const void* data = m.data();
    if (dtype == DType::F16) {
        tensor::convert_from_f32(DType::F16, m.data(), narrow.data(), m.size());
        data = narrow.data();
    }
    TopK out{std::vector<std::int32_t>(k), std::vector<float>(k)};
    cpu.dot_top_k(Tensor(const_cast<void*>(data), dtype, {n, dim}),
                  Tensor(q.data(), DType::F32, {dim}), Tensor(out.rows.data(), DType::I32, {k}),
                  Tensor(out.scores.data(), DType::F32, {k}));
    return out;
}

TEST(DotTopKTest, MatchesBruteForceWithTiesAndPadding) {
    backends::cpu::CpuBackend cpu;
    std::mt19937 rng(21);
    const std::int64_t big = static_cast<std::int64_t>(retrieval::VectorIndex::kParallelRows) + 77;
    for (std::int64_t dim : {384, 20}) {
        for (std::int64_t n : std::vector<std::int64_t>{0, 1, 9, 500, big}) {
            const auto m = eighths(static_cast<std::size_t>(n * dim), rng);
            const auto q = eighths(static_cast<std::size_t>(dim), rng);
            for (std::int64_t k : {std::int64_t{1}, std::int64_t{10}, std::int64_t{100},
                                   std::min<std::int64_t>(n + 3, 1024)}) {
                const TopK want = reference(m, q, n, k);
                for (DType dtype : {DType::F32, DType::F16}) {
                    const TopK got = run(cpu, m, dtype, q, n, k);
                    EXPECT_EQ(got.rows, want.rows) << "dim " << dim << " n " << n << " k " << k;
                    EXPECT_EQ(got.scores, want.scores) << "dim " << dim << " n " << n << " k " << k;
                }
            }
        }
    }
}

}  // namespace
}  // namespace inferscale
