#pragma once
// Element types and scalar conversions between them. bf16 and f16 are stored as raw uint16_t so
// host code never depends on compiler half-precision extensions.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace inferscale::tensor {

enum class DType : std::uint8_t { F32, F16, BF16, I32 };

constexpr std::size_t dtype_size(DType t) {
    switch (t) {
        case DType::F32: return 4;
        case DType::F16: return 2;
        case DType::BF16: return 2;
        case DType::I32: return 4;
    }
    return 0;
}

std::string_view dtype_name(DType t);

inline float bf16_to_f32(std::uint16_t h) {
    std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Round to nearest even; NaN stays NaN.
inline std::uint16_t f32_to_bf16(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<std::uint16_t>(bits >> 16);
}

float f16_to_f32(std::uint16_t h);
std::uint16_t f32_to_f16(float f);

// Converts n elements of type `from` at src into f32 at dst.
void convert_to_f32(DType from, const void* src, float* dst, std::size_t n);
// Converts n f32 elements into type `to`.
void convert_from_f32(DType to, const float* src, void* dst, std::size_t n);

}  // namespace inferscale::tensor
