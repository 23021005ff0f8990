// CpuBackend::linear and ::embedding on block-quantized weights (Q8_0, Q4_0, Q4_1 blocks made by
// the `gguf` package, tests/fixtures/quant). The activations are quantized exactly as ggml does
// (checked in tests/tensor/quantized_test.cpp), so the result must equal the double-precision
// value of ggml's block formula, sum over blocks of d_w d_a sum(q_w q_a) (+ m_w s_a for Q4_1),
// to f32 rounding: the integer part is exact and only the f32 scaling and summing differ.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "tensor/quant_fixture.h"
#include "tensor/quantized.h"

namespace inferscale {
namespace {

using backends::cpu::CpuBackend;
using tensor::DType;
using tensor::Tensor;

float half(const std::uint8_t* p) {
    return tensor::f16_to_f32(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

// The weight quants of block `b` of a row as integers (Q4_0 centred, Q4_1 raw nibbles).
void weight_quants(DType t, const std::uint8_t* blk, int* q) {
    for (int j = 0; j < 32; ++j) {
        if (t == DType::Q8_0) {
            q[j] = static_cast<std::int8_t>(blk[2 + j]);
        } else {
            const std::uint8_t* qs = blk + (t == DType::Q4_1 ? 4 : 2);
            const int nib = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
            q[j] = t == DType::Q4_0 ? nib - 8 : nib;
        }
    }
}

struct RefValue {
    double value = 0.0;
    double magnitude = 0.0;  // sum of |terms|: the scale of the f32 rounding error
};

// ggml's formula in double for one weight row and one f32 activation row.
RefValue reference_dot(DType wt, const std::uint8_t* wrow, const float* x, std::int64_t in) {
    const bool q8_1 = wt == DType::Q4_1;
    const std::size_t ab = q8_1 ? tensor::kQ8_1BlockBytes : 34, aq = q8_1 ? 4 : 2;
    std::vector<std::uint8_t> act(static_cast<std::size_t>(in / 32) * ab);
    if (q8_1) {
        tensor::quantize_row_q8_1(x, act.data(), in);
    } else {
        tensor::quantize_row_q8_0(x, act.data(), in);
    }
    RefValue r;
    const std::size_t wb = tensor::dtype_block_bytes(wt);
    for (std::int64_t b = 0; b < in / 32; ++b) {
        const std::uint8_t* w = wrow + b * wb;
        const std::uint8_t* a = act.data() + b * ab;
        int q[32];
        weight_quants(wt, w, q);
        long long isum = 0;
        for (int j = 0; j < 32; ++j) isum += q[j] * static_cast<std::int8_t>(a[aq + j]);
        const double term = static_cast<double>(half(w)) * half(a) * static_cast<double>(isum);
        r.value += term;
        r.magnitude += std::abs(term);
        if (q8_1) {
            const double m_term = static_cast<double>(half(w + 2)) * half(a + 2);
            r.value += m_term;
            r.magnitude += std::abs(m_term);
        }
    }
    return r;
}

class QuantizedLinearTest : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(QuantizedLinearTest, MatchesBlockFormulaInDouble) {
    const auto [wt, n] = GetParam();
    const tensor::test::QuantFixture f = tensor::test::QuantFixture::load();
    ASSERT_FALSE(f.x.empty());
    std::vector<std::uint8_t> blocks =
        wt == DType::Q8_0 ? f.q8_0 : (wt == DType::Q4_0 ? f.q4_0 : f.q4_1);
    const std::int64_t out = f.rows, in = f.cols;

    CpuBackend be({.num_threads = 2});
    auto w = be.upload_weight(Tensor(blocks.data(), wt, {out, in}));
    ASSERT_TRUE(w.ok()) << w.error().message;
    EXPECT_EQ(w->tensor.dtype, wt);

    std::mt19937 rng(7 + n);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n * in)), bias(out), y(n * out);
    for (float& v : x) v = dist(rng);
    for (float& v : bias) v = dist(rng);
    be.linear(Tensor(x.data(), DType::F32, {n, in}), w->tensor,
              Tensor(bias.data(), DType::F32, {out}), Tensor(y.data(), DType::F32, {n, out}));

    const std::size_t w_row = tensor::dtype_row_bytes(wt, in);
    for (int t = 0; t < n; ++t) {
        for (std::int64_t o = 0; o < out; ++o) {
            const RefValue r = reference_dot(wt, blocks.data() + o * w_row, x.data() + t * in, in);
            const double got = static_cast<double>(y[t * out + o]) - bias[o];
            EXPECT_NEAR(got, r.value, 1e-6 * r.magnitude + 1e-6 * std::abs(bias[o]))
                << "row " << t << " feature " << o;
        }
    }

    // Each row's result is independent of the batch around it (decode and prefill tiles agree).
    for (int t = 0; t < n; ++t) {
        std::vector<float> y1(out);
        be.linear(Tensor(x.data() + t * in, DType::F32, {1, in}), w->tensor,
                  Tensor(bias.data(), DType::F32, {out}), Tensor(y1.data(), DType::F32, {1, out}));
        EXPECT_EQ(std::memcmp(y1.data(), y.data() + t * out, out * sizeof(float)), 0)
            << "row " << t;
    }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedLinearTest,
                         ::testing::Combine(::testing::Values(DType::Q8_0, DType::Q4_0,
                                                              DType::Q4_1),
                                            ::testing::Values(1, 3, 9)));

TEST(QuantizedEmbedding, DequantizesTheRequestedRows) {
    const tensor::test::QuantFixture f = tensor::test::QuantFixture::load();
    ASSERT_FALSE(f.x.empty());
    std::vector<std::uint8_t> blocks = f.q8_0;
    CpuBackend be({.num_threads = 2});
    auto table = be.upload_weight(Tensor(blocks.data(), DType::Q8_0, {f.rows, f.cols}));
    ASSERT_TRUE(table.ok());
    std::vector<std::int32_t> ids = {4, 0, 4, 2};
    std::vector<float> out(ids.size() * f.cols);
    be.embedding(table->tensor, Tensor(ids.data(), DType::I32, {4}),
                 Tensor(out.data(), DType::F32, {4, f.cols}));
    for (std::size_t i = 0; i < ids.size(); ++i) {
        EXPECT_EQ(std::memcmp(out.data() + i * f.cols, f.q8_0_deq.data() + ids[i] * f.cols,
                              f.cols * sizeof(float)),
                  0)
            << "id " << ids[i];
    }
}

}  // namespace
}  // namespace inferscale
