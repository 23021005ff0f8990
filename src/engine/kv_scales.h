#pragma once
// FP8 KV scales: one for K and one for V per (layer, KV head), measured once at load by a
// forward over a fixed calibration text. K's scale bounds its rotary pairs' norms, so a key
// rounds the same way before RoPE (memory chunks) and after it at any position (the cache);
// V's bounds its values. Both keep a margin of kScaleMargin for tokens beyond the text's range,
// and values past it saturate at 448 * scale.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace inferscale::engine {

class LocalModel;

inline constexpr float kScaleMargin = 2.0f;

// Per layer, K scales then V scales ([num_layers][2][num_kv_heads], KvStorage::set_scales'
// order) from captured pre-RoPE K and V rows [num_layers][rows][num_kv_heads][head_dim] f32.
std::vector<float> kv_scales_from_rows(std::span<const float> k, std::span<const float> v,
                                       std::int64_t num_layers, std::int64_t rows,
                                       std::int64_t num_kv_heads, std::int64_t head_dim);

// Runs the calibration text through `lm` (its KV cache must be FP8) and sets the cache's
// scales. An Error when the forward fails or the KV cache has too few free blocks.
Status calibrate_kv_scales(LocalModel& lm);

// A short stable name for a set of scales (part of memory chunk identities).
std::string kv_scales_digest(std::span<const float> scales);

}  // namespace inferscale::engine
