// The K-quants' dequantization and the Q8_K activation quantizer (layouts in
// quantized.h). Built with -ffp-contract=off: d * sc * q - dmin * m must round
// at each step like the reference.

#include <cmath>
#include <cstring>

#include "base/check.h"
#include "tensor/quantized.h"

namespace inferscale::tensor {
namespace {

constexpr std::size_t kSuper = static_cast<std::size_t>(kSuperBlock);

float load_half(const std::uint8_t* p) {
    return f16_to_f32(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

// Q4_K and Q5_K: sub-block s (32 elements) is d * sc[s] * q - dmin * m[s];
// `quant(e)` gives the unsigned quant of element e.
template <typename Quant>
void dequant_scaled_min(const std::uint8_t* blk, float* dst, Quant quant) {
    const float d = load_half(blk);
    const float dmin = load_half(blk + 2);
    std::uint8_t sc[8], m[8];
    unpack_k_scales(blk + 4, sc, m);
    for (std::size_t s = 0; s < 8; ++s) {
        const float ds = d * static_cast<float>(sc[s]);
        const float ms = dmin * static_cast<float>(m[s]);
        for (std::size_t l = 0; l < 32; ++l) {
            dst[32 * s + l] = ds * static_cast<float>(quant(32 * s + l)) - ms;
        }
    }
}

// The low 4 bits of element e of a Q4_K/Q5_K super-block from its 128 nibble
// bytes.
int k_nibble(const std::uint8_t* qs, std::size_t e) {
    const std::size_t g = e / 64, r = e % 64;
    const std::uint8_t byte = qs[32 * g + r % 32];
    return r < 32 ? (byte & 0x0f) : (byte >> 4);
}

void dequant_q2_k(const std::uint8_t* blk, float* dst) {
    const std::uint8_t* scales = blk;
    const std::uint8_t* qs = blk + 16;
    const float d = load_half(blk + 80);
    const float dmin = load_half(blk + 82);
    for (std::size_t e = 0; e < kSuper; ++e) {
        const std::size_t h = e / 128, k = (e % 128) / 32, l = e % 32;
        const int q = (qs[32 * h + l] >> (2 * k)) & 3;
        const float dl = d * static_cast<float>(scales[e / 16] & 0x0f);
        const float ml = dmin * static_cast<float>(scales[e / 16] >> 4);
        dst[e] = dl * static_cast<float>(q) - ml;
    }
}

void dequant_q3_k(const std::uint8_t* blk, float* dst) {
    const std::uint8_t* hmask = blk;
    const std::uint8_t* qs = blk + 32;
    int sc[16];
    unpack_q3_k_scales(blk + 96, sc);
    const float d = load_half(blk + 108);
    for (std::size_t e = 0; e < kSuper; ++e) {
        const std::size_t h = e / 128, k = (e % 128) / 32, l = e % 32;
        const int low = (qs[32 * h + l] >> (2 * k)) & 3;
        const int high = (hmask[l] >> (e / 32)) & 1;
        const float ds = d * static_cast<float>(sc[e / 16]);
        dst[e] = ds * static_cast<float>(low - (high != 0 ? 0 : 4));
    }
}

void dequant_q6_k(const std::uint8_t* blk, float* dst) {
    const std::uint8_t* ql = blk;
    const std::uint8_t* qh = blk + 128;
    const auto* scales = reinterpret_cast<const std::int8_t*>(blk + 192);
    const float d = load_half(blk + 208);
    for (std::size_t e = 0; e < kSuper; ++e) {
        const std::size_t h = e / 128, c = (e % 128) / 32, l = e % 32;
        const std::uint8_t low = ql[64 * h + 32 * (c % 2) + l];
        const int lo = c < 2 ? (low & 0x0f) : (low >> 4);
        const int hi = (qh[32 * h + l] >> (2 * c)) & 3;
        const float ds = d * static_cast<float>(scales[e / 16]);
        dst[e] = ds * static_cast<float>((lo | hi << 4) - 32);
    }
}

// ggml's nearest_int: adding 1.5 * 2^23 rounds to an integer, half to even, for
// |x| < 2^22.
int nearest_int(float x) {
    const float v = x + 12582912.0f;
    std::int32_t bits;
    std::memcpy(&bits, &v, 4);
    return (bits & 0x007fffff) - 0x00400000;
}

}  // namespace

void unpack_k_scales(const std::uint8_t* packed, std::uint8_t* sc, std::uint8_t* m) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = packed[j] & 0x3f;
        m[j] = packed[4 + j] & 0x3f;
        sc[4 + j] = static_cast<std::uint8_t>((packed[8 + j] & 0x0f) | ((packed[j] >> 2) & 0x30));
        m[4 + j] = static_cast<std::uint8_t>((packed[8 + j] >> 4) | ((packed[4 + j] >> 2) & 0x30));
    }
}

void unpack_q3_k_scales(const std::uint8_t* packed, int* sc) {
    for (int j = 0; j < 16; ++j) {
        const int low = j < 8 ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
        const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (low | high << 4) - 32;
    }
}

void dequantize_k_blocks(DType type, const std::uint8_t* src, float* dst, std::size_t blocks) {
    const std::size_t bytes = dtype_block_bytes(type);
    for (std::size_t b = 0; b < blocks; ++b, src += bytes, dst += kSuper) {
        switch (type) {
            case DType::Q4_K: {
                const std::uint8_t* qs = src + 16;
                dequant_scaled_min(src, dst, [qs](std::size_t e) { return k_nibble(qs, e); });
                break;
            }
            case DType::Q5_K: {
                const std::uint8_t* qh = src + 16;
                const std::uint8_t* qs = src + 48;
                dequant_scaled_min(src, dst, [qs, qh](std::size_t e) {
                    return k_nibble(qs, e) | (((qh[e % 32] >> (e / 32)) & 1) << 4);
                });
                break;
            }
            case DType::Q2_K:
                dequant_q2_k(src, dst);
                break;
            case DType::Q3_K:
                dequant_q3_k(src, dst);
                break;
            case DType::Q6_K:
                dequant_q6_k(src, dst);
                break;
            default:
                IS_CHECK(false) << "not a K-quant: " << dtype_name(type);
        }
    }
}

void quantize_row_q8_K(const float* x, void* dst, std::int64_t n) {
    IS_CHECK(n % kSuperBlock == 0) << n;
    auto* out = static_cast<std::uint8_t*>(dst);
    for (std::int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuper, out += kQ8_KBlockBytes) {
        float max = 0.0f, amax = 0.0f;
        for (std::size_t j = 0; j < kSuper; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) amax = ax, max = x[j];
        }
        auto* qs = reinterpret_cast<std::int8_t*>(out + 4);
        std::int16_t bsums[16] = {};
        float d = 0.0f;
        if (amax != 0.0f) {
            const float iscale = -127.0f / max;
            for (std::size_t j = 0; j < kSuper; ++j) {
                const int q = nearest_int(iscale * x[j]);
                qs[j] = static_cast<std::int8_t>(q < 127 ? q : 127);
                bsums[j / 16] = static_cast<std::int16_t>(bsums[j / 16] + qs[j]);
            }
            d = 1.0f / iscale;
        } else {
            std::memset(qs, 0, kSuper);
        }
        std::memcpy(out, &d, 4);
        std::memcpy(out + 4 + kSuper, bsums, sizeof(bsums));
    }
}

}  // namespace inferscale::tensor
