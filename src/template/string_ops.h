#pragma once
// Python's str methods that filters and methods share. Case mapping covers ASCII letters only;
// other characters are kept as they are.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inferscale::jinja {

enum class StripSide { Both, Left, Right };

// str.strip(chars): Python's (Unicode) whitespace when chars is nullopt; chars are bytes.
std::string python_strip(std::string_view s, std::optional<std::string_view> chars, StripSide side);
std::string ascii_lower(std::string_view s);
std::string ascii_upper(std::string_view s);
std::string python_title(std::string_view s);
std::string python_capitalize(std::string_view s);
// str.split(sep, maxsplit): on whitespace runs when sep is empty; maxsplit < 0 splits all.
std::vector<std::string> python_split(std::string_view s, std::optional<std::string_view> sep,
                                      long maxsplit);
std::string python_replace(std::string_view s, std::string_view from, std::string_view to,
                           long count);

}  // namespace inferscale::jinja
