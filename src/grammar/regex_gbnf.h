#pragma once
// A regular expression (JSON schema `pattern`, ECMA-262 subset) as GBNF over the *JSON-encoded*
// content of a string: what the grammar emits between the quotes, escapes included.
// Supported: literals, `.`, classes [...] and [^...] with ranges, \d \w \s \D \W \S, escaped
// punctuation, groups ( ) and (?: ), alternation, quantifiers * + ? {n} {n,} {n,m} (lazy `?`
// is ignored), ^ at the start and $ at the end (without them the match may be surrounded by
// any characters, as JSON schema's search semantics say). Not supported (an error saying
// what): backreferences, lookaround, word boundaries, named groups, flags, \u escapes, \b.
// Negated classes and `.` never emit `"`, `\` or control characters (so no escapes), which
// keeps every output both valid JSON and a match.

#include <string>
#include <string_view>

#include "base/result.h"

namespace inferscale::grammar {

// `any_char` names the rule of one JSON string character (escapes included), used around
// unanchored patterns. Errors (InvalidArgument) say what is unsupported.
Result<std::string> regex_to_gbnf(std::string_view pattern, const std::string& any_char);

}  // namespace inferscale::grammar
