// Which fixture templates render tools and in which call format, and the generic format's
// messages: the instruction in the system turn, calls and results of the history as text that
// templates without tools (SmolLM2, Gemma 3) accept.

#include "toolcall/template_tools.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace inferscale::toolcall {
namespace {

jinja::ChatTemplate fixture_template(const std::string& name, jinja::SpecialTokens tokens) {
    const char* root = std::getenv("INFERSCALE_FIXTURES");
    std::ifstream in(std::string(root ? root : "tests/fixtures") + "/templates/" + name + ".jinja",
                     std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    auto t = jinja::ChatTemplate::parse(buffer.str(), std::move(tokens));
    EXPECT_TRUE(t.ok()) << name;
    return std::move(t).value();
}

std::vector<Tool> weather_tool() {
    nlohmann::ordered_json params = {{"type", "object"},
                                     {"properties", {{"city", {{"type", "string"}}}}},
                                     {"required", {"city"}}};
    nlohmann::ordered_json spec = {
        {"type", "function"},
        {"function",
         {{"name", "get_weather"}, {"description", "Weather."}, {"parameters", params}}}};
    return {{"get_weather", "Weather.", params, spec}};
}

std::vector<jinja::ChatMessage> history() {
    jinja::ChatMessage call{"assistant", ""};
    call.tool_calls.push_back({"call_1", "get_weather", "{\"city\": \"Paris\"}"});
    jinja::ChatMessage result{"tool", "Sunny, 21 C."};
    result.tool_call_id = "call_1";
    return {{"system", "Be brief."},
            {"user", "Weather in Paris?"},
            call,
            result,
            {"assistant", "Sunny."},
            {"user", "Thanks."}};
}

TEST(TemplateTools, DetectsFormats) {
    const jinja::SpecialTokens st{"<s>", "</s>"};
    struct Case {
        const char* name;
        bool renders;
        Format format;
    };
    for (const Case& c :
         {Case{"qwen2_5", true, Format::Hermes}, Case{"qwen2_5_coder", true, Format::Hermes},
          Case{"llama3_1", true, Format::Llama3}, Case{"llama3_2", true, Format::Llama3},
          Case{"mistral_v0_3", true, Format::Mistral}, Case{"smollm2", false, Format::Generic},
          Case{"gemma3", false, Format::Generic}}) {
        const TemplateTools t = detect_template_tools(fixture_template(c.name, st));
        EXPECT_EQ(t.renders_tools, c.renders) << c.name;
        EXPECT_EQ(t.format, c.format) << c.name;
    }
}

TEST(TemplateTools, GenericMessages) {
    const auto out = generic_messages(history(), weather_tool(), {}, true);
    ASSERT_EQ(out.size(), 6u);
    EXPECT_EQ(out[0].role, "system");
    EXPECT_TRUE(out[0].content.starts_with("Be brief.\n\nYou can call these tools"));
    EXPECT_NE(out[0].content.find("{\"name\": \"get_weather\", \"description\": \"Weather.\", "
                                  "\"parameters\": {\"type\": \"object\""),
              std::string::npos);
    EXPECT_NE(out[0].content.find("{\"response\": "), std::string::npos);
    EXPECT_EQ(out[2].role, "assistant");
    EXPECT_EQ(out[2].content,
              "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": "
              "\"Paris\"}}]}");
    EXPECT_TRUE(out[2].tool_calls.empty());
    EXPECT_EQ(out[3].role, "user");
    EXPECT_EQ(out[3].content,
              "{\"tool_results\": [{\"tool_call_id\": \"call_1\", \"name\": \"get_weather\", "
              "\"content\": \"Sunny, 21 C.\"}]}");
    // Without tools the history is still written out; no instruction is added.
    const auto plain = generic_messages(history(), {}, {}, true);
    EXPECT_EQ(plain[0].content, "Be brief.");
}

TEST(TemplateTools, GenericInstructionFollowsTheChoice) {
    const auto tools = weather_tool();
    const std::string required =
        generic_instruction(tools, {ToolChoice::Kind::Required, ""}, false);
    EXPECT_NE(required.find("You must call a tool"), std::string::npos);
    EXPECT_EQ(required.find("\"response\""), std::string::npos);
    EXPECT_NE(required.find("one tool at a time"), std::string::npos);
    EXPECT_NE(generic_instruction(tools, {ToolChoice::Kind::Named, "get_weather"}, true)
                  .find("You must call the tool \"get_weather\""),
              std::string::npos);
}

TEST(TemplateTools, TemplatesWithoutToolsRenderTheGenericHistory) {
    for (const auto& [name, tokens] :
         {std::pair{"gemma3", jinja::SpecialTokens{"<bos>", "<eos>"}},
          std::pair{"smollm2", jinja::SpecialTokens{"<|im_start|>", "<|im_end|>"}}}) {
        const auto t = fixture_template(name, tokens);
        const auto messages = generic_messages(history(), weather_tool(), {}, true);
        auto rendered = t.render(messages, true);
        ASSERT_TRUE(rendered.ok()) << name << ": " << rendered.error().message;
        EXPECT_NE(rendered->find("\"tool_results\""), std::string::npos) << name;
        EXPECT_NE(rendered->find("You can call these tools"), std::string::npos) << name;
    }
}

TEST(TemplateTools, ToolsValueKeepsTheEntryAsSent) {
    const auto t = fixture_template("qwen2_5", {"", "<|im_end|>"});
    const std::vector<jinja::ChatMessage> messages = {{"user", "hi"}};
    auto rendered = t.render(messages, true, tools_value(weather_tool()));
    ASSERT_TRUE(rendered.ok());
    EXPECT_NE(rendered->find("{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                             "\"description\": \"Weather.\", \"parameters\": {\"type\": "
                             "\"object\", \"properties\""),
              std::string::npos)
        << *rendered;
}

}  // namespace
}  // namespace inferscale::toolcall
