#pragma once
// Structured outputs on the completions routes: OpenAI's `response_format` (`text`,
// `json_object`, `json_schema` with `schema`, `name`, `description`, `strict`) and llama-server's
// `grammar` (GBNF text), compiled for the served model's vocabulary (through its grammar cache,
// so a schema seen before costs nothing) into the grammar the engine decodes under.

#include <memory>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "apps/server/api_error.h"
#include "apps/server/json_fields.h"
#include "grammar/grammar_cache.h"

namespace inferscale::server {

// The grammar `body` asks for, into `out` (left as it is when none). A 400 naming the field for
// a malformed format, both fields at once, or a schema or grammar the engine does not support. A
// schema's properties come in the order `ordered` (the same body) gives them, as OpenAI's do.
std::optional<ApiError> read_output_format(const nlohmann::json& body, OrderedBody& ordered,
                                           grammar::GrammarCache& grammars,
                                           std::shared_ptr<const grammar::CompiledGrammar>& out);

}  // namespace inferscale::server
