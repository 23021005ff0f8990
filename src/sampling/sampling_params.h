#pragma once
// SamplingParams: how one request picks its next tokens and when it stops.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace inferscale::sampling {

struct SamplingParams {
    float temperature = 0.0f;  // 0 means greedy (argmax)
    std::int32_t top_k = 0;    // 0 means no top-k cut
    float top_p = 1.0f;        // 1 means no nucleus cut
    std::optional<std::uint64_t> seed;  // unset: a random seed per request
    std::int32_t max_tokens = 256;
    std::vector<std::string> stop;  // stop strings; the match itself is not returned
    bool ignore_eos = false;
    // -1: none. 0..kMaxTopLogprobs: each sampled token's log-probability and this many most
    // likely alternatives.
    std::int32_t logprobs = -1;
};

inline constexpr std::int32_t kMaxTopLogprobs = 20;

// An Error naming the first out-of-range field (negative temperature, top_p outside (0, 1],
// negative top_k, max_tokens < 1, empty stop string, logprobs outside -1..kMaxTopLogprobs).
Status validate(const SamplingParams& params);

}  // namespace inferscale::sampling
