#pragma once
// The counter-based generator behind Backend::fill_random. Element i of a fill depends only on
// (seed, i), so every backend (and every thread or CUDA block layout) produces the same values,
// and filling 16 GB of weights needs no sequential state. Not for cryptography or statistics:
// it only has to make benchmark weights that look like noise.
// constexpr functions are callable from CUDA device code (--expt-relaxed-constexpr).

#include <cstdint>

#include "tensor/dtype.h"

namespace inferscale::tensor {

// splitmix64's finalizer over a Weyl sequence keyed by the seed.
constexpr std::uint64_t random_bits(std::uint64_t seed, std::uint64_t index) {
    std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + (index + 1) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// offset + scale * u with u uniform in [-1, 1) on a 2^24 grid (exact in f32).
constexpr float random_uniform(std::uint64_t seed, std::uint64_t index, float scale,
                               float offset) {
    const auto grid = static_cast<std::int32_t>(random_bits(seed, index) >> 40);  // [0, 2^24)
    const float u = static_cast<float>(grid - (1 << 23)) * (1.0f / 8388608.0f);
    return offset + scale * u;
}

// Random benchmark weights of a block-quantized type: every byte of a block is random except
// its f16 scale fields (quantized.h's layouts), which all hold one scale chosen so that the
// largest |value| a block can hold is about `max_abs` (block_scale_bits). Byte i depends only
// on (seed, i), as random_uniform's values do.
struct BlockScaleFields {
    int count = 0;
    int offsets[2] = {};  // byte offsets of the f16 scale fields in a block
    float quant_range = 1.0f;  // the largest |value| of a block whose scales are all 1
};

constexpr BlockScaleFields block_scale_fields(DType t) {
    switch (t) {
        case DType::Q8_0: return {1, {0, 0}, 127.0f};
        case DType::Q4_0: return {1, {0, 0}, 8.0f};
        case DType::Q4_1: return {2, {0, 2}, 16.0f};
        case DType::Q5_0: return {1, {0, 0}, 16.0f};
        case DType::Q5_1: return {2, {0, 2}, 32.0f};
        case DType::Q2_K: return {2, {80, 82}, 45.0f};
        case DType::Q3_K: return {1, {108, 0}, 128.0f};
        case DType::Q4_K: return {2, {0, 2}, 945.0f};
        case DType::Q5_K: return {2, {0, 2}, 1953.0f};
        case DType::Q6_K: return {1, {208, 0}, 4096.0f};
        case DType::IQ4_NL: return {1, {0, 0}, 127.0f};
        case DType::IQ4_XS: return {1, {0, 0}, 4064.0f};
        default: return {};
    }
}

// The f16 bits of the scale that makes a block of type t span about +-max_abs.
inline std::uint16_t random_block_scale_bits(DType t, float max_abs) {
    return f32_to_f16(max_abs / block_scale_fields(t).quant_range);
}

// Byte `index` of a random tensor of block type `t` whose scale fields hold `scale_bits` (an
// f16): little-endian, like the blocks themselves.
constexpr std::uint8_t random_block_byte(std::uint64_t seed, std::uint64_t index, DType t,
                                         std::uint16_t scale_bits) {
    const BlockScaleFields f = block_scale_fields(t);
    const auto offset = static_cast<int>(index % dtype_block_bytes(t));
    for (int i = 0; i < f.count; ++i) {
        if (offset == f.offsets[i]) return static_cast<std::uint8_t>(scale_bits & 0xff);
        if (offset == f.offsets[i] + 1) return static_cast<std::uint8_t>(scale_bits >> 8);
    }
    return static_cast<std::uint8_t>(random_bits(seed, index) >> 56);
}

}  // namespace inferscale::tensor
