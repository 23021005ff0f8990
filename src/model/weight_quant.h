#pragma once
// Which ggml block type each weight of a random benchmark model takes: llama.cpp's file mixes
// at real shapes without a file. Q4_K_M as llama.cpp's quantizer assigns it to a Llama: Q6_K
// for the output matrix and, in the layers use_more_bits picks (the first and last eighth and
// every third between), for v and down; Q4_K for every other matrix and the embedding table.

#include <cstdint>
#include <string_view>

#include "base/result.h"
#include "tensor/dtype.h"

namespace inferscale::model {

enum class WeightQuant { None, Q4_K_M };
enum class WeightRole { Embedding, Output, Query, Key, Value, AttentionOutput, Gate, Up, Down };

// "" or "none", and "q4_k_m" (case-insensitive); an Error names the value and the choices.
Result<WeightQuant> parse_weight_quant(std::string_view name);

// The dtype of a weight of `role` in layer `layer` of `num_layers` (ignored for the embedding
// and the output); `dense` when quant is None.
tensor::DType quantized_weight_dtype(WeightQuant quant, WeightRole role, std::int64_t layer,
                                     std::int64_t num_layers, tensor::DType dense);

}  // namespace inferscale::model
