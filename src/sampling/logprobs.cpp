#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace inferscale::sampling {

SampledLogprobs sampled_logprobs(std::span<const float> logits, std::int32_t token, int top) {
    IS_CHECK(!logits.empty() && token >= 0 && static_cast<std::size_t>(token) < logits.size() &&
             top >= 0);
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (const float x : logits) sum += std::exp(static_cast<double>(x) - max);
    const double log_norm = max + std::log(sum);
    const auto logprob = [&](std::int32_t id) {
        return static_cast<float>(logits[static_cast<std::size_t>(id)] - log_norm);
    };
    SampledLogprobs out;
    out.sampled = {token, logprob(token)};
    // The `top` best in one pass, kept sorted by insertion: top is at most 20, the vocab ~100K,
    // so this beats sorting an index of the whole vocabulary (and allocates no such index).
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(top), logits.size());
    const auto before = [&](std::int32_t a, std::int32_t b) {
        const float la = logits[static_cast<std::size_t>(a)];
        const float lb = logits[static_cast<std::size_t>(b)];
        return la > lb || (la == lb && a < b);
    };
    std::vector<std::int32_t> best;
    best.reserve(n + 1);
    for (std::size_t i = 0; i < logits.size() && n > 0; ++i) {
        const auto id = static_cast<std::int32_t>(i);
        if (best.size() == n && !before(id, best.back())) continue;
        best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
        if (best.size() > n) best.pop_back();
    }
    for (const std::int32_t id : best) out.top.push_back({id, logprob(id)});
    return out;
}

}  // namespace inferscale::sampling
