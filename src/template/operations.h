#pragma once
// Python's operators on Values as Jinja applies them: arithmetic, comparison, membership,
// attribute and item access, slicing, iteration. Type errors throw TemplateError.

#include <optional>
#include <string_view>

#include "template/value.h"

namespace inferscale::jinja {

Value binary_op(std::string_view op, const Value& a, const Value& b);  // + - * / // % ** ~ < ...
bool contains(const Value& container, const Value& item);              // Python's `in`
bool less_than(const Value& a, const Value& b);                        // Python's <

// Jinja's `object.name` (a method, a dict key, a namespace attribute) and `object[key]`;
// undefined when there is none. Both throw when object itself is undefined.
Value get_attribute(const Value& object, std::string_view name);
Value get_item(const Value& object, const Value& key);
Value get_slice(const Value& object, std::optional<std::int64_t> start,
                std::optional<std::int64_t> stop, std::optional<std::int64_t> step);

// The items a for loop visits: list items, dict keys, the characters of a string, nothing for
// an undefined value.
std::shared_ptr<const ValueList> iterate(const Value& v);

// UTF-8 text as a list of code points, one string each.
ValueList utf8_characters(std::string_view text);

}  // namespace inferscale::jinja
