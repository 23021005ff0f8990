// A Llama 3.1-style GGUF, whose rope_freqs.weight carries "llama3" rope scaling as one frequency
// divisor per rotary pair, against references made by tools/make_loader_fixtures.py
// (tiny_llama31.gguf, tiny_llama31_expected.json): the factors the converter derives from a
// llama3 rope_scaling equal our HF-path llama3 scaling; the f32 path matches a float64 numpy
// forward with angle pos * theta^(-2i/d) / factor_i; the ggml path (Q8_0 blocks kept) matches
// llama.cpp's own logits of the file. Both are far from the logits without the factors, so
// ignoring or misapplying them fails.

#include <cmath>
#include <cstdio>

#include "loader_test_util.h"
#include "model/golden_util.h"
#include "model/rope_tables.h"

namespace inferscale::model::golden {
namespace {

struct Expected {
    float theta = 0.0f;
    std::int64_t head_dim = 0;
    RopeScaling scaling;
    std::vector<float> factors;
    std::vector<std::int32_t> prompt;
    std::vector<float> logits, without_factors, llama_cpp;  // [prompt, vocab] f32
    float abs_max = 0.0f;
};

std::vector<float> flatten(const nlohmann::json& rows) {
    std::vector<float> out;
    for (const auto& row : rows)
        for (const auto& x : row) out.push_back(x.get<float>());
    return out;
}

Expected load_expected() {
    const auto j = nlohmann::json::parse(
        test::read_bytes(test::loader_fixture("tiny_llama31_expected.json")));
    Expected e;
    e.theta = j.at("rope_theta").get<float>();
    e.head_dim = j.at("head_dim").get<std::int64_t>();
    const auto& s = j.at("rope_scaling");
    e.scaling = RopeScaling{s.at("factor").get<float>(), s.at("low_freq_factor").get<float>(),
                            s.at("high_freq_factor").get<float>(),
                            s.at("original_max_position_embeddings").get<std::int64_t>()};
    e.factors = j.at("rope_freqs").get<std::vector<float>>();
    e.prompt = j.at("prompt").get<std::vector<std::int32_t>>();
    e.logits = flatten(j.at("logits"));
    e.without_factors = flatten(j.at("logits_without_factors"));
    e.llama_cpp = flatten(j.at("llama_cpp_logits"));
    for (float x : e.logits) e.abs_max = std::max(e.abs_max, std::abs(x));
    return e;
}

class GgufRopeFreqsTest : public ::testing::Test {
  protected:
    void SetUp() override { e_ = load_expected(); }

    // All prompt logits of the fixture, loaded with `keep_quantized` (true: the ggml path).
    std::vector<float> prompt_logits(bool keep_quantized) {
        Harness h;
        // The fixture's llama.cpp logits come from its AVX-512 build (tools/make_loader_fixtures.py
        // on an AVX-512 host): reproduce that build's arithmetic whatever this host has.
        backends::cpu::CpuBackendOptions options;
        options.ggml_isa = backends::cpu::GgmlIsa::Avx512;
        h.backend = std::make_unique<backends::cpu::CpuBackend>(options);
        h.init_path(test::loader_fixture("tiny_llama31.gguf"),
                    LoadOptions{.keep_quantized = keep_quantized});
        if (::testing::Test::HasFatalFailure()) return {};
        std::vector<std::int32_t> pages(e_.prompt.size() / 4 + 1);
        std::iota(pages.begin(), pages.end(), 0);
        return h.run_one(e_.prompt, 0, pages, LogitsSelection::AllTokens);
    }

    Expected e_;
};

TEST_F(GgufRopeFreqsTest, FactorsEqualLlama3ScalingOfTheInverseFrequencies) {
    auto files = load_model_files(test::loader_fixture("tiny_llama31.gguf"));
    ASSERT_TRUE(files.ok()) << files.error().message;
    EXPECT_EQ(files->config.rope_freq_factors, e_.factors);
    EXPECT_EQ(files->config.rope_scaling.factor, 0.0f);
    const std::size_t half = static_cast<std::size_t>(e_.head_dim / 2);
    ASSERT_EQ(e_.factors.size(), half);
    // The fixture spans all three llama3 bands: kept, interpolated and slowed by `factor`.
    EXPECT_EQ(e_.factors.front(), 1.0f);
    EXPECT_EQ(e_.factors.back(), e_.scaling.factor);
    EXPECT_TRUE(std::any_of(e_.factors.begin(), e_.factors.end(),
                            [&](float f) { return f > 1.0f && f < e_.scaling.factor; }));

    // The safetensors path scales from config.json; the GGUF path divides by the factors.
    const std::vector<float> hf = rope_inv_freq(RopeParams{e_.theta, e_.head_dim, e_.scaling, {}});
    const std::vector<float> gguf = rope_inv_freq(rope_params(files->config));
    ASSERT_EQ(hf.size(), half);
    ASSERT_EQ(gguf.size(), half);
    for (std::size_t i = 0; i < half; ++i) {
        const double exponent = -2.0 * static_cast<double>(i) / static_cast<double>(e_.head_dim);
        const double want = std::pow(static_cast<double>(e_.theta), exponent) / e_.factors[i];
        EXPECT_NEAR(hf[i], want, 1e-6 * want) << i;
        EXPECT_NEAR(gguf[i], want, 1e-6 * want) << i;
    }
}

TEST_F(GgufRopeFreqsTest, F32PathMatchesTheFloat64Forward) {
    const std::vector<float> logits = prompt_logits(/*keep_quantized=*/false);
    ASSERT_EQ(logits.size(), e_.logits.size());
    const float tolerance = 2e-5f * std::max(1.0f, e_.abs_max);
    const float diff = max_abs_diff(logits.data(), e_.logits.data(), logits.size());
    const float unscaled = max_abs_diff(logits.data(), e_.without_factors.data(), logits.size());
    std::printf("f32 path: max |diff| %.3g (tolerance %.3g), without factors %.3g\n", diff,
                tolerance, unscaled);
    EXPECT_LE(diff, tolerance);
    EXPECT_GT(unscaled, 1000 * tolerance);
}

// Q8_0 blocks kept: the CPU backend computes as ggml does, RoPE angles included, so the logits
// are llama.cpp's (its AVX-512 build, which made the fixture; tests/python/test_llama_cpp_rope_freqs.py
// holds the live llama.cpp of each instruction set to the same tokens).
TEST_F(GgufRopeFreqsTest, GgmlPathEqualsLlamaCpp) {
    const std::vector<float> logits = prompt_logits(/*keep_quantized=*/true);
    ASSERT_EQ(logits.size(), e_.llama_cpp.size());
    const float diff = max_abs_diff(logits.data(), e_.llama_cpp.data(), logits.size());
    const float unscaled = max_abs_diff(logits.data(), e_.without_factors.data(), logits.size());
    std::printf("ggml path: max |diff| to llama.cpp %.3g, without factors %.3g\n", diff, unscaled);
    EXPECT_EQ(diff, 0.0f);
    EXPECT_GT(unscaled, 0.5f * e_.abs_max);
}

}  // namespace
}  // namespace inferscale::model::golden
