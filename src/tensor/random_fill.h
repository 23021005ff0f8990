#pragma once
// The counter-based generator behind Backend::fill_random. Element i of a fill depends only on
// (seed, i), so every backend (and every thread or CUDA block layout) produces the same values,
// and filling 16 GB of weights needs no sequential state. Not for cryptography or statistics:
// it only has to make benchmark weights that look like noise.
// constexpr functions are callable from CUDA device code (--expt-relaxed-constexpr).

#include <cstdint>

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

}  // namespace inferscale::tensor
