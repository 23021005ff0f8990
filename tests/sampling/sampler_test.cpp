#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"

namespace inferscale::sampling {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, -2.0f, 2.5f, 0.0f, 2.9f, -1.0f, 1.5f};

// Reference distribution written straight from the definitions, in double precision.
std::vector<double> reference(const std::vector<float>& logits, double t, int top_k, double top_p) {
    std::vector<int> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    if (top_k > 0) order.resize(top_k);
    std::vector<double> p(logits.size(), 0.0);
    double z = 0;
    for (int i : order) z += std::exp(logits[i] / t);
    for (int i : order) p[i] = std::exp(logits[i] / t) / z;
    double mass = 0;
    size_t n = 0;
    while (n < order.size() && mass < top_p) mass += p[order[n++]];
    std::vector<double> out(logits.size(), 0.0);
    for (size_t j = 0; j < n; ++j) out[order[j]] = p[order[j]] / mass;
    return out;
}

TEST(Sampler, GreedyIsArgmax) {
    Sampler s(SamplingParams{});
    EXPECT_EQ(s.sample(kLogits), 1);
}

TEST(Sampler, ProbabilitiesMatchDefinition) {
    struct Case { float t; int k; float p; };
    for (Case c : {Case{1.0f, 0, 1.0f}, Case{0.5f, 0, 1.0f}, Case{1.3f, 3, 1.0f},
                   Case{1.0f, 0, 0.7f}, Case{0.8f, 5, 0.9f}}) {
        SamplingParams params;
        params.temperature = c.t;
        params.top_k = c.k;
        params.top_p = c.p;
        Sampler s(params);
        auto got = s.probabilities(kLogits);
        auto want = reference(kLogits, c.t, c.k, c.p);
        for (size_t i = 0; i < kLogits.size(); ++i)
            EXPECT_NEAR(got[i], want[i], 1e-6) << "t=" << c.t << " k=" << c.k << " p=" << c.p;
    }
}

TEST(Sampler, DrawFrequenciesFollowProbabilities) {
    SamplingParams params;
    params.temperature = 0.9f;
    params.top_p = 0.95f;
    params.seed = 7;
    Sampler s(params);
    const auto want = reference(kLogits, 0.9, 0, 0.95);
    const int n = 40000;
    std::vector<int> counts(kLogits.size(), 0);
    for (int i = 0; i < n; ++i) ++counts[s.sample(kLogits)];
    double chi2 = 0;
    int dof = -1;
    for (size_t i = 0; i < counts.size(); ++i) {
        if (want[i] == 0) {
            EXPECT_EQ(counts[i], 0) << "token outside the nucleus was drawn";
            continue;
        }
        const double e = want[i] * n;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
        ++dof;
    }
    EXPECT_LT(chi2, 25.0) << "dof " << dof;  // p < 0.001 for dof <= 7
}

TEST(Sampler, SeedIsReproducible) {
    SamplingParams params;
    params.temperature = 1.0f;
    params.seed = 1234;
    Sampler a(params), b(params);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(a.sample(kLogits), b.sample(kLogits));
}

// The penalized logits of `logits` after the tokens in `generated`, from the definition (OpenAI's
// frequency and presence penalties over the generated tokens), in f32 as logit - (count *
// frequency + presence): greedy ties are decided by the last bit.
std::vector<float> penalized_reference(const std::vector<float>& logits,
                                       const std::vector<int>& generated, float frequency,
                                       float presence) {
    std::vector<int> counts(logits.size(), 0);
    for (int t : generated) ++counts[t];
    std::vector<float> out(logits.begin(), logits.end());
    for (size_t i = 0; i < logits.size(); ++i) {
        if (counts[i] > 0) out[i] -= static_cast<float>(counts[i]) * frequency + presence;
    }
    return out;
}

TEST(Sampler, PenaltiesFollowTheDefinition) {
    struct Case { float frequency, presence, t; };
    for (Case c : {Case{0.5f, 0.0f, 0.0f}, Case{0.0f, 0.7f, 0.0f}, Case{0.3f, 0.4f, 0.0f},
                   Case{-0.5f, 0.0f, 0.0f}, Case{0.6f, 0.2f, 0.8f}, Case{2.0f, 2.0f, 1.2f}}) {
        SamplingParams params;
        params.frequency_penalty = c.frequency;
        params.presence_penalty = c.presence;
        params.temperature = c.t;
        params.seed = 7;
        Sampler s(params);
        std::vector<int> generated;
        for (int step = 0; step < 24; ++step) {
            const std::vector<float> want =
                penalized_reference(kLogits, generated, c.frequency, c.presence);
            // Greedy: the argmax of the penalized logits; sampled: their distribution.
            const std::vector<float> got = s.probabilities(kLogits);
            const std::vector<double> ref =
                c.t == 0.0f ? std::vector<double>{} : reference(want, c.t, 0, 1.0);
            for (size_t i = 0; i < kLogits.size(); ++i) {
                const double expected =
                    c.t == 0.0f ? (static_cast<int>(i) == argmax(want) ? 1.0 : 0.0) : ref[i];
                ASSERT_NEAR(got[i], expected, 1e-5) << "step " << step << " token " << i;
            }
            const int token = s.sample(kLogits);
            if (c.t == 0.0f) {
                ASSERT_EQ(token, argmax(want)) << "step " << step;
            }
            generated.push_back(token);
        }
        // A repeat-discouraging penalty spreads the picks; a negative one keeps the first.
        const std::vector<int> distinct = [&] {
            std::vector<int> d = generated;
            std::sort(d.begin(), d.end());
            d.erase(std::unique(d.begin(), d.end()), d.end());
            return d;
        }();
        if (c.t == 0.0f) {
            EXPECT_EQ(distinct.size() > 1, c.frequency + c.presence > 0.0f);
        }
    }
}

TEST(Sampler, NoPenaltyKeepsTheModelsArgmax) {
    SamplingParams params;  // greedy, no penalties: the same token every step
    Sampler s(params);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(kLogits), 1);
}

TEST(Sampler, LogitBiasIsAddedToTheLogits) {
    // Greedy: -100 on the argmax hands the pick to the runner-up; +100 on any token wins.
    SamplingParams params;
    params.logit_bias = {{1, -100.0f}};
    std::vector<float> biased = kLogits;
    biased[1] -= 100.0f;
    EXPECT_EQ(Sampler(params).sample(kLogits), argmax(biased));
    params.logit_bias = {{6, 100.0f}};
    EXPECT_EQ(Sampler(params).sample(kLogits), 6);
    // Sampled: the distribution of the biased logits.
    params.temperature = 0.9f;
    params.logit_bias = {{0, 1.5f}, {5, -0.7f}};
    biased = kLogits;
    biased[0] += 1.5f;
    biased[5] -= 0.7f;
    const std::vector<float> got = Sampler(params).probabilities(kLogits);
    const std::vector<double> want = reference(biased, 0.9, 0, 1.0);
    for (size_t i = 0; i < kLogits.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(SamplingParams, RejectsOutOfRange) {
    SamplingParams p;
    p.top_p = 0.0f;
    EXPECT_FALSE(validate(p).ok());
    p = {};
    p.temperature = -1.0f;
    EXPECT_FALSE(validate(p).ok());
    p = {};
    p.max_tokens = 0;
    EXPECT_FALSE(validate(p).ok());
    p = {};
    p.stop = {""};
    EXPECT_FALSE(validate(p).ok());
    p = {};
    p.frequency_penalty = 2.5f;
    EXPECT_FALSE(validate(p).ok());
    p = {};
    p.presence_penalty = -2.01f;
    EXPECT_FALSE(validate(p).ok());
    p = {};
    p.presence_penalty = std::nanf("");
    EXPECT_FALSE(validate(p).ok());
    p = {};
    p.logit_bias = {{3, 100.5f}};
    EXPECT_FALSE(validate(p).ok());
    p = {};
    p.logit_bias = {{-1, 1.0f}};
    EXPECT_FALSE(validate(p).ok());
    p = {};
    p.frequency_penalty = -2.0f;
    p.presence_penalty = 2.0f;
    p.logit_bias = {{3, -100.0f}, {4, 100.0f}};
    EXPECT_TRUE(validate(p).ok());
    EXPECT_TRUE(validate(SamplingParams{}).ok());
}

TEST(StopMatcher, HoldsBackPartialStopAndCutsAtMatch) {
    StopMatcher m({"</end>", "STOP"});
    std::string out;
    out += m.push("Hello </e");
    EXPECT_EQ(out, "Hello ");
    out += m.push("nx and S");
    EXPECT_EQ(out, "Hello </enx and ");
    out += m.push("TOP more");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(out, "Hello </enx and ");
    EXPECT_EQ(m.push("ignored"), "");
}

TEST(StopMatcher, FlushReturnsHeldText) {
    StopMatcher m({"abc"});
    EXPECT_EQ(m.push("xxab"), "xx");
    EXPECT_FALSE(m.stopped());
    EXPECT_EQ(m.flush(), "ab");
}

// Logits log(0.1), log(0.2), log(0.3), log(0.4) plus a constant: the log-probabilities are
// exactly those logs; the top list is most likely first, equal logits by lower id.
TEST(Logprobs, LogSoftmaxOfKnownDistribution) {
    const std::vector<float> logits{std::log(0.1f) + 7.0f, std::log(0.2f) + 7.0f,
                                    std::log(0.3f) + 7.0f, std::log(0.4f) + 7.0f};
    const SampledLogprobs lp = sampled_logprobs(logits, 2, 2);
    EXPECT_EQ(lp.sampled.token, 2);
    EXPECT_NEAR(lp.sampled.logprob, std::log(0.3), 1e-6);
    ASSERT_EQ(lp.top.size(), 2u);
    EXPECT_EQ(lp.top[0].token, 3);
    EXPECT_NEAR(lp.top[0].logprob, std::log(0.4), 1e-6);
    EXPECT_EQ(lp.top[1].token, 2);
    EXPECT_TRUE(sampled_logprobs(logits, 0, 0).top.empty());
    EXPECT_EQ(sampled_logprobs(logits, 0, 10).top.size(), 4u);
    const std::vector<float> tied{1.0f, 3.0f, 3.0f, 0.0f};
    const SampledLogprobs t = sampled_logprobs(tied, 1, 2);
    EXPECT_EQ(t.top[0].token, 1);
    EXPECT_EQ(t.top[1].token, 2);
    EXPECT_FLOAT_EQ(t.top[0].logprob, t.top[1].logprob);
}

TEST(Logprobs, TopEqualsAFullSortWithTies) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> level(0, 40);  // few distinct values: many ties
    std::vector<float> logits(5000);
    for (float& x : logits) x = 0.25f * static_cast<float>(level(rng));
    std::vector<std::int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
        return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
    });
    for (const int top : {1, 5, 20}) {
        const SampledLogprobs lp = sampled_logprobs(logits, 17, top);
        ASSERT_EQ(lp.top.size(), static_cast<std::size_t>(top));
        for (std::size_t i = 0; i < lp.top.size(); ++i) EXPECT_EQ(lp.top[i].token, order[i]) << i;
    }
}

// Constrained decoding: only allowed tokens are drawn, with the model's probabilities
// renormalized over them (top-k then counts allowed tokens only); greedy takes the best allowed.
TEST(Sampler, AllowedTokensMaskRestrictsTheDraw) {
    const std::vector<std::uint32_t> allowed{(1u << 0) | (1u << 3) | (1u << 5)};
    SamplingParams params;
    std::vector<float> only(kLogits.size(), -1e30f);
    for (int t : {0, 3, 5}) only[t] = kLogits[t];
    const int best = argmax(only);
    EXPECT_EQ(Sampler(params).sample(kLogits, allowed), best);

    params.temperature = 1.0f;
    params.seed = 11;
    Sampler s(params);
    const int draws = 20000;
    std::vector<int> counts(kLogits.size(), 0);
    for (int i = 0; i < draws; ++i) ++counts[s.sample(kLogits, allowed)];
    double total = 0;
    for (int t : {0, 3, 5}) total += std::exp(kLogits[t]);
    for (size_t t = 0; t < kLogits.size(); ++t) {
        const bool ok = t == 0 || t == 3 || t == 5;
        const double want = ok ? std::exp(kLogits[t]) / total : 0.0;
        EXPECT_NEAR(counts[t] / double(draws), want, 0.015) << "token " << t;
    }
}

}  // namespace
}  // namespace inferscale::sampling
