#pragma once
// OpenAI tool calling on the request side: `tools`, `tool_choice` and `parallel_tool_calls`
// read and checked (a 400 names the field), and the tools put into the prompt: passed to a
// chat template that renders tools, or written into the system turn in the generic format
// for one that does not (toolcall/template_tools.h).
//
// tool_choice "none" neither renders the tools nor parses calls from the output: the model
// answers as if no tools were given (the history's calls and results still render).

#include <string_view>
#include <variant>
#include <vector>

#include "apps/server/api_error.h"
#include "apps/server/json_fields.h"
#include "engine/request.h"
#include "grammar/grammar_cache.h"
#include "toolcall/forced_grammar.h"
#include "toolcall/template_tools.h"
#include "toolcall/tool.h"

namespace inferscale::server {

struct ToolRequest {
    std::vector<toolcall::Tool> tools;
    toolcall::ToolChoice choice;  // "auto" when tools are given and no choice is
    bool parallel = true;
    // Tools are offered and calls are parsed from the output.
    bool active() const {
        return !tools.empty() && choice.kind != toolcall::ToolChoice::Kind::None;
    }
};

// The tool fields of a request body `doc`, read from `ordered` (the same body with its keys in
// order: templates render the tools as sent) when `doc` has one of them.
std::variant<ToolRequest, ApiError> parse_tool_request(const nlohmann::json& doc,
                                                       OrderedBody& ordered);

// Puts `tools` into `request`'s prompt for a template that takes them as `tmpl` says; the
// generic format also rewrites the history's calls and results for templates without tools.
void apply_tool_prompt(const ToolRequest& tools, const toolcall::TemplateTools& tmpl,
                       engine::EngineRequest& request);

// The forced-call grammar for tool_choice "required" or a named function, compiled into
// request.grammar; nothing for "auto" or "none", or without `grammars`.
std::optional<ApiError> apply_tool_grammar(const ToolRequest& tools, toolcall::Format format,
                                           grammar::GrammarCache* grammars,
                                           engine::EngineRequest& request);

}  // namespace inferscale::server
