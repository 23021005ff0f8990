#pragma once
// SamplingParams: how one request picks its next tokens and when it stops.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace inferscale::sampling {

// OpenAI's logit_bias entry: `bias` is added to the token's logit before anything else.
struct LogitBias {
    std::int32_t token = 0;
    float bias = 0.0f;
};

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
    // OpenAI's penalties, over the tokens this request has generated so far (as vLLM counts
    // them; the prompt's tokens do not count): a token's logit loses frequency_penalty for each
    // time it was generated and presence_penalty once if it was at all, before temperature,
    // top-k and top-p (greedy takes the argmax of the penalized logits). In [-kMaxPenalty,
    // kMaxPenalty]; negative values favour repeats.
    float frequency_penalty = 0.0f;
    float presence_penalty = 0.0f;
    // Added to the logits before the penalties, temperature, top-k and top-p (greedy takes
    // the argmax of the biased logits); each bias in [-kMaxLogitBias, kMaxLogitBias]. Log-
    // probabilities stay the model's own.
    std::vector<LogitBias> logit_bias;

    bool has_penalties() const { return frequency_penalty != 0.0f || presence_penalty != 0.0f; }
    // The logits are changed before sampling: the row must come to the host.
    bool adjusts_logits() const { return has_penalties() || !logit_bias.empty(); }
};

inline constexpr std::int32_t kMaxTopLogprobs = 20;
inline constexpr float kMaxPenalty = 2.0f;
inline constexpr float kMaxLogitBias = 100.0f;

// An Error naming the first out-of-range field (negative temperature, top_p outside (0, 1],
// negative top_k, max_tokens < 1, empty stop string, logprobs outside -1..kMaxTopLogprobs, a
// penalty outside [-kMaxPenalty, kMaxPenalty], a negative logit_bias token or a bias outside
// [-kMaxLogitBias, kMaxLogitBias]).
Status validate(const SamplingParams& params);

}  // namespace inferscale::sampling
