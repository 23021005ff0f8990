#pragma once
// The template parser: tokens (lexer.h) to statements (ast.h). Filters and tests are resolved
// here and calls checked, so an unknown statement, filter, test, method or function fails when
// the template is parsed, not when a request renders it.

#include <vector>

#include "template/ast.h"
#include "template/lexer.h"

namespace inferscale::jinja {

// Throws TemplateError with the line of the first construct it cannot parse or does not support.
Body parse(const std::vector<Token>& tokens);

}  // namespace inferscale::jinja
