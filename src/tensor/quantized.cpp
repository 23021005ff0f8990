// Built with -ffp-contract=off (see CMakeLists.txt): Q4_1's d * q + m must round twice like the
// reference, not once as a fused multiply-add, or values differ in the last bit.

#include "tensor/quantized.h"

#include <cmath>
#include <cstring>

#include "base/check.h"

namespace inferscale::tensor {
namespace {

constexpr std::size_t kBlock = static_cast<std::size_t>(kQuantBlock);

std::uint16_t load_u16(const std::uint8_t* p) {
    return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

void store_u16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v & 0xff);
    p[1] = static_cast<std::uint8_t>(v >> 8);
}

float load_half(const std::uint8_t* p) { return f16_to_f32(load_u16(p)); }

void dequant_q8_0(const std::uint8_t* src, float* dst, std::size_t blocks) {
    for (std::size_t b = 0; b < blocks; ++b, src += 34, dst += kBlock) {
        const float d = load_half(src);
        for (std::size_t j = 0; j < kBlock; ++j)
            dst[j] = static_cast<float>(static_cast<std::int8_t>(src[2 + j])) * d;
    }
}

void dequant_q4_0(const std::uint8_t* src, float* dst, std::size_t blocks) {
    for (std::size_t b = 0; b < blocks; ++b, src += 18, dst += kBlock) {
        const float d = load_half(src);
        const std::uint8_t* qs = src + 2;
        for (std::size_t j = 0; j < kBlock / 2; ++j) {
            dst[j] = d * static_cast<float>(static_cast<int>(qs[j] & 0x0f) - 8);
            dst[j + kBlock / 2] = d * static_cast<float>(static_cast<int>(qs[j] >> 4) - 8);
        }
    }
}

void dequant_q4_1(const std::uint8_t* src, float* dst, std::size_t blocks) {
    for (std::size_t b = 0; b < blocks; ++b, src += 20, dst += kBlock) {
        const float d = load_half(src);
        const float m = load_half(src + 2);
        const std::uint8_t* qs = src + 4;
        for (std::size_t j = 0; j < kBlock / 2; ++j) {
            dst[j] = d * static_cast<float>(qs[j] & 0x0f) + m;
            dst[j + kBlock / 2] = d * static_cast<float>(qs[j] >> 4) + m;
        }
    }
}

std::uint32_t load_u32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(load_u16(p)) |
           static_cast<std::uint32_t>(load_u16(p + 2)) << 16;
}

// The 5-bit quant j of a Q5_0/Q5_1 block: its nibble and its qh bit.
int quant5(const std::uint8_t* qs, std::uint32_t qh, std::size_t j) {
    const int nib = j < kBlock / 2 ? (qs[j] & 0x0f) : (qs[j - kBlock / 2] >> 4);
    return nib | static_cast<int>(((qh >> j) & 1u) << 4);
}

void dequant_q5_0(const std::uint8_t* src, float* dst, std::size_t blocks) {
    for (std::size_t b = 0; b < blocks; ++b, src += 22, dst += kBlock) {
        const float d = load_half(src);
        const std::uint32_t qh = load_u32(src + 2);
        for (std::size_t j = 0; j < kBlock; ++j)
            dst[j] = d * static_cast<float>(quant5(src + 6, qh, j) - 16);
    }
}

void dequant_q5_1(const std::uint8_t* src, float* dst, std::size_t blocks) {
    for (std::size_t b = 0; b < blocks; ++b, src += 24, dst += kBlock) {
        const float d = load_half(src);
        const float m = load_half(src + 2);
        const std::uint32_t qh = load_u32(src + 4);
        for (std::size_t j = 0; j < kBlock; ++j)
            dst[j] = d * static_cast<float>(quant5(src + 8, qh, j)) + m;
    }
}

// One block of ggml's AVX2 activation quantizer. The multiplier is 127 / amax (not 1 / d) and
// the rounding is _mm256_round_ps(_MM_ROUND_NEAREST), i.e. half to even: nearbyint under the
// default rounding mode. The quants always fit in [-127, 127].
struct BlockStats {
    float d = 0.0f;  // the f32 scale, before its f16 rounding
    int sum = 0;     // sum of the quants (Q8_1's s)
};

BlockStats quantize_block(const float* x, std::uint8_t* d_out, std::int8_t* qs) {
    float amax = 0.0f;
    for (std::size_t j = 0; j < kBlock; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    store_u16(d_out, f32_to_f16(d));
    int sum = 0;
    for (std::size_t j = 0; j < kBlock; ++j) {
        const int q = static_cast<int>(std::nearbyint(x[j] * id));
        qs[j] = static_cast<std::int8_t>(q);
        sum += q;
    }
    return {d, sum};
}

}  // namespace

void dequantize_blocks(DType type, const void* src, float* dst, std::size_t n) {
    const auto elems = static_cast<std::size_t>(dtype_block_elems(type));
    IS_CHECK(n % elems == 0) << n << " elements of " << dtype_name(type);
    const auto* s = static_cast<const std::uint8_t*>(src);
    const std::size_t blocks = n / elems;
    switch (type) {
        case DType::Q8_0: dequant_q8_0(s, dst, blocks); return;
        case DType::Q4_0: dequant_q4_0(s, dst, blocks); return;
        case DType::Q4_1: dequant_q4_1(s, dst, blocks); return;
        case DType::Q5_0: dequant_q5_0(s, dst, blocks); return;
        case DType::Q5_1: dequant_q5_1(s, dst, blocks); return;
        case DType::Q2_K:
        case DType::Q3_K:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K: dequantize_k_blocks(type, s, dst, blocks); return;
        case DType::IQ4_NL:
        case DType::IQ4_XS: dequantize_iq4_blocks(type, s, dst, blocks); return;
        default: break;
    }
    IS_CHECK(false) << "dequantize_blocks: not a block type: " << dtype_name(type);
}

void quantize_row_q8_0(const float* x, void* dst, std::int64_t n) {
    IS_CHECK(n % kQuantBlock == 0) << n;
    auto* out = static_cast<std::uint8_t*>(dst);
    for (std::int64_t b = 0; b < n / kQuantBlock; ++b, x += kBlock, out += 34) {
        quantize_block(x, out, reinterpret_cast<std::int8_t*>(out + 2));
    }
}

void quantize_row_q8_1(const float* x, void* dst, std::int64_t n) {
    IS_CHECK(n % kQuantBlock == 0) << n;
    auto* out = static_cast<std::uint8_t*>(dst);
    for (std::int64_t b = 0; b < n / kQuantBlock; ++b, x += kBlock, out += kQ8_1BlockBytes) {
        const BlockStats st = quantize_block(x, out, reinterpret_cast<std::int8_t*>(out + 4));
        // As ggml: the f32 d (not its f16 rounding) times the integer sum, then rounded to f16.
        store_u16(out + 2, f32_to_f16(st.d * static_cast<float>(st.sum)));
    }
}

}  // namespace inferscale::tensor
