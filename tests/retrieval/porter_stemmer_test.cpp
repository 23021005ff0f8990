// porter_stem() against the Porter stemmer of the PyPI package snowballstemmer
// (tools/make_porter_fixture.py): every word of LoCoMo's observations and questions, and the
// examples of Porter's paper, must stem exactly as the reference does.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "retrieval/porter_stemmer.h"

namespace inferscale::retrieval {
namespace {

TEST(PorterStem, MatchesSnowballFixture) {
    const char* dir = std::getenv("INFERSCALE_FIXTURES");
    const std::string path = std::string(dir ? dir : "tests/fixtures") + "/retrieval/porter.json";
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << "missing fixture " << path;
    const auto fixture = nlohmann::json::parse(in);
    ASSERT_GT(fixture["pairs"].size(), 4000u);
    int wrong = 0;
    for (const auto& pair : fixture["pairs"]) {
        const std::string word = pair[0];
        const std::string want = pair[1];
        const std::string got = porter_stem(word);
        if (got != want && ++wrong <= 20) ADD_FAILURE() << word << ": " << got << ", want " << want;
    }
    EXPECT_EQ(wrong, 0);
}

TEST(PorterStem, PaperExamplesAndInputsItLeavesAlone) {
    EXPECT_EQ(porter_stem("caresses"), "caress");
    EXPECT_EQ(porter_stem("generalizations"), "gener");
    EXPECT_EQ(porter_stem("allergy"), porter_stem("allergies"));
    EXPECT_NE(porter_stem("allergy"), porter_stem("allergic"));  // Porter keeps these apart
    EXPECT_EQ(porter_stem("sky"), "sky");                         // no vowel before the y
    EXPECT_EQ(porter_stem("saying"), "sai");                      // consonant-y, then y -> i
    EXPECT_EQ(porter_stem(""), "");
    EXPECT_EQ(porter_stem("10k"), "10k");
    EXPECT_EQ(porter_stem("Running"), "Running");  // not lowercase: unchanged
    EXPECT_EQ(porter_stem("café"), "café");
}

}  // namespace
}  // namespace inferscale::retrieval
