// Real GGUF models (models/<file>, each skipped when absent: the bundled SmolLM2-135M Q4_1, and
// from scripts/fetch_model.sh the Qwen2.5-Coder checkpoints (Q4_K/Q6_K/Q5_0/Q8_0 mixes) and
// Gemma 3 270M) through engine::LocalModel on the CUDA backend against the CPU backend, each
// driven through an engine::Engine: greedy continuations of 40 tokens on 5 prompts, and on one
// prompt longer than Gemma 3's 512-token sliding window; with the default KV cache and with
// FP8 KV (--kv-cache-dtype fp8: each backend calibrates its own scales, so the two caches
// round alike but not identically, within the tolerance below).
//
// The two backends do not compute the same function. The CPU multiplies the blocks with
// Q8-quantized activations (as llama.cpp does) in f32; the GPU keeps the blocks, multiplies
// them with int8 activations for a few tokens and dequantizes them into bf16 for a prefill's
// tensor cores, and keeps activations and KV in bf16 (8 significant bits, 2^-9 relative
// rounding per stored value, through every layer). So the continuations may part where the
// CPU's top two logits are nearly tied, and only there. Tolerance: the golden-model CUDA test
// allows bf16 logits a relative error of 5e-2 through a whole network; a logit off by up to
// 5e-2 x rms(row) can close a gap of twice that, so a disagreement is accepted only where the
// CPU's top-2 margin is below kMarginTolerance = 0.1 x rms(row): at the step where the free-running
// continuations part, and at every later step, where both backends are fed the CPU's tokens (so all
// 40 steps are compared whatever happens early).

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/engine.h"
#include "engine/local_model.h"

namespace inferscale::cuda_test {
namespace {

constexpr int kTokens = 40;
constexpr double kMarginTolerance = 0.1;  // x rms(row); see the top of the file
// A broken weight upload or kernel puts the logits off by ~1; bf16 noise by a few percent.
constexpr double kMaxLogitsError = 0.15;
// With FP8 KV each backend rounds every K and V element to E4M3 (3 mantissa bits) from inputs
// that already differ by bf16 rounding, so the two caches may differ by a whole E4M3 step
// (2^-3 relative) in any element: 0.18 on one of the six prompts on an H100, 0.03 on another.
// A broken FP8 kernel still puts the logits off by ~1.
constexpr double kMaxFp8LogitsError = 0.3;

std::string model_path(const std::string& file) {
    const char* env = std::getenv("INFERSCALE_MODELS");
    return std::string(env != nullptr ? env : "models") + "/" + file;
}

std::unique_ptr<engine::LocalModel> load(const std::string& file, tensor::Device device,
                                         std::optional<DType> kv_dtype = std::nullopt) {
    engine::LocalModelOptions o;
    o.kv_cache_dtype = kv_dtype;
    o.model_path = model_path(file);
    o.device = device;
    o.max_context = 1024;
    o.kv_tokens = 2048;
    auto lm = engine::LocalModel::load(o);
    IS_CHECK(lm.ok()) << lm.error().message;
    return std::move(lm).value();
}

sampling::SamplingParams greedy(int tokens) {
    sampling::SamplingParams p;
    p.max_tokens = tokens;
    p.ignore_eos = true;  // always kTokens to compare
    return p;
}

// A model with an engine on it; prefix caching off, so every request prefills its whole
// prompt.
struct Runner {
    Runner(const std::string& file, tensor::Device device, std::optional<DType> kv_dtype)
        : lm(load(file, device, kv_dtype)) {
        engine::EngineOptions o;
        o.prefix_caching = false;
        auto started = engine::Engine::start(*lm, nullptr, nullptr, o);
        IS_CHECK(started.ok()) << started.error().message;
        engine = std::move(started).value();
    }
    engine::Completion run(const std::vector<std::int32_t>& prompt, int tokens,
                           bool keep_logits = false) {
        engine::EngineRequest r;
        r.prompt_token_ids = prompt;
        r.sampling = greedy(tokens);
        r.keep_prompt_logits = keep_logits;
        auto stream = engine->submit(std::move(r));
        IS_CHECK(stream.ok()) << stream.error().message;
        auto done = (*stream)->collect();
        IS_CHECK(done.ok()) << done.error().message;
        return std::move(done).value();
    }
    // The logits after `context` (one prefill).
    std::vector<float> next_logits(const std::vector<std::int32_t>& context) {
        return run(context, 1, /*keep_logits=*/true).prompt_logits;
    }
    std::unique_ptr<engine::LocalModel> lm;
    std::unique_ptr<engine::Engine> engine;
};

struct RowStats {
    std::int32_t top = 0;
    double margin = 0.0;  // top-1 minus top-2
    double rms = 0.0;
};

RowStats row_stats(const std::vector<float>& row) {
    RowStats s;
    s.top = static_cast<std::int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    float second = -INFINITY;
    double sq = 0.0;
    for (std::size_t i = 0; i < row.size(); ++i) {
        if (static_cast<std::int32_t>(i) != s.top) second = std::max(second, row[i]);
        sq += static_cast<double>(row[i]) * row[i];
    }
    s.margin = row[s.top] - second;
    s.rms = std::sqrt(sq / static_cast<double>(row.size()));
    return s;
}

class CudaLocalModelTest : public CudaTest, public ::testing::WithParamInterface<const char*> {
  protected:
    void SetUp() override {
        CudaTest::SetUp();
        if (IsSkipped()) return;
        if (!std::filesystem::exists(model_path(GetParam())))
            GTEST_SKIP() << "no " << model_path(GetParam());
    }
};

// Past Gemma 3's 512-token window: its sliding-window layers see only the last 512 tokens.
std::string long_prompt() {
    std::string text = "A long log of numbered lines follows.\n";
    for (int i = 0; i < 90; ++i) text += "line " + std::to_string(i) + ": all is well\n";
    return text + "The last line said";
}

TEST_P(CudaLocalModelTest, LoadsOnTheGpuWithBf16Kv) {
    auto lm = load(GetParam(), tensor::Device::Cuda);
    EXPECT_EQ(lm->backend().name(), "cuda");
    EXPECT_EQ(lm->kv().dtype(), DType::BF16);
    EXPECT_NE(lm->model_name().find("@cuda"), std::string::npos);  // chunks differ from the CPU's
    std::printf("device: %s\n", lm->device_description().c_str());
}

void expect_greedy_continuations_match(const std::string& file, std::optional<DType> kv_dtype) {
    Runner cpu(file, tensor::Device::Cpu, kv_dtype);
    Runner gpu(file, tensor::Device::Cuda, kv_dtype);
    const std::vector<std::string> prompts = {
        "The capital of France is",
        "Once upon a time, in a small village by the sea,",
        "def fibonacci(n):\n",
        "The three primary colors are",
        "Photosynthesis is the process by which plants",
        long_prompt(),
    };
    int identical = 0;
    for (const std::string& text : prompts) {
        SCOPED_TRACE(text);
        const std::vector<std::int32_t> prompt = cpu.lm->tokenizer().encode(text, true);
        ASSERT_EQ(prompt, gpu.lm->tokenizer().encode(text, true));

        // Prompt logits: the whole chain on both backends, before any greedy choice.
        const std::vector<float> cpu_row = cpu.next_logits(prompt);
        const double err = rel_error(gpu.next_logits(prompt), cpu_row);
        EXPECT_LT(err, kv_dtype ? kMaxFp8LogitsError : kMaxLogitsError);

        const engine::Completion want = cpu.run(prompt, kTokens);
        const engine::Completion got = gpu.run(prompt, kTokens);
        ASSERT_EQ(want.token_ids.size(), static_cast<std::size_t>(kTokens));
        ASSERT_EQ(got.token_ids.size(), static_cast<std::size_t>(kTokens));
        const auto split = std::mismatch(want.token_ids.begin(), want.token_ids.end(),
                                         got.token_ids.begin());
        const auto same = static_cast<int>(split.first - want.token_ids.begin());
        std::printf("prompt %-50.50s (%zu tokens) logits rel err %.4f, %d/%d greedy tokens "
                    "identical\n",
                    ("\"" + text + "\"").c_str(), prompt.size(), err, same, kTokens);
        if (same == kTokens) {
            ++identical;
            continue;
        }
        // At the split the two free runs part: the CPU must have been near a tie there. From
        // then on both are fed the CPU's tokens, and each disagreement must be a near-tie too.
        std::vector<std::int32_t> context = prompt;
        context.insert(context.end(), want.token_ids.begin(), want.token_ids.begin() + same);
        for (int i = same; i < kTokens; ++i) {
            const RowStats c = row_stats(cpu.next_logits(context));
            const std::int32_t cpu_token = i == same ? want.token_ids[i] : c.top;
            const std::int32_t gpu_token =
                i == same ? got.token_ids[i] : row_stats(gpu.next_logits(context)).top;
            if (gpu_token != cpu_token) {
                std::printf("  step %d%s: cpu %d, gpu %d; cpu margin %.4f, tolerance %.4f\n", i,
                            i == same ? " (split)" : "", cpu_token, gpu_token, c.margin,
                            kMarginTolerance * c.rms);
                EXPECT_LT(c.margin, kMarginTolerance * c.rms)
                    << "step " << i << ": the GPU picks " << gpu_token << ", the CPU " << cpu_token;
            }
            context.push_back(want.token_ids[i]);
        }
    }
    std::printf("%d of %zu prompts: all %d greedy tokens identical\n", identical, prompts.size(),
                kTokens);
}

TEST_P(CudaLocalModelTest, GreedyContinuationMatchesCpu) {
    expect_greedy_continuations_match(GetParam(), std::nullopt);
}

TEST_P(CudaLocalModelTest, Fp8KvGreedyContinuationMatchesCpuFp8Kv) {
    expect_greedy_continuations_match(GetParam(), DType::F8_E4M3);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaLocalModelTest,
                         ::testing::Values("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3-270m.gguf",
                                           "qwen2.5-coder-0.5b.gguf", "qwen2.5-coder-1.5b.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                             std::string name(info.param);
                             name = name.substr(0, name.find(".gguf"));
                             for (char& c : name) {
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             }
                             return name;
                         });

}  // namespace
}  // namespace inferscale::cuda_test
