#include "model/weight_quant.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace inferscale::model {
namespace {

// llama.cpp's use_more_bits(i, n).
bool more_bits(std::int64_t i, std::int64_t n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

}  // namespace

Result<WeightQuant> parse_weight_quant(std::string_view name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower.empty() || lower == "none") return WeightQuant::None;
    if (lower == "q4_k_m") return WeightQuant::Q4_K_M;
    return make_error("unknown weight quantization '" + std::string(name) +
                      "' (choices: none, q4_k_m)");
}

tensor::DType quantized_weight_dtype(WeightQuant quant, WeightRole role, std::int64_t layer,
                                     std::int64_t num_layers, tensor::DType dense) {
    if (quant == WeightQuant::None) return dense;
    switch (role) {
        case WeightRole::Output: return tensor::DType::Q6_K;
        case WeightRole::Value:
        case WeightRole::Down:
            return more_bits(layer, num_layers) ? tensor::DType::Q6_K : tensor::DType::Q4_K;
        default: return tensor::DType::Q4_K;
    }
}

}  // namespace inferscale::model
