#include "apps/server/tool_request.h"

#include <set>

namespace inferscale::server {
namespace {

using nlohmann::ordered_json;
using Kind = toolcall::ToolChoice::Kind;

bool valid_function_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    for (const char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    return true;
}

std::variant<toolcall::Tool, ApiError> read_tool(const ordered_json& entry, const std::string& at) {
    if (!entry.is_object()) return bad_request("'" + at + "' must be an object", at);
    for (const auto& [key, _] : entry.items())
        if (key != "type" && key != "function")
            return bad_request("'" + at + "." + key + "' is not supported", at + "." + key);
    const auto type = entry.find("type");
    if (type == entry.end() || !type->is_string() || *type != "function")
        return bad_request("'" + at + ".type' must be \"function\"", at + ".type");
    const auto fn = entry.find("function");
    if (fn == entry.end() || !fn->is_object())
        return bad_request("'" + at + ".function' must be an object", at + ".function");
    toolcall::Tool tool;
    tool.spec = entry;
    for (const auto& [key, value] : fn->items()) {
        const std::string field = at + ".function." + key;
        if (key == "name") {
            if (!value.is_string() || !valid_function_name(value.get<std::string>()))
                return bad_request(
                    "'" + field + "' must be 1 to 64 letters, digits, underscores or dashes",
                    field);
            tool.name = value.get<std::string>();
        } else if (key == "description") {
            if (!value.is_string() && !value.is_null())
                return bad_request("'" + field + "' must be a string", field);
            if (value.is_string()) tool.description = value.get<std::string>();
        } else if (key == "parameters") {
            if (!value.is_object() && !value.is_null())
                return bad_request("'" + field + "' must be a JSON schema object", field);
            if (value.is_object()) tool.parameters = value;
        } else if (key == "strict") {
            if (!value.is_boolean() && !value.is_null())
                return bad_request("'" + field + "' must be a boolean", field);
        } else {
            return bad_request("'" + field + "' is not supported", field);
        }
    }
    if (tool.name.empty())
        return bad_request("'" + at + ".function.name' is required", at + ".function.name");
    if (tool.parameters.is_null()) tool.parameters = ordered_json::object();
    return tool;
}

}  // namespace

std::variant<ToolRequest, ApiError> parse_tool_request(const nlohmann::json& body_doc,
                                                       OrderedBody& ordered) {
    ToolRequest out;
    if (!body_doc.contains("tools") && !body_doc.contains("tool_choice") &&
        !body_doc.contains("parallel_tool_calls"))
        return out;
    const ordered_json& doc = ordered.get();
    if (const auto tools = doc.find("tools"); tools != doc.end() && !tools->is_null()) {
        if (!tools->is_array() || tools->empty())
            return bad_request("'tools' must be a non-empty list of functions", "tools");
        std::set<std::string> names;
        for (std::size_t i = 0; i < tools->size(); ++i) {
            auto tool = read_tool((*tools)[i], "tools[" + std::to_string(i) + "]");
            if (auto* e = std::get_if<ApiError>(&tool)) return *e;
            auto& t = std::get<toolcall::Tool>(tool);
            if (!names.insert(t.name).second)
                return bad_request("'tools' names the function '" + t.name + "' twice",
                                   "tools[" + std::to_string(i) + "].function.name");
            out.tools.push_back(std::move(t));
        }
    }
    if (const auto p = doc.find("parallel_tool_calls"); p != doc.end() && !p->is_null()) {
        if (!p->is_boolean())
            return bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
        out.parallel = p->get<bool>();
    }
    const auto choice = doc.find("tool_choice");
    if (choice == doc.end() || choice->is_null()) return out;
    const ApiError wrong = bad_request(
        "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
        "\"function\": {\"name\": ...}}",
        "tool_choice");
    if (choice->is_string()) {
        const std::string c = choice->get<std::string>();
        if (c == "auto")
            out.choice.kind = Kind::Auto;
        else if (c == "none")
            out.choice.kind = Kind::None;
        else if (c == "required")
            out.choice.kind = Kind::Required;
        else
            return wrong;
    } else if (choice->is_object()) {
        const auto type = choice->find("type");
        const auto fn = choice->find("function");
        if (type == choice->end() || *type != "function" || fn == choice->end() ||
            !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
            return wrong;
        out.choice = {Kind::Named, (*fn)["name"].get<std::string>()};
        bool known = false;
        for (const toolcall::Tool& t : out.tools) known = known || t.name == out.choice.name;
        if (!known)
            return bad_request("'tool_choice' names the function '" + out.choice.name +
                                   "', which is not in 'tools'",
                               "tool_choice");
    } else {
        return wrong;
    }
    if (out.tools.empty() && out.choice.kind == Kind::Required)
        return bad_request("'tool_choice' \"required\" needs 'tools'", "tool_choice");
    return out;
}

void apply_tool_prompt(const ToolRequest& tools, const toolcall::TemplateTools& tmpl,
                       engine::EngineRequest& request) {
    if (tmpl.renders_tools) {
        if (tools.active()) request.tools = toolcall::tools_value(tools.tools);
        return;
    }
    if (!tools.active() && !toolcall::has_tool_turns(request.messages)) return;
    request.messages = toolcall::generic_messages(
        request.messages, tools.active() ? tools.tools : std::vector<toolcall::Tool>{},
        tools.choice, tools.parallel);
}

std::optional<ApiError> apply_tool_grammar(const ToolRequest& tools, toolcall::Format format,
                                           grammar::GrammarCache* grammars,
                                           engine::EngineRequest& request) {
    if (grammars == nullptr ||
        (tools.choice.kind != Kind::Required && tools.choice.kind != Kind::Named))
        return std::nullopt;
    auto text = toolcall::forced_call_grammar(format, tools.tools, tools.choice, tools.parallel);
    if (!text.ok()) return bad_request(text.error().message, "tools");
    auto compiled = grammars->gbnf(*text);
    if (!compiled.ok()) return bad_request("tools: " + compiled.error().message, "tools");
    request.grammar = std::move(compiled).value();
    return std::nullopt;
}

}  // namespace inferscale::server
