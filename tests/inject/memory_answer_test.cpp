// The three memory modes end to end on the bundled SmolLM2-135M-Instruct (CPU; skipped when
// models/SmolLM2-135M-Instruct.Q4_1.gguf is absent): the scaffold's token-level rules, one
// chunk holding the whole memory reproducing prompt injection exactly, and a fact answered
// from KV and from the prompt but not without memory.

#include "engine/memory_answer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "inject/inject_plan.h"

namespace inferscale::engine {
namespace {

std::string model_path() {
    const char* env = std::getenv("INFERSCALE_MODELS");
    return std::string(env != nullptr ? env : "models") + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

class MemoryAnswerTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (!std::filesystem::exists(model_path())) return;
        LocalModelOptions o;
        o.model_path = model_path();
        o.num_threads = 2;
        o.max_context = 1024;
        o.kv_tokens = 2048;
        auto lm = LocalModel::load(o);
        ASSERT_TRUE(lm.ok()) << lm.error().message;
        lm_ = std::move(lm).value().release();
        // Facts encoded after the memory header: at w = 0 a standalone chunk starts at position
        // 0 without BOS and becomes an attention sink of its own (reference-system.md §9.7);
        // the 135M model then loses the fact, so the answer test uses the header context.
        MemoryOptions mo;
        mo.encoding = inject::EncodingMode::AfterHeader;
        auto rt = MemoryRuntime::create(*lm_, mo);
        ASSERT_TRUE(rt.ok()) << rt.error().message;
        rt_ = std::move(rt).value().release();
    }
    static void TearDownTestSuite() {
        delete rt_;
        delete lm_;
        rt_ = nullptr;
        lm_ = nullptr;
    }
    void SetUp() override {
        if (lm_ == nullptr) GTEST_SKIP() << "no " << model_path();
    }

    static sampling::SamplingParams greedy(int max_tokens = 24) {
        sampling::SamplingParams p;
        p.max_tokens = max_tokens;
        return p;
    }

    static inline LocalModel* lm_ = nullptr;
    static inline MemoryRuntime* rt_ = nullptr;
};

// Retrieval order: best first.
const std::vector<MemoryFact> kAliceFacts = {
    {"alice-dog", "Alice's dog is named Biscuit.", "", {}, 0},
    {"alice-job", "  Alice works as a nurse in Boston.  ", "", {}, 0},
};
constexpr const char* kQuestion = "What is the name of Alice's dog?";

TEST_F(MemoryAnswerTest, ScaffoldFollowsTheReferenceRules) {
    const inject::MemoryScaffold& s = rt_->scaffold();
    const std::int64_t bs = lm_->block_size();
    EXPECT_GE(static_cast<std::int64_t>(s.footer.size()), bs - 1);
    const auto nl = lm_->tokenizer().encode("\n", false, false);
    ASSERT_EQ(nl.size(), 1u);
    EXPECT_EQ(s.footer.front(), nl[0]);  // padded with separate newline tokens
    EXPECT_NE(s.header_text.find("remembers details"), std::string::npos);
    EXPECT_EQ(lm_->tokenizer().decode(s.header), s.header_text);

    // Facts stripped, "\n" appended, best-ranked last; kv and prompt see the same tokens.
    auto ordered = prompt_order(kAliceFacts);
    ASSERT_TRUE(ordered.ok());
    ASSERT_EQ(ordered->size(), 2u);
    EXPECT_EQ((*ordered)[1].id, "alice-dog");
    auto prompt = build_memory_prompt(*lm_, s, *ordered, kQuestion, MemoryMode::Prompt);
    ASSERT_TRUE(prompt.ok());
    const std::string text = lm_->tokenizer().decode(*prompt);
    EXPECT_NE(text.find("Alice works as a nurse in Boston.\nAlice's dog is named Biscuit.\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("Question: What is the name of Alice's dog?"), std::string::npos);
    auto none = build_memory_prompt(*lm_, s, *ordered, kQuestion, MemoryMode::None);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(lm_->tokenizer().decode(*none).find("Biscuit"), std::string::npos);

    // Duplicates collapse; the same id with other text is an error.
    std::vector<MemoryFact> dup = kAliceFacts;
    dup.push_back(kAliceFacts[0]);
    EXPECT_EQ(prompt_order(dup)->size(), 2u);
    dup.back().text = "Alice's dog is named Rex.";
    EXPECT_FALSE(prompt_order(dup).ok());
}

// w = 0, one chunk holding the whole memory stream M, encoded as one standalone sequence from
// position 0: injecting it and prefilling the tail plus the query is the prompt-mode prefill.
TEST_F(MemoryAnswerTest, OneChunkOfTheWholeMemoryEqualsPromptInjection) {
    auto ordered = prompt_order(kAliceFacts).value();
    const std::vector<std::int32_t> prompt =
        build_memory_prompt(*lm_, rt_->scaffold(), ordered, kQuestion, MemoryMode::Prompt).value();
    const std::vector<std::int32_t> query =
        inject::query_token_ids(lm_->tokenizer(), &*lm_->chat_template(), kQuestion, prompt[0]);
    const std::vector<std::int32_t> memory(prompt.begin(), prompt.end() - query.size());

    inject::ChunkRequest req;
    req.identity.fact_id = "whole-memory";
    req.fact_tokens = memory;
    auto chunks = rt_->encoder().encode({&req, 1});
    ASSERT_TRUE(chunks.ok()) << chunks.error().message;
    const inject::KvChunk* stream[] = {&(*chunks)[0]};
    const auto footer = static_cast<std::int64_t>(rt_->scaffold().footer.size());
    auto plan = inject::make_inject_plan(stream, static_cast<std::int64_t>(memory.size()) - footer,
                                         lm_->block_size());
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(plan->token_ids, memory);

    GenerateOptions gen;
    gen.keep_prompt_logits = true;
    gen.prefix_tokens = plan->loaded_tokens;
    ASSERT_TRUE(
        lm_->blocks().allocate(static_cast<std::int32_t>(plan->num_blocks()), gen.prefix_blocks));
    ASSERT_TRUE(rt_->injector().inject(*plan, gen.prefix_blocks, lm_->kv()).ok());
    const std::int32_t free_before = lm_->blocks().num_free() + plan->num_blocks();
    auto kv = generate(*lm_, prompt, greedy(), {}, std::move(gen));
    ASSERT_TRUE(kv.ok()) << kv.error().message;
    EXPECT_EQ(lm_->blocks().num_free(), free_before) << "prefix blocks must be returned";
    EXPECT_EQ(kv->prefilled_tokens, static_cast<std::int64_t>(prompt.size()) - plan->loaded_tokens);

    AnswerOptions keep;
    keep.keep_prompt_logits = true;
    auto text = answer_with_memory(*lm_, *rt_, kAliceFacts, kQuestion, MemoryMode::Prompt, greedy(),
                                   {}, keep);
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(text->prompt_tokens, static_cast<std::int64_t>(prompt.size()));

    const auto& a = kv->prompt_logits;
    const auto& b = text->generation.prompt_logits;
    ASSERT_EQ(a.size(), b.size());
    float worst = 0.0f, scale = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, std::abs(a[i] - b[i]));
        scale = std::max(scale, std::abs(b[i]));
    }
    EXPECT_LT(worst, 1e-3f * std::max(1.0f, scale)) << "scale " << scale;
    EXPECT_EQ(kv->token_ids, text->generation.token_ids)
        << "kv: " << kv->text << "\nprompt: " << text->generation.text;
}

TEST_F(MemoryAnswerTest, FactIsAnsweredFromKvAndPromptButNotWithoutMemory) {
    for (MemoryMode mode : {MemoryMode::Kv, MemoryMode::Prompt}) {
        const std::int32_t free_before = lm_->blocks().num_free();
        auto ans = answer_with_memory(*lm_, *rt_, kAliceFacts, kQuestion, mode, greedy());
        ASSERT_TRUE(ans.ok()) << ans.error().message;
        EXPECT_NE(ans->generation.text.find("Biscuit"), std::string::npos)
            << memory_mode_name(mode) << ": " << ans->generation.text;
        EXPECT_EQ(lm_->blocks().num_free(), free_before);
        if (mode == MemoryMode::Kv) {
            EXPECT_GT(ans->injected_tokens, 0);
            EXPECT_EQ(ans->injected_tokens % lm_->block_size(), 0);
            EXPECT_LT(ans->generation.prefilled_tokens, ans->prompt_tokens);
        }
    }
    // The chunks are cached by identity: a second request encodes nothing.
    const std::size_t cached = rt_->pool().size();
    ASSERT_TRUE(
        answer_with_memory(*lm_, *rt_, kAliceFacts, kQuestion, MemoryMode::Kv, greedy(4)).ok());
    EXPECT_EQ(rt_->pool().size(), cached);

    auto none = answer_with_memory(*lm_, *rt_, {}, kQuestion, MemoryMode::None, greedy());
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none->generation.text.find("Biscuit"), std::string::npos) << none->generation.text;
    // Another user, whose memory is empty: the scaffold with "(No relevant memories found)".
    auto empty = answer_with_memory(*lm_, *rt_, {}, kQuestion, MemoryMode::Kv, greedy());
    ASSERT_TRUE(empty.ok()) << empty.error().message;
    EXPECT_EQ(empty->generation.text.find("Biscuit"), std::string::npos) << empty->generation.text;
}

TEST_F(MemoryAnswerTest, ParsesModes) {
    EXPECT_EQ(parse_memory_mode("kv").value(), MemoryMode::Kv);
    EXPECT_EQ(parse_memory_mode("prompt").value(), MemoryMode::Prompt);
    EXPECT_EQ(parse_memory_mode("none").value(), MemoryMode::None);
    EXPECT_FALSE(parse_memory_mode("rag").ok());
}

}  // namespace
}  // namespace inferscale::engine
