// Block formats against the `gguf` package (tools/make_quant_fixtures.py): dequantization bit
// for bit, and our activation quantizer (ggml's AVX2 arithmetic) byte for byte on random rows;
// plus the one place the two references part ways, exact .5 ties.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "quant_fixture.h"
#include "tensor/dtype.h"
#include "tensor/quantized.h"
#include "tensor/tensor.h"

namespace inferscale::tensor {
namespace {

using test::QuantFixture;

std::int64_t bit_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        bad += std::memcmp(&a[i], &b[i], 4) != 0;
    return bad;
}

TEST(QuantizedBlocks, Geometry) {
    EXPECT_EQ(dtype_block_bytes(DType::Q8_0), 34u);
    EXPECT_EQ(dtype_block_bytes(DType::Q4_0), 18u);
    EXPECT_EQ(dtype_block_bytes(DType::Q4_1), 20u);
    EXPECT_EQ(dtype_block_elems(DType::Q4_1), 32);
    EXPECT_EQ(dtype_block_elems(DType::F16), 1);
    EXPECT_EQ(dtype_size(DType::Q4_0), 0u);
    EXPECT_EQ(dtype_row_bytes(DType::Q4_1, 576), 18u * 20u);
    EXPECT_EQ(dtype_row_bytes(DType::BF16, 576), 1152u);
    const Tensor t(nullptr, DType::Q8_0, {3, 64});
    EXPECT_EQ(t.nbytes(), 3u * 2u * 34u);
    EXPECT_EQ(dtype_name(DType::Q4_1), "q4_1");
}

TEST(QuantizedBlocks, DequantizationMatchesGgufPackageBitForBit) {
    const QuantFixture f = QuantFixture::load();
    const std::size_t n = f.x.size();
    ASSERT_GT(n, 0u);
    std::vector<float> got(n);
    dequantize_blocks(DType::Q8_0, f.q8_0.data(), got.data(), n);
    EXPECT_EQ(bit_mismatches(got, f.q8_0_deq), 0);
    dequantize_blocks(DType::Q4_0, f.q4_0.data(), got.data(), n);
    EXPECT_EQ(bit_mismatches(got, f.q4_0_deq), 0);
    // Through the generic conversion too (what the embedding op uses).
    convert_to_f32(DType::Q4_1, f.q4_1.data(), got.data(), n);
    EXPECT_EQ(bit_mismatches(got, f.q4_1_deq), 0);
}

TEST(QuantizedBlocks, ActivationQ8_0MatchesGgufPackageBytes) {
    const QuantFixture f = QuantFixture::load();
    ASSERT_FALSE(f.x.empty());
    std::vector<std::uint8_t> got(f.q8_0.size());
    for (std::int64_t r = 0; r < f.rows; ++r) {
        const std::size_t row_bytes = dtype_row_bytes(DType::Q8_0, f.cols);
        quantize_row_q8_0(f.x.data() + r * f.cols, got.data() + r * row_bytes, f.cols);
    }
    EXPECT_EQ(got, f.q8_0);
}

TEST(QuantizedBlocks, ActivationQ8_1HasQ8_0QuantsAndScaledSum) {
    const QuantFixture f = QuantFixture::load();
    ASSERT_FALSE(f.x.empty());
    const std::int64_t blocks = static_cast<std::int64_t>(f.x.size()) / 32;
    std::vector<std::uint8_t> q81(static_cast<std::size_t>(blocks) * kQ8_1BlockBytes);
    quantize_row_q8_1(f.x.data(), q81.data(), static_cast<std::int64_t>(f.x.size()));
    for (std::int64_t b = 0; b < blocks; ++b) {
        SCOPED_TRACE(b);
        const std::uint8_t* mine = q81.data() + b * kQ8_1BlockBytes;
        const std::uint8_t* ref = f.q8_0.data() + b * 34;
        EXPECT_EQ(std::memcmp(mine, ref, 2), 0);             // d
        EXPECT_EQ(std::memcmp(mine + 4, ref + 2, 32), 0);    // quants
        float amax = 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
            amax = std::fmax(amax, std::fabs(f.x[b * 32 + j]));
            sum += static_cast<std::int8_t>(ref[2 + j]);
        }
        // s = f16(d * sum) with the f32 d, as ggml stores it.
        const std::uint16_t want = f32_to_f16((amax / 127.0f) * static_cast<float>(sum));
        std::uint16_t s;
        std::memcpy(&s, mine + 2, 2);
        EXPECT_EQ(s, want);
    }
}

// ggml's AVX2 quantizer (and ours) rounds half to even; gguf-py and ggml's scalar reference
// round half away from zero. amax = 127 makes the multiplier exactly 1, so x is the product.
TEST(QuantizedBlocks, TiesRoundHalfToEvenAsGgmlAvx2) {
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;
    x[1] = 2.5f;    // -> 2 (reference: 3)
    x[2] = -3.5f;   // -> -4 (same either way)
    x[3] = 0.5f;    // -> 0 (reference: 1)
    x[4] = -1.5f;   // -> -2
    std::vector<std::uint8_t> q(34);
    quantize_row_q8_0(x.data(), q.data(), 32);
    const auto* qs = reinterpret_cast<const std::int8_t*>(q.data() + 2);
    EXPECT_EQ(qs[0], 127);
    EXPECT_EQ(qs[1], 2);
    EXPECT_EQ(qs[2], -4);
    EXPECT_EQ(qs[3], 0);
    EXPECT_EQ(qs[4], -2);
    EXPECT_EQ(f16_to_f32(static_cast<std::uint16_t>(q[0] | (q[1] << 8))), 1.0f);
}

TEST(QuantizedBlocks, ZeroBlockHasZeroScaleAndQuants) {
    std::vector<float> x(32, 0.0f);
    std::vector<std::uint8_t> q(kQ8_1BlockBytes, 0xff);
    quantize_row_q8_1(x.data(), q.data(), 32);
    for (std::uint8_t byte : q) EXPECT_EQ(byte, 0);
}

}  // namespace
}  // namespace inferscale::tensor
