// Bm25Index against scores from the PyPI package rank-bm25 (tools/make_bm25_fixture.py), plus
// the properties the fixture cannot show: tie order, per-user statistics, top-k, updates.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "retrieval/bm25_index.h"
#include "retrieval/lexical_tokenizer.h"

namespace inferscale::retrieval {
namespace {

using nlohmann::json;

json load_fixture() {
    const char* dir = std::getenv("INFERSCALE_FIXTURES");
    const std::string path = std::string(dir ? dir : "tests/fixtures") + "/retrieval/bm25.json";
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << "missing fixture " << path;
    return json::parse(in);
}

std::map<FactId, std::string> docs_of(const json& c) {
    std::map<FactId, std::string> docs;
    for (const auto& d : c["docs"]) docs[d["id"].get<FactId>()] = d["text"].get<std::string>();
    return docs;
}

void expect_matches_case(const Bm25Index& index, const json& c) {
    for (const auto& q : c["queries"]) {
        const std::string query = q["query"];
        SCOPED_TRACE(c["name"].get<std::string>() + " / " + query);
        const auto hits = index.search("u", query, 1000);
        const auto& ranking = q["ranking"];
        ASSERT_EQ(hits.size(), ranking.size());
        for (std::size_t i = 0; i < hits.size(); ++i) {
            EXPECT_EQ(hits[i].fact_id, ranking[i].get<FactId>()) << "rank " << i;
            const double want = q["scores"][std::to_string(hits[i].fact_id)];
            EXPECT_NEAR(hits[i].score, want, 1e-9 * std::max(1.0, std::abs(want)));
        }
    }
}

TEST(LexicalTerms, MatchesFixtureTokenizer) {
    const json fixture = load_fixture();
    for (const auto& c : fixture["cases"]) {
        for (const auto& d : c["docs"])
            EXPECT_EQ(lexical_terms(d["text"].get<std::string>()),
                      d["terms"].get<std::vector<std::string>>())
                << d["text"];
        for (const auto& q : c["queries"])
            EXPECT_EQ(lexical_terms(q["query"].get<std::string>()),
                      q["terms"].get<std::vector<std::string>>());
    }
}

TEST(LexicalTerms, Rules) {
    EXPECT_EQ(lexical_terms("Hello, WORLD! it's 2024."),
              (std::vector<std::string>{"hello", "world", "s", "2024"}));
    EXPECT_EQ(lexical_terms("Café ÉCOLE"), (std::vector<std::string>{"café", "École"}));
    EXPECT_TRUE(lexical_terms("the a of and").empty());
    EXPECT_TRUE(lexical_terms("").empty());
    EXPECT_TRUE(is_stopword("the"));
    EXPECT_FALSE(is_stopword("melanie"));
}

TEST(LexicalTerms, StemsLongAsciiWordsUnlessOff) {
    EXPECT_EQ(lexical_terms("Melanie paints; painting, painted US 10ks cafés"),
              (std::vector<std::string>{"melani", "paint", "paint", "paint", "us", "10ks",
                                        "cafés"}));
    EXPECT_EQ(lexical_terms("Melanie paints", {.stem = false}),
              (std::vector<std::string>{"melanie", "paints"}));
    // Stop words are dropped before stemming: "thing" is kept, "this" is not.
    EXPECT_EQ(lexical_terms("this thing"), (std::vector<std::string>{"thing"}));
}

TEST(Bm25Index, MatchesRankBm25) {
    const json fixture = load_fixture();
    ASSERT_EQ(fixture["k1"].get<double>(), Bm25Params{}.k1);
    ASSERT_EQ(fixture["b"].get<double>(), Bm25Params{}.b);
    Bm25Index index;
    for (const auto& [id, text] : docs_of(fixture["cases"][0])) index.upsert("u", id, text);
    expect_matches_case(index, fixture["cases"][0]);
}

TEST(Bm25Index, IncrementalUpdatesMatchAFreshBuild) {
    const json fixture = load_fixture();
    const auto before = docs_of(fixture["cases"][0]);
    const auto after = docs_of(fixture["cases"][1]);
    Bm25Index index;
    for (const auto& [id, text] : before) index.upsert("u", id, text);
    // Noise from another user must not move this user's statistics.
    index.upsert("other", 5000, "Melanie Caroline pottery camping beach");
    for (const auto& [id, text] : before) {
        if (!after.contains(id)) {
            EXPECT_TRUE(index.remove(id));
        }
    }
    for (const auto& [id, text] : after)
        if (!before.contains(id) || before.at(id) != text) index.upsert("u", id, text);
    EXPECT_EQ(index.size("u"), after.size());
    expect_matches_case(index, fixture["cases"][1]);
    EXPECT_FALSE(index.remove(123456));
}

TEST(Bm25Index, TiesBreakByFactIdAndTopK) {
    Bm25Index index;
    for (FactId id : {9, 3, 7, 5}) index.upsert("u", id, "same words here");
    index.upsert("u", 1, "unrelated");
    auto hits = index.search("u", "words", 10);
    ASSERT_EQ(hits.size(), 4u);
    EXPECT_EQ(hits[0].fact_id, 3);
    EXPECT_EQ(hits[1].fact_id, 5);
    EXPECT_EQ(hits[2].fact_id, 7);
    EXPECT_EQ(hits[3].fact_id, 9);
    EXPECT_EQ(hits[0].score, hits[3].score);
    hits = index.search("u", "words", 2);
    ASSERT_EQ(hits.size(), 2u);
    EXPECT_EQ(hits[0].fact_id, 3);
    EXPECT_EQ(hits[1].fact_id, 5);
    EXPECT_TRUE(index.search("u", "words", 0).empty());
}

TEST(Bm25Index, UsersAreIsolated) {
    Bm25Index index;
    index.upsert("alice", 1, "alice likes tea");
    index.upsert("bob", 2, "bob likes tea");
    auto hits = index.search("alice", "tea", 10);
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].fact_id, 1);
    EXPECT_TRUE(index.search("carol", "tea", 10).empty());
    EXPECT_EQ(index.remove_user("alice"), 1u);
    EXPECT_TRUE(index.search("alice", "tea", 10).empty());
    EXPECT_EQ(index.search("bob", "tea", 10).size(), 1u);
    EXPECT_EQ(index.size(), 1u);
}

TEST(Bm25Index, StemmingIsAnOptionOfTheIndex) {
    Bm25Index stemmed;
    Bm25Index plain(Bm25Params{.stem = false});
    for (Bm25Index* index : {&stemmed, &plain}) {
        index->upsert("u", 1, "Bob's daughter has a severe peanut allergy.");
        index->upsert("u", 2, "Bob is allergic to peanuts.");
        index->upsert("u", 3, "Bob paints landscapes.");
    }
    auto ids = [](const std::vector<Hit>& hits) {
        std::vector<FactId> out;
        for (const Hit& hit : hits) out.push_back(hit.fact_id);
        return out;
    };
    EXPECT_EQ(ids(stemmed.search("u", "allergies", 10)), (std::vector<FactId>{1}));
    EXPECT_TRUE(plain.search("u", "allergies", 10).empty());
    EXPECT_EQ(ids(stemmed.search("u", "Who likes painting?", 10)), (std::vector<FactId>{3}));
    EXPECT_TRUE(plain.search("u", "Who likes painting?", 10).empty());
    EXPECT_EQ(ids(stemmed.search("u", "peanut", 10)).size(), 2u);
    EXPECT_EQ(ids(plain.search("u", "peanut", 10)), (std::vector<FactId>{1}));
    // Porter's stems: "allergy" is "allergi", "allergic" is "allerg"; they do not meet.
    EXPECT_EQ(ids(stemmed.search("u", "allergy", 10)), (std::vector<FactId>{1}));
}

TEST(Bm25Index, UpsertReplacesText) {
    Bm25Index index;
    index.upsert("u", 1, "old text about cats");
    index.upsert("u", 1, "new text about dogs");
    EXPECT_TRUE(index.search("u", "cats", 10).empty());
    EXPECT_EQ(index.search("u", "dogs", 10).size(), 1u);
    EXPECT_EQ(index.size(), 1u);
    // A fact that tokenizes to nothing still counts as a document and is never a hit.
    index.upsert("u", 2, "the of and");
    EXPECT_EQ(index.size("u"), 2u);
    EXPECT_TRUE(index.search("u", "the", 10).empty());
}

}  // namespace
}  // namespace inferscale::retrieval
