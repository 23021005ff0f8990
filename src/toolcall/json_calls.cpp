#include "toolcall/json_calls.h"

namespace inferscale::toolcall {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kFence = "```";

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
    return s;
}

std::optional<ParsedCall> call_from(const ordered_json& v) {
    if (!v.is_object()) return std::nullopt;
    const auto name = v.find("name");
    if (name == v.end() || !name->is_string() || name->get<std::string>().empty())
        return std::nullopt;
    auto args = v.find("arguments");
    if (args == v.end()) args = v.find("parameters");
    ParsedCall call{name->get<std::string>(), "{}"};
    if (args == v.end() || args->is_null()) return call;
    if (args->is_object()) {
        call.arguments = args->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
        return call;
    }
    if (args->is_string()) {  // arguments already as JSON text
        const auto inner = ordered_json::parse(args->get<std::string>(), nullptr, false);
        if (!inner.is_object()) return std::nullopt;
        call.arguments = inner.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
        return call;
    }
    return std::nullopt;
}

// Adds what one top-level value holds to `out`; false when it is not a shape of calls.
bool take_value(Format format, const ordered_json& v, JsonCalls& out) {
    if (v.is_array()) {
        if (v.empty()) return false;
        for (const ordered_json& item : v) {
            auto call = call_from(item);
            if (!call) return false;
            out.calls.push_back(std::move(*call));
        }
        return true;
    }
    if (!v.is_object()) return false;
    if (const auto calls = v.find("tool_calls"); calls != v.end() && v.size() == 1)
        return calls->is_array() && take_value(format, *calls, out);
    if (const auto response = v.find("response");
        format == Format::Generic && response != v.end() && v.size() == 1) {
        if (!response->is_string()) return false;
        out.content += response->get<std::string>();
        return true;
    }
    auto call = call_from(v);
    if (!call) return false;
    out.calls.push_back(std::move(*call));
    return true;
}

}  // namespace

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::size_t json_value_end(std::string_view text, std::size_t begin) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = begin; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"')
            in_string = true;
        else if (c == '{' || c == '[')
            ++depth;
        else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
        }
    }
    return std::string_view::npos;
}

std::optional<ParsedCall> parse_call_object(std::string_view text) {
    const auto v = ordered_json::parse(trim(text), nullptr, false);
    if (v.is_discarded()) return std::nullopt;
    return call_from(v);
}

std::optional<JsonCalls> parse_json_calls(Format format, std::string_view text) {
    text = trim(text);
    if (text.starts_with(kPythonTag)) text = trim(text.substr(kPythonTag.size()));
    if (text.starts_with(kFence)) {
        const std::size_t eol = text.find('\n');
        if (eol == std::string_view::npos) return std::nullopt;
        const std::string_view lang = trim(text.substr(kFence.size(), eol - kFence.size()));
        if (!lang.empty() && lang != "json") return std::nullopt;
        text = trim(text.substr(eol + 1));
        if (text.ends_with(kFence)) text = trim(text.substr(0, text.size() - kFence.size()));
    }
    JsonCalls out;
    std::size_t at = 0;
    bool any = false;
    while (at < text.size()) {
        if (text[at] != '{' && text[at] != '[') return std::nullopt;
        const std::size_t end = json_value_end(text, at);
        if (end == std::string_view::npos) return std::nullopt;
        const auto v = ordered_json::parse(text.substr(at, end - at), nullptr, false);
        if (v.is_discarded() || !take_value(format, v, out)) return std::nullopt;
        any = true;
        at = end;
        while (at < text.size() && (is_json_space(text[at]) || text[at] == ';' || text[at] == ','))
            ++at;
    }
    if (!any) return std::nullopt;
    return out;
}

}  // namespace inferscale::toolcall
