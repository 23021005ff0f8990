#pragma once
// CompletionWriter: the response bodies and server-sent-event chunks of one completions or
// chat completions call, in the OpenAI shapes, for any number of choices.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/server/api_error.h"
#include "engine/request_stream.h"
#include "template/chat_template.h"

namespace inferscale::server {

// What one choice answered.
struct ChoiceOutput {
    std::string text;  // chat: the content, null in the message when empty beside tool calls
    std::vector<jinja::ToolCall> tool_calls;
    const char* finish_reason = "stop";
    std::vector<engine::TokenLogprobs> logprobs;
};

class CompletionWriter {
  public:
    CompletionWriter(bool chat, std::string model, std::size_t num_choices);

    // The whole answer (non-streaming). `logprobs`: each choice carries its tokens'
    // log-probabilities (the request asked for them), else null.
    std::string response(const std::vector<ChoiceOutput>& choices, const engine::Usage& usage,
                         bool logprobs);
    // One "data: ...\n\n" event for choice `index`. A chat choice's first chunk carries the
    // assistant role.
    std::string chunk(std::size_t index, std::string_view text, const char* finish_reason,
                      const std::vector<engine::TokenLogprobs>* logprobs);
    // One event of chat choice `index` carrying tool calls whole (id, name, arguments), the
    // first at position `first` of the choice's calls.
    std::string tool_calls_chunk(std::size_t index, const std::vector<jinja::ToolCall>& calls,
                                 std::size_t first);
    std::string usage_chunk(const engine::Usage& usage) const;
    static std::string error_event(const ApiError& error);
    // memory.return_facts: the response, or else the first event, carries `facts` as
    // "memory_facts": [{"id", "memory", "score"}], best-ranked first.
    void report_memory_facts(const std::vector<engine::RetrievedFact>& facts);
    static constexpr std::string_view kDone = "data: [DONE]\n\n";

  private:
    std::string event(std::size_t index, nlohmann::json delta, const char* finish_reason,
                      const std::vector<engine::TokenLogprobs>* logprobs);

    bool chat_;
    std::string model_;
    std::string id_;
    std::int64_t created_;
    // Per choice: completions' characters of text so far, and whether chat sent the role.
    std::vector<std::int64_t> text_offsets_;
    std::vector<bool> sent_role_;
    std::optional<nlohmann::json> memory_facts_;  // until sent
};

}  // namespace inferscale::server
