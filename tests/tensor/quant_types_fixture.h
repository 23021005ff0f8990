#pragma once
// Reads tests/fixtures/quant/quant_types.bin, written by tools/make_quant_fixtures.py with the
// `gguf` package's quants module (layout documented there): f32 rows, their Q8_K activation
// blocks, and blocks of Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, IQ4_NL and IQ4_XS with
// gguf.quants' dequantizations.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/quantized.h"

namespace inferscale::tensor::test {

struct QuantTypesFixture {
    struct Blocks {
        std::vector<std::uint8_t> bytes;  // [rows, cols / block] blocks
        std::vector<float> deq;           // [rows, cols] gguf.quants dequantization
    };
    std::int64_t rows = 0, cols = 0;
    std::vector<float> x;            // [rows, cols] f32
    std::vector<std::uint8_t> q8_k;  // [rows, cols / 256] Q8_K blocks of x
    std::map<DType, Blocks> types;

    static constexpr DType kTypes[] = {DType::Q5_0, DType::Q5_1, DType::Q4_K,
                                       DType::Q5_K, DType::Q6_K, DType::Q3_K,
                                       DType::Q2_K, DType::IQ4_NL, DType::IQ4_XS};

    static QuantTypesFixture load() {
        const char* env = std::getenv("INFERSCALE_FIXTURES");
        const std::string path =
            std::string(env != nullptr && *env != '\0' ? env : "tests/fixtures") +
            "/quant/quant_types.bin";
        std::ifstream in(path, std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
        QuantTypesFixture f;
        EXPECT_GE(bytes.size(), 8u) << path;
        if (bytes.size() < 8) return f;
        std::int32_t dims[2];
        std::memcpy(dims, bytes.data(), 8);
        f.rows = dims[0], f.cols = dims[1];
        const auto n = static_cast<std::size_t>(f.rows * f.cols);
        std::size_t off = 8;
        auto take = [&](void* dst, std::size_t size) {
            EXPECT_LE(off + size, bytes.size());
            if (off + size <= bytes.size()) std::memcpy(dst, bytes.data() + off, size);
            off += size;
        };
        f.x.resize(n);
        take(f.x.data(), 4 * n);
        f.q8_k.resize(n / 256 * kQ8_KBlockBytes);
        take(f.q8_k.data(), f.q8_k.size());
        for (DType t : kTypes) {
            Blocks& b = f.types[t];
            b.bytes.resize(dtype_row_bytes(t, static_cast<std::int64_t>(n)));
            take(b.bytes.data(), b.bytes.size());
            b.deq.resize(n);
            take(b.deq.data(), 4 * n);
        }
        EXPECT_EQ(off, bytes.size());
        return f;
    }
};

}  // namespace inferscale::tensor::test
