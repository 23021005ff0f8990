// Q5_0, Q5_1, the K-quants (Q2_K ... Q6_K), IQ4_NL and IQ4_XS against the `gguf` package
// (tools/make_quant_fixtures.py): dequantization bit for bit, and the Q8_K activation quantizer
// byte for byte against a numpy transcription of ggml's quantize_row_q8_K_ref.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "quant_types_fixture.h"
#include "tensor/dtype.h"
#include "tensor/quantized.h"
#include "tensor/tensor.h"

namespace inferscale::tensor {
namespace {

using test::QuantTypesFixture;

TEST(QuantizedTypes, Geometry) {
    EXPECT_EQ(dtype_block_bytes(DType::Q5_0), 22u);
    EXPECT_EQ(dtype_block_bytes(DType::Q5_1), 24u);
    EXPECT_EQ(dtype_block_bytes(DType::Q4_K), 144u);
    EXPECT_EQ(dtype_block_bytes(DType::Q5_K), 176u);
    EXPECT_EQ(dtype_block_bytes(DType::Q6_K), 210u);
    EXPECT_EQ(dtype_block_bytes(DType::Q3_K), 110u);
    EXPECT_EQ(dtype_block_bytes(DType::Q2_K), 84u);
    EXPECT_EQ(dtype_block_bytes(DType::IQ4_NL), 18u);
    EXPECT_EQ(dtype_block_bytes(DType::IQ4_XS), 136u);
    EXPECT_EQ(dtype_block_elems(DType::IQ4_NL), 32);
    EXPECT_EQ(dtype_block_elems(DType::IQ4_XS), 256);
    EXPECT_TRUE(is_super_block(DType::IQ4_XS));
    EXPECT_FALSE(is_k_quant(DType::IQ4_XS));
    EXPECT_FALSE(is_super_block(DType::IQ4_NL));
    EXPECT_TRUE(is_block_quantized(DType::IQ4_NL));
    EXPECT_EQ(dtype_name(DType::IQ4_XS), "iq4_xs");
    EXPECT_EQ(dtype_block_elems(DType::Q5_1), 32);
    EXPECT_EQ(dtype_block_elems(DType::Q4_K), 256);
    EXPECT_EQ(dtype_block_elems(DType::Q6_K), 256);
    EXPECT_TRUE(is_k_quant(DType::Q5_K));
    EXPECT_FALSE(is_k_quant(DType::Q5_0));
    EXPECT_EQ(dtype_row_bytes(DType::Q4_K, 4864), 19u * 144u);
    const Tensor t(nullptr, DType::Q6_K, {3, 512});
    EXPECT_EQ(t.nbytes(), 3u * 2u * 210u);
    EXPECT_EQ(dtype_name(DType::Q4_K), "q4_k");
}

class QuantizedTypesDequant : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizedTypesDequant, MatchesGguf) {
    const QuantTypesFixture f = QuantTypesFixture::load();
    ASSERT_FALSE(f.x.empty());
    const QuantTypesFixture::Blocks& b = f.types.at(GetParam());
    std::vector<float> got(b.deq.size());
    dequantize_blocks(GetParam(), b.bytes.data(), got.data(), got.size());
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) bad += std::memcmp(&got[i], &b.deq[i], 4) != 0;
    EXPECT_EQ(bad, 0) << dtype_name(GetParam());
    // The generic entry point takes the same path.
    std::vector<float> via(got.size());
    convert_to_f32(GetParam(), b.bytes.data(), via.data(), via.size());
    EXPECT_EQ(std::memcmp(via.data(), got.data(), 4 * got.size()), 0);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedTypesDequant,
                         ::testing::Values(DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                                           DType::IQ4_XS));

TEST(QuantizedTypes, Q8KMatchesGgmlReference) {
    const QuantTypesFixture f = QuantTypesFixture::load();
    ASSERT_FALSE(f.x.empty());
    std::vector<std::uint8_t> got(f.q8_k.size(), 0xcd);
    quantize_row_q8_K(f.x.data(), got.data(), f.rows * f.cols);
    for (std::size_t b = 0; b < got.size() / kQ8_KBlockBytes; ++b) {
        EXPECT_EQ(std::memcmp(got.data() + b * kQ8_KBlockBytes, f.q8_k.data() + b * kQ8_KBlockBytes,
                              kQ8_KBlockBytes),
                  0)
            << "super-block " << b;
    }
}

TEST(QuantizedTypes, Q8KAllZeroBlock) {
    std::vector<float> x(256, 0.0f);
    std::vector<std::uint8_t> q(kQ8_KBlockBytes, 0xcd);
    quantize_row_q8_K(x.data(), q.data(), 256);
    for (std::uint8_t byte : q) EXPECT_EQ(byte, 0);
}

TEST(QuantizedTypes, Iq4XsScalesUnpack) {
    // Sub-block s: low nibble of scales_l[s / 2] (s even) or its high nibble (s odd), top two
    // bits from bits 2s..2s+1 of scales_h; minus 32.
    const std::uint8_t blk[8] = {0, 0, 0xe4, 0x1b, 0x21, 0x43, 0xf0, 0x0f};
    int sc[8];
    unpack_iq4_xs_scales(blk, sc);
    const int want[8] = {0x01 - 32, 0x12 - 32, 0x23 - 32, 0x34 - 32,
                         0x30 - 32, 0x2f - 32, 0x1f - 32, 0x00 - 32};
    for (int s = 0; s < 8; ++s) EXPECT_EQ(sc[s], want[s]) << s;
}

TEST(QuantizedTypes, KScalesUnpack) {
    // sc[0..3] = low 6 bits of bytes 0-3; sc[4..7] = low nibble of bytes 8-11 |
    // top bits of 0-3.
    std::uint8_t packed[12] = {0xc1, 0x02, 0x43, 0x04, 0x85, 0x06,
                               0x07, 0xc8, 0xa9, 0x0a, 0x0b, 0xfc};
    std::uint8_t sc[8], m[8];
    unpack_k_scales(packed, sc, m);
    const std::uint8_t want_sc[8] = {1, 2, 3, 4, 0x09 | 0x30, 0x0a, 0x0b | 0x10, 0x0c};
    const std::uint8_t want_m[8] = {5, 6, 7, 8, 0x0a | 0x20, 0x00, 0x00, 0x0f | 0x30};
    for (int j = 0; j < 8; ++j) {
        EXPECT_EQ(sc[j], want_sc[j]) << j;
        EXPECT_EQ(m[j], want_m[j]) << j;
    }
}

}  // namespace
}  // namespace inferscale::tensor
