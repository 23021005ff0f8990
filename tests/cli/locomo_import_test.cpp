// LoCoMo import: a synthetic conversation with every oddity, and a real locomo10 file whose
// counts are recomputed here straight from its JSON.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "apps/cli/locomo/locomo_date.h"
#include "apps/cli/locomo/locomo_import.h"
#include "memory/temp_dir.h"

namespace inferscale::memory {
namespace {

using nlohmann::json;
using testing::TempDir;

// session_2 happened before session_1; session_1 holds an empty turn and an image turn.
constexpr const char* kSynthetic = R"json({
  "speaker_a": "Ann", "speaker_b": "Ben",
  "session_1_date_time": "8:05 pm on 3 June, 2023",
  "session_1": [
    {"speaker": "Ann", "dia_id": "D1:1", "text": "Back from the lake."},
    {"speaker": "Ben", "dia_id": "D1:2", "text": ""},
    {"speaker": "Ann", "dia_id": "D1:3", "text": "", "img_url": ["http://x"],
     "blip_caption": "a boat on a lake", "query": "boat lake"}
  ],
  "session_2_date_time": "9:15 am on 12 May, 2023",
  "session_2": [
    {"speaker": "Ben", "dia_id": "D2:1", "text": "Hi Ann!"},
    {"speaker": "Ann", "dia_id": "D2:2", "text": "I adopted a cat."}
  ],
  "session_1_observation": {
    "Ann": [["Ann went to a lake.", "D1:1"], ["Ann has a boat.", ["D1:3", "D1:1"]]],
    "Ben": [["Ben said nothing.", "D1:2"]]
  },
  "session_2_observation": {
    "Ann": [["Ann adopted a cat.", "D2:2, D2:1"]]
  },
  "session_1_summary": "ignored", "events_session_1": {}, "qa": []
})json";

TEST(LocomoDate, Formats) {
    auto d = parse_locomo_date("1:56 pm on 8 May, 2023");
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->iso_utc(), "2023-05-08T13:56:00.000Z");
    EXPECT_EQ(parse_locomo_date("12:48 am on 1 February, 2023")->iso_utc(),
              "2023-02-01T00:48:00.000Z");
    EXPECT_EQ(parse_locomo_date("12:05 PM on 1 Sept, 2023")->iso_utc(), "2023-09-01T12:05:00.000Z");
    EXPECT_EQ(parse_locomo_date("2022-12-31")->iso_utc(), "2022-12-31T00:00:00.000Z");
    EXPECT_EQ(parse_locomo_date("1:00 am on 1 January, 1970")->epoch_seconds(), 3600);
    EXPECT_LT(*parse_locomo_date("11:59 pm on 7 May, 2023"),
              *parse_locomo_date("1:56 pm on 8 May, 2023"));
    for (const char* bad : {"", "yesterday", "13:00 pm on 8 May, 2023", "1:56 pm on 31 June, 2023",
                            "1:56 pm on 8 Ma, 2023", "1:56 pm on 8 May 2023", "2023-13-01"})
        EXPECT_FALSE(parse_locomo_date(bad).ok()) << bad;
}

TEST(LocomoImport, SyntheticConversation) {
    auto conv = parse_locomo(kSynthetic);
    ASSERT_TRUE(conv.ok()) << conv.error().message;
    EXPECT_EQ(conv->sessions, 2u);
    EXPECT_EQ(conv->skipped_turns, 1u);
    ASSERT_EQ(conv->turns.size(), 4u);
    // session_2 is first in time, so it is session_index 1.
    EXPECT_EQ(conv->turns[0].session_id, "session_2");
    EXPECT_EQ(conv->turns[0].session_index, 1);
    EXPECT_EQ(conv->turns[0].timestamp, "9:15 am on 12 May, 2023");
    EXPECT_EQ(conv->turns[2].session_id, "session_1");
    EXPECT_EQ(conv->turns[2].session_index, 2);
    EXPECT_EQ(conv->turns[3].turn_index, 2);  // the skipped turn keeps its index
    EXPECT_EQ(conv->turns[3].image_caption, "a boat on a lake");
    EXPECT_EQ(conv->turns[3].image_query, "boat lake");
    ASSERT_EQ(conv->facts.size(), 4u);
    // Facts in chronological session order: session_2's first.
    EXPECT_EQ(conv->facts[0].text, "Ann adopted a cat.");
    EXPECT_EQ(conv->facts[0].source, (TurnRef{"session_2", 1}));
    EXPECT_EQ(conv->facts[0].created_at, "2023-05-12T09:15:00.000Z");
    EXPECT_EQ(conv->facts[2].source, (TurnRef{"session_1", 2}));  // first of a list
    EXPECT_FALSE(conv->facts[3].source.has_value());             // its turn was skipped
    EXPECT_EQ(conv->facts_without_source, 1u);

    TempDir dir;
    const std::string path = dir.file("conv-7.json");
    std::ofstream(path) << kSynthetic;
    auto store = MemoryStore::open(dir.file("m.db"));
    ASSERT_TRUE(store.ok());
    auto report = import_locomo(**store, path);
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->user, "conv-7");
    EXPECT_EQ(report->turns, 4u);
    EXPECT_EQ(report->facts, 4u);
    EXPECT_EQ((*store)->list_turns("conv-7").value(), conv->turns);
    EXPECT_FALSE(import_locomo(**store, path).ok());  // the user already has turns
    EXPECT_TRUE(import_locomo(**store, path, "other").ok());
}

TEST(LocomoImport, BadFiles) {
    EXPECT_FALSE(parse_locomo("{not json").ok());
    EXPECT_FALSE(parse_locomo("[1, 2]").ok());
    EXPECT_FALSE(parse_locomo(R"({"speaker_a": "A"})").ok());
    EXPECT_FALSE(parse_locomo(R"({"session_1": [], "session_1_date_time": "soon"})").ok());
    EXPECT_FALSE(parse_locomo(R"({"session_1": {}, "session_1_date_time": "2023-01-01"})").ok());
    EXPECT_FALSE(read_locomo_file("/nonexistent/26.json").ok());
}

// Counts from the raw JSON, by rules written independently of the importer: dia_id "Dn:m" is
// turn m-1 of session_n.
struct Expected {
    std::size_t sessions = 0, turns = 0, skipped = 0, facts = 0;
    std::vector<std::optional<TurnRef>> sources;
};

Expected expected_counts(const json& root) {
    Expected e;
    const std::regex session_key(R"(session_(\d+))"), dia(R"(D(\d+):(\d+))");
    std::vector<int> numbers;
    for (const auto& [key, value] : root.items()) {
        std::smatch m;
        if (!std::regex_match(key, m, session_key)) continue;
        numbers.push_back(std::stoi(m[1]));
        ++e.sessions;
        for (const auto& t : value) {
            const bool empty = t.value("text", "").empty() && t.value("blip_caption", "").empty();
            ++(empty ? e.skipped : e.turns);
        }
    }
    // These files list sessions in time order already, so numeric order is chronological.
    std::sort(numbers.begin(), numbers.end());
    for (int n : numbers) {
        const std::string key = "session_" + std::to_string(n) + "_observation";
        if (!root.contains(key)) continue;
        for (const auto& [speaker, entries] : root[key].items()) {
            for (const auto& entry : entries) {
                ++e.facts;
                const json& src = entry[1].is_array() ? entry[1][0] : entry[1];
                const std::string s = src.get<std::string>();
                std::smatch m;
                if (std::regex_search(s, m, dia))
                    e.sources.push_back(TurnRef{"session_" + m[1].str(), std::stoi(m[2]) - 1});
                else
                    e.sources.push_back(std::nullopt);
            }
        }
    }
    return e;
}

TEST(LocomoImport, RealConversationCounts) {
    const char* dir_env = std::getenv("INFERSCALE_LOCOMO");
    const std::string path =
        std::string(dir_env ? dir_env : "../shared/data/locomo10") + "/30.json";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no LoCoMo data at " << path;
    std::ifstream in(path);
    const Expected want = expected_counts(json::parse(in));

    TempDir dir;
    auto store = MemoryStore::open(dir.file("m.db"));
    ASSERT_TRUE(store.ok());
    auto report = import_locomo(**store, path);
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->user, "30");
    EXPECT_EQ(report->sessions, want.sessions);
    EXPECT_EQ(report->turns, want.turns);
    EXPECT_EQ(report->skipped_turns, want.skipped);
    EXPECT_EQ(report->facts, want.facts);

    auto turns = (*store)->list_turns("30");
    auto facts = (*store)->list_facts("30");
    ASSERT_TRUE(turns.ok() && facts.ok());
    EXPECT_EQ(turns->size(), want.turns);
    ASSERT_EQ(facts->size(), want.facts);
    for (std::size_t i = 0; i < facts->size(); ++i)
        EXPECT_EQ((*facts)[i].source, want.sources[i]) << (*facts)[i].text;
    // Chronological: session dates never go backwards along the turn list.
    for (std::size_t i = 1; i < turns->size(); ++i)
        EXPECT_LE(*parse_locomo_date((*turns)[i - 1].timestamp),
                  *parse_locomo_date((*turns)[i].timestamp));
}

}  // namespace
}  // namespace inferscale::memory
