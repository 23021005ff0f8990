#pragma once
// UTF-8 encoding of a code point, shared by the tokenizer, the template interpreter and the
// grammar engine.

#include <string>

namespace inferscale {

// Appends `cp` (at most U+10FFFF) to `out` as UTF-8.
void append_utf8(std::string& out, char32_t cp);

}  // namespace inferscale
