#pragma once
// Reads tests/fixtures/quant/quant_rows.bin, written by tools/make_quant_fixtures.py with the
// `gguf` package's quants module (layout documented there).

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace inferscale::tensor::test {

struct QuantFixture {
    std::int64_t rows = 0, cols = 0;
    std::vector<float> x;  // [rows, cols] f32
    std::vector<std::uint8_t> q8_0, q4_0, q4_1;  // gguf.quants blocks of x
    std::vector<float> q8_0_deq, q4_0_deq, q4_1_deq;  // gguf.quants dequantizations

    static QuantFixture load() {
        const char* env = std::getenv("INFERSCALE_FIXTURES");
        const std::string path =
            std::string(env != nullptr && *env != '\0' ? env : "tests/fixtures") +
            "/quant/quant_rows.bin";
        std::ifstream in(path, std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
        QuantFixture f;
        EXPECT_GE(bytes.size(), 8u) << path;
        if (bytes.size() < 8) return f;
        std::int32_t dims[2];
        std::memcpy(dims, bytes.data(), 8);
        f.rows = dims[0], f.cols = dims[1];
        const std::size_t n = static_cast<std::size_t>(f.rows * f.cols), blocks = n / 32;
        std::size_t off = 8;
        auto take_f32 = [&](std::vector<float>& v) {
            v.resize(n);
            EXPECT_LE(off + 4 * n, bytes.size());
            if (off + 4 * n <= bytes.size()) std::memcpy(v.data(), bytes.data() + off, 4 * n);
            off += 4 * n;
        };
        auto take_u8 = [&](std::vector<std::uint8_t>& v, std::size_t block_bytes) {
            v.resize(blocks * block_bytes);
            EXPECT_LE(off + v.size(), bytes.size());
            if (off + v.size() <= bytes.size()) std::memcpy(v.data(), bytes.data() + off, v.size());
            off += v.size();
        };
        take_f32(f.x);
        take_u8(f.q8_0, 34);
        take_f32(f.q8_0_deq);
        take_u8(f.q4_0, 18);
        take_f32(f.q4_0_deq);
        take_u8(f.q4_1, 20);
        take_f32(f.q4_1_deq);
        EXPECT_EQ(off, bytes.size());
        return f;
    }
};

}  // namespace inferscale::tensor::test
