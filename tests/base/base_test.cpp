#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/mapped_file.h"
#include "base/result.h"
#include "tensor/dtype.h"

namespace inferscale {
namespace {

Result<int> parse_positive(int v) {
    if (v <= 0) return make_error("not positive");
    return v;
}

Result<int> doubled(int v) {
    int x = IS_TRY(parse_positive(v));
    return 2 * x;
}

TEST(Result, PropagatesErrors) {
    EXPECT_EQ(doubled(4).value(), 8);
    auto r = doubled(-1);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "not positive");
}

TEST(MappedFile, MissingFileIsAnError) {
    auto f = MappedFile::open("/nonexistent/inferscale/file");
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().message.find("/nonexistent/inferscale/file"), std::string::npos);
}

TEST(MappedFile, MapsContents) {
    const std::string path = testing::TempDir() + "/mapped_file_test.bin";
    { std::ofstream(path) << "hello"; }
    auto f = MappedFile::open(path);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->view(), "hello");
    std::remove(path.c_str());
}

// Every f16 bit pattern round-trips through f32, and f32->f16 rounds to nearest even.
TEST(DType, F16RoundTripsEveryBitPattern) {
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const float f = tensor::f16_to_f32(static_cast<std::uint16_t>(h));
        if (std::isnan(f)) continue;
        EXPECT_EQ(tensor::f32_to_f16(f), h) << h;
    }
    EXPECT_EQ(tensor::f16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(tensor::f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(tensor::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
}

TEST(DType, Bf16RoundsToNearestEven) {
    EXPECT_EQ(tensor::f32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(tensor::bf16_to_f32(0x3f80), 1.0f);
    EXPECT_EQ(tensor::f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even
    EXPECT_EQ(tensor::f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
}

}  // namespace
}  // namespace inferscale
