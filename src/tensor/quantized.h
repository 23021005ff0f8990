#pragma once
// ggml's 32-element block formats, their dequantization, and the activation quantizers ggml's
// CPU backend runs before a matmul with a block-quantized weight. Blocks are packed and
// little-endian, with fp16 scales; pointers need no alignment (GGUF data is only 32-byte
// aligned per tensor, and 34-byte Q8_0 blocks leave every other row misaligned anyway).
//
//   Q8_0  [d f16][32 x i8]               34 bytes  x = q * d
//   Q4_0  [d f16][16 x u8 nibbles]       18 bytes  x = (nibble - 8) * d
//   Q4_1  [d f16][m f16][16 x nibbles]   20 bytes  x = nibble * d + m
//   Q8_1  [d f16][s f16][32 x i8]        36 bytes  activations only: s = d * sum(q)
// Nibble byte j holds element j (low half) and element j + 16 (high half).

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace inferscale::tensor {

constexpr std::int64_t kQuantBlock = 32;     // elements per block of every type here
constexpr std::size_t kQ8_1BlockBytes = 36;  // activation-only type; not a DType

// Dequantizes `n` elements (a multiple of 32) of a block type at `src` into f32 `dst`, with the
// f32 arithmetic of the reference (gguf-py's quants.py, ggml's dequantize_row_*): bit-exact.
void dequantize_blocks(DType type, const void* src, float* dst, std::size_t n);

// Quantizes `n` f32 values (a multiple of 32) into Q8_0 blocks at `dst`, exactly as ggml's
// AVX2 quantize_row_q8_0 does (what llama.cpp runs on x86): amax per block, d = amax / 127
// stored as f16, q = round-half-even(x * (127 / amax)). ggml's scalar reference (and gguf-py)
// multiply by 1 / d and round half away from zero instead; the two differ only at exact ties
// and in rare last-ulp cases of the multiplier.
void quantize_row_q8_0(const float* x, void* dst, std::int64_t n);
// The same quants and d as quantize_row_q8_0, plus s = f16(d * sum(q)) (ggml's Q8_1, the
// activation type dotted with Q4_1 weights).
void quantize_row_q8_1(const float* x, void* dst, std::int64_t n);

}  // namespace inferscale::tensor
