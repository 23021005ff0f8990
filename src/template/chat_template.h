#pragma once
// ChatTemplate: a model's own Jinja chat template (GGUF tokenizer.chat_template,
// tokenizer_config.json or a file the user names), parsed when the model loads and rendered per
// request into the prompt text, as transformers' apply_chat_template(tokenize=False) renders it.

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "template/template.h"
#include "template/value.h"

namespace inferscale::jinja {

struct ToolCall {
    std::string id;
    std::string name;
    std::string
        arguments;  // JSON text; an object is rendered as a mapping, as transformers expects
};

struct ChatMessage {
    ChatMessage() = default;
    ChatMessage(std::string role_, std::string content_)
        : role(std::move(role_)), content(std::move(content_)) {}

    std::string role;     // "system", "user", "assistant", "tool", ...
    std::string content;  // None to the template for an assistant turn of tool calls only
    std::vector<ToolCall> tool_calls;
    std::string tool_call_id;  // role "tool": the call this result answers
    std::string name;          // optional participant or tool name
};

// The special-token strings templates read (transformers passes the tokenizer's).
struct SpecialTokens {
    std::string bos_token;
    std::string eos_token;
};

class ChatTemplate {
  public:
    // Error "chat template line N: ..." for a template that does not parse or uses a construct
    // the interpreter does not support.
    static Result<ChatTemplate> parse(std::string_view source, SpecialTokens tokens);

    // Errors name the template line (a template's raise_exception for a conversation it does
    // not accept, for one). `tools`: a list of OpenAI function schemas, or None. `extra`:
    // further variables (date_string, ...), or nullptr.
    Result<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                               const Value& tools = None{}, const ValueDict* extra = nullptr) const;
    // The template text as parsed (its markers tell tool-call formats apart).
    const std::string& source() const { return source_; }

  private:
    Template template_;
    SpecialTokens tokens_;
    std::string source_;
};

}  // namespace inferscale::jinja
