#pragma once
// Grammar: a context-free grammar over bytes, the source of structured outputs (constrained
// decoding). Built from GBNF (llama.cpp's dialect), from a JSON schema (OpenAI's
// response_format json_schema) or as "any JSON object" (response_format json_object).
// A Grammar is immutable once built and shared through shared_ptr; it knows no vocabulary
// (CompiledGrammar in matcher.h prepares it for one).
//
// JSON output allows at most one bounded whitespace run between JSON tokens
// (`"" | " " | "\n" [ \t]{0,20}`) and none before the value or after it, so a model cannot
// loop in whitespace; numbers have at most 16 integer digits, 16 fraction digits and 3
// exponent digits for the same reason.

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "base/result.h"

namespace inferscale::grammar {

struct RuleSet;  // the rules as byte automata, rule_set.h

class Grammar {
  public:
    // GBNF as llama.cpp's server accepts it: rules `name ::= ...`, alternatives |, grouping ( ),
    // literals "..." with escapes (\n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), character classes
    // [a-z] [^"\\] (code points, matched as UTF-8), `.` (any code point), repetition
    // * + ? {m} {m,} {m,n}, comments from #. The start rule is `root`. Errors (InvalidArgument)
    // name the line and column; undefined rules and left recursion are errors too.
    static Result<std::shared_ptr<const Grammar>> from_gbnf(std::string_view text);
    // A JSON schema (the subset in json_schema.h). Errors (InvalidArgument) name the
    // unsupported keyword and its JSON pointer. Properties are emitted in the object's
    // iteration order: nlohmann::json sorts keys, so parse the schema as ordered_json to keep
    // the schema's own order (what OpenAI's structured outputs do).
    static Result<std::shared_ptr<const Grammar>> from_json_schema(const nlohmann::json& schema);
    static Result<std::shared_ptr<const Grammar>> from_json_schema(
        const nlohmann::ordered_json& schema);
    // Any JSON object (response_format json_object). The same instance on every call.
    static std::shared_ptr<const Grammar> any_json_object();

    // Whether `bytes` is a complete sentence of the grammar (for tests and validation).
    bool accepts(std::string_view bytes) const;
    // The GBNF the grammar was built from (generated GBNF for schemas).
    const std::string& gbnf() const { return gbnf_; }
    const RuleSet& rules() const { return *rules_; }

    Grammar(std::string gbnf, std::shared_ptr<const RuleSet> rules);

  private:
    std::string gbnf_;
    std::shared_ptr<const RuleSet> rules_;
};

// GBNF rules for a schema: the schema's own rule is named `rule_name`, helper rules are prefixed
// `rule_name-`, so callers can compose grammars (tool calls:
// root ::= "<tool_call>\n" call "\n</tool_call>"). Errors as Grammar::from_json_schema.
// A GBNF string literal (quotes included) matching exactly `bytes`, for composing grammars.
std::string gbnf_literal(std::string_view bytes);

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema,
                                        std::string_view rule_name = "root");
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                        std::string_view rule_name = "root");

}  // namespace inferscale::grammar
