// The IQ4 types' dequantization (layouts in quantized.h). Built with -ffp-contract=off: IQ4_XS's
// d * (sc - 32) * value rounds after each multiply, as the reference does.

#include "base/check.h"
#include "tensor/quantized.h"

namespace inferscale::tensor {
namespace {

float load_half(const std::uint8_t* p) {
    return f16_to_f32(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
}

// 32 elements scaled by `scale` from the 16 nibble bytes at `qs`.
void dequant_nibbles(const std::uint8_t* qs, float scale, float* dst) {
    for (std::size_t j = 0; j < 16; ++j) {
        dst[j] = scale * static_cast<float>(kIq4NlValues[qs[j] & 0x0f]);
        dst[j + 16] = scale * static_cast<float>(kIq4NlValues[qs[j] >> 4]);
    }
}

void dequant_iq4_xs(const std::uint8_t* blk, float* dst) {
    const float d = load_half(blk);
    int sc[8];
    unpack_iq4_xs_scales(blk, sc);
    for (std::size_t s = 0; s < 8; ++s)
        dequant_nibbles(blk + 8 + 16 * s, d * static_cast<float>(sc[s]), dst + 32 * s);
}

}  // namespace

void unpack_iq4_xs_scales(const std::uint8_t* blk, int* sc) {
    const int high = blk[2] | (blk[3] << 8);
    for (int s = 0; s < 8; ++s) {
        const int low = (blk[4 + s / 2] >> (4 * (s % 2))) & 0x0f;
        sc[s] = (low | (((high >> (2 * s)) & 3) << 4)) - 32;
    }
}

void dequantize_iq4_blocks(DType type, const std::uint8_t* src, float* dst, std::size_t blocks) {
    const std::size_t bytes = dtype_block_bytes(type);
    const auto elems = static_cast<std::size_t>(dtype_block_elems(type));
    for (std::size_t b = 0; b < blocks; ++b, src += bytes, dst += elems) {
        switch (type) {
            case DType::IQ4_NL: dequant_nibbles(src + 2, load_half(src), dst); break;
            case DType::IQ4_XS: dequant_iq4_xs(src, dst); break;
            default: IS_CHECK(false) << "not an IQ4 type: " << dtype_name(type);
        }
    }
}

}  // namespace inferscale::tensor
