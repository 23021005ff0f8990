// CallParser: each format's calls from complete outputs, several calls, text before a call,
// malformed calls left as content byte for byte, and the same result however a stream cuts
// the text (every split point, and one byte at a time).

#include "toolcall/call_parser.h"

#include <gtest/gtest.h>

namespace inferscale::toolcall {
namespace {

ParsedCall weather(std::string city) { return {"get_weather", "{\"city\":\"" + city + "\"}"}; }

// The whole text at once, then every two-piece split and byte-by-byte streaming, must agree.
ParsedOutput check_streams(Format format, std::string_view text) {
    const ParsedOutput whole = parse_output(format, text);
    const auto same = [&](const ParsedOutput& got, const std::string& how) {
        EXPECT_EQ(got.content, whole.content) << how;
        EXPECT_EQ(got.calls, whole.calls) << how;
    };
    for (std::size_t cut = 0; cut <= text.size(); ++cut) {
        CallParser p(format);
        ParsedOutput got;
        for (ParseDelta d : {p.push(text.substr(0, cut)), p.push(text.substr(cut)), p.finish()}) {
            got.content += d.content;
            got.calls.insert(got.calls.end(), d.calls.begin(), d.calls.end());
        }
        same(got, "split at " + std::to_string(cut));
    }
    CallParser p(format);
    ParsedOutput got;
    for (std::size_t i = 0; i <= text.size(); ++i) {
        ParseDelta d = i < text.size() ? p.push(text.substr(i, 1)) : p.finish();
        got.content += d.content;
        got.calls.insert(got.calls.end(), d.calls.begin(), d.calls.end());
    }
    same(got, "byte by byte");
    return whole;
}

TEST(CallParser, HermesBlocks) {
    const auto out = check_streams(
        Format::Hermes,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"London\"}}\n</tool_call>");
    EXPECT_EQ(out.content, "");
    EXPECT_EQ(out.calls, (std::vector<ParsedCall>{weather("Paris"), weather("London")}));
}

TEST(CallParser, HermesTextBeforeACall) {
    const auto out = check_streams(
        Format::Hermes,
        "Let me check <tool that.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        "{\"city\": \"Paris\"}}\n</tool_call>");
    EXPECT_EQ(out.content, "Let me check <tool that.");
    EXPECT_EQ(out.calls, std::vector<ParsedCall>{weather("Paris")});
}

TEST(CallParser, HermesKeepsArgumentOrderAndTakesTextArguments) {
    const auto out = check_streams(
        Format::Hermes,
        "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"z\\\": 1, \\\"a\\\": [true]}\"}"
        "</tool_call>");
    EXPECT_EQ(out.calls, (std::vector<ParsedCall>{{"f", "{\"z\":1,\"a\":[true]}"}}));
}

TEST(CallParser, HermesUnclosedBlockAtTheEnd) {
    const auto out = check_streams(
        Format::Hermes,
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n");
    EXPECT_EQ(out.calls, std::vector<ParsedCall>{weather("Paris")});
}

TEST(CallParser, HermesMalformedBlockStaysContent) {
    const std::string text =
        "Sure. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n"
        "</tool_call> done\n";
    const auto out = check_streams(Format::Hermes, text);
    EXPECT_EQ(out.content, text);
    EXPECT_TRUE(out.calls.empty());
    const std::string cut = "<tool_call>\n{\"name\": \"get_weather\", \"argu";
    EXPECT_EQ(check_streams(Format::Hermes, cut).content, cut);  // a length cut mid-call
}

TEST(CallParser, BareAndFencedJsonCalls) {
    // What Qwen2.5-Coder writes for the Hermes template.
    const auto fenced =
        check_streams(Format::Hermes,
                      "```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\n    \"city\": "
                      "\"Paris\"\n  }\n}\n```");
    EXPECT_EQ(fenced.content, "");
    EXPECT_EQ(fenced.calls, std::vector<ParsedCall>{weather("Paris")});
    const auto bare =
        check_streams(Format::Hermes,
                      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}");
    EXPECT_EQ(bare.calls, (std::vector<ParsedCall>{weather("Paris"), weather("London")}));
}

TEST(CallParser, JsonThatIsNotACallStaysContent) {
    for (const std::string text : {"{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                                   "\"Paris\"}}\n{\"temperature\": 21}",
                                   "```python\nprint(1)\n```", "```json\n{\"a\": 1}\n```", "[1, 2]",
                                   "{\"name\": ", "  {not json} tail  ", "```", "<|python"}) {
        const auto out = check_streams(Format::Hermes, text);
        EXPECT_EQ(out.content, text);
        EXPECT_TRUE(out.calls.empty()) << text;
    }
}

TEST(CallParser, PlainTextIsUnchanged) {
    for (Format f : {Format::Hermes, Format::Llama3, Format::Mistral, Format::Generic}) {
        const std::string text = "  The weather is [fine] <b>today</b>.\n\n";
        const auto out = check_streams(f, text);
        EXPECT_EQ(out.content, text) << format_name(f);
        EXPECT_TRUE(out.calls.empty());
    }
}

TEST(CallParser, Llama3) {
    auto out = check_streams(Format::Llama3,
                             "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
    EXPECT_EQ(out.calls, std::vector<ParsedCall>{weather("Paris")});
    out = check_streams(Format::Llama3,
                        "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": "
                        "\"Paris\"}}; {\"name\": \"get_weather\", \"parameters\": {\"city\": "
                        "\"London\"}}");
    EXPECT_EQ(out.calls, (std::vector<ParsedCall>{weather("Paris"), weather("London")}));
    EXPECT_EQ(out.content, "");
    // Text first: Llama 3.1 calls only start the output.
    const std::string later = "I will call {\"name\": \"get_weather\", \"parameters\": {}}";
    EXPECT_EQ(check_streams(Format::Llama3, later).content, later);
}

TEST(CallParser, Mistral) {
    auto out = check_streams(
        Format::Mistral,
        "Checking.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}, \"id\": "
        "\"abc123def\"}]");
    EXPECT_EQ(out.content, "Checking.");
    EXPECT_EQ(out.calls, (std::vector<ParsedCall>{weather("Paris"), weather("London")}));
    // The marker is a special token some decoders drop: the bare list reads the same.
    out = check_streams(Format::Mistral,
                        "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]");
    EXPECT_EQ(out.calls, std::vector<ParsedCall>{weather("Paris")});
    const std::string bad = "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": 3}]";
    EXPECT_EQ(check_streams(Format::Mistral, bad).content, bad);
}

TEST(CallParser, Generic) {
    auto out = check_streams(
        Format::Generic,
        " {\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}]}");
    EXPECT_EQ(out.content, "");
    EXPECT_EQ(out.calls, (std::vector<ParsedCall>{weather("Paris"), weather("London")}));
    out = check_streams(Format::Generic, "{\"response\": \"It is sunny.\"}");
    EXPECT_EQ(out.content, "It is sunny.");
    EXPECT_TRUE(out.calls.empty());
    const std::string bad = "{\"tool_calls\": [{\"arguments\": {}}]}";
    EXPECT_EQ(check_streams(Format::Generic, bad).content, bad);
    // {"response"} is the generic format's alone.
    const std::string response = "{\"response\": \"hi\"}";
    EXPECT_EQ(check_streams(Format::Hermes, response).content, response);
}

TEST(CallParser, ContentStreamsBeforeTheCallIsKnown) {
    CallParser p(Format::Hermes);
    EXPECT_EQ(p.push("Hello").content, "Hello");
    EXPECT_EQ(p.push(" there <tool").content, " there");
    const ParseDelta d = p.push(
        "_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\"}}</tool_call>");
    EXPECT_EQ(d.content, "");
    EXPECT_EQ(d.calls, std::vector<ParsedCall>{weather("Paris")});
    EXPECT_EQ(p.num_calls(), 1u);
    EXPECT_EQ(p.finish().content, "");
}

TEST(CallParser, CallsToOtherFunctionsStayContent) {
    const std::vector<std::string> names = {"get_weather"};
    const std::string person = "{\"name\": \"Ada\", \"arguments\": {\"age\": 36}}";
    EXPECT_EQ(parse_output(Format::Hermes, person, names).content, person);
    EXPECT_EQ(parse_output(Format::Hermes, person).calls.size(), 1u);  // no names: any
    const std::string block = "<tool_call>" + person + "</tool_call>";
    EXPECT_EQ(parse_output(Format::Hermes, block, names).content, block);
    const auto ok =
        parse_output(Format::Hermes,
                     "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
                     "</tool_call>",
                     names);
    EXPECT_EQ(ok.calls, std::vector<ParsedCall>{weather("Paris")});
}

TEST(CallParser, CallIds) {
    const std::string a = new_call_id(), b = new_call_id();
    EXPECT_EQ(a.size(), 29u);
    EXPECT_TRUE(a.starts_with("call_"));
    EXPECT_NE(a, b);
}

}  // namespace
}  // namespace inferscale::toolcall
