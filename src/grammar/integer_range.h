#pragma once
// GBNF for the decimal integers in a range (JSON schema minimum/maximum on integers): no
// leading zeros, at most 16 digits like every integer the JSON grammars emit.

#include <cstdint>
#include <optional>
#include <string>

namespace inferscale::grammar {

// A parenthesized GBNF expression matching exactly the integers in [lo, hi] (nullopt:
// unbounded on that side; bounds beyond 16 digits count as unbounded). Requires lo <= hi.
std::string integer_range_gbnf(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi);

}  // namespace inferscale::grammar
