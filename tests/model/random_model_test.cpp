// Random-weight models (the benchmarks' 8B shapes start here): fill_random's values follow
// U(offset +- scale), depend only on the seed, and a random model runs to finite, repeatable
// logits.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "model/hf_config.h"
#include "model/llama_model.h"

namespace inferscale::model {
namespace {

using tensor::DType;

std::vector<float> fill(backends::cpu::CpuBackend& be, std::uint64_t seed, float scale,
                        float offset, std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    be.fill_random(tensor::Tensor(v.data(), DType::F32, {n}), seed, scale, offset);
    return v;
}

TEST(FillRandom, UniformMomentsAndRange) {
    backends::cpu::CpuBackend be;
    const std::int64_t n = 1 << 20;
    const auto v = fill(be, 42, 0.5f, 2.0f, n);
    double sum = 0, sq = 0;
    for (float x : v) {
        ASSERT_GE(x, 1.5f);
        ASSERT_LT(x, 2.5f);
        sum += x;
        sq += (x - 2.0) * (x - 2.0);
    }
    // Mean 2, variance 0.25 / 3; n = 2^20 puts 5 standard errors well inside these bounds.
    EXPECT_NEAR(sum / n, 2.0, 5 * 0.5 / std::sqrt(3.0 * n));
    EXPECT_NEAR(sq / n, 0.25 / 3, 0.002);
}

TEST(FillRandom, DependsOnlyOnSeed) {
    backends::cpu::CpuBackend be;
    EXPECT_EQ(fill(be, 7, 1.0f, 0.0f, 4096), fill(be, 7, 1.0f, 0.0f, 4096));
    EXPECT_NE(fill(be, 7, 1.0f, 0.0f, 4096), fill(be, 8, 1.0f, 0.0f, 4096));
    // A prefix of a longer fill is the shorter fill: element i depends on (seed, i) alone.
    auto longer = fill(be, 9, 1.0f, 0.0f, 1000);
    longer.resize(10);
    EXPECT_EQ(longer, fill(be, 9, 1.0f, 0.0f, 10));
}

TEST(FillRandom, Bf16IsTheRoundedF32Fill) {
    backends::cpu::CpuBackend be;
    const auto f = fill(be, 3, 0.25f, -1.0f, 1024);
    std::vector<std::uint16_t> b(1024);
    be.fill_random(tensor::Tensor(b.data(), DType::BF16, {1024}), 3, 0.25f, -1.0f);
    for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], tensor::f32_to_bf16(f[i])) << i;
}

std::vector<float> random_model_logits(std::uint64_t seed) {
    const char* fixtures = std::getenv("INFERSCALE_FIXTURES");
    auto cfg = load_hf_config(std::string(fixtures ? fixtures : "tests/fixtures") +
                              "/golden/qwen2/config.json");
    EXPECT_TRUE(cfg.ok()) << (cfg.ok() ? "" : cfg.error().message);
    backends::cpu::CpuBackend be;
    auto model = LlamaModel::create_random(be, cfg->config, seed);
    EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
    auto kv = kv::KvStorage::create(be, model->kv_layout(8, 16));
    auto ws = model->create_workspace(WorkspaceLimits{});
    std::vector<std::int32_t> ids(40), pos(40), pages{0, 1, 2};
    std::iota(pos.begin(), pos.end(), 0);
    for (int i = 0; i < 40; ++i) ids[i] = (i * 37) % static_cast<int>(cfg->config.vocab_size);
    BatchSequence seq{40, 40, pages};
    ForwardBatch batch{ids, pos, {&seq, 1}};
    std::vector<float> logits(static_cast<std::size_t>(cfg->config.vocab_size));
    auto st = model->forward(batch, *kv, *ws, logits);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    return logits;
}

TEST(RandomModel, FiniteAndRepeatable) {
    const auto a = random_model_logits(1);
    for (float x : a) ASSERT_TRUE(std::isfinite(x));
    EXPECT_EQ(a, random_model_logits(1));
    EXPECT_NE(a, random_model_logits(2));
}

}  // namespace
}  // namespace inferscale::model
