// Structured output through the engine on the bundled model (CPU; skipped when the model file is
// absent): answers under a JSON schema parse and satisfy it, greedy and sampled; the masked
// device argmax and the host sampler's mask pick the same tokens; an unconstrained request
// batched beside a constrained one answers as it does alone.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../grammar/schema_check.h"
#include "engine/engine.h"
#include "engine/local_model.h"

namespace inferscale::engine {
namespace {

std::string model_path() {
    const char* env = std::getenv("INFERSCALE_MODELS");
    return std::string(env != nullptr ? env : "models") + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

const nlohmann::json kSchema = nlohmann::json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 24},
    "age": {"type": "integer"},
    "city": {"enum": ["Paris", "Berlin", "Tokyo"]},
    "pets": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
    "address": {"type": "object",
                "properties": {"street": {"type": "string", "maxLength": 24},
                               "zip": {"type": "integer"}},
                "required": ["zip"], "additionalProperties": false}
  },
  "required": ["name", "age", "city", "pets", "address"],
  "additionalProperties": false
})");

class StructuredOutputTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (!std::filesystem::exists(model_path())) return;
        LocalModelOptions o;
        o.model_path = model_path();
        o.max_context = 512;
        o.kv_tokens = 2048;
        o.max_batch_tokens = 256;
        o.max_batch_seqs = 8;
        auto lm = LocalModel::load(o);
        IS_CHECK(lm.ok()) << lm.error().message;
        lm_ = std::move(lm).value().release();
        auto engine = Engine::start(*lm_, nullptr, nullptr, {});
        IS_CHECK(engine.ok()) << engine.error().message;
        engine_ = std::move(engine).value().release();
    }
    static void TearDownTestSuite() {
        delete engine_;
        delete lm_;
    }
    void SetUp() override {
        if (lm_ == nullptr) GTEST_SKIP() << "no " << model_path();
    }

    static EngineRequest chat(const std::string& content, int max_tokens = 160) {
        EngineRequest r;
        r.messages = {{"user", content}};
        r.sampling.max_tokens = max_tokens;
        return r;
    }
    static Completion run(EngineRequest r) {
        auto stream = engine_->submit(std::move(r));
        IS_CHECK(stream.ok()) << stream.error().message;
        auto done = (*stream)->collect();
        IS_CHECK(done.ok()) << done.error().message;
        return std::move(done).value();
    }

    static LocalModel* lm_;
    static Engine* engine_;
};

LocalModel* StructuredOutputTest::lm_ = nullptr;
Engine* StructuredOutputTest::engine_ = nullptr;

TEST_F(StructuredOutputTest, AnswersParseAndSatisfyTheSchema) {
    auto compiled = lm_->grammars().json_schema(kSchema);
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    int complete = 0;
    for (int seed = 0; seed < 6; ++seed) {
        EngineRequest r = chat("Describe a person who lives in a city, as JSON.");
        r.grammar = *compiled;
        r.sampling.temperature = seed == 0 ? 0.0f : 1.0f;
        r.sampling.seed = seed;
        const Completion c = run(std::move(r));
        SCOPED_TRACE(c.text);
        if (std::string(c.finish_reason) == "length") continue;  // cut off: a prefix only
        ++complete;
        EXPECT_STREQ(c.finish_reason, "stop");
        const nlohmann::json doc = nlohmann::json::parse(c.text);  // throws when not JSON
        EXPECT_EQ(grammar::testing::schema_violation(doc, kSchema, kSchema), "");
        EXPECT_TRUE((*compiled)->grammar().accepts(c.text));
    }
    EXPECT_GE(complete, 4);
}

// A 135M model may nest objects until max_tokens (greedy repeats itself); the answers that end
// are objects.
TEST_F(StructuredOutputTest, JsonObjectModeGivesAnObject) {
    int complete = 0;
    for (int seed = 1; seed <= 4; ++seed) {
        EngineRequest r = chat("Reply with a JSON object with the keys name and color.", 96);
        r.grammar = lm_->grammars().json_object();
        r.sampling.temperature = 0.7f;
        r.sampling.seed = seed;
        const Completion c = run(std::move(r));
        SCOPED_TRACE(c.text);
        ASSERT_FALSE(c.text.empty());
        EXPECT_EQ(c.text.front(), '{');
        if (std::string(c.finish_reason) != "stop") continue;
        ++complete;
        EXPECT_TRUE(nlohmann::json::parse(c.text).is_object());
    }
    EXPECT_GE(complete, 1);
}

// Greedy constrained decoding runs the masked argmax where the logits are; asking for
// log-probabilities brings the logits to the host, where the sampler applies the same mask.
TEST_F(StructuredOutputTest, DeviceMaskAndHostMaskPickTheSameTokens) {
    auto compiled = lm_->grammars().json_schema(kSchema);
    ASSERT_TRUE(compiled.ok());
    EngineRequest device = chat("Describe a person as JSON.", 48);
    device.grammar = *compiled;
    EngineRequest host = device;
    host.sampling.logprobs = 0;
    const Completion a = run(std::move(device));
    const Completion b = run(std::move(host));
    EXPECT_EQ(a.token_ids, b.token_ids);
    EXPECT_FALSE(a.text.empty());
    EXPECT_EQ(a.text.front(), '{');
}

TEST_F(StructuredOutputTest, UnconstrainedNeighbourAnswersAsAlone) {
    const EngineRequest plain = chat("Name three colors.", 24);
    const Completion alone = run(plain);
    auto compiled = lm_->grammars().json_schema(kSchema);
    ASSERT_TRUE(compiled.ok());
    EngineRequest constrained = chat("Describe a person as JSON.", 24);
    constrained.grammar = *compiled;
    auto s1 = engine_->submit(constrained);
    auto s2 = engine_->submit(plain);
    ASSERT_TRUE(s1.ok() && s2.ok());
    auto c1 = (*s1)->collect();
    auto c2 = (*s2)->collect();
    ASSERT_TRUE(c1.ok() && c2.ok());
    EXPECT_EQ(c2->token_ids, alone.token_ids);
    EXPECT_EQ(c1->text.front(), '{');
}

TEST_F(StructuredOutputTest, RefusesIgnoreEosWithAGrammar) {
    EngineRequest r = chat("Hi");
    r.grammar = lm_->grammars().json_object();
    r.sampling.ignore_eos = true;
    auto stream = engine_->submit(std::move(r));
    ASSERT_FALSE(stream.ok());
    EXPECT_NE(stream.error().message.find("ignore_eos"), std::string::npos);
}

}  // namespace
}  // namespace inferscale::engine
