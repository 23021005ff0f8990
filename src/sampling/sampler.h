#pragma once
// Sampler: picks the next token from one row of f32 logits. One Sampler per request: it owns the
// request's random stream, so a fixed seed gives the same tokens whatever else is batched.
// Scratch space is reused across calls; no allocation after the first call for a vocabulary.

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "sampling/sampling_params.h"

namespace inferscale::sampling {

class Sampler {
  public:
    explicit Sampler(const SamplingParams& params);

    std::int32_t sample(std::span<const float> logits);

    // The probability each token would be drawn with (after temperature, top-k and top-p);
    // zero outside the kept set. For tests and logprobs. Greedy puts all mass on the argmax.
    std::vector<float> probabilities(std::span<const float> logits);

  private:
    // Fills candidates_ with the kept (token, probability) pairs, most probable first.
    void select_candidates(std::span<const float> logits);

    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, std::int32_t>> candidates_;
};

std::int32_t argmax(std::span<const float> logits);

}  // namespace inferscale::sampling
