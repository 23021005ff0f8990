#pragma once
// The JSON shapes models write calls in, read leniently but wholly: the text is either all
// calls (or, for the generic format, a response) or nothing is taken from it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "toolcall/tool.h"

namespace inferscale::toolcall {

struct JsonCalls {
    std::vector<ParsedCall> calls;
    std::string content;  // the generic format's {"response": "..."}
};

// `text`: optional whitespace, <|python_tag|> and a ``` fence (```json), then one or more JSON
// values separated by whitespace, ';' or ',', then the closing fence if one opened. Each value is
// a call {"name": N, "arguments" | "parameters": object or JSON text of one}, a list of calls,
// {"tool_calls": [calls]}, or (generic format only) {"response": "text"}. nullopt when any part
// is anything else.
std::optional<JsonCalls> parse_json_calls(Format format, std::string_view text);

// One call object's text (Hermes' block body), or nullopt.
std::optional<ParsedCall> parse_call_object(std::string_view text);

// The index just past the JSON object or array that starts at text[begin] ('{' or '['), strings
// and escapes respected; npos when it does not close inside `text`.
std::size_t json_value_end(std::string_view text, std::size_t begin);

bool is_json_space(char c);

}  // namespace inferscale::toolcall
