#pragma once
// Validation and normalization of what users hand the memory store.

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace inferscale::memory {

// Trims and collapses runs of ASCII whitespace to one space (Python's " ".join(s.split()) for
// ASCII), so equal facts get equal text, and equal KV chunks.
std::string normalize_whitespace(std::string_view text);

bool is_valid_utf8(std::string_view text);

// Error unless `user` is non-empty UTF-8 without control characters, at most max_bytes long.
Status check_user_id(std::string_view user, std::size_t max_bytes);

// The normalized fact text, or Error when it is empty, not UTF-8 or longer than max_bytes.
Result<std::string> normalize_fact_text(std::string_view text, std::size_t max_bytes);

}  // namespace inferscale::memory
