#pragma once
// The OpenAI tool-calling vocabulary shared by the server and the formats: the tools a request
// offers, its tool_choice, the call formats models write, and a call as parsed from output.
//
// Formats, picked from the chat template's source (template_tools.h):
//   Hermes   Qwen2.5 / Hermes 2 Pro: <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>,
//            one block per call;
//   Llama3   Llama 3.1+: a JSON object {"name": N, "parameters": {...}}, optionally after
//            <|python_tag|>;
//   Mistral  [TOOL_CALLS][{"name": N, "arguments": {...}}, ...];
//   Generic  templates that do not render tools: the server's own instruction in the system
//            message asks for {"tool_calls": [{"name": N, "arguments": {...}}]} or
//            {"response": "..."} (generic_prompt.h).

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace inferscale::toolcall {

enum class Format { Hermes, Llama3, Mistral, Generic };

// "hermes", "llama3", "mistral" or "generic".
const char* format_name(Format format);

// One entry of a request's `tools` (type "function").
struct Tool {
    std::string name;
    std::string description;
    nlohmann::ordered_json parameters;  // a JSON schema (an object); {} when the tool takes none
    // The entry as the request sent it, keys in their order: what templates render.
    nlohmann::ordered_json spec;
};

struct ToolChoice {
    enum class Kind { Auto, None, Required, Named };
    Kind kind = Kind::Auto;
    std::string name;  // Named: the function that must be called
};

// A call found in the model's output.
struct ParsedCall {
    std::string name;
    std::string arguments;  // a JSON object as text, as OpenAI's function.arguments carries it
    bool operator==(const ParsedCall&) const = default;
};

// "call_" and 24 random letters and digits.
std::string new_call_id();

}  // namespace inferscale::toolcall
