// forced_call_grammar against the grammar engine and the call parser: per format, the grammar
// accepts the model's call text (one call, or several when parallel), rejects a call of a tool
// the choice does not allow, arguments that break the parameters schema and a second call when
// not parallel, and what it accepts parses back as the same calls.

#include "toolcall/forced_grammar.h"

#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "toolcall/call_parser.h"

namespace inferscale::toolcall {
namespace {

std::vector<Tool> two_tools() {
    Tool weather{"get_weather",
                 "Weather.",
                 {{"type", "object"},
                  {"properties", {{"city", {{"type", "string"}}}}},
                  {"required", {"city"}}},
                 {}};
    Tool add{"add", "", nlohmann::ordered_json::object(), {}};
    return {weather, add};
}

std::shared_ptr<const grammar::Grammar> compile(Format format, const ToolChoice& choice,
                                                bool parallel) {
    auto text = forced_call_grammar(format, two_tools(), choice, parallel);
    IS_CHECK(text.ok()) << text.error().message;
    auto g = grammar::Grammar::from_gbnf(*text);
    IS_CHECK(g.ok()) << g.error().message << "\n" << *text;
    return *g;
}

std::string call_text(Format format, const std::string& name, const std::string& args) {
    const std::string key = format == Format::Llama3 ? "parameters" : "arguments";
    return "{\"name\": \"" + name + "\", \"" + key + "\": " + args + "}";
}

std::string output(Format format, const std::vector<std::string>& calls) {
    std::string out;
    for (std::size_t i = 0; i < calls.size(); ++i) {
        switch (format) {
            case Format::Hermes:
                out += (i ? "\n" : "") + std::string("<tool_call>\n") + calls[i] + "\n</tool_call>";
                break;
            case Format::Llama3: out += (i ? "; " : "") + calls[i]; break;
            case Format::Mistral:
            case Format::Generic: out += (i ? ", " : "") + calls[i]; break;
        }
    }
    if (format == Format::Mistral) return "[TOOL_CALLS][" + out + "]";
    if (format == Format::Generic) return "{\"tool_calls\": [" + out + "]}";
    return out;
}

TEST(ForcedGrammar, AcceptsTheFormatsCallsAndParsesBack) {
    for (Format format : {Format::Hermes, Format::Llama3, Format::Mistral, Format::Generic}) {
        SCOPED_TRACE(static_cast<int>(format));
        const std::string weather = call_text(format, "get_weather", "{\"city\": \"Paris\"}");
        const std::string add = call_text(format, "add", "{}");
        const auto required = compile(format, {ToolChoice::Kind::Required, ""}, true);
        for (const auto& calls : std::vector<std::vector<std::string>>{
                 {weather}, {add}, {weather, add}}) {
            const std::string text = output(format, calls);
            EXPECT_TRUE(required->accepts(text)) << text;
            const ParsedOutput parsed = parse_output(format, text);
            ASSERT_EQ(parsed.calls.size(), calls.size()) << text;
            EXPECT_EQ(parsed.calls[0].name, calls[0] == weather ? "get_weather" : "add");
        }
        // The schema's required field, and only tools that exist.
        EXPECT_FALSE(required->accepts(output(format, {call_text(format, "get_weather", "{}")})));
        EXPECT_FALSE(required->accepts(output(format, {call_text(format, "nope", "{}")})));
        EXPECT_FALSE(required->accepts(output(format, {call_text(format, "get_weather",
                                                                "{\"city\": 3}")})));
        const auto named = compile(format, {ToolChoice::Kind::Named, "add"}, false);
        EXPECT_TRUE(named->accepts(output(format, {add})));
        EXPECT_FALSE(named->accepts(output(format, {weather})));
        EXPECT_FALSE(named->accepts(output(format, {add, add})));  // not parallel
    }
}

TEST(ForcedGrammar, Errors) {
    EXPECT_FALSE(forced_call_grammar(Format::Hermes, two_tools(),
                                     {ToolChoice::Kind::Named, "nope"}, true)
                     .ok());
    EXPECT_FALSE(
        forced_call_grammar(Format::Hermes, two_tools(), {ToolChoice::Kind::Auto, ""}, true).ok());
    std::vector<Tool> tools = two_tools();
    tools[0].parameters["uniqueItems"] = true;
    auto g = forced_call_grammar(Format::Hermes, tools, {ToolChoice::Kind::Required, ""}, true);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.error().message.find("tool 'get_weather' parameters: "), std::string::npos);
    EXPECT_NE(g.error().message.find("uniqueItems"), std::string::npos);
}

// The literals the formats are built from match exactly their bytes.
TEST(ForcedGrammar, LiteralsMatchTheirBytes) {
    for (const std::string text : {"a\"b\\c\n\t\x01é", "<tool_call>\n", "[TOOL_CALLS]["}) {
        auto g = grammar::Grammar::from_gbnf("root ::= " + grammar::gbnf_literal(text));
        ASSERT_TRUE(g.ok()) << g.error().message;
        EXPECT_TRUE((*g)->accepts(text));
        EXPECT_FALSE((*g)->accepts(text + " "));
    }
}

}  // namespace
}  // namespace inferscale::toolcall
