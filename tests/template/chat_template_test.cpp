// ChatTemplate renders exactly what transformers' apply_chat_template renders, byte for byte,
// for the original templates of Llama 3.1/3.2, Mistral v0.3, Qwen2.5 (and Coder), SmolLM2 and
// Gemma 3 (and two templates written to exercise more constructs) over a corpus of
// conversations: system prompts, multi-turn, tools, tool calls, tool results
// (tools/make_template_fixtures.py), and fails where transformers fails.

#include "template/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "template/json_value.h"

namespace inferscale::jinja {
namespace {

using Json = nlohmann::ordered_json;

std::string fixture_text(const std::string& name) {
    const char* root = std::getenv("INFERSCALE_FIXTURES");
    std::ifstream in(std::string(root ? root : "tests/fixtures") + "/templates/" + name,
                     std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::string string_or_empty(const Json& object, const char* key) {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? "" : it->get<std::string>();
}

std::vector<ChatMessage> messages_of(const Json& conversation) {
    std::vector<ChatMessage> out;
    for (const Json& m : conversation) {
        ChatMessage message{m.at("role"), string_or_empty(m, "content")};
        for (const Json& call : m.value("tool_calls", Json::array())) {
            const Json& function = call.at("function");
            message.tool_calls.push_back(
                {call.at("id"), function.at("name"), function.at("arguments").dump()});
        }
        message.tool_call_id = string_or_empty(m, "tool_call_id");
        message.name = string_or_empty(m, "name");
        out.push_back(std::move(message));
    }
    return out;
}

TEST(ChatTemplate, MatchesTransformers) {
    const Json expected = Json::parse(fixture_text("expected.json"));
    const Value tools = from_json(expected.at("tools"));
    int rendered = 0, rejected = 0;
    for (const Json& c : expected.at("cases")) {
        const std::string name = c.at("template");
        const std::string conversation = c.at("conversation");
        SCOPED_TRACE(name + " / " + conversation + (c.at("tools").get<bool>() ? " +tools" : "") +
                     (c.at("add_generation_prompt").get<bool>() ? " +gen" : ""));
        const Json& special = expected.at("special_tokens").at(name);
        auto tmpl =
            ChatTemplate::parse(fixture_text(name + ".jinja"),
                                {string_or_empty(special, "bos_token"), special.at("eos_token")});
        ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
        const Value extra_value = from_json(c.at("extra"));
        const auto out =
            tmpl->render(messages_of(expected.at("conversations").at(conversation)),
                         c.at("add_generation_prompt"),
                         c.at("tools").get<bool>() ? tools : Value(None{}), &extra_value.as_dict());
        if (c.contains("error")) {
            EXPECT_FALSE(out.ok()) << *out;
            ++rejected;
            continue;
        }
        ASSERT_TRUE(out.ok()) << out.error().message;
        EXPECT_EQ(*out, c.at("rendered").get<std::string>());
        ++rendered;
    }
    EXPECT_EQ(rendered, 132);
    EXPECT_EQ(rejected, 12);
}

TEST(ChatTemplate, RaisedExceptionNamesTheTemplateLine) {
    auto tmpl = ChatTemplate::parse(fixture_text("gemma3.jinja"), {"<bos>", "<eos>"});
    ASSERT_TRUE(tmpl.ok());
    const std::vector<ChatMessage> messages = {{"assistant", "Hi"}};
    const auto out = tmpl->render(messages, true);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().message,
              "chat template line 15: Conversation roles must alternate "
              "user/assistant/user/assistant/...");
}

}  // namespace
}  // namespace inferscale::jinja
