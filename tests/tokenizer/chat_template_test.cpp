// ChatTemplate reproduces transformers' apply_chat_template output exactly for the real
// templates of Llama-3.1-8B-Instruct, Mistral-7B-Instruct-v0.3, Qwen2.5-7B-Instruct and
// SmolLM2 (with and without a system message, multi-turn, with and without the generation
// prompt), and detects each template's family from its source.

#include <gtest/gtest.h>

#include "fixture_util.h"
#include "tokenizer/chat_template.h"

namespace inferscale::tokenizer {
namespace {

using testing::fixture_path;
using testing::read_json;
using testing::read_text;

ChatTemplate::Kind kind_named(const std::string& name) {
    if (name == "Llama3") return ChatTemplate::Kind::Llama3;
    if (name == "Mistral") return ChatTemplate::Kind::Mistral;
    return ChatTemplate::Kind::ChatML;
}

TEST(ChatTemplateTest, MatchesTransformers) {
    const auto expected = read_json("chat_templates_expected.json");
    const auto& conversations = expected.at("conversations");
    int checked = 0;
    for (const auto& c : expected.at("cases")) {
        const std::string name = c.at("template");
        SCOPED_TRACE(name + " / " + c.at("conversation").get<std::string>() +
                     (c.at("add_generation_prompt").get<bool>() ? " +gen" : ""));
        auto tmpl =
            ChatTemplate::detect(read_text(fixture_path("chat_templates/" + name + ".jinja")));
        ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
        EXPECT_EQ(tmpl->kind(), kind_named(c.at("kind")));
        std::vector<ChatMessage> messages;
        for (const auto& m : conversations.at(c.at("conversation").get<std::string>())) {
            messages.push_back({m.at("role"), m.at("content")});
        }
        EXPECT_EQ(tmpl->render(messages, c.at("add_generation_prompt")),
                  c.at("rendered").get<std::string>());
        ++checked;
    }
    EXPECT_EQ(checked, 32);
}

TEST(ChatTemplateTest, DefaultSystemPrompts) {
    auto smol = ChatTemplate::detect(read_text(fixture_path("chat_templates/smollm2.jinja")));
    ASSERT_TRUE(smol.ok());
    EXPECT_EQ(smol->default_system_prompt(),
              "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
    auto qwen = ChatTemplate::detect(read_text(fixture_path("chat_templates/qwen2_5.jinja")));
    ASSERT_TRUE(qwen.ok());
    EXPECT_EQ(qwen->default_system_prompt(),
              "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
}

TEST(ChatTemplateTest, UnknownTemplateIsAnError) {
    EXPECT_FALSE(ChatTemplate::detect("{{ messages }}").ok());
    EXPECT_FALSE(ChatTemplate::detect("").ok());
}

}  // namespace
}  // namespace inferscale::tokenizer
