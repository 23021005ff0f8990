#include "template/chat_template.h"

#include <nlohmann/json.hpp>

#include "template/json_value.h"

namespace inferscale::jinja {
namespace {

Value tool_call_value(const ToolCall& call) {
    auto arguments =
        nlohmann::ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    ValueDict function;
    function.set("name", call.name);
    function.set("arguments", arguments.is_object() ? from_json(arguments) : Value(call.arguments));
    ValueDict d;
    if (!call.id.empty()) d.set("id", call.id);
    d.set("type", "function");
    d.set("function", std::move(function));
    return d;
}

Value message_value(const ChatMessage& m) {
    ValueDict d;
    d.set("role", m.role);
    const bool calls_only = m.content.empty() && !m.tool_calls.empty();
    d.set("content", calls_only ? Value(None{}) : Value(m.content));
    if (!m.tool_calls.empty()) {
        ValueList calls;
        calls.reserve(m.tool_calls.size());
        for (const ToolCall& c : m.tool_calls) calls.push_back(tool_call_value(c));
        d.set("tool_calls", std::move(calls));
    }
    if (!m.tool_call_id.empty()) d.set("tool_call_id", m.tool_call_id);
    if (!m.name.empty()) d.set("name", m.name);
    return d;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, SpecialTokens tokens) {
    auto parsed = Template::parse(source);
    if (!parsed.ok())
        return make_error(ErrorKind::InvalidArgument, "chat template " + parsed.error().message);
    ChatTemplate t;
    t.template_ = std::move(parsed).value();
    t.tokens_ = std::move(tokens);
    t.source_ = std::string(source);
    return t;
}

Result<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                         bool add_generation_prompt, const Value& tools,
                                         const ValueDict* extra) const {
    ValueList list;
    list.reserve(messages.size());
    for (const ChatMessage& m : messages) list.push_back(message_value(m));
    ValueDict context;
    context.set("messages", std::move(list));
    context.set("tools", tools);
    context.set("documents", None{});
    context.set("add_generation_prompt", add_generation_prompt);
    context.set("bos_token", tokens_.bos_token);
    context.set("eos_token", tokens_.eos_token);
    if (extra != nullptr)
        for (const auto& [k, v] : extra->entries()) context.set(k, v);
    auto rendered = template_.render(context);
    if (!rendered.ok())
        return make_error(ErrorKind::InvalidArgument, "chat template " + rendered.error().message);
    return rendered;
}

}  // namespace inferscale::jinja
