// The three memory modes on the bundled SmolLM2-135M-Instruct (CPU; skipped when
// models/SmolLM2-135M-Instruct.Q4_1.gguf is absent). At the model level: the scaffold's token
// rules, and one chunk holding the whole memory reproducing prompt injection's logits. Through
// an Engine over a real SQLite store: a fact answered from KV and from the prompt but not
// without memory, never for another user, and its chunk encoded once.

#include "engine/memory_runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "../memory/temp_dir.h"
#include "engine/engine.h"
#include "inject/inject_plan.h"
#include "memory/fact_indexer.h"
#include "retrieval/bm25_index.h"

namespace inferscale::engine {
namespace {

std::string model_path() {
    const char* env = std::getenv("INFERSCALE_MODELS");
    return std::string(env != nullptr ? env : "models") + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::unique_ptr<LocalModel> load_model() {
    LocalModelOptions o;
    o.model_path = model_path();
    o.num_threads = 2;
    o.max_context = 1024;
    o.kv_tokens = 2048;
    auto lm = LocalModel::load(o);
    IS_CHECK(lm.ok()) << lm.error().message;
    return std::move(lm).value();
}

// Facts encoded after the memory header: at w = 0 a standalone chunk starts at position 0
// without BOS and becomes an attention sink of its own (reference-system.md §9.7); the 135M
// model then loses the fact, so these tests use the header context.
MemoryOptions after_header() {
    MemoryOptions mo;
    mo.encoding = memory::EncodingMode::AfterHeader;
    return mo;
}

// Retrieval order: best first.
const std::vector<MemoryFact> kAliceFacts = {
    {"alice-dog", "Alice's dog is named Biscuit.", "", {}, 0},
    {"alice-job", "  Alice works as a nurse in Boston.  ", "", {}, 0},
};
constexpr const char* kQuestion = "What is the name of Alice's dog?";
const std::vector<jinja::ChatMessage> kConversation = {{"user", kQuestion}};

class MemoryPromptTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (!std::filesystem::exists(model_path())) return;
        lm_ = load_model().release();
        auto rt = MemoryRuntime::create(*lm_, after_header());
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

    // The logits after `prompt`, whose first `prefix` tokens already have their KV in
    // `blocks` (which cover the whole prompt): one forward over the rest.
    static std::vector<float> last_logits(const std::vector<std::int32_t>& prompt,
                                          std::int64_t prefix,
                                          const std::vector<kv::BlockId>& blocks) {
        const auto count = static_cast<std::int64_t>(prompt.size()) - prefix;
        std::vector<std::int32_t> positions(static_cast<std::size_t>(count));
        std::iota(positions.begin(), positions.end(), static_cast<std::int32_t>(prefix));
        model::BatchSequence seq;
        seq.num_tokens = static_cast<std::int32_t>(count);
        seq.kv_len = static_cast<std::int32_t>(prompt.size());
        seq.pages = blocks;
        model::ForwardBatch batch;
        batch.token_ids = std::span(prompt).subspan(static_cast<std::size_t>(prefix));
        batch.positions = positions;
        batch.sequences = {&seq, 1};
        batch.logits = model::LogitsSelection::LastPerSequence;
        std::vector<float> logits(static_cast<std::size_t>(lm_->config().vocab_size));
        const Status st = lm_->model().forward(batch, lm_->kv(), lm_->workspace(), logits);
        IS_CHECK(st.ok()) << st.error().message;
        return logits;
    }

    static inline LocalModel* lm_ = nullptr;
    static inline MemoryRuntime* rt_ = nullptr;
};

TEST_F(MemoryPromptTest, ScaffoldFollowsTheReferenceRules) {
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
    auto prompt = memory_prompt(*lm_, s, *ordered, kConversation);
    ASSERT_TRUE(prompt.ok());
    const std::string text = lm_->tokenizer().decode(prompt->tokens);
    EXPECT_NE(text.find("Alice works as a nurse in Boston.\nAlice's dog is named Biscuit.\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("Question: What is the name of Alice's dog?"), std::string::npos);
    EXPECT_EQ(lm_->tokenizer().decode(
                  std::span(prompt->tokens).first(static_cast<std::size_t>(prompt->memory_tokens))),
              lm_->tokenizer().decode(inject::memory_stream(s, prompt->fact_tokens)));

    // Duplicates collapse; the same id with other text is an error.
    std::vector<MemoryFact> dup = kAliceFacts;
    dup.push_back(kAliceFacts[0]);
    EXPECT_EQ(prompt_order(dup)->size(), 2u);
    dup.back().text = "Alice's dog is named Rex.";
    EXPECT_FALSE(prompt_order(dup).ok());
}

// w = 0, one chunk holding the whole memory stream M, encoded as one standalone sequence from
// position 0: injecting it and prefilling the tail plus the question is the prompt-mode
// prefill.
TEST_F(MemoryPromptTest, OneChunkOfTheWholeMemoryEqualsPromptInjection) {
    const MemoryPrompt prompt =
        memory_prompt(*lm_, rt_->scaffold(), prompt_order(kAliceFacts).value(), kConversation)
            .value();
    const std::vector<std::int32_t> memory(prompt.tokens.begin(),
                                           prompt.tokens.begin() + prompt.memory_tokens);

    engine::ChunkRequest req;
    req.identity.fact_id = "whole-memory";
    req.fact_tokens = memory;
    auto chunks = rt_->encoder().encode({&req, 1});
    ASSERT_TRUE(chunks.ok()) << chunks.error().message;
    const memory::KvChunk* stream[] = {&(*chunks)[0]};
    const auto footer = static_cast<std::int64_t>(rt_->scaffold().footer.size());
    auto plan = inject::make_inject_plan(stream, prompt.memory_tokens - footer, lm_->block_size());
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(plan->token_ids, memory);
    ASSERT_GT(plan->loaded_tokens, 0);

    const auto blocks_needed = static_cast<std::int32_t>(
        (static_cast<std::int64_t>(prompt.tokens.size()) + lm_->block_size() - 1) /
        lm_->block_size());
    std::vector<kv::BlockId> injected, computed;
    ASSERT_TRUE(lm_->blocks().allocate(blocks_needed, injected));
    ASSERT_TRUE(lm_->blocks().allocate(blocks_needed, computed));
    ASSERT_TRUE(rt_->injector().inject(*plan, injected, lm_->kv()).ok());
    const std::vector<float> a = last_logits(prompt.tokens, plan->loaded_tokens, injected);
    const std::vector<float> b = last_logits(prompt.tokens, 0, computed);
    lm_->blocks().release(injected);
    lm_->blocks().release(computed);

    ASSERT_EQ(a.size(), b.size());
    float worst = 0.0f, scale = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, std::abs(a[i] - b[i]));
        scale = std::max(scale, std::abs(b[i]));
    }
    EXPECT_LT(worst, 1e-3f * std::max(1.0f, scale)) << "scale " << scale;
    EXPECT_EQ(std::max_element(a.begin(), a.end()) - a.begin(),
              std::max_element(b.begin(), b.end()) - b.begin());
}

// An Engine over a real store with Alice's and Bob's facts, as the server and the CLI run it.
class EngineMemoryTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (!std::filesystem::exists(model_path())) return;
        dir_ = new memory::testing::TempDir();
        lm_ = load_model().release();
        store_ = memory::MemoryStore::open(dir_->file("memory.db")).value().release();
        index_ = new retrieval::Bm25Index();
        indexer_ = memory::FactIndexer::attach(*store_, *index_).value().release();
        retriever_ = new retrieval::FactRetriever(*index_);
        for (const MemoryFact& f : kAliceFacts)
            ASSERT_TRUE(store_->add_fact("alice", {f.text, {}, ""}).ok());
        ASSERT_TRUE(store_->add_fact("bob", {"Bob plays the violin.", {}, ""}).ok());
        EngineOptions o;
        o.memory = after_header();
        auto engine = Engine::start(*lm_, store_, retriever_, o);
        ASSERT_TRUE(engine.ok()) << engine.error().message;
        engine_ = std::move(engine).value().release();
    }
    static void TearDownTestSuite() {
        delete engine_;
        delete retriever_;
        delete indexer_;
        delete index_;
        delete store_;
        delete lm_;
        delete dir_;
        engine_ = nullptr;
        lm_ = nullptr;
    }
    void SetUp() override {
        if (lm_ == nullptr) GTEST_SKIP() << "no " << model_path();
    }

    static Completion ask(const std::string& user, MemoryMode mode, int max_tokens = 24) {
        EngineRequest r;
        r.messages = kConversation;
        r.user = user;
        r.memory_mode = mode;
        r.sampling.max_tokens = max_tokens;
        r.sampling.temperature = 0.0f;
        auto stream = engine_->submit(std::move(r));
        IS_CHECK(stream.ok()) << stream.error().message;
        auto done = (*stream)->collect();
        IS_CHECK(done.ok()) << done.error().message;
        return std::move(done).value();
    }

    static inline memory::testing::TempDir* dir_ = nullptr;
    static inline LocalModel* lm_ = nullptr;
    static inline memory::MemoryStore* store_ = nullptr;
    static inline retrieval::Bm25Index* index_ = nullptr;
    static inline retrieval::FactRetriever* retriever_ = nullptr;
    static inline memory::FactIndexer* indexer_ = nullptr;
    static inline Engine* engine_ = nullptr;
};

TEST_F(EngineMemoryTest, FactIsAnsweredFromKvAndPromptButNotWithoutMemory) {
    for (MemoryMode mode : {MemoryMode::Kv, MemoryMode::Prompt}) {
        const Completion ans = ask("alice", mode);
        EXPECT_NE(ans.text.find("Biscuit"), std::string::npos)
            << memory_mode_name(mode) << ": " << ans.text;
        EXPECT_GT(ans.usage.memory_tokens, 0);
        if (mode == MemoryMode::Kv) {
            EXPECT_GT(ans.usage.injected_tokens, 0);
            EXPECT_EQ(ans.usage.injected_tokens % lm_->block_size(), 0);
        } else {
            EXPECT_EQ(ans.usage.injected_tokens, 0);
        }
    }
    const Completion none = ask("alice", MemoryMode::None);
    EXPECT_EQ(none.text.find("Biscuit"), std::string::npos) << none.text;
    EXPECT_EQ(none.usage.memory_tokens, 0);
}

TEST_F(EngineMemoryTest, AnotherUsersMemoryNeverAnswers) {
    for (MemoryMode mode : {MemoryMode::Kv, MemoryMode::Prompt, MemoryMode::None}) {
        const Completion ans = ask("bob", mode);
        EXPECT_EQ(ans.text.find("Biscuit"), std::string::npos)
            << memory_mode_name(mode) << ": " << ans.text;
    }
}

TEST_F(EngineMemoryTest, ChunksAreEncodedOnce) {
    (void)ask("alice", MemoryMode::Kv, 2);
    const std::size_t cached = engine_->memory_runtime()->pool().size();
    (void)ask("alice", MemoryMode::Kv, 2);
    EXPECT_EQ(engine_->memory_runtime()->pool().size(), cached);
}

}  // namespace
}  // namespace inferscale::engine
