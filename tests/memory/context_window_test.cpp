// Context-window selection and truncation (docs/reference-system.md §3.3).

#include <gtest/gtest.h>

#include <vector>

#include "memory/context_window.h"

namespace inferscale::memory {
namespace {

Turn turn(const std::string& session, int session_index, int turn_index) {
    Turn t;
    t.session_id = session;
    t.session_index = session_index;
    t.turn_index = turn_index;
    t.speaker = "S";
    t.text = session + "/" + std::to_string(turn_index);
    return t;
}

// Three sessions whose ids are not in chronological order (session_2 happened first), handed
// over shuffled, with a gap where an empty turn was skipped (session_1 has no turn 1).
std::vector<Turn> conversation() {
    return {turn("session_1", 2, 2), turn("session_2", 1, 0), turn("session_3", 3, 0),
            turn("session_1", 2, 0), turn("session_2", 1, 1), turn("session_3", 3, 1),
            turn("session_2", 1, 2), turn("session_1", 2, 3)};
}

std::vector<std::string> texts(const Result<std::vector<Turn>>& turns) {
    EXPECT_TRUE(turns.ok()) << turns.error().message;
    std::vector<std::string> out;
    if (turns.ok())
        for (const Turn& t : *turns) out.push_back(t.text);
    return out;
}

using Strings = std::vector<std::string>;

TEST(ContextWindow, MiddleOfASession) {
    EXPECT_EQ(texts(select_context_turns(conversation(), {"session_1", 3}, 2)),
              (Strings{"session_1/0", "session_1/2"}));
}

TEST(ContextWindow, CrossesSessionBoundaries) {
    EXPECT_EQ(texts(select_context_turns(conversation(), {"session_1", 2}, 3)),
              (Strings{"session_2/1", "session_2/2", "session_1/0"}));
    EXPECT_EQ(texts(select_context_turns(conversation(), {"session_3", 1}, 4)),
              (Strings{"session_1/0", "session_1/2", "session_1/3", "session_3/0"}));
}

TEST(ContextWindow, StartOfConversation) {
    EXPECT_TRUE(texts(select_context_turns(conversation(), {"session_2", 0}, 5)).empty());
    EXPECT_EQ(texts(select_context_turns(conversation(), {"session_2", 1}, 5)),
              (Strings{"session_2/0"}));
}

TEST(ContextWindow, WindowLargerThanHistoryAndZero) {
    EXPECT_EQ(texts(select_context_turns(conversation(), {"session_3", 1}, 100)),
              (Strings{"session_2/0", "session_2/1", "session_2/2", "session_1/0", "session_1/2",
                       "session_1/3", "session_3/0"}));
    EXPECT_TRUE(texts(select_context_turns(conversation(), {"session_3", 1}, 0)).empty());
}

TEST(ContextWindow, UnknownSourceIsAnError) {
    EXPECT_FALSE(select_context_turns(conversation(), {"session_1", 1}, 2).ok());
    EXPECT_FALSE(select_context_turns({}, {"session_1", 0}, 2).ok());
}

TEST(ContextTruncation, FitsWithoutDropping) {
    const std::vector<std::size_t> tokens = {5, 7, 3};
    auto plan = plan_context_truncation(tokens, 10, 25);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->dropped_tokens, 0u);
    EXPECT_EQ(plan->kept_tokens, 15u);
    EXPECT_EQ(plan->first_turn, 0u);
    EXPECT_EQ(plan->first_turn_offset, 0u);
}

TEST(ContextTruncation, DropsOldestTokensMidTurn) {
    const std::vector<std::size_t> tokens = {5, 7, 3};
    auto plan = plan_context_truncation(tokens, 10, 18);  // room for 8 context tokens
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->dropped_tokens, 7u);
    EXPECT_EQ(plan->kept_tokens, 8u);
    EXPECT_EQ(plan->first_turn, 1u);
    EXPECT_EQ(plan->first_turn_offset, 2u);  // turn 1 loses its first 2 of 7 tokens
}

TEST(ContextTruncation, DropsWholeTurnsExactly) {
    const std::vector<std::size_t> tokens = {5, 7, 3};
    auto plan = plan_context_truncation(tokens, 10, 20);  // room for 10: drop turn 0 exactly
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->dropped_tokens, 5u);
    EXPECT_EQ(plan->first_turn, 1u);
    EXPECT_EQ(plan->first_turn_offset, 0u);
}

TEST(ContextTruncation, TargetFillsTheLimit) {
    const std::vector<std::size_t> tokens = {5, 7};
    auto plan = plan_context_truncation(tokens, 16, 16);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->kept_tokens, 0u);
    EXPECT_EQ(plan->dropped_tokens, 12u);
    EXPECT_EQ(plan->first_turn, 2u);
    EXPECT_EQ(plan->first_turn_offset, 0u);
}

TEST(ContextTruncation, EmptyTurnsAndErrors) {
    const std::vector<std::size_t> tokens = {0, 4, 0, 4};
    auto plan = plan_context_truncation(tokens, 1, 6);  // keep 5 of 8
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->dropped_tokens, 3u);
    EXPECT_EQ(plan->first_turn, 1u);
    EXPECT_EQ(plan->first_turn_offset, 3u);
    plan = plan_context_truncation(tokens, 1, 100);
    EXPECT_EQ(plan->first_turn, 0u);  // nothing dropped: the plan starts at turn 0
    EXPECT_FALSE(plan_context_truncation(tokens, 0, 100).ok());
    EXPECT_FALSE(plan_context_truncation(tokens, 101, 100).ok());
    EXPECT_TRUE(plan_context_truncation({}, 3, 3).ok());
}

TEST(FormatTurnForMemory, ImageTags) {
    Turn t = turn("s", 1, 0);
    t.speaker = "Caroline";
    t.text = "Look at this!";
    EXPECT_EQ(format_turn_for_memory(t), "Caroline: Look at this!");
    t.image_caption = "a dog on a beach";
    EXPECT_EQ(format_turn_for_memory(t),
              "Caroline: Look at this! [Sharing image that shows: a dog on a beach]");
    t.image_query = "dog beach";
    EXPECT_EQ(format_turn_for_memory(t),
              "Caroline: Look at this! [Sharing image - query: dog beach. The image shows: a dog "
              "on a beach]");
    t.image_caption.clear();
    EXPECT_EQ(format_turn_for_memory(t),
              "Caroline: Look at this! [Sharing image - query for: dog beach]");
    t.text.clear();
    EXPECT_EQ(format_turn_for_memory(t), "Caroline: [Sharing image - query for: dog beach]");
}

}  // namespace
}  // namespace inferscale::memory
