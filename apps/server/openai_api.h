#pragma once
// The OpenAI completions API on top of the engine: request bodies of /v1/chat/completions and
// /v1/completions become EngineRequests (every field checked, wrong types named), and engine
// output becomes response bodies and server-sent-event chunks.
//
// Memory rides on the standard `user` field (or metadata.user_id) with an extension object
//   "memory": {"mode": "kv" | "prompt" | "none", "top_k": K, "context_window": W}
// A request with a user and no memory object uses the server's default memory mode.
// `ignore_eos: true` (as vLLM takes it) generates exactly max_tokens tokens, for benchmarks.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "apps/server/api_error.h"
#include "engine/engine.h"

namespace inferscale::server {

struct CompletionCall {
    engine::EngineRequest request;
    bool chat = true;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
};

// `chat`: the body of /v1/chat/completions, else of /v1/completions. An unknown model is a 404.
std::variant<CompletionCall, ApiError> parse_completion_call(std::string_view body, bool chat,
                                                             std::string_view served_model,
                                                             const engine::MemoryDefaults& defaults);

// Response bodies and stream chunks of one call.
class CompletionWriter {
  public:
    CompletionWriter(bool chat, std::string model);

    // The whole answer (non-streaming). `logprobs`: the tokens' log-probabilities when the
    // request asked for them, else null.
    std::string response(const std::string& text, const char* finish_reason,
                         const engine::Usage& usage,
                         const std::vector<engine::TokenLogprobs>* logprobs);
    // One "data: ...\n\n" event. The first chat chunk carries the assistant role.
    std::string chunk(std::string_view text, const char* finish_reason,
                      const std::vector<engine::TokenLogprobs>* logprobs);
    std::string usage_chunk(const engine::Usage& usage) const;
    static std::string error_event(const ApiError& error);
    static constexpr std::string_view kDone = "data: [DONE]\n\n";

  private:
    bool chat_;
    std::int64_t text_offset_ = 0;  // completions: characters of completion text so far
    std::string model_;
    std::string id_;
    std::int64_t created_;
    bool sent_role_ = false;
};

}  // namespace inferscale::server
