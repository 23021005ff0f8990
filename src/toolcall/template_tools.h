#pragma once
// How a model's chat template takes tools, and the prompt for templates that take none.
//
// A template renders tools when a probe tool's name appears in its output (the template reads
// `tools`); the server then passes the request's tools to it as transformers does. The call
// format comes from markers in the template source: <tool_call> (Hermes, Qwen2.5), [TOOL_CALLS]
// (Mistral), <|python_tag|> or <|start_header_id|> (Llama 3.1+); another template that renders
// tools is read as Hermes, whose parser also takes the bare JSON calls most models write.
//
// Templates that do not render tools (SmolLM2, Gemma 3) get the generic format: the tool list
// and an instruction to answer with {"tool_calls": [...]} or {"response": "..."} go into the
// system message (generic_messages), and the history's calls and results are written in that
// format, as user turns for the results (templates such as Gemma 3's take only user and
// assistant turns).

#include <span>
#include <string_view>
#include <vector>

#include "template/chat_template.h"
#include "toolcall/tool.h"

namespace inferscale::toolcall {

struct TemplateTools {
    bool renders_tools = false;  // the template writes the tool list itself
    Format format = Format::Generic;
};

TemplateTools detect_template_tools(const jinja::ChatTemplate& tmpl);

// The request's tools as the template's `tools` variable: the entries as sent.
jinja::Value tools_value(const std::vector<Tool>& tools);

// The system text of the generic format for these tools and choice (Auto, Required or Named).
std::string generic_instruction(const std::vector<Tool>& tools, const ToolChoice& choice,
                                bool parallel);

// `messages` for a template without tools: the instruction (when `tools` is not empty) joined
// to the system message or put first as one, assistant calls as {"tool_calls": [...]} text and
// each run of tool results as one user turn {"tool_results": [{"tool_call_id", "name",
// "content"}]}.
std::vector<jinja::ChatMessage> generic_messages(std::span<const jinja::ChatMessage> messages,
                                                 const std::vector<Tool>& tools,
                                                 const ToolChoice& choice, bool parallel);

// Whether any message carries calls or is a tool result.
bool has_tool_turns(std::span<const jinja::ChatMessage> messages);

}  // namespace inferscale::toolcall
