#pragma once
// UTF-8 helpers for character classes: code point ranges as sequences of byte ranges, so a class
// becomes a small byte automaton (a token may end in the middle of a code point).

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/utf8.h"  // append_utf8

namespace inferscale::grammar {

using CodeRange = std::pair<std::uint32_t, std::uint32_t>;  // inclusive
using ByteRange = std::pair<std::uint8_t, std::uint8_t>;    // inclusive

// The length of the UTF-8 sequence at the start of `s` and its code point; 0 if invalid.
int decode_utf8(std::string_view s, std::uint32_t& code_point);

// Sorted, merged ranges.
std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> ranges);
// [0, max] minus `ranges` (normalized).
std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& ranges, std::uint32_t max);
// Drops U+D800..U+DFFF, which UTF-8 cannot encode.
void remove_surrogates(std::vector<CodeRange>& ranges);

// The UTF-8 encodings of the code points in [lo, hi] as sequences of byte ranges: a byte string
// encodes such a code point iff it matches one sequence (each byte in its range).
std::vector<std::vector<ByteRange>> utf8_sequences(std::uint32_t lo, std::uint32_t hi);

}  // namespace inferscale::grammar
