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
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(top), logits.size());
    std::vector<std::int32_t> ids(logits.size());
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](std::int32_t a, std::int32_t b) {
                          const float la = logits[static_cast<std::size_t>(a)];
                          const float lb = logits[static_cast<std::size_t>(b)];
                          return la > lb || (la == lb && a < b);
                      });
    for (std::size_t i = 0; i < n; ++i) out.top.push_back({ids[i], logprob(ids[i])});
    return out;
}

}  // namespace inferscale::sampling
