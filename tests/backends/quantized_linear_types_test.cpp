// CpuBackend::linear on Q5_0, Q5_1, Q2_K ... Q6_K, IQ4_NL and IQ4_XS weights against llama.cpp
// itself: the fixture (tools/make_quant_fixtures.py) holds ggml's own dot products of the same
// blocks and rows, from the AVX-512 and the AVX2 build of the ggml CPU library llama-cpp-python
// ships, and the result must equal both bit for bit. Plus a check that needs no llama.cpp: the value in
// double of the gguf package's dequantized weights times our dequantized activations (for Q5_1,
// ggml's minimum term m * s with s, the sum of the activation block, rounded to f16 as Q8_1
// stores it).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "tensor/quant_types_fixture.h"
#include "tensor/quantized.h"

namespace inferscale {
namespace {

using backends::cpu::CpuBackend;
using tensor::DType;
using tensor::Tensor;
using tensor::test::QuantTypesFixture;

constexpr int kLegs = 2;  // AVX-512, AVX2
constexpr int kTypeCount = static_cast<int>(std::size(QuantTypesFixture::kTypes));
// One section per type, then IQ4_NL over an odd number of blocks.
constexpr int kSections = kTypeCount + 1;

// quant_dots.bin: per section, per build, [rows x, rows w] f32.
std::vector<float> load_dots() {
    const char* env = std::getenv("INFERSCALE_FIXTURES");
    const std::string path = std::string(env != nullptr && *env != '\0' ? env : "tests/fixtures") +
                             "/quant/quant_dots.bin";
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_GT(bytes.size(), 8u) << path;
    if (bytes.size() <= 8) return {};
    std::vector<float> v((bytes.size() - 8) / 4);
    std::memcpy(v.data(), bytes.data() + 8, 4 * v.size());
    return v;
}

int type_index(DType t) {
    for (int i = 0; i < kTypeCount; ++i)
        if (QuantTypesFixture::kTypes[i] == t) return i;
    return -1;
}

float half(const std::uint8_t* p) {
    return tensor::f16_to_f32(static_cast<std::uint16_t>(p[0] | p[1] << 8));
}

// Activation quantization of one row, dequantized: the values ggml multiplies by; for Q8_1 also
// each block's stored sum s.
std::vector<double> activation_values(DType wt, const float* x, std::int64_t in,
                                      std::vector<double>* sums) {
    std::vector<double> a(static_cast<std::size_t>(in));
    if (tensor::is_super_block(wt)) {
        std::vector<std::uint8_t> q(static_cast<std::size_t>(in / 256) * tensor::kQ8_KBlockBytes);
        tensor::quantize_row_q8_K(x, q.data(), in);
        for (std::int64_t b = 0; b < in / 256; ++b) {
            const std::uint8_t* blk = q.data() + b * tensor::kQ8_KBlockBytes;
            float d;
            std::memcpy(&d, blk, 4);
            for (int j = 0; j < 256; ++j)
                a[b * 256 + j] = static_cast<double>(d) * static_cast<std::int8_t>(blk[4 + j]);
        }
    } else {
        const bool q8_1 = wt == DType::Q5_1;
        const std::size_t ab = q8_1 ? tensor::kQ8_1BlockBytes : 34, aq = q8_1 ? 4 : 2;
        std::vector<std::uint8_t> q(static_cast<std::size_t>(in / 32) * ab);
        if (q8_1) {
            tensor::quantize_row_q8_1(x, q.data(), in);
        } else {
            tensor::quantize_row_q8_0(x, q.data(), in);
        }
        for (std::int64_t b = 0; b < in / 32; ++b) {
            const std::uint8_t* blk = q.data() + b * ab;
            const double d = half(blk);
            if (q8_1) sums->push_back(half(blk + 2));
            for (int j = 0; j < 32; ++j) a[b * 32 + j] = d * static_cast<std::int8_t>(blk[aq + j]);
        }
    }
    return a;
}

class QuantizedLinearTypes : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizedLinearTypes, EqualsLlamaCppOnBothBuilds) {
    const DType wt = GetParam();
    const QuantTypesFixture f = QuantTypesFixture::load();
    const std::vector<float> dots = load_dots();
    ASSERT_FALSE(f.x.empty());
    const std::int64_t n = f.rows, out = f.rows, in = f.cols;
    ASSERT_EQ(dots.size(), static_cast<std::size_t>(kSections * kLegs * n * out));
    std::vector<std::uint8_t> blocks = f.types.at(wt).bytes;

    CpuBackend be({.num_threads = 2});
    auto w = be.upload_weight(Tensor(blocks.data(), wt, {out, in}));
    ASSERT_TRUE(w.ok()) << w.error().message;
    EXPECT_EQ(w->tensor.dtype, wt);
    std::vector<float> x = f.x, y(static_cast<std::size_t>(n * out));
    be.linear(Tensor(x.data(), DType::F32, {n, in}), w->tensor, Tensor(),
              Tensor(y.data(), DType::F32, {n, out}));

    for (int leg = 0; leg < kLegs; ++leg) {
        const float* want = dots.data() + (type_index(wt) * kLegs + leg) * n * out;
        for (std::int64_t i = 0; i < n * out; ++i) {
            EXPECT_EQ(std::memcmp(&y[i], &want[i], 4), 0)
                << (leg == 0 ? "avx512" : "avx2") << " row " << i / out << " feature " << i % out
                << ": got " << y[i] << " llama.cpp " << want[i];
        }
    }

    // The gguf package's dequantized weights times our dequantized activations, in double.
    const std::vector<float>& wdeq = f.types.at(wt).deq;
    for (std::int64_t t = 0; t < n; ++t) {
        std::vector<double> sums;
        const std::vector<double> a = activation_values(wt, x.data() + t * in, in, &sums);
        for (std::int64_t o = 0; o < out; ++o) {
            double sum = 0.0, mag = 0.0;
            for (std::int64_t e = 0; e < in; ++e) {
                double wv = wdeq[o * in + e];
                if (!sums.empty()) {  // Q5_1: (w - m) * a per element, m * s per block
                    const std::uint8_t* blk = blocks.data() + (o * in + e) / 32 * 24;
                    wv -= half(blk + 2);
                    if (e % 32 == 0) sum += half(blk + 2) * sums[e / 32];
                }
                const double term = wv * a[e];
                sum += term;
                mag += std::abs(term);
            }
            EXPECT_NEAR(y[t * out + o], sum, 2e-6 * mag + 1e-30) << "row " << t << " feature " << o;
        }
    }

    // Each row's result is independent of the batch around it (decode and prefill tiles agree).
    for (std::int64_t t = 0; t < n; ++t) {
        std::vector<float> y1(out);
        be.linear(Tensor(x.data() + t * in, DType::F32, {1, in}), w->tensor, Tensor(),
                  Tensor(y1.data(), DType::F32, {1, out}));
        EXPECT_EQ(std::memcmp(y1.data(), y.data() + t * out, out * sizeof(float)), 0) << t;
    }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedLinearTypes,
                         ::testing::Values(DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                                           DType::IQ4_XS),
                         [](const auto& info) {
                             return std::string(tensor::dtype_name(info.param));
                         });

// ggml sums IQ4_NL's blocks in pairs and an odd last block on its own: the fixture's weights and
// rows cut to their first cols - 32 columns (15 blocks).
TEST(QuantizedLinearTypes, Iq4NlOddBlockCountEqualsLlamaCpp) {
    const QuantTypesFixture f = QuantTypesFixture::load();
    const std::vector<float> dots = load_dots();
    ASSERT_FALSE(f.x.empty());
    const std::int64_t n = f.rows, out = f.rows, in = f.cols - 32;
    ASSERT_EQ(dots.size(), static_cast<std::size_t>(kSections * kLegs * n * out));
    const std::vector<std::uint8_t>& full = f.types.at(DType::IQ4_NL).bytes;
    const std::size_t full_row = tensor::dtype_row_bytes(DType::IQ4_NL, f.cols);
    const std::size_t cut_row = tensor::dtype_row_bytes(DType::IQ4_NL, in);
    std::vector<std::uint8_t> blocks(static_cast<std::size_t>(out) * cut_row);
    std::vector<float> x(static_cast<std::size_t>(n * in)), y(static_cast<std::size_t>(n * out));
    for (std::int64_t r = 0; r < n; ++r) {
        std::memcpy(blocks.data() + r * cut_row, full.data() + r * full_row, cut_row);
        std::memcpy(x.data() + r * in, f.x.data() + r * f.cols, 4 * in);
    }
    CpuBackend be({.num_threads = 2});
    auto w = be.upload_weight(Tensor(blocks.data(), DType::IQ4_NL, {out, in}));
    ASSERT_TRUE(w.ok()) << w.error().message;
    be.linear(Tensor(x.data(), DType::F32, {n, in}), w->tensor, Tensor(),
              Tensor(y.data(), DType::F32, {n, out}));
    for (int leg = 0; leg < kLegs; ++leg) {
        const float* want = dots.data() + (kTypeCount * kLegs + leg) * n * out;
        for (std::int64_t i = 0; i < n * out; ++i) {
            EXPECT_EQ(std::memcmp(&y[i], &want[i], 4), 0)
                << (leg == 0 ? "avx512" : "avx2") << " row " << i / out << " feature " << i % out
                << ": got " << y[i] << " llama.cpp " << want[i];
        }
    }
}

}  // namespace
}  // namespace inferscale
