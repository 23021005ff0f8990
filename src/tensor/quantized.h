#pragma once
// ggml's block formats, their dequantization, and the activation quantizers ggml's
// CPU backend runs before a matmul with a block-quantized weight. Blocks are packed and
// little-endian, with fp16 scales; pointers need no alignment (GGUF data is only 32-byte
// aligned per tensor, and 34-byte Q8_0 blocks leave every other row misaligned anyway).
//
//   Q8_0  [d f16][32 x i8]               34 bytes  x = q * d
//   Q4_0  [d f16][16 x u8 nibbles]       18 bytes  x = (nibble - 8) * d
//   Q4_1  [d f16][m f16][16 x nibbles]   20 bytes  x = nibble * d + m
//   Q5_0  [d f16][qh u32][16 x nibbles]  22 bytes  x = ((nibble | bit << 4) - 16) * d
//   Q5_1  [d f16][m f16][qh u32][16 x nibbles]  24 bytes  x = (nibble | bit << 4) * d + m
//   Q8_1  [d f16][s f16][32 x i8]        36 bytes  activations only: s = d * sum(q)
// Nibble byte j holds element j (low half) and element j + 16 (high half); bit j of qh is the
// fifth bit of element j.
//
// The K-quants group 256 elements (a super-block) into sub-blocks, each with its own scale:
//   Q2_K  [scales 16][qs 64][d f16][dmin f16]                     84 bytes
//         16 sub-blocks of 16; x = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4), q 2 bits:
//         in each half h (128 elements), element 32k + l takes bits 2k..2k+1 of qs[32h + l].
//   Q3_K  [hmask 32][qs 64][scales 12][d f16]                     110 bytes
//         16 sub-blocks of 16; x = d * (sc - 32) * (low - (high ? 0 : 4)), sc 6 bits: its low 4
//         bits are the low (j < 8) or high (j >= 8) nibble of scales[j % 8], its top 2 bits
//         bits 2(j / 4)..+1 of scales[8 + j % 4]. In each half h (128 elements), element
//         32k + l takes `low` from bits 2k..2k+1 of qs[32h + l]; `high` of element e is bit
//         e / 32 of hmask[e % 32].
//   Q4_K  [d f16][dmin f16][scales 12][128 x nibbles]             144 bytes
//   Q5_K  [d f16][dmin f16][scales 12][qh 32][128 x nibbles]      176 bytes
//         8 sub-blocks of 32; x = d * sc * q - dmin * m with 6-bit sc and m packed in `scales`:
//         bytes 0-3 hold sc[0..3] (low 6 bits) and the top 2 bits of sc[4..7], bytes 4-7 the
//         same for m, bytes 8-11 the low 4 bits of sc[4..7] (low half) and m[4..7] (high half).
//         Elements 64g..64g+31 are the low nibbles of qs[32g..32g+31] (sub-block 2g), elements
//         64g+32.. their high nibbles (sub-block 2g+1); Q5_K's fifth bit of element 32s + l is
//         bit s of qh[l].
//   Q6_K  [ql 128][qh 64][scales 16 x i8][d f16]                  210 bytes
//         16 sub-blocks of 16; x = d * sc * (q - 32), q 6 bits. In each half h (128 elements),
//         element 32c + l (c < 4) takes its low 4 bits from ql[64h + 32(c % 2) + l] (low nibble
//         for c < 2, high for c >= 2) and its top 2 bits from bits 2c..2c+1 of qh[32h + l].
//   Q8_K  [d f32][256 x i8][bsums 16 x i16]                       292 bytes  activations only:
//         x = q * d; bsums[k] = sum of the quants 16k..16k+15.
//
// The IQ4 types store 4-bit indices into kIq4NlValues, a non-uniform grid, instead of quants:
//   IQ4_NL [d f16][16 x u8 nibbles]                               18 bytes (32 elements)
//         x = d * kIq4NlValues[nibble]; nibbles as Q4_0's.
//   IQ4_XS [d f16][scales_h u16][scales_l 4][128 x nibbles]       136 bytes (256 elements)
//         8 sub-blocks of 32; x = d * (sc - 32) * kIq4NlValues[nibble], sc 6 bits: its low 4
//         bits are the low (s even) or high (s odd) nibble of scales_l[s / 2], its top 2 bits
//         bits 2s..2s+1 of scales_h. Sub-block s has nibble bytes 16s..16s+15, element j of it
//         in the low half of byte j and element j + 16 in the high half.

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace inferscale::tensor {

constexpr std::int64_t kQuantBlock = 32;      // elements per block of the non-K types
constexpr std::int64_t kSuperBlock = 256;     // elements per super-block (K-quants, IQ4_XS)
constexpr std::size_t kQ8_1BlockBytes = 36;   // activation-only type; not a DType
constexpr std::size_t kQ8_KBlockBytes = 292;  // activation-only type; not a DType

// The values an IQ4_NL or IQ4_XS index stands for (ggml's kvalues_iq4nl).
inline constexpr std::int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

// Dequantizes `n` elements (a whole number of blocks) of a block type at `src` into f32 `dst`,
// with the f32 arithmetic of the reference (gguf-py's quants.py, ggml's dequantize_row_*):
// bit-exact.
void dequantize_blocks(DType type, const void* src, float* dst, std::size_t n);

// Quantizes `n` f32 values (a multiple of 32) into Q8_0 blocks at `dst`, exactly as ggml's
// AVX2 quantize_row_q8_0 does (what llama.cpp runs on x86): amax per block, d = amax / 127
// stored as f16, q = round-half-even(x * (127 / amax)). ggml's scalar reference (and gguf-py)
// multiply by 1 / d and round half away from zero instead; the two differ only at exact ties
// and in rare last-ulp cases of the multiplier.
void quantize_row_q8_0(const float* x, void* dst, std::int64_t n);
// The same quants and d as quantize_row_q8_0, plus s = f16(d * sum(q)) (ggml's Q8_1, the
// activation type dotted with Q4_1 and Q5_1 weights).
void quantize_row_q8_1(const float* x, void* dst, std::int64_t n);
// Quantizes `n` f32 values (a multiple of 256) into Q8_K blocks, the activations of K-quant
// weights, as ggml's quantize_row_q8_K_ref (what llama.cpp runs on x86): the signed value of
// largest magnitude `max` gives iscale = -127 / max, q = min(127, round-half-even(iscale * x)),
// d = 1 / iscale; an all-zero block has d = 0 and zero quants.
void quantize_row_q8_K(const float* x, void* dst, std::int64_t n);

// The 6-bit sub-block scales and minimums of a Q4_K/Q5_K super-block from its 12 packed bytes.
void unpack_k_scales(const std::uint8_t* packed, std::uint8_t* sc, std::uint8_t* m);

// The 6-bit sub-block scales of a Q3_K super-block from its 12 packed bytes, minus 32.
void unpack_q3_k_scales(const std::uint8_t* packed, int* sc);

// The K-quant part of dequantize_blocks (quantized_k.cpp): `blocks` super-blocks of a K-quant.
void dequantize_k_blocks(DType type, const std::uint8_t* src, float* dst, std::size_t blocks);

// The 6-bit sub-block scales of an IQ4_XS super-block `blk`, minus 32.
void unpack_iq4_xs_scales(const std::uint8_t* blk, int* sc);

// The IQ4 part of dequantize_blocks (quantized_iq4.cpp): `blocks` blocks of IQ4_NL or IQ4_XS.
void dequantize_iq4_blocks(DType type, const std::uint8_t* src, float* dst, std::size_t blocks);

}  // namespace inferscale::tensor
