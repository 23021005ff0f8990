#pragma once
// GBNF text -> AstGrammar (llama.cpp's dialect, grammar.h). Errors name line and column.

#include <string_view>

#include "base/result.h"
#include "grammar/grammar_ast.h"

namespace inferscale::grammar {

Result<AstGrammar> parse_gbnf(std::string_view text);

}  // namespace inferscale::grammar
