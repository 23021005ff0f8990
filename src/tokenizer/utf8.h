#pragma once
// UTF-8 helpers shared by the tokenizer stages. Input text is made valid once at the entry point
// (sanitize_utf8), so later stages may assume well-formed UTF-8.

#include <cstddef>
#include <string>
#include <string_view>

#include "base/utf8.h"  // append_utf8

namespace inferscale::tokenizer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Length of the valid UTF-8 sequence starting at s[pos], or 0 when the bytes there are not a
// complete, well-formed sequence. Decoded code point in *cp when non-zero.
std::size_t utf8_sequence_at(std::string_view s, std::size_t pos, char32_t* cp);

// Replaces every maximal invalid subpart with U+FFFD, exactly like Rust's String::from_utf8_lossy
// (and so like Hugging Face's decoders), so results are deterministic for any bytes.
std::string sanitize_utf8(std::string_view bytes);

// Length of the longest prefix that does not end inside a UTF-8 sequence which could still be
// completed by more bytes. Used by streaming decode to hold back a partial character.
std::size_t utf8_complete_prefix(std::string_view bytes);

// Rust's char::is_whitespace (the Unicode White_Space property), which HF uses for lstrip/rstrip.
bool is_unicode_whitespace(char32_t cp);

// Python's str.strip() whitespace set, which Jinja's |trim uses.
bool is_python_whitespace(char32_t cp);

// Strips leading and trailing Python whitespace.
std::string python_strip(std::string_view s);

}  // namespace inferscale::tokenizer
