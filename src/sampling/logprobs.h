#pragma once
// Log-probabilities of a sampled token and of the most likely alternatives, from one row of raw
// logits (before temperature, top-k and top-p: the model's own distribution, as the OpenAI API
// reports it).

#include <cstdint>
#include <span>
#include <vector>

namespace inferscale::sampling {

struct TokenLogprob {
    std::int32_t token = 0;
    float logprob = 0.0f;
};

struct SampledLogprobs {
    TokenLogprob sampled;
    std::vector<TokenLogprob> top;  // the `top` most likely tokens, most likely first
};

// log softmax(logits)[token] and the `top` largest entries (ties: lower id first), with the
// normalizer summed in double.
SampledLogprobs sampled_logprobs(std::span<const float> logits, std::int32_t token, int top);

}  // namespace inferscale::sampling
