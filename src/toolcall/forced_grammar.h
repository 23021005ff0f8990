#pragma once
// The grammar that forces a tool call, for tool_choice "required" or a named function: GBNF
// (llama.cpp's syntax, start rule `root`) for the call in the model's format with arguments
// that match the tool's parameters schema. The schema part comes from a converter passed in
// (the grammar library's json_schema_to_gbnf), so this library does not depend on it.
//
//   Hermes   <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>, blocks joined by "\n"
//   Llama3   {"name": "N", "parameters": ARGS}, calls joined by "; "
//   Mistral  [TOOL_CALLS][{"name": "N", "arguments": ARGS}, ...]
//   Generic  {"tool_calls": [{"name": "N", "arguments": ARGS}, ...]}
// One call unless `parallel`; Required allows any of the tools, Named only that one. Every call
// parses with CallParser in the same format.

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "toolcall/tool.h"

namespace inferscale::toolcall {

// GBNF rules for `schema` whose start rule is `rule_name`, helper rules prefixed
// `rule_name-`; an Error for a schema it cannot convert. The schema keeps the request's key
// order, so properties can be asked for in the order the tool declares them.
using SchemaToGbnf = std::function<Result<std::string>(const nlohmann::ordered_json& schema,
                                                       std::string_view rule_name)>;

// `choice` must be Required or Named (a name among `tools`); an Error from the converter, or
// for a choice that forces nothing.
Result<std::string> forced_call_grammar(Format format, const std::vector<Tool>& tools,
                                        const ToolChoice& choice, bool parallel,
                                        const SchemaToGbnf& convert);

// `text` as a GBNF string literal, quotes included.
std::string gbnf_literal(std::string_view text);

}  // namespace inferscale::toolcall
