#include "tensor/dtype.h"

#include <cmath>
#include <limits>

#include "base/check.h"
#include "tensor/quantized.h"

namespace inferscale::tensor {

std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "f32";
        case DType::F16: return "f16";
        case DType::BF16: return "bf16";
        case DType::I32: return "i32";
        case DType::Q8_0: return "q8_0";
        case DType::Q4_0: return "q4_0";
        case DType::Q4_1: return "q4_1";
        case DType::Q5_0: return "q5_0";
        case DType::Q5_1: return "q5_1";
        case DType::Q2_K: return "q2_k";
        case DType::Q3_K: return "q3_k";
        case DType::Q4_K: return "q4_k";
        case DType::Q5_K: return "q5_k";
        case DType::Q6_K: return "q6_k";
        case DType::IQ4_NL: return "iq4_nl";
        case DType::IQ4_XS: return "iq4_xs";
        case DType::F8_E4M3:
            return "f8_e4m3";
    }
    return "?";
}

float f16_to_f32(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t mant = h & 0x3ffu;
    std::uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            exp = 127 - 15 + 1;
            while ((mant & 0x400u) == 0) {
                mant <<= 1;
                --exp;
            }
            mant &= 0x3ffu;
            bits = sign | (exp << 23) | (mant << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

std::uint16_t f32_to_f16(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    const std::uint32_t abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;                   // NaN
    if (abs >= 0x477ff000u) return sign | 0x7c00u;                  // overflow to inf
    if (abs < 0x33000001u) return sign;                             // underflow to zero
    std::int32_t exp = static_cast<std::int32_t>(abs >> 23) - 127 + 15;
    std::uint32_t mant = abs & 0x7fffffu;
    if (exp <= 0) {  // subnormal half
        mant |= 0x800000u;
        const int shift = 14 - exp;
        std::uint32_t half = mant >> shift;
        const std::uint32_t rem = mant & ((1u << shift) - 1);
        const std::uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) ++half;
        return sign | static_cast<std::uint16_t>(half);
    }
    std::uint32_t half = (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
    const std::uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
    return sign | static_cast<std::uint16_t>(half);
}

float e4m3_to_f32(std::uint8_t b) {
    const int exp = (b >> 3) & 0xf, mant = b & 7;
    float magnitude;
    if (exp == 0xf && mant == 7) {
        magnitude = std::numeric_limits<float>::quiet_NaN();
    } else if (exp == 0) {
        magnitude = std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant * 2^-9
    } else {
        magnitude = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
    }
    return (b & 0x80) ? -magnitude : magnitude;
}

std::uint8_t f32_to_e4m3(float f) {
    const std::uint8_t sign = std::signbit(f) ? 0x80 : 0;
    const float a = std::fabs(f);
    if (std::isnan(f)) return sign | 0x7f;
    if (a > 448.0f) return sign | 0x7e;
    if (a < 0x1p-6f) {
        // Subnormals are multiples of 2^-9; rounding up to 8 gives 0x08, the smallest normal.
        return sign | static_cast<std::uint8_t>(std::nearbyint(a * 512.0f));
    }
    int e = 0;
    const float fraction = std::frexp(a, &e);  // a = fraction * 2^e, fraction in [0.5, 1)
    int exp = e - 1 + 7;
    int mant = static_cast<int>(std::nearbyint((2.0f * fraction - 1.0f) * 8.0f));
    if (mant == 8) {
        mant = 0;
        ++exp;
    }
    if (exp > 15 || (exp == 15 && mant == 7)) return sign | 0x7e;
    return sign | static_cast<std::uint8_t>(exp << 3 | mant);
}

void convert_to_f32(DType from, const void* src, float* dst, std::size_t n) {
    if (is_block_quantized(from)) {
        dequantize_blocks(from, src, dst, n);
        return;
    }
    switch (from) {
        case DType::F32:
            std::memcpy(dst, src, n * 4);
            return;
        case DType::F16: {
            const auto* s = static_cast<const std::uint16_t*>(src);
            for (std::size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
            return;
        }
        case DType::BF16: {
            const auto* s = static_cast<const std::uint16_t*>(src);
            for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
            return;
        }
        case DType::F8_E4M3: {
            const auto* s = static_cast<const std::uint8_t*>(src);
            for (std::size_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(s[i]);
            return;
        }
        default:
            break;
    }
    IS_CHECK(false) << "convert_to_f32: unsupported dtype " << dtype_name(from);
}

void convert_from_f32(DType to, const float* src, void* dst, std::size_t n) {
    switch (to) {
        case DType::F32:
            std::memcpy(dst, src, n * 4);
            return;
        case DType::F16: {
            auto* d = static_cast<std::uint16_t*>(dst);
            for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
            return;
        }
        case DType::BF16: {
            auto* d = static_cast<std::uint16_t*>(dst);
            for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
            return;
        }
        case DType::F8_E4M3: {
            auto* d = static_cast<std::uint8_t*>(dst);
            for (std::size_t i = 0; i < n; ++i) d[i] = f32_to_e4m3(src[i]);
            return;
        }
        default:
            break;
    }
    IS_CHECK(false) << "convert_from_f32: unsupported dtype " << dtype_name(to);
}

}  // namespace inferscale::tensor
