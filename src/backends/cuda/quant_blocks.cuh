#pragma once
// ggml's block formats on the device (layouts in tensor/quantized.h), 8 consecutive elements
// of one block at a time: the unit every kernel over blocks works in (one 16-byte bf16 vector
// of activations or output, two 32-bit words of int8 activations).
//
// BlockCodec<T>::piece(b, o) gives elements o..o+7 (o a multiple of 8) of the block at b as
// a QuantPiece: 8 small integers q_j packed one per byte (two's complement; |q_j| < 128), and a
// scale and an offset with element j = scale * q_j + offset. That form serves both uses:
//   - dequantization (dequantize_piece): scale * q_j + offset rounded one step at a time is
//     exactly the reference's f32 arithmetic (tensor::dequantize_blocks) for every type: where
//     the reference computes d * (q - 8) the products d * q and 8 * d are exact in f32 (an f16
//     scale times a few-bit integer), and Q6_K keeps q - 32 in its bytes, whose product with
//     its 19-bit scale is exact only that way;
//   - dot products with int8 activations (quant_linear.cu): sum_j w_j x_j for x_j = dx * p_j is
//     dx * (scale * dp4a(q, p) + offset * sum_j p_j).
//
// Blocks sit back to back in a row, so a block's alignment is its size's: 16 bytes for Q4_K
// and Q5_K, 8 for Q5_1 and IQ4_XS, 4 for Q4_1 and Q2_K, 2 for the rest. Loads never assume more.

#include <cuda_fp16.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace inferscale::backends::cuda {

struct QuantPiece {
    std::uint32_t lo = 0, hi = 0;  // q_0..q_3, q_4..q_7, one byte each
    float scale = 0.0f, offset = 0.0f;
};

namespace quant_detail {

__device__ __forceinline__ float half_at(const std::uint8_t* p) {
    return __half2float(__ushort_as_half(*reinterpret_cast<const std::uint16_t*>(p)));
}

// 4 bytes from a 2-byte aligned address.
__device__ __forceinline__ std::uint32_t u32_a2(const std::uint8_t* p) {
    const auto* h = reinterpret_cast<const std::uint16_t*>(p);
    return static_cast<std::uint32_t>(h[0]) | static_cast<std::uint32_t>(h[1]) << 16;
}

// 8 bytes as two words, from an address aligned to `Align` (2, 4 or 8).
template <int Align>
__device__ __forceinline__ void bytes8(const std::uint8_t* p, std::uint32_t& lo,
                                       std::uint32_t& hi) {
    if constexpr (Align >= 8) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        lo = v.x;
        hi = v.y;
    } else if constexpr (Align == 4) {
        lo = *reinterpret_cast<const std::uint32_t*>(p);
        hi = *reinterpret_cast<const std::uint32_t*>(p + 4);
    } else {
        lo = u32_a2(p);
        hi = u32_a2(p + 4);
    }
}

constexpr std::uint32_t kLowNibbles = 0x0f0f0f0fu;

// The nibbles of 8 bytes, low halves (shift 0) or high halves (shift 4), one per byte.
__device__ __forceinline__ void nibbles(std::uint32_t lo, std::uint32_t hi, int shift,
                                        QuantPiece& q) {
    q.lo = (lo >> shift) & kLowNibbles;
    q.hi = (hi >> shift) & kLowNibbles;
}

// Bits `bit` of 8 bytes, moved to bit `to` of each byte.
__device__ __forceinline__ std::uint32_t byte_bits(std::uint32_t w, int bit, int to) {
    return ((w >> bit) & 0x01010101u) << to;
}

// Bits first..first+3 of a 32-bit mask, each moved to bit 4 of its own byte (Q5_0, Q5_1).
__device__ __forceinline__ std::uint32_t mask_bits_to_bytes(std::uint32_t mask, int first) {
    const std::uint32_t b = mask >> first;
    return ((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25);
}

// Nibble blocks of 32 (Q4_0, Q4_1, Q5_*): byte j holds element j (low half) and j + 16 (high
// half); elements o..o+7 of the 16 bytes at qs.
template <int Align>
__device__ __forceinline__ void nibbles32(const std::uint8_t* qs, int o, QuantPiece& q) {
    std::uint32_t lo, hi;
    bytes8<Align>(qs + (o & 15), lo, hi);
    nibbles(lo, hi, o < 16 ? 0 : 4, q);
}

// Each byte j of w (an index 0..15) replaced by kIq4NlValues[index], through byte permutes of
// the table held in four words (no per-thread table lookups).
__device__ __forceinline__ std::uint32_t iq4_values(std::uint32_t w) {
    constexpr std::uint32_t kLow0 = 0xbfad9881u, kLow1 = 0xf6eaddcfu;   // values 0..7
    constexpr std::uint32_t kHigh0 = 0x26190d01u, kHigh1 = 0x71594535u;  // values 8..15
    const std::uint32_t select =
        (w & 7u) | ((w >> 4) & 0x70u) | ((w >> 8) & 0x700u) | ((w >> 12) & 0x7000u);
    const std::uint32_t low = __byte_perm(kLow0, kLow1, select);
    const std::uint32_t high = __byte_perm(kHigh0, kHigh1, select);
    const std::uint32_t take_high = ((w >> 3) & 0x01010101u) * 0xffu;
    return (low & ~take_high) | (high & take_high);
}

// Q4_K/Q5_K: sub-block s (0..7)'s scale d * sc and offset -dmin * m, its 6-bit scale sc and
// minimum m taken from the 12 packed bytes held as three words, without branching (the lanes of
// a warp take different sub-blocks).
__device__ __forceinline__ void k_scale_offset(float d, float dmin, std::uint32_t w0,
                                               std::uint32_t w1, std::uint32_t w2, int s,
                                               float& scale, float& offset) {
    const int shift = 8 * (s & 3);
    const int b0 = static_cast<int>((w0 >> shift) & 0xffu);
    const int b1 = static_cast<int>((w1 >> shift) & 0xffu);
    const int b2 = static_cast<int>((w2 >> shift) & 0xffu);
    const bool low = s < 4;
    const int sc = low ? (b0 & 63) : ((b2 & 15) | ((b0 >> 6) << 4));
    const int m = low ? (b1 & 63) : ((b2 >> 4) | ((b1 >> 6) << 4));
    scale = __fmul_rn(d, static_cast<float>(sc));
    offset = -__fmul_rn(dmin, static_cast<float>(m));
}

// The sum of 4 int8 lanes of w, plus c.
__device__ __forceinline__ int sum_bytes(std::uint32_t w, int c) {
    return __dp4a(static_cast<int>(w), 0x01010101, c);
}

// Q4_K/Q5_K: elements o..o+7 of super-block b, whose low 4 bits are nibbles of the 128 bytes at
// qs (elements 64g..64g+31 the low nibbles of qs[32g..], the next 32 their high nibbles):
// x = d * sc * q - dmin * m for the sub-block's scale sc and minimum m.
__device__ __forceinline__ QuantPiece k_scaled_min(const std::uint8_t* b, const std::uint8_t* qs,
                                                   int o) {
    QuantPiece q;
    std::uint32_t lo, hi;
    bytes8<8>(qs + 32 * (o / 64) + o % 32, lo, hi);
    nibbles(lo, hi, (o / 32) % 2 ? 4 : 0, q);
    const auto* scales = reinterpret_cast<const std::uint32_t*>(b + 4);
    k_scale_offset(half_at(b), half_at(b + 2), scales[0], scales[1], scales[2], o / 32, q.scale,
                   q.offset);
    return q;
}

}  // namespace quant_detail

template <tensor::DType T>
struct BlockCodec;

template <>
struct BlockCodec<tensor::DType::Q8_0> {
    static constexpr int kElems = 32, kBytes = 34;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        quant_detail::bytes8<2>(b + 2 + o, q.lo, q.hi);
        q.scale = quant_detail::half_at(b);
        return q;
    }
};

template <>
struct BlockCodec<tensor::DType::Q4_0> {
    static constexpr int kElems = 32, kBytes = 18;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        quant_detail::nibbles32<2>(b + 2, o, q);
        q.scale = quant_detail::half_at(b);
        q.offset = -8.0f * q.scale;
        return q;
    }
};

template <>
struct BlockCodec<tensor::DType::Q4_1> {
    static constexpr int kElems = 32, kBytes = 20;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        quant_detail::nibbles32<4>(b + 4, o, q);
        q.scale = quant_detail::half_at(b);
        q.offset = quant_detail::half_at(b + 2);
        return q;
    }
};

template <>
struct BlockCodec<tensor::DType::Q5_0> {
    static constexpr int kElems = 32, kBytes = 22;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        quant_detail::nibbles32<2>(b + 6, o, q);
        const std::uint32_t qh = quant_detail::u32_a2(b + 2);
        q.lo |= quant_detail::mask_bits_to_bytes(qh, o);
        q.hi |= quant_detail::mask_bits_to_bytes(qh, o + 4);
        q.scale = quant_detail::half_at(b);
        q.offset = -16.0f * q.scale;
        return q;
    }
};

template <>
struct BlockCodec<tensor::DType::Q5_1> {
    static constexpr int kElems = 32, kBytes = 24;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        quant_detail::nibbles32<8>(b + 8, o, q);
        const std::uint32_t qh = *reinterpret_cast<const std::uint32_t*>(b + 4);
        q.lo |= quant_detail::mask_bits_to_bytes(qh, o);
        q.hi |= quant_detail::mask_bits_to_bytes(qh, o + 4);
        q.scale = quant_detail::half_at(b);
        q.offset = quant_detail::half_at(b + 2);
        return q;
    }
};

// The K-quants: elements o..o+7 of a 256-element super-block.
template <>
struct BlockCodec<tensor::DType::Q2_K> {
    static constexpr int kElems = 256, kBytes = 84;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        const int h = o / 128, k = (o % 128) / 32;
        std::uint32_t lo, hi;
        quant_detail::bytes8<4>(b + 16 + 32 * h + o % 32, lo, hi);
        q.lo = (lo >> (2 * k)) & 0x03030303u;
        q.hi = (hi >> (2 * k)) & 0x03030303u;
        const int sc = b[o / 16];
        q.scale = __fmul_rn(quant_detail::half_at(b + 80), static_cast<float>(sc & 15));
        q.offset = -__fmul_rn(quant_detail::half_at(b + 82), static_cast<float>(sc >> 4));
        return q;
    }
};

template <>
struct BlockCodec<tensor::DType::Q3_K> {
    static constexpr int kElems = 256, kBytes = 110;
    // x = ds * (low - (high ? 0 : 4)) = ds * (low | high << 2) - 4 * ds.
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        const int h = o / 128, k = (o % 128) / 32, l0 = o % 32, s = o / 16;
        std::uint32_t lo, hi, mlo, mhi;
        quant_detail::bytes8<2>(b + 32 + 32 * h + l0, lo, hi);
        quant_detail::bytes8<2>(b + l0, mlo, mhi);
        q.lo = ((lo >> (2 * k)) & 0x03030303u) | quant_detail::byte_bits(mlo, o / 32, 2);
        q.hi = ((hi >> (2 * k)) & 0x03030303u) | quant_detail::byte_bits(mhi, o / 32, 2);
        const std::uint8_t* packed = b + 96;
        const int low4 = s < 8 ? (packed[s] & 15) : (packed[s - 8] >> 4);
        const int high2 = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
        q.scale = __fmul_rn(quant_detail::half_at(b + 108),
                            static_cast<float>((low4 | high2 << 4) - 32));
        q.offset = -4.0f * q.scale;
        return q;
    }
};

template <>
struct BlockCodec<tensor::DType::Q4_K> {
    static constexpr int kElems = 256, kBytes = 144;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        return quant_detail::k_scaled_min(b, b + 16, o);
    }
};

template <>
struct BlockCodec<tensor::DType::Q5_K> {
    static constexpr int kElems = 256, kBytes = 176;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q = quant_detail::k_scaled_min(b, b + 48, o);
        std::uint32_t lo, hi;
        quant_detail::bytes8<8>(b + 16 + o % 32, lo, hi);
        q.lo |= quant_detail::byte_bits(lo, o / 32, 4);
        q.hi |= quant_detail::byte_bits(hi, o / 32, 4);
        return q;
    }
};

template <>
struct BlockCodec<tensor::DType::Q6_K> {
    static constexpr int kElems = 256, kBytes = 210;
    // The bytes hold q - 32 (see the top of the file): (q | 0x80) - 32 borrows from no
    // neighbouring byte, and flipping 0x80 back leaves q - 32 in two's complement.
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        const int h = o / 128, c = (o % 128) / 32, l0 = o % 32;
        std::uint32_t lo, hi, hlo, hhi;
        quant_detail::bytes8<2>(b + 64 * h + 32 * (c % 2) + l0, lo, hi);
        quant_detail::bytes8<2>(b + 128 + 32 * h + l0, hlo, hhi);
        quant_detail::nibbles(lo, hi, c < 2 ? 0 : 4, q);
        q.lo |= ((hlo >> (2 * c)) & 0x03030303u) << 4;
        q.hi |= ((hhi >> (2 * c)) & 0x03030303u) << 4;
        q.lo = ((q.lo | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
        q.hi = ((q.hi | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
        q.scale = __fmul_rn(quant_detail::half_at(b + 208),
                            static_cast<float>(static_cast<std::int8_t>(b[192 + o / 16])));
        return q;
    }
};

// The IQ4 types: 4-bit indices into kIq4NlValues, nibbles laid out as Q4_0's.
template <>
struct BlockCodec<tensor::DType::IQ4_NL> {
    static constexpr int kElems = 32, kBytes = 18;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        quant_detail::nibbles32<2>(b + 2, o, q);
        q.lo = quant_detail::iq4_values(q.lo);
        q.hi = quant_detail::iq4_values(q.hi);
        q.scale = quant_detail::half_at(b);
        return q;
    }
};

template <>
struct BlockCodec<tensor::DType::IQ4_XS> {
    static constexpr int kElems = 256, kBytes = 136;
    __device__ static QuantPiece piece(const std::uint8_t* b, int o) {
        QuantPiece q;
        const int s = o / 32;
        quant_detail::nibbles32<8>(b + 8 + 16 * s, o % 32, q);
        q.lo = quant_detail::iq4_values(q.lo);
        q.hi = quant_detail::iq4_values(q.hi);
        const int low = (b[4 + s / 2] >> (4 * (s % 2))) & 15;
        const int high = (*reinterpret_cast<const std::uint16_t*>(b + 2) >> (2 * s)) & 3;
        q.scale = __fmul_rn(quant_detail::half_at(b), static_cast<float>((low | high << 4) - 32));
        return q;
    }
};

// Element j (0..7) of a piece as the reference computes it: scale * q_j + offset, each step
// rounded.
__device__ __forceinline__ float piece_value(const QuantPiece& q, int j) {
    const std::uint32_t w = j < 4 ? q.lo : q.hi;
    const auto qj = static_cast<std::int8_t>((w >> (8 * (j & 3))) & 0xffu);
    return __fadd_rn(__fmul_rn(q.scale, static_cast<float>(qj)), q.offset);
}

// Calls f(BlockCodec<T>{}) for the block type `t`; false when `t` is not one.
template <class F>
bool with_block_codec(tensor::DType t, F&& f) {
    using tensor::DType;
    switch (t) {
        case DType::Q8_0: f(BlockCodec<DType::Q8_0>{}); return true;
        case DType::Q4_0: f(BlockCodec<DType::Q4_0>{}); return true;
        case DType::Q4_1: f(BlockCodec<DType::Q4_1>{}); return true;
        case DType::Q5_0: f(BlockCodec<DType::Q5_0>{}); return true;
        case DType::Q5_1: f(BlockCodec<DType::Q5_1>{}); return true;
        case DType::Q2_K: f(BlockCodec<DType::Q2_K>{}); return true;
        case DType::Q3_K: f(BlockCodec<DType::Q3_K>{}); return true;
        case DType::Q4_K: f(BlockCodec<DType::Q4_K>{}); return true;
        case DType::Q5_K: f(BlockCodec<DType::Q5_K>{}); return true;
        case DType::Q6_K: f(BlockCodec<DType::Q6_K>{}); return true;
        case DType::IQ4_NL: f(BlockCodec<DType::IQ4_NL>{}); return true;
        case DType::IQ4_XS: f(BlockCodec<DType::IQ4_XS>{}); return true;
        default: return false;
    }
}

}  // namespace inferscale::backends::cuda
