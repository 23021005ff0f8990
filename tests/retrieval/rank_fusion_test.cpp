// reciprocal_rank_fusion against tools/make_rank_fusion_fixture.py's independent Python computation
// (random lists from a fixed seed plus ties, repeats and empty lists), and the fusion's own
// properties.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "retrieval/rank_fusion.h"

namespace inferscale::retrieval {
namespace {

using nlohmann::json;

json load_fixture() {
    const char* dir = std::getenv("INFERSCALE_FIXTURES");
    const std::string path =
        std::string(dir ? dir : "tests/fixtures") + "/retrieval/rank_fusion.json";
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << "missing fixture " << path;
    return json::parse(in);
}

TEST(RankFusionTest, MatchesThePythonReference) {
    const json fixture = load_fixture();
    ASSERT_GT(fixture["cases"].size(), 10u);
    for (const json& c : fixture["cases"]) {
        SCOPED_TRACE(c["name"].get<std::string>());
        std::vector<std::vector<Hit>> lists;
        for (const json& ranked : c["lists"]) {
            std::vector<Hit> list;
            // Descending made-up scores: fusion must read ranks only.
            double score = 1e6;
            for (const json& id : ranked) list.push_back({id.get<FactId>(), score--});
            lists.push_back(std::move(list));
        }
        const auto fused =
            reciprocal_rank_fusion(lists, c["k"].get<std::size_t>(), c["c"].get<double>());
        ASSERT_EQ(fused.size(), c["fused"].size());
        for (std::size_t i = 0; i < fused.size(); ++i) {
            EXPECT_EQ(fused[i].fact_id, c["fused"][i]["id"].get<FactId>()) << "place " << i;
            // Same sums in the same order: the same doubles.
            EXPECT_EQ(fused[i].score, c["fused"][i]["score"].get<double>()) << "place " << i;
        }
    }
}

TEST(RankFusionTest, IgnoresScoresAndHandlesEmptyInput) {
    const std::vector<std::vector<Hit>> lists = {{{3, -100.0}, {1, -200.0}}, {{1, 9.0}}};
    const auto fused = reciprocal_rank_fusion(lists, 5);
    ASSERT_EQ(fused.size(), 2u);
    EXPECT_EQ(fused[0].fact_id, 1);  // ranks 2 and 1 beat rank 1 alone
    EXPECT_EQ(fused[0].score, 1.0 / 62.0 + 1.0 / 61.0);
    EXPECT_EQ(fused[1].fact_id, 3);
    EXPECT_TRUE(reciprocal_rank_fusion(lists, 0).empty());
    EXPECT_TRUE(reciprocal_rank_fusion(std::span<const std::vector<Hit>>{}, 5).empty());
}

}  // namespace
}  // namespace inferscale::retrieval
