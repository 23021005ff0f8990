#include "apps/server/openai_api.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

namespace inferscale::server {
namespace {

using nlohmann::json;

// Reads optional fields of `obj`, recording the first type error.
class Fields {
  public:
    explicit Fields(const json& obj) : obj_(obj) {}

    const json* get(const char* name) const {
        auto it = obj_.find(name);
        return it == obj_.end() || it->is_null() ? nullptr : &*it;
    }
    template <class T>
    void read(const char* name, T& out, const char* type_name,
              bool (json::*check)() const noexcept) {
        const json* v = get(name);
        if (!v || error) return;
        if (!((*v).*check)()) {
            error = bad_request(std::string("'") + name + "' must be " + type_name, name);
            return;
        }
        out = v->get<T>();
    }
    std::optional<ApiError> error;

  private:
    const json& obj_;
};

std::optional<ApiError> read_stop(const json* v, std::vector<std::string>& out) {
    if (!v) return std::nullopt;
    if (v->is_string()) {
        out.push_back(v->get<std::string>());
    } else if (v->is_array()) {
        for (const json& s : *v) {
            if (!s.is_string())
                return bad_request("'stop' must be a string or a list of strings", "stop");
            out.push_back(s.get<std::string>());
        }
    } else {
        return bad_request("'stop' must be a string or a list of strings", "stop");
    }
    if (out.size() > 4) return bad_request("'stop' takes at most 4 sequences", "stop");
    for (const std::string& s : out)
        if (s.empty()) return bad_request("'stop' sequences must not be empty", "stop");
    return std::nullopt;
}

// Message content: a string, or a list of {"type": "text", "text": ...} parts.
std::optional<std::string> message_text(const json& content) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) return std::nullopt;
    std::string out;
    for (const json& part : content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string())
            return std::nullopt;
        out += part["text"].get<std::string>();
    }
    return out;
}

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
        token_logprobs.push_back(t.sampled.logprob);
        json alternatives = json::object();
        for (const engine::LogprobEntry& e : t.top) alternatives[e.token] = e.logprob;
        top.push_back(alternatives);
        offsets.push_back(text_offset);
        text_offset += static_cast<std::int64_t>(t.sampled.token.size());
    }
    return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top},
            {"text_offset", offsets}};
}

}  // namespace

std::variant<CompletionCall, ApiError> parse_completion_call(std::string_view body, bool chat,
                                                             std::string_view served_model,
                                                             const engine::MemoryDefaults& defaults) {
    const json doc = json::parse(body, nullptr, false);
    if (doc.is_discarded()) return bad_request("the request body is not valid JSON");
    if (!doc.is_object()) return bad_request("the request body must be a JSON object");
    CompletionCall call;
    call.chat = chat;
    engine::EngineRequest& r = call.request;
    Fields f(doc);

    std::string model;
    f.read("model", model, "a string", &json::is_string);
    if (f.error) return *f.error;
    if (model.empty()) return bad_request("'model' is required", "model");
    if (model != served_model)
        return not_found("the model '" + model + "' does not exist; this server serves '" +
                             std::string(served_model) + "'",
                         "model_not_found");

    if (chat) {
        const json* messages = f.get("messages");
        if (!messages || !messages->is_array() || messages->empty())
            return bad_request("'messages' must be a non-empty list", "messages");
        for (const json& m : *messages) {
            if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
                return bad_request("every message needs a string 'role'", "messages");
            std::string role = m["role"].get<std::string>();
            if (role == "developer") role = "system";
            if (role != "system" && role != "user" && role != "assistant")
                return bad_request("unsupported message role '" + role + "'", "messages");
            const auto text = m.contains("content") ? message_text(m["content"]) : std::nullopt;
            if (!text)
                return bad_request("message content must be a string or a list of text parts",
                                   "messages");
            r.messages.push_back({role, *text});
        }
    } else {
        const json* prompt = f.get("prompt");
        if (prompt && prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string())
            prompt = &(*prompt)[0];
        if (!prompt || !prompt->is_string())
            return bad_request("'prompt' must be a string", "prompt");
        r.prompt = prompt->get<std::string>();
    }

    sampling::SamplingParams& s = r.sampling;
    s.max_tokens = 256;
    std::int64_t max_tokens = -1, seed = -1, n = 1, top_k = -1;
    double temperature = 1.0, top_p = 1.0, frequency_penalty = 0.0, presence_penalty = 0.0;
    f.read("max_tokens", max_tokens, "an integer", &json::is_number_integer);
    f.read("max_completion_tokens", max_tokens, "an integer", &json::is_number_integer);
    f.read("temperature", temperature, "a number", &json::is_number);
    f.read("top_p", top_p, "a number", &json::is_number);
    f.read("seed", seed, "an integer", &json::is_number_integer);
    f.read("n", n, "an integer", &json::is_number_integer);
    f.read("frequency_penalty", frequency_penalty, "a number", &json::is_number);
    f.read("presence_penalty", presence_penalty, "a number", &json::is_number);
    f.read("top_k", top_k, "an integer", &json::is_number_integer);  // as vLLM takes it
    f.read("stream", call.stream, "a boolean", &json::is_boolean);
    f.read("ignore_eos", s.ignore_eos, "a boolean", &json::is_boolean);  // as vLLM takes it
    if (f.error) return *f.error;
    if (const json* so = f.get("stream_options")) {
        if (!so->is_object())
            return bad_request("'stream_options' must be an object", "stream_options");
        Fields sf(*so);
        sf.read("include_usage", call.include_usage, "a boolean", &json::is_boolean);
        if (sf.error) return *sf.error;
    }
    if (n != 1) return bad_request("only n = 1 is supported", "n");
    if (chat) {
        bool logprobs = false;
        std::int64_t top = 0;
        f.read("logprobs", logprobs, "a boolean", &json::is_boolean);
        f.read("top_logprobs", top, "an integer", &json::is_number_integer);
        if (f.error) return *f.error;
        if (top < 0 || top > sampling::kMaxTopLogprobs)
            return bad_request("'top_logprobs' must be in [0, " +
                                   std::to_string(sampling::kMaxTopLogprobs) + "]",
                               "top_logprobs");
        if (f.get("top_logprobs") && !logprobs)
            return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
        if (logprobs) s.logprobs = static_cast<std::int32_t>(top);
    } else if (f.get("logprobs")) {
        std::int64_t top = 0;
        f.read("logprobs", top, "an integer", &json::is_number_integer);
        if (f.error) return *f.error;
        if (top < 0 || top > 5) return bad_request("'logprobs' must be in [0, 5]", "logprobs");
        s.logprobs = static_cast<std::int32_t>(top);
    }
    if (f.get("max_tokens") || f.get("max_completion_tokens")) {
        if (max_tokens < 1 || max_tokens > (1 << 30))
            return bad_request("'max_tokens' must be at least 1", "max_tokens");
        s.max_tokens = static_cast<std::int32_t>(max_tokens);
    }
    if (temperature < 0.0 || temperature > 2.0)
        return bad_request("'temperature' must be between 0 and 2", "temperature");
    if (top_p <= 0.0 || top_p > 1.0) return bad_request("'top_p' must be in (0, 1]", "top_p");
    s.temperature = static_cast<float>(temperature);
    s.top_p = static_cast<float>(top_p);
    for (const auto& [name, value] : {std::pair{"frequency_penalty", frequency_penalty},
                                      std::pair{"presence_penalty", presence_penalty}}) {
        if (!(std::fabs(value) <= sampling::kMaxPenalty))
            return bad_request("'" + std::string(name) + "' must be between -2 and 2", name);
    }
    s.frequency_penalty = static_cast<float>(frequency_penalty);
    s.presence_penalty = static_cast<float>(presence_penalty);
    // vLLM's top_k: -1 (or 0) keeps every token.
    if (top_k < -1 || top_k > (1 << 30))
        return bad_request("'top_k' must be -1 (no cut) or a positive count", "top_k");
    s.top_k = static_cast<std::int32_t>(std::max<std::int64_t>(top_k, 0));
    if (f.get("seed")) s.seed = static_cast<std::uint64_t>(seed);
    if (auto e = read_stop(f.get("stop"), s.stop)) return *e;

    // Memory: the user, then the extension object.
    f.read("user", r.user, "a string", &json::is_string);
    if (const json* meta = f.get("metadata")) {
        if (!meta->is_object()) return bad_request("'metadata' must be an object", "metadata");
        Fields mf(*meta);
        std::string user_id;
        mf.read("user_id", user_id, "a string", &json::is_string);
        if (mf.error) return *mf.error;
        if (!user_id.empty()) r.user = user_id;
    }
    if (f.error) return *f.error;
    engine::MemoryChoice choice;
    if (const json* mem = f.get("memory")) {
        if (!mem->is_object()) return bad_request("'memory' must be an object", "memory");
        Fields mf(*mem);
        std::string mode;
        std::int64_t top_k = 0, window = 0;
        mf.read("mode", mode, "a string", &json::is_string);
        mf.read("top_k", top_k, "an integer", &json::is_number_integer);
        mf.read("context_window", window, "an integer", &json::is_number_integer);
        if (mf.error) return *mf.error;
        if (!mode.empty()) choice.mode = mode;
        if (mf.get("top_k")) choice.top_k = top_k;
        if (mf.get("context_window")) choice.context_window = window;
    }
    if (const auto e = engine::choose_memory(choice, defaults, r)) {
        if (e->option == "user") return bad_request("memory needs a 'user'", "user");
        const std::string param = "memory." + e->option;
        return bad_request(e->option == "mode" ? e->message : "'" + param + "' " + e->message,
                           param);
    }
    // Completions carry no memory.
    if (!chat) r.memory_mode = engine::MemoryMode::None;
    return call;
}

CompletionWriter::CompletionWriter(bool chat, std::string model)
    : chat_(chat),
      model_(std::move(model)),
      id_(next_id(chat ? "chatcmpl" : "cmpl")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

std::string CompletionWriter::response(const std::string& text, const char* finish_reason,
                                       const engine::Usage& usage,
                                       const std::vector<engine::TokenLogprobs>* logprobs) {
    json choice = {{"index", 0}, {"finish_reason", finish_reason},
                   {"logprobs", logprobs_json(chat_, logprobs, text_offset_)}};
    if (chat_) choice["message"] = {{"role", "assistant"}, {"content", text}};
    else choice["text"] = text;
    return json{{"id", id_},
                {"object", chat_ ? "chat.completion" : "text_completion"},
                {"created", created_},
                {"model", model_},
                {"choices", json::array({choice})},
                {"usage", usage_json(usage)}}
        .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string CompletionWriter::chunk(std::string_view text, const char* finish_reason,
                                    const std::vector<engine::TokenLogprobs>* logprobs) {
    json choice = {{"index", 0}, {"logprobs", logprobs_json(chat_, logprobs, text_offset_)},
                   {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
    if (chat_) {
        json delta = json::object();
        if (!sent_role_) delta["role"] = "assistant";
        if (!text.empty() || !sent_role_) delta["content"] = std::string(text);
        sent_role_ = true;
        choice["delta"] = delta;
    } else {
        choice["text"] = std::string(text);
    }
    const json c = {{"id", id_},
                    {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                    {"created", created_},
                    {"model", model_},
                    {"choices", json::array({choice})}};
    return "data: " + c.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
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
