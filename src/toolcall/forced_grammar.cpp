#include "toolcall/forced_grammar.h"

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace inferscale::toolcall {

Result<std::string> forced_call_grammar(Format format, const std::vector<Tool>& tools,
                                        const ToolChoice& choice, bool parallel) {
    using grammar::gbnf_literal;
    if (choice.kind != ToolChoice::Kind::Required && choice.kind != ToolChoice::Kind::Named)
        return make_error(ErrorKind::InvalidArgument,
                          "only required or named tool choices "
                          "force a call");
    const char* args_key = format == Format::Llama3 ? "parameters" : "arguments";
    std::string rules, alternatives;
    for (std::size_t i = 0; i < tools.size(); ++i) {
        const Tool& t = tools[i];
        if (choice.kind == ToolChoice::Kind::Named && t.name != choice.name) continue;
        const std::string args_rule = "tool-" + std::to_string(i) + "-args";
        // An empty schema still asks for an object: arguments are one.
        const nlohmann::ordered_json schema =
            t.parameters.empty() ? nlohmann::ordered_json{{"type", "object"}} : t.parameters;
        auto converted = grammar::json_schema_to_gbnf(schema, args_rule);
        if (!converted.ok())
            return make_error(ErrorKind::InvalidArgument,
                              "tool '" + t.name + "' parameters: " + converted.error().message);
        const std::string head =
            "{\"name\": " + nlohmann::json(t.name).dump() + ", \"" + args_key + "\": ";
        const std::string call_rule = "call-" + std::to_string(i);
        rules += call_rule + " ::= " + gbnf_literal(head) + " " + args_rule + " \"}\"\n";
        rules += *converted;
        if (!rules.ends_with('\n')) rules += '\n';
        alternatives += (alternatives.empty() ? "" : " | ") + call_rule;
    }
    if (alternatives.empty())
        return make_error(ErrorKind::InvalidArgument,
                          "tool_choice names '" + choice.name + "', which is not among the tools");
    // More calls, each after its separator, when parallel.
    const auto more = [&](std::string_view separator, std::string_view item) {
        return parallel ? " (" + gbnf_literal(separator) + " " + std::string(item) + ")*"
                        : std::string();
    };
    std::string root;
    switch (format) {
        case Format::Hermes:
            root = "root ::= tool-call" + more("\n", "tool-call") + "\n" +
                   "tool-call ::= " + gbnf_literal("<tool_call>\n") + " call " +
                   gbnf_literal("\n</tool_call>") + "\n";
            break;
        case Format::Llama3:
            root = "root ::= call" + more("; ", "call") + "\n";
            break;
        case Format::Mistral:
            root = "root ::= " + gbnf_literal("[TOOL_CALLS][") + " call" + more(", ", "call") +
                   " \"]\"\n";
            break;
        case Format::Generic:
            root = "root ::= " + gbnf_literal("{\"tool_calls\": [") + " call" + more(", ", "call") +
                   " " + gbnf_literal("]}") + "\n";
            break;
    }
    return root + "call ::= " + alternatives + "\n" + rules;
}

}  // namespace inferscale::toolcall
