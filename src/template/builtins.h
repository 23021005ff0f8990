#pragma once
// The filters, tests, methods and globals a chat template can use: Jinja's built-ins that real
// templates call, plus transformers' tojson, raise_exception and strftime_now. Using a filter or
// test, or calling a method or function, that is missing here is a parse error (parser.h).

#include <string_view>

#include "template/value.h"

namespace inferscale::jinja {

using FilterFn = Value (*)(const Value& input, CallArgs& args);
using TestFn = bool (*)(const Value& input, CallArgs& args);

FilterFn find_filter(std::string_view name);  // nullptr when unknown
TestFn find_test(std::string_view name);      // nullptr when unknown

// `object.name` for a str or dict method (bound to object); undefined when none.
Value find_method(const Value& object, std::string_view name);
// Whether `name` is a method some value has (str and dict methods, loop.cycle).
bool is_method_name(std::string_view name);

// The globals every render sees: namespace, range, dict, raise_exception, strftime_now.
const ValueDict& global_functions();

}  // namespace inferscale::jinja
