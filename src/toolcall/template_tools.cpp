#include "toolcall/template_tools.h"

#include "template/json_value.h"

namespace inferscale::toolcall {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kProbeName = "inferscale_probe_tool_q7x";

// One line as Python's json.dumps writes it (", " and ": "), the JSON models see most.
std::string dump(const ordered_json& v) { return jinja::to_json(jinja::from_json(v), {}); }

// A call's arguments as JSON: the object they hold, or the text when it is not one.
ordered_json arguments_json(const std::string& text) {
    auto v = ordered_json::parse(text, nullptr, false);
    return v.is_discarded() ? ordered_json(text) : v;
}

}  // namespace

TemplateTools detect_template_tools(const jinja::ChatTemplate& tmpl) {
    TemplateTools out;
    ordered_json probe = {
        {"type", "function"},
        {"function",
         {{"name", kProbeName},
          {"description", "probe"},
          {"parameters", {{"type", "object"}, {"properties", ordered_json::object()}}}}}};
    const std::vector<jinja::ChatMessage> messages = {{"user", "hello"}};
    const auto rendered =
        tmpl.render(messages, true, jinja::from_json(ordered_json::array({probe})));
    out.renders_tools = rendered.ok() && rendered->find(kProbeName) != std::string::npos;
    if (!out.renders_tools) return out;
    const std::string& source = tmpl.source();
    if (source.find("[TOOL_CALLS]") != std::string::npos)
        out.format = Format::Mistral;
    else if (source.find("<tool_call>") != std::string::npos)
        out.format = Format::Hermes;
    else if (source.find("<|python_tag|>") != std::string::npos ||
             source.find("<|start_header_id|>") != std::string::npos)
        out.format = Format::Llama3;
    else
        out.format = Format::Hermes;
    return out;
}

jinja::Value tools_value(const std::vector<Tool>& tools) {
    ordered_json list = ordered_json::array();
    for (const Tool& t : tools) list.push_back(t.spec);
    return jinja::from_json(list);
}

std::string generic_instruction(const std::vector<Tool>& tools, const ToolChoice& choice,
                                bool parallel) {
    std::string text = "You can call these tools (their parameters are JSON schemas):\n";
    for (const Tool& t : tools) {
        ordered_json entry = {{"name", t.name}};
        if (!t.description.empty()) entry["description"] = t.description;
        entry["parameters"] = t.parameters;
        text += dump(entry) + "\n";
    }
    const std::string calls = parallel ? "{\"tool_calls\": [{\"name\": \"<tool name>\", "
                                         "\"arguments\": {<its arguments>}}, ...]}"
                                       : "{\"tool_calls\": [{\"name\": \"<tool name>\", "
                                         "\"arguments\": {<its arguments>}}]}";
    switch (choice.kind) {
        case ToolChoice::Kind::Named:
            text += "\nYou must call the tool \"" + choice.name +
                    "\". Answer with only this JSON object:\n{\"tool_calls\": [{\"name\": \"" +
                    choice.name + "\", \"arguments\": {<its arguments>}}]}";
            break;
        case ToolChoice::Kind::Required:
            text += "\nYou must call a tool. Answer with only this JSON object:\n" + calls;
            break;
        default:
            text += "\nTo call tools, answer with only this JSON object:\n" + calls +
                    "\nTo answer the user directly, answer with only this JSON object:\n"
                    "{\"response\": \"<your answer>\"}";
            break;
    }
    if (!parallel && choice.kind != ToolChoice::Kind::Named) text += "\nCall one tool at a time.";
    return text;
}

bool has_tool_turns(std::span<const jinja::ChatMessage> messages) {
    for (const jinja::ChatMessage& m : messages)
        if (!m.tool_calls.empty() || m.role == "tool") return true;
    return false;
}

std::vector<jinja::ChatMessage> generic_messages(std::span<const jinja::ChatMessage> messages,
                                                 const std::vector<Tool>& tools,
                                                 const ToolChoice& choice, bool parallel) {
    std::vector<jinja::ChatMessage> out;
    if (!tools.empty()) {
        const std::string instruction = generic_instruction(tools, choice, parallel);
        if (!messages.empty() && messages.front().role == "system") {
            out.emplace_back("system", messages.front().content + "\n\n" + instruction);
            messages = messages.subspan(1);
        } else {
            out.emplace_back("system", instruction);
        }
    }
    std::vector<std::pair<std::string, std::string>> call_names;  // id -> name
    ordered_json results = ordered_json::array();
    const auto flush_results = [&] {
        if (results.empty()) return;
        out.emplace_back("user", dump({{"tool_results", results}}));
        results = ordered_json::array();
    };
    for (const jinja::ChatMessage& m : messages) {
        if (m.role == "tool") {
            std::string name = m.name;
            for (const auto& [id, n] : call_names)
                if (name.empty() && id == m.tool_call_id) name = n;
            ordered_json r = {{"tool_call_id", m.tool_call_id}};
            if (!name.empty()) r["name"] = name;
            r["content"] = m.content;
            results.push_back(std::move(r));
            continue;
        }
        flush_results();
        if (m.tool_calls.empty()) {
            out.push_back(m);
            continue;
        }
        ordered_json calls = ordered_json::array();
        for (const jinja::ToolCall& c : m.tool_calls) {
            calls.push_back({{"name", c.name}, {"arguments", arguments_json(c.arguments)}});
            call_names.emplace_back(c.id, c.name);
        }
        const std::string text = dump({{"tool_calls", calls}});
        out.emplace_back(m.role, m.content.empty() ? text : m.content + "\n\n" + text);
    }
    flush_results();
    return out;
}

}  // namespace inferscale::toolcall
