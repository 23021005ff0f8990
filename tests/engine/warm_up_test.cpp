// engine::warm_up on the bundled model (CPU; skipped when the model file is absent): it runs
// the step shapes it promises, leaves every KV block free, and leaves no trace in what the
// model computes afterwards (prompt logits bit for bit, greedy tokens equal).

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/local_model.h"
#include "engine/warm_up.h"

namespace inferscale::engine {
namespace {

std::string model_path() {
    const char* env = std::getenv("INFERSCALE_MODELS");
    return std::string(env != nullptr ? env : "models") + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::unique_ptr<LocalModel> load(std::int64_t max_seqs) {
    LocalModelOptions o;
    o.model_path = model_path();
    o.max_context = 256;
    o.kv_tokens = 256;  // 16 blocks
    o.max_batch_tokens = 48;  // steps of 1, 2, 4, 8, 16, 32 and 48 tokens
    o.max_batch_seqs = max_seqs;
    auto lm = LocalModel::load(o);
    IS_CHECK(lm.ok()) << lm.error().message;
    return std::move(lm).value();
}

// Greedy tokens and prompt logits of `prompt`, through an engine that lives for this request
// only (no warm-up of its own, no prefix cache), so it leaves every block free.
Completion greedy(LocalModel& lm, const std::vector<std::int32_t>& prompt) {
    EngineOptions o;
    o.prefix_caching = false;
    o.warm_up = false;
    auto engine = Engine::start(lm, nullptr, nullptr, o);
    IS_CHECK(engine.ok()) << engine.error().message;
    EngineRequest r;
    r.prompt_token_ids = prompt;
    r.sampling.max_tokens = 12;
    r.sampling.ignore_eos = true;
    r.keep_prompt_logits = true;
    auto stream = (*engine)->submit(std::move(r));
    IS_CHECK(stream.ok()) << stream.error().message;
    auto done = (*stream)->collect();
    IS_CHECK(done.ok()) << done.error().message;
    return std::move(done).value();
}

class WarmUpTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!std::filesystem::exists(model_path())) GTEST_SKIP() << "no " << model_path();
    }
};

TEST_F(WarmUpTest, RunsEveryStepShapeAndLeavesNoTrace) {
    auto lm = load(8);
    const std::vector<std::int32_t> prompt =
        lm->tokenizer().encode("The three primary colors are", true);
    const Completion before = greedy(*lm, prompt);
    const std::int32_t free_before = lm->blocks().num_free();

    model::DecodeGraphOptions go;
    go.max_kv_len = 256;
    auto graphs = model::DecodeGraphRunner::create(lm->model(), lm->kv(), lm->workspace(), go);
    ASSERT_TRUE(graphs.ok()) << graphs.error().message;
    auto report = warm_up(*lm, &*graphs, 8);
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->steps, 7);
    EXPECT_EQ(report->skipped, 0);
    EXPECT_EQ(lm->blocks().num_free(), free_before);

    const Completion after = greedy(*lm, prompt);
    EXPECT_EQ(after.prompt_logits, before.prompt_logits);
    EXPECT_EQ(after.token_ids, before.token_ids);
}

TEST_F(WarmUpTest, SkipsShapesThatDoNotFitTheKvCacheAndFreesWhatItTook) {
    // 16 blocks: steps of up to 16 tokens are up to 16 one-token sequences, a block each; the
    // steps of 32 and 48 tokens would spread over 32 sequences, more than there are blocks.
    auto lm = load(32);
    ASSERT_EQ(lm->blocks().num_blocks(), 16);
    auto report = warm_up(*lm, nullptr, 32);
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->steps, 5);
    EXPECT_EQ(report->skipped, 2);
    EXPECT_EQ(lm->blocks().num_free(), 16);
}

}  // namespace
}  // namespace inferscale::engine
