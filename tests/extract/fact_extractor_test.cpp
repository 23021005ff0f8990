// FactExtractor's decision logic on a scripted model: which questions it asks
// (prompts and schemas), which it skips (nothing similar stored, a
// word-for-word repeat), how it reads bad answers, and how decisions merge into
// one change per fact. The real model's answers are tested in
// extraction_model_test.cpp.

#include "extract/fact_extractor.h"

#include <gtest/gtest.h>

#include <deque>

namespace inferscale::extract {

void PrintTo(const FactChange& c, std::ostream* os) {
    *os << event_name(c.event) << "(" << (c.id ? std::to_string(*c.id) : "-") << ", '" << c.text
        << "', was '" << c.old_text << "')";
}

namespace {

using nlohmann::json;

class ScriptedLlm final : public JsonLlm {
  public:
    std::deque<json> answers;
    std::vector<std::vector<jinja::ChatMessage>> prompts;
    std::vector<json> schemas;

    Result<json> complete(const std::vector<jinja::ChatMessage>& messages, const json& schema,
                          int) override {
        prompts.push_back(messages);
        schemas.push_back(schema);
        if (answers.empty()) return make_error("no scripted answer left");
        json a = answers.front();
        answers.pop_front();
        return a;
    }
};

SimilarFacts stored(std::vector<StoredFact> facts) {
    return [facts](std::string_view, std::size_t k) -> Result<std::vector<StoredFact>> {
        return std::vector<StoredFact>(facts.begin(), facts.begin() + std::min(k, facts.size()));
    };
}

json candidates(std::vector<std::string> facts, std::vector<std::string> forget = {}) {
    return {{"facts", facts}, {"forget", forget}};
}

FactChange add(std::string text) { return {Event::Add, std::nullopt, std::move(text), ""}; }

TEST(FactExtractor, WithNothingStoredFactsAreAddedWithoutAQuestionAndRepeatsDropped) {
    ScriptedLlm llm;
    llm.answers.push_back(candidates(
        {"The user likes jazz.", " the user likes  jazz ", "", "The user is 30."}, {"x"}));
    FactExtractor ex(llm);
    auto changes = ex.extract({{"user", "", "I love jazz. I'm 30."}}, "2023-05-08", stored({}));
    ASSERT_TRUE(changes.ok()) << changes.error().message;
    EXPECT_EQ(*changes,
              (std::vector<FactChange>{add("The user likes jazz."), add("The user is 30.")}));
    ASSERT_EQ(llm.prompts.size(),
              1u);  // only the candidates: nothing to compare with
    const std::string& asked = llm.prompts[0].back().content;
    EXPECT_NE(asked.find("user: I love jazz. I'm 30."), std::string::npos);
    EXPECT_NE(asked.find("2023-05-08"), std::string::npos);
    EXPECT_EQ(llm.schemas[0]["properties"]["facts"]["maxItems"], 8);
}

TEST(FactExtractor, SpeakersNameTheirMessages) {
    ScriptedLlm llm;
    llm.answers.push_back(candidates({}));
    FactExtractor ex(llm);
    ASSERT_TRUE(ex.extract({{"user", "Caroline", "I went to a support group."},
                            {"assistant", "Melanie", "That's great!"}},
                           "", stored({}))
                    .ok());
    const std::string& asked = llm.prompts[0].back().content;
    EXPECT_NE(asked.find("Caroline: I went to a support group.\nMelanie: That's great!"),
              std::string::npos);
}

TEST(FactExtractor, DecisionsShowSimilarFactsByPositionAndMapBackToIds) {
    ScriptedLlm llm;
    llm.answers.push_back(
        candidates({"The user moved to Berlin.", "The user has a sister."}, {"The user smokes."}));
    llm.answers.push_back({{"event", "UPDATE"}, {"id", 1}, {"text", "The user lives in Berlin."}});
    // The second candidate repeats stored fact 40 word for word: no question.
    llm.answers.push_back({{"event", "DELETE"}, {"id", 2}, {"text", ""}});
    FactExtractor ex(llm);
    const auto similar = stored(
        {{40, "The user has a sister."}, {7, "The user lives in Paris."}, {9, "The user smokes."}});
    auto changes = ex.extract({{"user", "", "..."}}, "", similar);
    ASSERT_TRUE(changes.ok()) << changes.error().message;
    EXPECT_EQ(*changes, (std::vector<FactChange>{{Event::Update, 7, "The user lives in Berlin.",
                                                  "The user lives in Paris."},
                                                 {Event::Delete, 9, "", "The user smokes."}}));
    ASSERT_EQ(llm.prompts.size(), 3u);
    EXPECT_NE(
        llm.prompts[1].back().content.find("[0] The user has a sister.\n[1] The user lives in "
                                           "Paris.\n[2] The user smokes.\nNew fact: The user "
                                           "moved to Berlin."),
        std::string::npos);
    EXPECT_EQ(llm.schemas[1]["properties"]["id"]["enum"], json({0, 1, 2, nullptr}));
    // The forget question shows what the update left and offers DELETE or NONE
    // only.
    EXPECT_NE(llm.prompts[2].back().content.find("[1] The user lives in Berlin."),
              std::string::npos);
    EXPECT_EQ(llm.schemas[2]["properties"]["event"]["enum"], json({"DELETE", "NONE"}));
}

TEST(FactExtractor, ChangesToOneFactMergeAndBadIdsFallBack) {
    ScriptedLlm llm;
    llm.answers.push_back(candidates({"a1", "a2", "a3", "a4"}, {"f1"}));
    llm.answers.push_back({{"event", "UPDATE"}, {"id", 0}, {"text", "first"}});
    llm.answers.push_back({{"event", "UPDATE"}, {"id", 0}, {"text", "second"}});
    llm.answers.push_back({{"event", "UPDATE"}, {"id", nullptr}, {"text", "orphan"}});  // -> ADD
    llm.answers.push_back({{"event", "NONE"}, {"id", nullptr}, {"text", ""}});
    llm.answers.push_back({{"event", "DELETE"}, {"id", nullptr}, {"text", ""}});  // -> nothing
    FactExtractor ex(llm);
    auto changes = ex.extract({{"user", "", "..."}}, "", stored({{3, "old"}}));
    ASSERT_TRUE(changes.ok()) << changes.error().message;
    EXPECT_EQ(*changes,
              (std::vector<FactChange>{{Event::Update, 3, "second", "old"}, add("orphan")}));
}

TEST(FactExtractor, AFactAddedAndDeletedInOneBatchIsNoChangeAndDeletedFactsAreNotShown) {
    ScriptedLlm llm;
    llm.answers.push_back(candidates({"b"}, {"c", "d"}));
    llm.answers.push_back({{"event", "DELETE"}, {"id", 0}, {"text", ""}});  // b deletes 5
    llm.answers.push_back({{"event", "DELETE"}, {"id", 0}, {"text", ""}});  // c: 6 (5 hidden)
    FactExtractor ex(llm);
    auto changes = ex.extract({{"user", "", "..."}}, "", stored({{5, "x"}, {6, "y"}}));
    ASSERT_TRUE(changes.ok()) << changes.error().message;
    EXPECT_EQ(*changes,
              (std::vector<FactChange>{{Event::Delete, 5, "", "x"}, {Event::Delete, 6, "", "y"}}));
    // "d" saw nothing left to delete: no question.
    EXPECT_EQ(llm.prompts.size(), 3u);
}

TEST(FactExtractor, AMalformedAnswerIsAnError) {
    ScriptedLlm llm;
    llm.answers.push_back({{"facts", "not a list"}, {"forget", json::array()}});
    FactExtractor ex(llm);
    auto changes = ex.extract({{"user", "", "..."}}, "", stored({}));
    ASSERT_FALSE(changes.ok());
    EXPECT_NE(changes.error().message.find("'facts'"), std::string::npos);
    // A model that fails passes its error on.
    auto failed = ex.extract({{"user", "", "..."}}, "", stored({}));
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.error().message, "no scripted answer left");
}

}  // namespace
}  // namespace inferscale::extract
