#pragma once
// ggml tensor types: their block geometry, and conversion to f32 for the types we load
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS).
// Dequantization is the exact f32 arithmetic of the reference (gguf-py's quants.py), so results
// match it bit for bit; the block formats themselves live in tensor/quantized.h.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "tensor/dtype.h"

namespace inferscale::model {

enum class GgmlType : std::uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, IQ4_NL = 20, IQ4_XS = 23, BF16 = 30,
};

struct GgmlTypeSize {
    std::uint64_t block_elems = 0;  // elements per block (1 for plain types)
    std::uint64_t block_bytes = 0;  // bytes per block
};

// The block geometry of any ggml type id we know the layout of (including types we cannot
// dequantize, so their files still parse); block_elems == 0 for an unknown id.
GgmlTypeSize ggml_type_size(std::uint32_t type);
// "Q4_K", "F16", ... or "type <id>" for unknown ids.
std::string ggml_type_name(std::uint32_t type);
// Whether dequantize_to_f32 handles `type`.
bool ggml_type_supported(std::uint32_t type);

// The DType of a block-quantized ggml type we can keep in block form (every supported Q type).
std::optional<tensor::DType> block_dtype(std::uint32_t type);

// Converts `n` elements of a supported type at `src` to f32 at `dst`. `n` must be a multiple
// of the block size; `src` needs no alignment.
void dequantize_to_f32(std::uint32_t type, const std::uint8_t* src, float* dst, std::size_t n);

}  // namespace inferscale::model
