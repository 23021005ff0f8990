// FP8 E4M3 conversions against PyTorch's float8_e4m3fn (tests/fixtures/fp8/e4m3.bin, written
// by tools/make_fp8_fixture.py): every byte widened, and ties, near-ties, saturation and random
// values narrowed.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace inferscale::tensor {
namespace {

struct E4m3Fixture {
    std::vector<float> widened;  // [256]
    std::vector<float> inputs;
    std::vector<std::uint8_t> narrowed;
};

E4m3Fixture load_fixture() {
    const char* env = std::getenv("INFERSCALE_FIXTURES");
    const std::string path =
        std::string(env != nullptr && *env != '\0' ? env : "tests/fixtures") + "/fp8/e4m3.bin";
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << "missing " << path;
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    E4m3Fixture f;
    if (bytes.size() < 4) return f;
    std::uint32_t n = 0;
    std::memcpy(&n, bytes.data(), 4);
    EXPECT_EQ(bytes.size(), 4 + 256 * 4 + std::size_t{n} * 5);
    if (bytes.size() != 4 + 256 * 4 + std::size_t{n} * 5) return f;
    f.widened.resize(256);
    f.inputs.resize(n);
    f.narrowed.resize(n);
    std::memcpy(f.widened.data(), bytes.data() + 4, 256 * 4);
    std::memcpy(f.inputs.data(), bytes.data() + 4 + 256 * 4, std::size_t{n} * 4);
    std::memcpy(f.narrowed.data(), bytes.data() + 4 + 256 * 4 + std::size_t{n} * 4, n);
    return f;
}

TEST(E4m3Test, EveryByteWidensAsPyTorch) {
    const E4m3Fixture f = load_fixture();
    ASSERT_EQ(f.widened.size(), 256u);
    for (int b = 0; b < 256; ++b) {
        const float got = e4m3_to_f32(static_cast<std::uint8_t>(b));
        if (std::isnan(f.widened[b])) {
            EXPECT_TRUE(std::isnan(got)) << b;
        } else {
            EXPECT_EQ(std::memcmp(&got, &f.widened[b], 4), 0) << b << ": " << got;
        }
    }
}

TEST(E4m3Test, NarrowingRoundsToEvenAndSaturatesAsPyTorch) {
    const E4m3Fixture f = load_fixture();
    ASSERT_GT(f.inputs.size(), 1000u);
    int wrong = 0;
    for (std::size_t i = 0; i < f.inputs.size(); ++i) {
        const std::uint8_t got = f32_to_e4m3(f.inputs[i]);
        if (got != f.narrowed[i] && ++wrong <= 10)
            ADD_FAILURE() << f.inputs[i] << ": " << int(got) << " want " << int(f.narrowed[i]);
    }
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::infinity()), 0x7e);
    EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7f, 0x7f);
}

TEST(E4m3Test, ConvertRoundTripsEveryFiniteValue) {
    std::vector<std::uint8_t> codes;
    for (int b = 0; b < 256; ++b)
        if ((b & 0x7f) != 0x7f) codes.push_back(static_cast<std::uint8_t>(b));
    std::vector<float> wide(codes.size());
    std::vector<std::uint8_t> back(codes.size());
    convert_to_f32(DType::F8_E4M3, codes.data(), wide.data(), codes.size());
    convert_from_f32(DType::F8_E4M3, wide.data(), back.data(), codes.size());
    EXPECT_EQ(back, codes);
    EXPECT_EQ(dtype_size(DType::F8_E4M3), 1u);
}

}  // namespace
}  // namespace inferscale::tensor
