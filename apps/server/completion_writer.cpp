#include "apps/server/completion_writer.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <utility>

#include <nlohmann/json.hpp>

namespace inferscale::server {
namespace {

using nlohmann::json;

std::string next_id(const char* prefix) {
    static std::atomic<std::uint64_t> counter{0};
    const auto now = std::chrono::system_clock::now().time_since_epoch().count();
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s-%llx%llx", prefix, static_cast<unsigned long long>(now),
                  static_cast<unsigned long long>(++counter));
    return buf;
}

json usage_json(const engine::Usage& u) {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json token_bytes(const std::string& token) {
    json bytes = json::array();
    for (const char c : token) bytes.push_back(static_cast<unsigned char>(c));
    return bytes;
}

// The choice's "logprobs": chat's {"content": [{token, logprob, bytes, top_logprobs}]}, or the
// completions form {tokens, token_logprobs, top_logprobs, text_offset}; null when not asked.
// text_offset runs on over the completion's chunks.
json logprobs_json(bool chat, const std::vector<engine::TokenLogprobs>* logprobs,
                   std::int64_t& text_offset) {
    if (!logprobs) return nullptr;
    if (chat) {
        json content = json::array();
        for (const engine::TokenLogprobs& t : *logprobs) {
            json top = json::array();
            for (const engine::LogprobEntry& e : t.top)
                top.push_back(
                    {{"token", e.token}, {"logprob", e.logprob}, {"bytes", token_bytes(e.token)}});
            content.push_back({{"token", t.sampled.token},
                               {"logprob", t.sampled.logprob},
                               {"bytes", token_bytes(t.sampled.token)},
                               {"top_logprobs", top}});
        }
        return {{"content", content}};
    }
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
         offsets = json::array();
    for (const engine::TokenLogprobs& t : *logprobs) {
        tokens.push_back(t.sampled.token);
        token_logprobs.push_back(t.scored ? json(t.sampled.logprob) : json(nullptr));
        json alternatives = json::object();
        for (const engine::LogprobEntry& e : t.top) alternatives[e.token] = e.logprob;
        top.push_back(t.scored ? alternatives : json(nullptr));
        offsets.push_back(text_offset);
        text_offset += static_cast<std::int64_t>(t.sampled.token.size());
    }
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top},
            {"text_offset", offsets}};
}

json call_json(const jinja::ToolCall& call) {
    return {{"id", call.id},
            {"type", "function"},
            {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace

CompletionWriter::CompletionWriter(bool chat, std::string model, std::size_t num_choices)
    : chat_(chat),
      model_(std::move(model)),
      id_(next_id(chat ? "chatcmpl" : "cmpl")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      text_offsets_(num_choices, 0),
      sent_role_(num_choices, false) {}

std::string CompletionWriter::response(const std::vector<ChoiceOutput>& choices,
                                       const engine::Usage& usage, bool logprobs) {
    json out = json::array();
    for (std::size_t i = 0; i < choices.size(); ++i) {
        const ChoiceOutput& c = choices[i];
        json choice = {{"index", i},
                       {"finish_reason", c.finish_reason},
                       {"logprobs", logprobs_json(chat_, logprobs ? &c.logprobs : nullptr,
                                                  text_offsets_[i])}};
        if (chat_) {
            json message = {{"role", "assistant"},
                            {"content", c.text.empty() && !c.tool_calls.empty()
                                            ? json(nullptr)
                                            : json(c.text)}};
            if (!c.tool_calls.empty()) {
                message["tool_calls"] = json::array();
                for (const jinja::ToolCall& call : c.tool_calls)
                    message["tool_calls"].push_back(call_json(call));
            }
            choice["message"] = std::move(message);
        } else {
            choice["text"] = c.text;
        }
        out.push_back(std::move(choice));
    }
    json body = {{"id", id_},           {"object", chat_ ? "chat.completion" : "text_completion"},
                 {"created", created_}, {"model", model_},
                 {"choices", out},      {"usage", usage_json(usage)}};
    if (memory_facts_) body["memory_facts"] = *std::exchange(memory_facts_, std::nullopt);
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string CompletionWriter::chunk(std::size_t index, std::string_view text,
                                    const char* finish_reason,
                                    const std::vector<engine::TokenLogprobs>* logprobs) {
    json delta = json::object();
    if (chat_ && (!text.empty() || !sent_role_[index])) delta["content"] = std::string(text);
    if (!chat_) delta = std::string(text);
    return event(index, std::move(delta), finish_reason, logprobs);
}

std::string CompletionWriter::tool_calls_chunk(std::size_t index,
                                               const std::vector<jinja::ToolCall>& calls,
                                               std::size_t first) {
    json list = json::array();
    for (std::size_t i = 0; i < calls.size(); ++i) {
        json c = call_json(calls[i]);
        c["index"] = first + i;
        list.push_back(std::move(c));
    }
    return event(index, {{"tool_calls", list}}, nullptr, nullptr);
}

// chat: `delta` is the message delta (the role is added to a choice's first); completions:
// the text.
std::string CompletionWriter::event(std::size_t index, json delta, const char* finish_reason,
                                    const std::vector<engine::TokenLogprobs>* logprobs) {
    json choice = {{"index", index},
                   {"logprobs", logprobs_json(chat_, logprobs, text_offsets_[index])},
                   {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
    if (chat_) {
        if (!sent_role_[index]) delta["role"] = "assistant";
        sent_role_[index] = true;
        choice["delta"] = std::move(delta);
    } else {
        choice["text"] = std::move(delta);
    }
    json c = {{"id", id_},
              {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
              {"created", created_},
              {"model", model_},
              {"choices", json::array({choice})}};
    if (memory_facts_) c["memory_facts"] = *std::exchange(memory_facts_, std::nullopt);
    return "data: " + c.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

void CompletionWriter::report_memory_facts(const std::vector<engine::RetrievedFact>& facts) {
    json list = json::array();
    for (const engine::RetrievedFact& f : facts)
        list.push_back({{"id", f.id}, {"memory", f.text}, {"score", f.score}});
    memory_facts_ = std::move(list);
}

std::string CompletionWriter::usage_chunk(const engine::Usage& usage) const {
    const json c = {{"id", id_},
                    {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                    {"created", created_},
                    {"model", model_},
                    {"choices", json::array()},
                    {"usage", usage_json(usage)}};
    return "data: " + c.dump() + "\n\n";
}

std::string CompletionWriter::error_event(const ApiError& error) {
    return "data: " + error.body() + "\n\n";
}

}  // namespace inferscale::server
