// forced_call_grammar with a stand-in converter: the GBNF text per format, one call or many,
// required (any tool) or a named one.

#include "toolcall/forced_grammar.h"

#include <gtest/gtest.h>

namespace inferscale::toolcall {
namespace {

std::vector<Tool> two_tools() {
    Tool weather{"get_weather",
                 "Weather.",
                 {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}},
                 {}};
    Tool add{"add", "", nlohmann::ordered_json::object(), {}};
    return {weather, add};
}

// Records the schemas it was given; every schema becomes a rule matching "{}" plus a helper.
struct FakeConverter {
    std::vector<std::string> seen;
    SchemaToGbnf fn() {
        return [this](const nlohmann::ordered_json& schema,
                      std::string_view rule) -> Result<std::string> {
            seen.push_back(std::string(rule) + "=" + schema.dump());
            return std::string(rule) + " ::= \"{}\" " + std::string(rule) + "-x\n" +
                   std::string(rule) + "-x ::= \"\"";
        };
    }
};

TEST(ForcedGrammar, HermesRequiredParallel) {
    FakeConverter c;
    auto g = forced_call_grammar(Format::Hermes, two_tools(), {ToolChoice::Kind::Required, ""},
                                 true, c.fn());
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(*g,
              "root ::= tool-call (\"\\n\" tool-call)*\n"
              "tool-call ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n"
              "call ::= call-0 | call-1\n"
              "call-0 ::= \"{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": \" "
              "tool-0-args \"}\"\n"
              "tool-0-args ::= \"{}\" tool-0-args-x\n"
              "tool-0-args-x ::= \"\"\n"
              "call-1 ::= \"{\\\"name\\\": \\\"add\\\", \\\"arguments\\\": \" tool-1-args \"}\"\n"
              "tool-1-args ::= \"{}\" tool-1-args-x\n"
              "tool-1-args-x ::= \"\"\n");
    EXPECT_EQ(c.seen, (std::vector<std::string>{
                          "tool-0-args={\"type\":\"object\",\"properties\":{\"city\":{"
                          "\"type\":\"string\"}}}",
                          "tool-1-args={\"type\":\"object\"}"}));
}

TEST(ForcedGrammar, NamedSingleCallPerFormat) {
    const ToolChoice named{ToolChoice::Kind::Named, "add"};
    FakeConverter c;
    const auto grammar = [&](Format f) {
        auto g = forced_call_grammar(f, two_tools(), named, false, c.fn());
        EXPECT_TRUE(g.ok());
        return g.ok() ? g.value() : "";
    };
    const std::string call =
        "call ::= call-1\n"
        "call-1 ::= \"{\\\"name\\\": \\\"add\\\", \\\"arguments\\\": \" tool-1-args \"}\"\n"
        "tool-1-args ::= \"{}\" tool-1-args-x\ntool-1-args-x ::= \"\"\n";
    EXPECT_EQ(grammar(Format::Generic), "root ::= \"{\\\"tool_calls\\\": [\" call \"]}\"\n" + call);
    EXPECT_EQ(grammar(Format::Mistral), "root ::= \"[TOOL_CALLS][\" call \"]\"\n" + call);
    EXPECT_EQ(
        grammar(Format::Hermes),
        "root ::= tool-call\ntool-call ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n" + call);
    std::string llama = call;
    llama.replace(llama.find("arguments"), 9, "parameters");
    EXPECT_EQ(grammar(Format::Llama3), "root ::= call\n" + llama);
}

TEST(ForcedGrammar, Errors) {
    FakeConverter c;
    EXPECT_FALSE(forced_call_grammar(Format::Hermes, two_tools(), {ToolChoice::Kind::Named, "nope"},
                                     true, c.fn())
                     .ok());
    EXPECT_FALSE(
        forced_call_grammar(Format::Hermes, two_tools(), {ToolChoice::Kind::Auto, ""}, true, c.fn())
            .ok());
    const SchemaToGbnf failing = [](const nlohmann::ordered_json&,
                                    std::string_view) -> Result<std::string> {
        return make_error("unsupported keyword");
    };
    auto g = forced_call_grammar(Format::Hermes, two_tools(), {ToolChoice::Kind::Required, ""},
                                 true, failing);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error().message, "tool 'get_weather' parameters: unsupported keyword");
}

TEST(ForcedGrammar, Literals) {
    EXPECT_EQ(gbnf_literal("a\"b\\c\n\t\x01é"), "\"a\\\"b\\\\c\\n\\t\\x01é\"");
}

}  // namespace
}  // namespace inferscale::toolcall
