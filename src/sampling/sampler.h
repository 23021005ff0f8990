#pragma once
// Sampler: picks the next token from one row of f32 logits. One Sampler per request: it owns the
// request's random stream, so a fixed seed gives the same tokens whatever else is batched, and
// counts the tokens it has picked for the frequency and presence penalties. Scratch space is
// reused across calls; no allocation after the first call for a vocabulary.

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

    // The next token; it counts as generated for the penalties of later calls. `allowed`
    // (constrained decoding; empty: every token): a bitmask over the vocabulary, token t
    // allowed iff bit t % 32 of allowed[t / 32] is set; it must allow at least one token.
    std::int32_t sample(std::span<const float> logits,
                        std::span<const std::uint32_t> allowed = {});

    // The probability each token would be drawn with next (after the logit bias, penalties,
    // temperature, top-k and top-p); zero outside the kept set. For tests. Greedy puts all mass
    // on the argmax.
    std::vector<float> probabilities(std::span<const float> logits);

  private:
    // logits, or with the logit bias and penalties the request asks for applied to a copy, and
    // tokens outside `allowed` (when not empty) set to -inf.
    std::span<const float> adjusted(std::span<const float> logits,
                                    std::span<const std::uint32_t> allowed);
    // Fills candidates_ with the kept (token, probability) pairs, most probable first.
    void select_candidates(std::span<const float> logits);

    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<std::pair<float, std::int32_t>> candidates_;
    // With penalties: how often each token was generated, the tokens generated at least once
    // (in first-generated order); the adjusted copy of a row of logits.
    std::vector<std::int32_t> counts_;
    std::vector<std::int32_t> generated_;
    std::vector<float> adjusted_;
};

std::int32_t argmax(std::span<const float> logits);

}  // namespace inferscale::sampling
