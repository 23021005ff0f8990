// choose_memory: the one rule by which the server's bodies and the CLI's flags become a
// request's memory options.

#include "engine/request.h"

#include <gtest/gtest.h>

namespace inferscale::engine {
namespace {

TEST(RequestTest, ParsesModes) {
    EXPECT_EQ(parse_memory_mode("kv").value(), MemoryMode::Kv);
    EXPECT_EQ(parse_memory_mode("prompt").value(), MemoryMode::Prompt);
    EXPECT_EQ(parse_memory_mode("none").value(), MemoryMode::None);
    EXPECT_FALSE(parse_memory_mode("rag").ok());
    for (MemoryMode m : {MemoryMode::Kv, MemoryMode::Prompt, MemoryMode::None})
        EXPECT_EQ(parse_memory_mode(memory_mode_name(m)).value(), m);
}

TEST(RequestTest, AUserTakesTheDefaultModeAndNoUserNone) {
    const MemoryDefaults defaults{MemoryMode::Prompt, 7, 2};
    EngineRequest with_user;
    with_user.user = "alice";
    EXPECT_FALSE(choose_memory({}, defaults, with_user));
    EXPECT_EQ(with_user.memory_mode, MemoryMode::Prompt);
    EXPECT_EQ(with_user.retrieval.top_k, 7);
    EXPECT_EQ(with_user.retrieval.context_window, 2);

    EngineRequest anonymous;
    EXPECT_FALSE(choose_memory({}, defaults, anonymous));
    EXPECT_EQ(anonymous.memory_mode, MemoryMode::None);
    EXPECT_FALSE(choose_memory({"none", {}, {}}, defaults, anonymous));
    EXPECT_EQ(anonymous.memory_mode, MemoryMode::None);
}

TEST(RequestTest, ExplicitChoicesOverrideAndAreChecked) {
    EngineRequest r;
    r.user = "alice";
    EXPECT_FALSE(choose_memory({"kv", 0, 1000}, {}, r));
    EXPECT_EQ(r.memory_mode, MemoryMode::Kv);
    EXPECT_EQ(r.retrieval.top_k, 0);
    EXPECT_EQ(r.retrieval.context_window, 1000);

    EXPECT_EQ(choose_memory({"rag", {}, {}}, {}, r)->option, "mode");
    EXPECT_EQ(choose_memory({{}, -1, {}}, {}, r)->option, "top_k");
    EXPECT_EQ(choose_memory({{}, 1001, {}}, {}, r)->option, "top_k");
    EXPECT_EQ(choose_memory({{}, {}, -1}, {}, r)->option, "context_window");

    EXPECT_EQ(choose_memory({{}, {}, {}, "bm42"}, {}, r)->option, "retrieval");

    EngineRequest anonymous;
    const auto e = choose_memory({"prompt", {}, {}}, {}, anonymous);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->option, "user");
}

TEST(RequestTest, TheRetrievalMethodIsTheChoiceOrTheDefaultOrUnset) {
    EngineRequest r;
    r.user = "alice";
    EXPECT_FALSE(choose_memory({}, {}, r));
    EXPECT_FALSE(r.retrieval.method.has_value());  // the retriever's own default
    MemoryDefaults defaults;
    defaults.retrieval = retrieval::RetrievalMethod::Bm25;
    EXPECT_FALSE(choose_memory({}, defaults, r));
    EXPECT_EQ(r.retrieval.method, retrieval::RetrievalMethod::Bm25);
    EXPECT_FALSE(choose_memory({{}, {}, {}, "dense"}, defaults, r));
    EXPECT_EQ(r.retrieval.method, retrieval::RetrievalMethod::Dense);
}

}  // namespace
}  // namespace inferscale::engine
