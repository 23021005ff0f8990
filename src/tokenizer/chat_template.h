#pragma once
// ChatTemplate: renders a conversation the way a model's Jinja chat template does, for the
// template families we serve, without a Jinja engine. detect() recognises the family from the
// template source (tokenizer_config.json "chat_template" or GGUF tokenizer.chat_template) and
// picks up what varies inside a family: Llama 3.1's dated system preamble, Mistral's [INST]
// spacing and system-message placement, a ChatML default system prompt (Qwen2.5, SmolLM2).
// Tool calls are not rendered.

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace inferscale::tokenizer {

struct ChatMessage {
    std::string role;  // "system", "user" or "assistant"
    std::string content;
};

class ChatTemplate {
  public:
    enum class Kind { Llama3, Mistral, ChatML };

    // Error when the source is not one of the known families.
    static Result<ChatTemplate> detect(std::string_view jinja_source);
    static ChatTemplate of_kind(Kind kind);  // the family's plain default

    // Output equals transformers' apply_chat_template(tokenize=False) for these families.
    std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

    Kind kind() const { return kind_; }
    const std::string& default_system_prompt() const { return default_system_; }

  private:
    std::string render_llama3(const std::vector<ChatMessage>& messages, bool gen) const;
    std::string render_mistral(const std::vector<ChatMessage>& messages) const;
    std::string render_chatml(const std::vector<ChatMessage>& messages, bool gen) const;

    Kind kind_ = Kind::ChatML;
    std::string default_system_;  // ChatML: inserted when the first message is not a system one
    // Llama 3.1+: system header with knowledge/today dates is always emitted.
    bool llama_dated_preamble_ = false;
    std::string knowledge_date_ = "December 2023";
    std::string today_date_ = "26 Jul 2024";
    // Mistral: "[INST] " (v0.3) vs " [INST] " (v0.1/v0.2); system text goes into the last user
    // message (v0.3) or the first one (older).
    std::string inst_open_ = "[INST] ";
    std::string inst_close_ = "[/INST]";
    bool system_in_last_user_ = true;
};

}  // namespace inferscale::tokenizer
