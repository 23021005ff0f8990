#pragma once
// The OpenAI completions API on top of the engine: request bodies of /v1/chat/completions and
// /v1/completions become EngineRequests (every field checked, wrong types named), and engine
// output becomes response bodies and server-sent-event chunks (completion_writer.h).
//
// Memory rides on the standard `user` field (or metadata.user_id) with an extension object
//   "memory": {"mode": "kv" | "prompt" | "none", "top_k": K, "context_window": W,
//              "store": true | false, "return_facts": true | false}
// A request with a user and no memory object uses the server's default memory mode. `store`
// (chat, with a user) queues the exchange for fact extraction once answered (exchange_memory.h).
// `return_facts` reports the facts retrieved for the answer (completion_writer.h).
// `ignore_eos: true` (as vLLM takes it) generates exactly max_tokens tokens, for benchmarks.
// Completions take a prompt string, a list of them, a list of token ids or a list of such
// lists; `n` up to kMaxChoices copies of each prompt share its KV blocks through the prefix
// cache (the scheduler lets the copies wait for the first one's prompt blocks).
// Chat takes OpenAI tool calling: `tools`, `tool_choice`, `parallel_tool_calls` (tool_request.h);
// the calls are parsed from the output by the route (toolcall/call_parser.h).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/server/api_error.h"
#include "engine/engine.h"
#include "grammar/grammar_cache.h"
#include "toolcall/forced_grammar.h"
#include "toolcall/template_tools.h"

namespace inferscale::server {

struct CompletionCall {
    // One request per prompt (chat: one; completions: one per prompt of a list), each
    // answered with n choices.
    std::vector<engine::EngineRequest> prompts;
    int n = 1;
    bool chat = true;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    // Completions: each choice's text starts with its prompt (and with logprobs, its logprobs
    // with the prompt's: EngineRequest::prompt_logprobs).
    bool echo = false;
    // Chat with tools offered (tool_choice not "none"): calls are parsed from each choice's
    // output in this format; with parallel_tool_calls false only the first is kept.
    std::optional<toolcall::Format> tool_format;
    bool parallel_tool_calls = true;
    std::vector<std::string> tool_names;  // the functions a call may name
    // Chat's memory.store: the request's last user message, whose exchange with the answer is
    // stored for the request's user; nullopt when not asked.
    std::optional<std::string> store_question;
    // memory.return_facts: the answer carries the facts retrieved for it.
    bool return_facts = false;
};

inline constexpr int kMaxChoices = 16;  // the largest n

// The model a call must name and what its token ids may be.
struct ServedModel {
    std::string_view id;
    std::int64_t vocab_size = 0;
    // Where response_format, grammar and the forced tool-call grammar are compiled (the model's
    // LocalModel::grammars()); null: such requests are a 400, and tool_choice is not enforced.
    grammar::GrammarCache* grammars = nullptr;
    // How the chat template takes tools.
    toolcall::TemplateTools tools;
};

// `chat`: the body of /v1/chat/completions, else of /v1/completions. An unknown model is a 404;
// a field the server does not implement is a 400 naming it.
std::variant<CompletionCall, ApiError> parse_completion_call(std::string_view body, bool chat,
                                                             const ServedModel& model,
                                                             const engine::MemoryDefaults& defaults);

// The engine requests of a call's choices in choice order: prompt p's copy i is choice
// p * n + i. With a seed, copy i samples with seed + i, so the copies differ at a temperature
// above 0 and each is reproducible (copy 0 is the request with n = 1).
std::vector<engine::EngineRequest> choice_requests(const CompletionCall& call);

// Chat messages: a non-empty list of {"role", "content"} ("developer" is taken as "system";
// content a string or a list of text parts; an optional "name"), assistant turns with
// "tool_calls" (content may then be null) and "tool" turns with their "tool_call_id", or a
// 400 naming the field.
std::variant<std::vector<jinja::ChatMessage>, ApiError> parse_messages(
    const nlohmann::json* messages);

}  // namespace inferscale::server
