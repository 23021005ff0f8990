#include "apps/server/openai_api.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "apps/server/json_fields.h"
#include "apps/server/structured_output.h"
#include "apps/server/tool_request.h"

namespace inferscale::server {
namespace {

using nlohmann::json;

// Fields each route implements; any other is a 400 naming it.
const std::initializer_list<std::string_view> kChatFields = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed",
    "n", "frequency_penalty", "presence_penalty", "top_k", "stream", "stream_options",
    "ignore_eos", "logprobs", "top_logprobs", "stop", "logit_bias", "user", "metadata", "memory",
    "response_format", "grammar", "tools", "tool_choice", "parallel_tool_calls"};
const std::initializer_list<std::string_view> kCompletionFields = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "seed", "n", "frequency_penalty",
    "presence_penalty", "top_k", "stream", "stream_options", "ignore_eos", "logprobs", "stop",
    "logit_bias", "echo", "user", "response_format", "grammar"};

// A list of token ids, each inside the vocabulary; nullopt when `v` is not one.
std::optional<std::vector<std::int32_t>> token_ids(const json& v, std::int64_t vocab_size,
                                                   std::optional<ApiError>& error) {
    if (!v.is_array() || v.empty()) return std::nullopt;
    std::vector<std::int32_t> ids;
    for (const json& id : v) {
        if (!id.is_number_integer()) return std::nullopt;
        const auto value = id.get<std::int64_t>();
        if (value < 0 || value >= vocab_size) {
            error = bad_request("token id " + std::to_string(value) +
                                    " is outside the vocabulary of " +
                                    std::to_string(vocab_size),
                                "prompt");
            return std::nullopt;
        }
        ids.push_back(static_cast<std::int32_t>(value));
    }
    return ids;
}

// Completions' prompt: a string, a list of strings, a list of token ids, or a list of lists of
// token ids; one request per prompt, appended to `out`.
std::optional<ApiError> read_prompts(const json* prompt, std::int64_t vocab_size,
                                     std::vector<engine::EngineRequest>& out) {
    const ApiError wrong = bad_request(
        "'prompt' must be a string, a list of strings, a list of token ids or a list of lists "
        "of token ids",
        "prompt");
    if (!prompt) return wrong;
    std::optional<ApiError> error;
    if (prompt->is_string()) {
        out.emplace_back().prompt = prompt->get<std::string>();
    } else if (auto ids = token_ids(*prompt, vocab_size, error)) {
        out.emplace_back().prompt_token_ids = std::move(*ids);
    } else if (error) {
        return error;
    } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_string()) {
        for (const json& p : *prompt) {
            if (!p.is_string()) return wrong;
            out.emplace_back().prompt = p.get<std::string>();
        }
    } else if (prompt->is_array() && !prompt->empty()) {
        for (const json& p : *prompt) {
            auto list = token_ids(p, vocab_size, error);
            if (!list) return error ? error : wrong;
            out.emplace_back().prompt_token_ids = std::move(*list);
        }
    } else {
        return wrong;
    }
    return std::nullopt;
}

// logit_bias: {"token id": bias in [-100, 100]}, the ids inside the vocabulary.
std::optional<ApiError> read_logit_bias(const json* v, std::int64_t vocab_size,
                                        std::vector<sampling::LogitBias>& out) {
    if (!v) return std::nullopt;
    if (!v->is_object())
        return bad_request("'logit_bias' must map token ids to numbers", "logit_bias");
    for (const auto& [key, bias] : v->items()) {
        char* end = nullptr;
        const long long id = std::strtoll(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0' || id < 0 || id >= vocab_size)
            return bad_request("'logit_bias' key '" + key + "' is not a token id of the model",
                               "logit_bias");
        if (!bias.is_number() || !(std::fabs(bias.get<double>()) <= sampling::kMaxLogitBias))
            return bad_request("'logit_bias' values must be numbers in [-100, 100]",
                               "logit_bias");
        out.push_back({static_cast<std::int32_t>(id), bias.get<float>()});
    }
    return std::nullopt;
}

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

// An assistant message's "tool_calls": [{"id", "type": "function", "function": {"name",
// "arguments": JSON text}}].
std::optional<ApiError> read_tool_calls(const json& m, const std::string& at,
                                        jinja::ChatMessage& message) {
    if (!m.contains("tool_calls") || m["tool_calls"].is_null()) return std::nullopt;
    const json& calls = m["tool_calls"];
    if (message.role != "assistant")
        return bad_request("only assistant messages carry 'tool_calls'", at + ".tool_calls");
    if (!calls.is_array())
        return bad_request("'" + at + ".tool_calls' must be a list", at + ".tool_calls");
    for (std::size_t j = 0; j < calls.size(); ++j) {
        const json& c = calls[j];
        const std::string field = at + ".tool_calls[" + std::to_string(j) + "]";
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
            return bad_request("'" + field + "' must be {\"id\", \"type\": \"function\", "
                                             "\"function\": {\"name\", \"arguments\"}}",
                               field);
        if (c.contains("type") && c["type"] != "function")
            return bad_request("'" + field + ".type' must be \"function\"", field + ".type");
        jinja::ToolCall call;
        if (c.contains("id") && !c["id"].is_null()) {
            if (!c["id"].is_string())
                return bad_request("'" + field + ".id' must be a string", field + ".id");
            call.id = c["id"].get<std::string>();
        }
        const json& fn = c["function"];
        if (!fn.contains("name") || !fn["name"].is_string() ||
            fn["name"].get<std::string>().empty())
            return bad_request("'" + field + ".function.name' must be a string",
                               field + ".function.name");
        call.name = fn["name"].get<std::string>();
        if (!fn.contains("arguments") || !fn["arguments"].is_string())
            return bad_request("'" + field + ".function.arguments' must be a string of JSON",
                               field + ".function.arguments");
        call.arguments = fn["arguments"].get<std::string>();
        if (!json::accept(call.arguments))
            return bad_request("'" + field + ".function.arguments' is not valid JSON",
                               field + ".function.arguments");
        message.tool_calls.push_back(std::move(call));
    }
    return std::nullopt;
}

}  // namespace

std::variant<std::vector<jinja::ChatMessage>, ApiError> parse_messages(
    const json* messages) {
    if (!messages || !messages->is_array() || messages->empty())
        return bad_request("'messages' must be a non-empty list", "messages");
    std::vector<jinja::ChatMessage> out;
    for (std::size_t i = 0; i < messages->size(); ++i) {
        const json& m = (*messages)[i];
        const std::string at = "messages[" + std::to_string(i) + "]";
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
            return bad_request("every message needs a string 'role'", at + ".role");
        jinja::ChatMessage message;
        message.role = m["role"].get<std::string>();
        if (message.role == "developer") message.role = "system";
        if (message.role != "system" && message.role != "user" && message.role != "assistant" &&
            message.role != "tool")
            return bad_request("unsupported message role '" + message.role + "'", at + ".role");
        if (auto e = read_tool_calls(m, at, message)) return *e;
        const bool content_optional = !message.tool_calls.empty();
        const bool has_content = m.contains("content") && !m["content"].is_null();
        const auto text = has_content ? message_text(m["content"]) : std::nullopt;
        if (!text && (has_content || !content_optional))
            return bad_request("message content must be a string or a list of text parts",
                               at + ".content");
        if (text) message.content = *text;
        if (m.contains("name") && !m["name"].is_null()) {
            if (!m["name"].is_string())
                return bad_request("'" + at + ".name' must be a string", at + ".name");
            message.name = m["name"].get<std::string>();
        }
        if (message.role == "tool") {
            if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string() ||
                m["tool_call_id"].get<std::string>().empty())
                return bad_request("a tool message needs its 'tool_call_id'",
                                   at + ".tool_call_id");
            message.tool_call_id = m["tool_call_id"].get<std::string>();
        }
        out.push_back(std::move(message));
    }
    return out;
}

std::vector<engine::EngineRequest> choice_requests(const CompletionCall& call) {
    std::vector<engine::EngineRequest> out;
    for (const engine::EngineRequest& prompt : call.prompts) {
        for (int i = 0; i < call.n; ++i) {
            engine::EngineRequest& r = out.emplace_back(prompt);
            if (r.sampling.seed) *r.sampling.seed += static_cast<std::uint64_t>(i);
        }
    }
    return out;
}

std::variant<CompletionCall, ApiError> parse_completion_call(std::string_view body, bool chat,
                                                             const ServedModel& served,
                                                             const engine::MemoryDefaults& defaults) {
    json doc;
    if (auto e = parse_object(body, doc)) return *e;
    OrderedBody ordered(body);
    if (auto e = unsupported_field(doc, chat ? kChatFields : kCompletionFields)) return *e;
    CompletionCall call;
    call.chat = chat;
    engine::EngineRequest r;  // what every prompt's request shares
    Fields f(doc);

    std::string model;
    f.read("model", model, "a string", &json::is_string);
    if (f.error) return *f.error;
    if (model.empty()) return bad_request("'model' is required", "model");
    if (model != served.id)
        return not_found("the model '" + model + "' does not exist; this server serves '" +
                             std::string(served.id) + "'",
                         "model_not_found");

    std::vector<engine::EngineRequest> prompts;
    if (chat) {
        auto messages = parse_messages(f.get("messages"));
        if (auto* e = std::get_if<ApiError>(&messages)) return *e;
        r.messages = std::move(std::get<std::vector<jinja::ChatMessage>>(messages));
        auto tools = parse_tool_request(doc, ordered);
        if (auto* e = std::get_if<ApiError>(&tools)) return *e;
        const ToolRequest& t = std::get<ToolRequest>(tools);
        apply_tool_prompt(t, served.tools, r);
        if (t.active()) {
            const toolcall::Format format =
                served.tools.renders_tools ? served.tools.format : toolcall::Format::Generic;
            call.tool_format = format;
            call.parallel_tool_calls = t.parallel;
            for (const toolcall::Tool& tool : t.tools) call.tool_names.push_back(tool.name);
            if (auto e = apply_tool_grammar(t, format, served.grammars, r)) return *e;
        }
    } else if (auto e = read_prompts(f.get("prompt"), served.vocab_size, prompts)) {
        return *e;
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
        if (auto e = unsupported_field(*so, {"include_usage"}, "stream_options.")) return *e;
        Fields sf(*so);
        sf.read("include_usage", call.include_usage, "a boolean", &json::is_boolean);
        if (sf.error) return *sf.error;
    }
    if (n < 1 || n > kMaxChoices)
        return bad_request("'n' must be in [1, " + std::to_string(kMaxChoices) + "]", "n");
    call.n = static_cast<int>(n);
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
    } else {
        f.read("echo", call.echo, "a boolean", &json::is_boolean);
        if (f.get("logprobs")) {
            std::int64_t top = 0;
            f.read("logprobs", top, "an integer", &json::is_number_integer);
            if (f.error) return *f.error;
            if (top < 0 || top > 5) return bad_request("'logprobs' must be in [0, 5]", "logprobs");
            s.logprobs = static_cast<std::int32_t>(top);
        }
        if (f.error) return *f.error;
        r.prompt_logprobs = call.echo && s.logprobs >= 0;
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
    if (auto e = read_logit_bias(f.get("logit_bias"), served.vocab_size, s.logit_bias)) return *e;
    if (served.grammars != nullptr) {
        const bool forced_call = r.grammar != nullptr;
        if (auto e = read_output_format(doc, ordered, *served.grammars, r.grammar)) return *e;
        if (forced_call && (f.get("response_format") || f.get("grammar")))
            return bad_request("a forced tool call (tool_choice 'required' or a function) cannot "
                               "be combined with 'response_format' or 'grammar'",
                               "tool_choice");
    } else if (f.get("response_format") || f.get("grammar")) {
        return bad_request("structured outputs are not available here", "response_format");
    }

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
        if (auto e = unsupported_field(
                *mem, {"mode", "top_k", "context_window", "retrieval", "store", "return_facts"},
                "memory."))
            return *e;
        Fields mf(*mem);
        std::string mode, method;
        std::int64_t top_k = 0, window = 0;
        bool store = false;
        mf.read("mode", mode, "a string", &json::is_string);
        mf.read("retrieval", method, "a string", &json::is_string);
        mf.read("top_k", top_k, "an integer", &json::is_number_integer);
        mf.read("context_window", window, "an integer", &json::is_number_integer);
        mf.read("store", store, "a boolean", &json::is_boolean);
        mf.read("return_facts", call.return_facts, "a boolean", &json::is_boolean);
        if (mf.error) {  // named as fields of the memory object
            ApiError e = *mf.error;
            e.message = "'memory." + e.message.substr(1);
            e.param = "memory." + e.param.value_or("");
            return e;
        }
        if (store) {
            if (r.user.empty()) return bad_request("'memory.store' needs a 'user'", "memory.store");
            const auto last_user =
                std::find_if(r.messages.rbegin(), r.messages.rend(),
                             [](const jinja::ChatMessage& m) { return m.role == "user"; });
            if (last_user == r.messages.rend())
                return bad_request("'memory.store' needs a user message", "memory.store");
            call.store_question = last_user->content;
        }
        if (!mode.empty()) choice.mode = mode;
        if (mf.get("top_k")) choice.top_k = top_k;
        if (mf.get("context_window")) choice.context_window = window;
        if (mf.get("retrieval")) choice.retrieval = method;
    }
    if (const auto e = engine::choose_memory(choice, defaults, r)) {
        if (e->option == "user") return bad_request("memory needs a 'user'", "user");
        const std::string param = "memory." + e->option;
        return bad_request(e->option == "mode" || e->option == "retrieval"
                               ? e->message
                               : "'" + param + "' " + e->message,
                           param);
    }
    // The memory prompt's system turn and a template's tool section do not combine yet: a
    // user's memory is left out of such a request unless it asked for memory by name.
    if (!r.tools.is_none() && r.memory_mode != engine::MemoryMode::None) {
        if (choice.mode)
            return bad_request("memory is not supported with tools this model's template renders",
                               "memory.mode");
        r.memory_mode = engine::MemoryMode::None;
    }
    if (chat) {
        call.prompts.push_back(std::move(r));
        return call;
    }
    r.memory_mode = engine::MemoryMode::None;  // completions carry no memory
    for (engine::EngineRequest& p : prompts) {
        engine::EngineRequest& request = call.prompts.emplace_back(r);
        request.prompt = std::move(p.prompt);
        request.prompt_token_ids = std::move(p.prompt_token_ids);
    }
    return call;
}

}  // namespace inferscale::server
