#pragma once
// Rotary position embedding parameters and tables, computed exactly as transformers does
// (rotate_half convention; "llama3" scaling folded into the inverse frequencies like
// `_compute_llama3_parameters`, or a GGUF's per-pair frequency factors as llama.cpp applies
// them), in f32 so positions rotate identically to the reference.

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace inferscale::model {

// Plain values, so components that cannot include the model (inject) can hold a copy.
struct RopeParams {
    float theta = 10000.0f;
    std::int64_t head_dim = 0;
    RopeScaling scaling;  // factor 0: none
    // [head_dim / 2] f32 divisors of each pair's frequency (GGUF rope_freqs.weight); empty: none.
    // A GGUF's form of llama3 scaling, so never together with `scaling`.
    std::vector<float> freq_factors;
    // Angles as llama.cpp's CPU backend forms them (GGUF models, whose reference is llama.cpp):
    // theta_i = pos * s^i by repeated f32 multiplication, s = powf(theta, -2 / head_dim), then
    // divided by freq_factors[i]. Only without `scaling`, which GGUF files do not carry.
    bool ggml_angles = false;
};

RopeParams rope_params(const ModelConfig& config);

// inv_freq[i] = theta^(-2i / head_dim), then llama3-scaled or divided by freq_factors[i]:
// [head_dim / 2] f32.
std::vector<float> rope_inv_freq(const RopeParams& params);

// Host tables of cos/sin(pos * inv_freq[i]) (or the ggml angles) for pos < max_positions.
struct HostRopeTables {
    std::int64_t max_positions = 0;
    std::int64_t half_dim = 0;
    std::vector<float> cos;  // [max_positions, head_dim / 2] f32
    std::vector<float> sin;  // [max_positions, head_dim / 2] f32
};

HostRopeTables make_rope_tables(const RopeParams& params, std::int64_t max_positions);

}  // namespace inferscale::model
