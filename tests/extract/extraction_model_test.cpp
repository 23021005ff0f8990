// Fact extraction with a real instruction model through the engine (CPU), on
// cases built by hand: a new fact is added, a move updates the old city (with
// the old text kept for the history), "forget that I smoke" deletes, small talk
// changes nothing. The model is INFERSCALE_EXTRACT_MODEL, else
// models/qwen2.5-coder-1.5b.gguf (scripts/fetch_model.sh); skipped when absent.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/local_model.h"
#include "extract/engine_json_llm.h"
#include "extract/fact_extractor.h"

namespace inferscale::extract {
namespace {

std::string model_path() {
    if (const char* env = std::getenv("INFERSCALE_EXTRACT_MODEL")) return env;
    const char* dir = std::getenv("INFERSCALE_MODELS");
    return std::string(dir != nullptr ? dir : "models") + "/qwen2.5-coder-1.5b.gguf";
}

class ExtractionModelTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (!std::filesystem::exists(model_path())) return;
        engine::LocalModelOptions o;
        o.model_path = model_path();
        o.max_context = 2048;
        o.kv_tokens = 4096;
        o.max_batch_tokens = 512;
        auto lm = engine::LocalModel::load(o);
        IS_CHECK(lm.ok()) << lm.error().message;
        lm_ = std::move(lm).value().release();
        auto engine = engine::Engine::start(*lm_, nullptr, nullptr, {});
        IS_CHECK(engine.ok()) << engine.error().message;
        engine_ = std::move(engine).value().release();
        llm_ = new EngineJsonLlm(*engine_);
    }
    static void TearDownTestSuite() {
        delete llm_;
        delete engine_;
        delete lm_;
    }
    void SetUp() override {
        if (lm_ == nullptr) GTEST_SKIP() << "no " << model_path();
    }

    // Extraction for one user message against `stored` (all of it shown: a
    // handful of facts).
    static std::vector<FactChange> run(const std::string& said, std::vector<StoredFact> stored) {
        FactExtractor ex(*llm_);
        const SimilarFacts similar = [stored](std::string_view,
                                              std::size_t k) -> Result<std::vector<StoredFact>> {
            return std::vector<StoredFact>(stored.begin(),
                                           stored.begin() + std::min(k, stored.size()));
        };
        auto candidates = ex.candidates({{"user", "", said}}, "");
        IS_CHECK(candidates.ok()) << candidates.error().message;
        for (const std::string& f : candidates->facts) std::cerr << "  fact: " << f << "\n";
        for (const std::string& f : candidates->forget) std::cerr << "  forget: " << f << "\n";
        auto changes = ex.decide(*candidates, similar);
        IS_CHECK(changes.ok()) << changes.error().message;
        for (const FactChange& c : *changes)
            std::cerr << "  " << event_name(c.event) << " " << (c.id ? *c.id : -1) << " '" << c.text
                      << "' (was '" << c.old_text << "')\n";
        return std::move(changes).value();
    }

    static bool mentions(const std::string& text, const std::string& word) {
        std::string lower = text;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return lower.find(word) != std::string::npos;
    }

    static engine::LocalModel* lm_;
    static engine::Engine* engine_;
    static EngineJsonLlm* llm_;
};

engine::LocalModel* ExtractionModelTest::lm_ = nullptr;
engine::Engine* ExtractionModelTest::engine_ = nullptr;
EngineJsonLlm* ExtractionModelTest::llm_ = nullptr;

TEST_F(ExtractionModelTest, ANewFactIsAdded) {
    const auto changes = run("By the way, I'm allergic to peanuts.",
                             {{1, "The user lives in Paris."}, {2, "The user has a cat."}});
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].event, Event::Add);
    EXPECT_TRUE(mentions(changes[0].text, "peanut")) << changes[0].text;
}

TEST_F(ExtractionModelTest, AMoveUpdatesTheOldCity) {
    const auto changes = run("I moved to Berlin last month.",
                             {{1, "The user lives in Paris."}, {2, "The user has a cat."}});
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].event, Event::Update);
    EXPECT_EQ(changes[0].id, 1);
    EXPECT_EQ(changes[0].old_text, "The user lives in Paris.");
    EXPECT_TRUE(mentions(changes[0].text, "berlin")) << changes[0].text;
}

TEST_F(ExtractionModelTest, ForgetDeletes) {
    const auto changes =
        run("Please forget that I smoke.", {{1, "The user smokes."}, {2, "The user has a cat."}});
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].event, Event::Delete);
    EXPECT_EQ(changes[0].id, 1);
}

TEST_F(ExtractionModelTest, SmallTalkChangesNothing) {
    EXPECT_TRUE(run("Hi there! How are you doing today?", {{1, "The user has a cat."}}).empty());
    EXPECT_TRUE(run("Thanks, that's all for now.", {}).empty());
}

}  // namespace
}  // namespace inferscale::extract
