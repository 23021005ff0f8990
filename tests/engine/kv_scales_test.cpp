// FP8 KV scales. From rows: a key rotated by any angle stays within 448 / kScaleMargin of its
// head's K scale, with the largest rotary pair at that bound, and V likewise. Calibrated on the
// bundled SmolLM2-135M-Instruct (CPU; skipped when models/ lacks it): every scale positive and
// finite, the same at every load, part of the chunk identity, and the FP8 cache's next-token
// logits close to the f32 cache's (same top token, correlation above 0.99).

#include "engine/kv_scales.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "engine/local_model.h"

namespace inferscale::engine {
namespace {

TEST(KvScales, RotatedKeysAndValuesStayInRange) {
    constexpr std::int64_t kLayers = 2, kRows = 5, kHeads = 3, kDim = 8, kHalf = kDim / 2;
    std::mt19937 rng(4);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    std::vector<float> k(kLayers * kRows * kHeads * kDim), v(k.size());
    for (float& x : k) x = dist(rng);
    for (float& x : v) x = dist(rng) * 0.1f;
    const std::vector<float> scales = kv_scales_from_rows(k, v, kLayers, kRows, kHeads, kDim);
    ASSERT_EQ(scales.size(), static_cast<std::size_t>(kLayers * 2 * kHeads));
    const float bound = 448.0f / kScaleMargin;
    std::uniform_real_distribution<float> angle(0.0f, 6.2831853f);
    for (std::int64_t l = 0; l < kLayers; ++l)
        for (std::int64_t h = 0; h < kHeads; ++h) {
            const float ks = scales[(l * 2) * kHeads + h], vs = scales[(l * 2 + 1) * kHeads + h];
            float largest_pair = 0.0f, largest_v = 0.0f;
            for (std::int64_t r = 0; r < kRows; ++r) {
                const float* kr = &k[((l * kRows + r) * kHeads + h) * kDim];
                const float* vr = &v[((l * kRows + r) * kHeads + h) * kDim];
                for (std::int64_t i = 0; i < kHalf; ++i) {
                    largest_pair = std::max(largest_pair, std::hypot(kr[i], kr[i + kHalf]));
                    for (int trial = 0; trial < 16; ++trial) {
                        const float a = angle(rng);
                        const float x = kr[i] * std::cos(a) - kr[i + kHalf] * std::sin(a);
                        EXPECT_LE(std::abs(x) / ks, bound * (1 + 1e-6f));
                    }
                }
                for (std::int64_t i = 0; i < kDim; ++i)
                    largest_v = std::max(largest_v, std::abs(vr[i]));
            }
            EXPECT_NEAR(largest_pair / ks, bound, bound * 1e-6f);
            EXPECT_NEAR(largest_v / vs, bound, bound * 1e-6f);
        }
}

std::string model_path() {
    const char* env = std::getenv("INFERSCALE_MODELS");
    return std::string(env != nullptr ? env : "models") + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::unique_ptr<LocalModel> load(std::optional<tensor::DType> kv_dtype) {
    LocalModelOptions o;
    o.model_path = model_path();
    o.num_threads = 2;
    o.max_context = 512;
    o.kv_tokens = 1024;
    o.kv_cache_dtype = kv_dtype;
    auto lm = LocalModel::load(o);
    IS_CHECK(lm.ok()) << lm.error().message;
    return std::move(lm).value();
}

std::vector<float> next_token_logits(LocalModel& lm, const std::vector<std::int32_t>& tokens) {
    std::vector<kv::BlockId> blocks;
    const auto n = static_cast<std::int32_t>(tokens.size());
    IS_CHECK(lm.blocks().allocate((n + 15) / 16, blocks));
    std::vector<std::int32_t> positions(tokens.size());
    std::iota(positions.begin(), positions.end(), 0);
    const model::BatchSequence seq{n, n, blocks};
    model::ForwardBatch batch;
    batch.token_ids = tokens;
    batch.positions = positions;
    batch.sequences = {&seq, 1};
    std::vector<float> logits(static_cast<std::size_t>(lm.config().vocab_size));
    IS_CHECK(lm.model().forward(batch, lm.kv(), lm.workspace(), logits).ok());
    lm.blocks().release(blocks);
    return logits;
}

TEST(KvScales, CalibratedCacheKeepsTheModelsNextToken) {
    if (!std::filesystem::exists(model_path())) GTEST_SKIP() << "run scripts/setup.sh first";
    auto fp8 = load(tensor::DType::F8_E4M3);
    auto again = load(tensor::DType::F8_E4M3);
    auto f32 = load(std::nullopt);
    ASSERT_TRUE(fp8->kv().fp8());
    for (float s : fp8->kv().scales()) EXPECT_TRUE(std::isfinite(s) && s > 0.0f) << s;
    EXPECT_EQ(fp8->kv().scales(), again->kv().scales());
    EXPECT_EQ(fp8->kv_identity(), again->kv_identity());
    EXPECT_NE(fp8->kv_identity(), f32->kv_identity());
    EXPECT_EQ(f32->kv_identity(), f32->model_name());

    for (const char* prompt : {"The capital of France is", "def fibonacci(n):\n    \"\"\"",
                               "My sister Ana lives in Lisbon with her two cats. She"}) {
        const std::vector<std::int32_t> tokens = f32->tokenizer().encode(prompt);
        const std::vector<float> a = next_token_logits(*f32, tokens);
        const std::vector<float> b = next_token_logits(*fp8, tokens);
        EXPECT_EQ(std::max_element(a.begin(), a.end()) - a.begin(),
                  std::max_element(b.begin(), b.end()) - b.begin())
            << prompt;
        const double mean_a = std::accumulate(a.begin(), a.end(), 0.0) / a.size();
        const double mean_b = std::accumulate(b.begin(), b.end(), 0.0) / b.size();
        double ab = 0, aa = 0, bb = 0;
        for (std::size_t i = 0; i < a.size(); ++i) {
            ab += (a[i] - mean_a) * (b[i] - mean_b);
            aa += (a[i] - mean_a) * (a[i] - mean_a);
            bb += (b[i] - mean_b) * (b[i] - mean_b);
        }
        EXPECT_GT(ab / std::sqrt(aa * bb), 0.99) << prompt;
    }
}

}  // namespace
}  // namespace inferscale::engine
