#pragma once
// The grammar that forces a tool call, for tool_choice "required" or a named function: GBNF
// (llama.cpp's syntax, start rule `root`) for the call in the model's format with arguments
// that match the tool's parameters schema (grammar::json_schema_to_gbnf, in the schema's own
// property order).
//
//   Hermes   <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>, blocks joined by "\n"
//   Llama3   {"name": "N", "parameters": ARGS}, calls joined by "; "
//   Mistral  [TOOL_CALLS][{"name": "N", "arguments": ARGS}, ...]
//   Generic  {"tool_calls": [{"name": "N", "arguments": ARGS}, ...]}
// One call unless `parallel`; Required allows any of the tools, Named only that one. Every call
// parses with CallParser in the same format.

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "toolcall/tool.h"

namespace inferscale::toolcall {

// `choice` must be Required or Named (a name among `tools`); an Error naming the tool whose
// parameters schema the grammar engine does not support, or for a choice that forces nothing.
Result<std::string> forced_call_grammar(Format format, const std::vector<Tool>& tools,
                                        const ToolChoice& choice, bool parallel);

}  // namespace inferscale::toolcall
