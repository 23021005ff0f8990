#pragma once
// Element types and scalar conversions between them. bf16 and f16 are stored as raw uint16_t so
// host code never depends on compiler half-precision extensions. The Q types are ggml's
// block-quantized types (layouts in quantized.h): 32 consecutive elements of a row share one
// block (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL), or 256 for the super-block types (the K-quants
// Q2_K ... Q6_K, and IQ4_XS), so a tensor of them has a last dimension that is a multiple of its
// block. F8_E4M3 is OCP FP8 E4M3 (CUDA's __nv_fp8_e4m3, PyTorch's float8_e4m3fn): 1 sign, 4
// exponent bits (bias 7), 3 mantissa bits, no infinities, largest finite value 448; the KV
// cache's FP8 type, always read with a scale kept beside it.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace inferscale::tensor {

enum class DType : std::uint8_t {
    F32,
    F16,
    BF16,
    I32,
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    IQ4_NL,
    IQ4_XS,
    F8_E4M3
};

constexpr bool is_k_quant(DType t) {
    return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K ||
           t == DType::Q6_K;
}

// Types in super-blocks of 256 elements, whose activations ggml quantizes to Q8_K.
constexpr bool is_super_block(DType t) { return is_k_quant(t) || t == DType::IQ4_XS; }

constexpr bool is_block_quantized(DType t) {
    return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 ||
           t == DType::Q5_1 || t == DType::IQ4_NL || is_super_block(t);
}

// Elements per block: 256 for the super-block types, 32 for the other block types, 1 otherwise.
constexpr std::int64_t dtype_block_elems(DType t) {
    return is_super_block(t) ? 256 : (is_block_quantized(t) ? 32 : 1);
}

// Bytes per block (per element for plain types): the fp16 scales plus the quants.
constexpr std::size_t dtype_block_bytes(DType t) {
    switch (t) {
        case DType::F32: return 4;
        case DType::F16: return 2;
        case DType::BF16: return 2;
        case DType::I32: return 4;
        case DType::Q8_0: return 34;
        case DType::Q4_0: return 18;
        case DType::Q4_1: return 20;
        case DType::Q5_0: return 22;
        case DType::Q5_1: return 24;
        case DType::Q2_K: return 84;
        case DType::Q3_K: return 110;
        case DType::Q4_K: return 144;
        case DType::Q5_K: return 176;
        case DType::Q6_K: return 210;
        case DType::IQ4_NL: return 18;
        case DType::IQ4_XS: return 136;
        case DType::F8_E4M3:
            return 1;
    }
    return 0;
}

// Bytes per element of a plain type; 0 for block-quantized types, which have no per-element
// size (use dtype_row_bytes).
constexpr std::size_t dtype_size(DType t) {
    return is_block_quantized(t) ? 0 : dtype_block_bytes(t);
}

// Bytes of `n` consecutive elements; `n` must be a whole number of blocks.
constexpr std::size_t dtype_row_bytes(DType t, std::int64_t n) {
    return static_cast<std::size_t>(n / dtype_block_elems(t)) * dtype_block_bytes(t);
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

// FP8 E4M3: exact widening; narrowing rounds to nearest even and saturates to +-448 (CUDA's
// __NV_SATFINITE), NaN becomes NaN (0x7f with the sign).
float e4m3_to_f32(std::uint8_t b);
std::uint8_t f32_to_e4m3(float f);

// Converts n elements of type `from` at src into f32 at dst (block types: dequantizes; n must
// then be a whole number of blocks).
void convert_to_f32(DType from, const void* src, float* dst, std::size_t n);
// Converts n f32 elements into type `to`.
void convert_from_f32(DType to, const float* src, void* dst, std::size_t n);

}  // namespace inferscale::tensor
