#pragma once
// The template lexer: splits Jinja source into text and the tokens of {{ }} and {% %} tags,
// applying the whitespace rules transformers renders with (trim_blocks, lstrip_blocks, the -
// and + tag modifiers, one trailing newline dropped). Comments are dropped here.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace inferscale::jinja {

struct Token {
    enum class Type {
        Text,
        VarBegin,
        VarEnd,
        BlockBegin,
        BlockEnd,
        Name,
        String,
        Int,
        Float,
        Op,
        End
    };
    Type type;
    std::string text;  // Text: the text; Name/String/Op: the name, unescaped string or operator
    int line = 1;
    std::int64_t int_value = 0;
    double float_value = 0.0;
};

// Throws TemplateError (error.h) with the line of a malformed tag or literal.
std::vector<Token> lex(std::string_view source);

}  // namespace inferscale::jinja
