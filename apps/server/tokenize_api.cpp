// vLLM's tokenizer routes, in its shapes:
//   POST /tokenize   {"model"?, "prompt", "add_special_tokens"? (true)}
//                    {"model"?, "messages", "add_generation_prompt"? (true), "tools"?}
//                    -> {"tokens": [ids], "count": N, "max_model_len": M}
//   POST /detokenize {"model"?, "tokens": [ids]} -> {"prompt": text}
// A prompt tokenizes as /v1/completions takes it, messages as /v1/chat/completions renders
// them.

#include <httplib.h>

#include "apps/server/http_server.h"
#include "apps/server/json_fields.h"
#include "apps/server/tool_request.h"

namespace inferscale::server {
namespace {

using nlohmann::json;

// An error unless every field of `doc` is in `known` and its model (when named) is the served
// one.
std::optional<ApiError> check_fields(const json& doc, const ServerContext& ctx,
                                     std::initializer_list<std::string_view> known) {
    if (auto e = unsupported_field(doc, known)) return e;
    Fields f(doc);
    std::string model = ctx.options.model_name;
    f.read("model", model, "a string", &json::is_string);
    if (f.error) return f.error;
    if (model != ctx.options.model_name)
        return not_found("the model '" + model + "' does not exist", "model_not_found");
    return std::nullopt;
}

std::variant<std::vector<std::int32_t>, ApiError> tokenize(const std::string& body,
                                                           const ServerContext& ctx) {
    const engine::LocalModel& model = ctx.engine.model();
    json doc;
    if (auto e = parse_object(body, doc)) return *e;
    if (doc.contains("messages")) {
        if (auto e =
                check_fields(doc, ctx, {"model", "messages", "add_generation_prompt", "tools"}))
            return *e;
        Fields f(doc);
        bool add_generation_prompt = true;
        f.read("add_generation_prompt", add_generation_prompt, "a boolean", &json::is_boolean);
        if (f.error) return *f.error;
        auto messages = parse_messages(f.get("messages"));
        if (auto* e = std::get_if<ApiError>(&messages)) return *e;
        // Tools render as a chat request with tool_choice "auto" renders them.
        OrderedBody ordered(body);
        auto tools = parse_tool_request(doc, ordered);
        if (auto* e = std::get_if<ApiError>(&tools)) return *e;
        engine::EngineRequest r;
        r.messages = std::move(std::get<std::vector<jinja::ChatMessage>>(messages));
        apply_tool_prompt(std::get<ToolRequest>(tools), ctx.tool_template, r);
        auto tokens = model.encode_chat(r.messages, add_generation_prompt, r.tools);
        if (!tokens.ok()) return from_error(tokens.error());
        return std::move(tokens).value();
    }
    if (auto e = check_fields(doc, ctx, {"model", "prompt", "add_special_tokens"})) return *e;
    Fields f(doc);
    std::string prompt;
    bool add_special_tokens = true;
    f.read("prompt", prompt, "a string", &json::is_string);
    f.read("add_special_tokens", add_special_tokens, "a boolean", &json::is_boolean);
    if (f.error) return *f.error;
    if (!f.get("prompt")) return bad_request("'prompt' or 'messages' is required", "prompt");
    return model.tokenizer().encode(prompt, add_special_tokens);
}

std::variant<std::string, ApiError> detokenize(const std::string& body,
                                               const ServerContext& ctx) {
    json doc;
    if (auto e = parse_object(body, doc)) return *e;
    if (auto e = check_fields(doc, ctx, {"model", "tokens"})) return *e;
    const json* tokens = Fields(doc).get("tokens");
    const std::int64_t vocab = ctx.engine.model().config().vocab_size;
    const ApiError wrong =
        bad_request("'tokens' must be a list of token ids of the model", "tokens");
    if (!tokens || !tokens->is_array()) return wrong;
    std::vector<std::int32_t> ids;
    for (const json& id : *tokens) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
            id.get<std::int64_t>() >= vocab)
            return wrong;
        ids.push_back(id.get<std::int32_t>());
    }
    return ctx.engine.model().tokenizer().decode(ids);
}

}  // namespace

void add_tokenize_routes(httplib::Server& http, ServerContext& ctx) {
    http.Post("/tokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
        if (!authenticate(ctx, req, res)) return;
        auto tokens = tokenize(req.body, ctx);
        if (auto* e = std::get_if<ApiError>(&tokens)) return send_error(res, *e);
        const auto& ids = std::get<std::vector<std::int32_t>>(tokens);
        send_json(res, json{{"tokens", ids},
                            {"count", ids.size()},
                            {"max_model_len", ctx.engine.model().max_context()}}
                           .dump());
    });
    http.Post("/detokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
        if (!authenticate(ctx, req, res)) return;
        auto text = detokenize(req.body, ctx);
        if (auto* e = std::get_if<ApiError>(&text)) return send_error(res, *e);
        send_json(res, json{{"prompt", std::get<std::string>(text)}}.dump(
                           -1, ' ', false, json::error_handler_t::replace));
    });
}

}  // namespace inferscale::server
