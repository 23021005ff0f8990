#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace inferscale::sampling {

Status validate(const SamplingParams& p) {
    if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
        return make_error("temperature must be a finite number >= 0");
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return make_error("top_p must be in (0, 1]");
    if (p.top_k < 0) return make_error("top_k must be >= 0");
    if (p.max_tokens < 1) return make_error("max_tokens must be >= 1");
    for (const std::string& s : p.stop)
        if (s.empty()) return make_error("stop strings must not be empty");
    if (p.logprobs < -1 || p.logprobs > kMaxTopLogprobs)
        return make_error("top logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "]");
    for (const float penalty : {p.frequency_penalty, p.presence_penalty}) {
        if (!(std::fabs(penalty) <= kMaxPenalty))
            return make_error("frequency and presence penalties must be in [-2, 2]");
    }
    for (const LogitBias& b : p.logit_bias) {
        if (b.token < 0) return make_error("logit_bias token ids must be >= 0");
        if (!(std::fabs(b.bias) <= kMaxLogitBias))
            return make_error("logit_bias values must be in [-100, 100]");
    }
    return {};
}

std::int32_t argmax(std::span<const float> logits) {
    IS_CHECK(!logits.empty());
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) -
                                      logits.begin());
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), rng_(params.seed ? *params.seed : std::random_device{}()) {}

std::span<const float> Sampler::adjusted(std::span<const float> logits,
                                         std::span<const std::uint32_t> allowed) {
    if (!params_.adjusts_logits() && allowed.empty()) return logits;
    adjusted_.assign(logits.begin(), logits.end());
    for (const LogitBias& b : params_.logit_bias) {
        IS_CHECK(static_cast<std::size_t>(b.token) < logits.size())
            << "logit_bias token " << b.token;
        adjusted_[b.token] += b.bias;
    }
    for (const std::int32_t token : generated_) {
        adjusted_[token] -= static_cast<float>(counts_[token]) * params_.frequency_penalty +
                             params_.presence_penalty;
    }
    if (!allowed.empty()) {
        IS_CHECK(allowed.size() * 32 >= logits.size()) << "allowed-token mask too short";
        bool any = false;
        for (std::size_t t = 0; t < logits.size(); ++t) {
            if ((allowed[t / 32] >> (t % 32)) & 1u) {
                any = true;
            } else {
                adjusted_[t] = -std::numeric_limits<float>::infinity();
            }
        }
        IS_CHECK(any) << "the allowed-token mask allows no token";
    }
    return adjusted_;
}

void Sampler::select_candidates(std::span<const float> logits) {
    // Tokens at -inf (outside a constrained request's allowed set) are never candidates.
    const auto vocab = static_cast<std::int32_t>(logits.size());
    candidates_.clear();
    constexpr float kExcluded = -std::numeric_limits<float>::infinity();
    for (std::int32_t i = 0; i < vocab; ++i)
        if (logits[i] != kExcluded) candidates_.emplace_back(logits[i], i);
    IS_CHECK(!candidates_.empty()) << "no token to sample";

    auto by_logit_desc = [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    std::size_t keep = candidates_.size();
    if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < keep) {
        keep = static_cast<std::size_t>(params_.top_k);
        std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(),
                          by_logit_desc);
    } else {
        std::sort(candidates_.begin(), candidates_.end(), by_logit_desc);
    }
    candidates_.resize(keep);

    // Softmax of logits / temperature over the kept set, in a numerically stable form.
    const float inv_t = 1.0f / params_.temperature;
    const float max_logit = candidates_.front().first;
    double total = 0.0;
    for (auto& c : candidates_) {
        c.first = std::exp((c.first - max_logit) * inv_t);
        total += c.first;
    }
    for (auto& c : candidates_) c.first = static_cast<float>(c.first / total);

    if (params_.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
        double mass = 0.0;
        std::size_t n = 0;
        while (n < candidates_.size()) {
            mass += candidates_[n++].first;
            if (mass >= params_.top_p) break;
        }
        candidates_.resize(n);
        for (auto& c : candidates_) c.first = static_cast<float>(c.first / mass);
    }
}

std::int32_t Sampler::sample(std::span<const float> logits,
                             std::span<const std::uint32_t> allowed) {
    const std::span<const float> row = adjusted(logits, allowed);
    std::int32_t token = 0;
    if (params_.temperature == 0.0f) {
        token = argmax(row);
    } else {
        select_candidates(row);
        std::uniform_real_distribution<double> uniform(0.0, 1.0);
        double u = uniform(rng_);
        token = candidates_.back().second;  // where rounding leaves a sliver of mass
        for (const auto& [p, id] : candidates_) {
            u -= p;
            if (u < 0.0) {
                token = id;
                break;
            }
        }
    }
    if (params_.has_penalties()) {
        counts_.resize(logits.size());
        if (counts_[token]++ == 0) generated_.push_back(token);
    }
    return token;
}

std::vector<float> Sampler::probabilities(std::span<const float> logits) {
    std::vector<float> probs(logits.size(), 0.0f);
    const std::span<const float> row = adjusted(logits, {});
    if (params_.temperature == 0.0f) {
        probs[argmax(row)] = 1.0f;
        return probs;
    }
    select_candidates(row);
    for (const auto& [p, id] : candidates_) probs[id] = p;
    return probs;
}

}  // namespace inferscale::sampling
