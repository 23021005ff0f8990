// Jinja's tests (`x is defined`, `x is equalto y`, ...).

#include <string_view>
#include <utility>

#include "template/builtins.h"
#include "template/error.h"
#include "template/operations.h"
#include "template/string_ops.h"

namespace inferscale::jinja {
namespace {

const Value& operand(const CallArgs& args) {
    const Value* v = args.get(0, "other");
    if (v == nullptr) fail("the test needs an argument");
    return *v;
}

bool t_defined(const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(const Value& v, CallArgs&) { return v.is_number() || v.is_bool(); }
bool t_string(const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(const Value& v, CallArgs&) { return v.is_dict(); }
bool t_callable(const Value& v, CallArgs&) { return v.is_callable(); }
// Python's iter() accepts str, list, dict and Jinja's undefined.
bool t_iterable(const Value& v, CallArgs&) {
    return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_sequence(const Value& v, CallArgs& a) { return t_iterable(v, a); }
bool t_eq(const Value& v, CallArgs& a) { return v == operand(a); }
bool t_ne(const Value& v, CallArgs& a) { return !(v == operand(a)); }
bool t_lt(const Value& v, CallArgs& a) { return less_than(v, operand(a)); }
bool t_le(const Value& v, CallArgs& a) { return !less_than(operand(a), v); }
bool t_gt(const Value& v, CallArgs& a) { return less_than(operand(a), v); }
bool t_ge(const Value& v, CallArgs& a) { return !less_than(v, operand(a)); }
bool t_in(const Value& v, CallArgs& a) { return contains(operand(a), v); }
// `is sameas`: identity, which for the values templates compare (None, booleans) is equality
// of the same type.
bool t_sameas(const Value& v, CallArgs& a) {
    const Value& other = operand(a);
    return v.type_name() == other.type_name() && v == other;
}
bool t_odd(const Value& v, CallArgs&) { return v.is_int() && v.as_int() % 2 != 0; }
bool t_even(const Value& v, CallArgs&) { return v.is_int() && v.as_int() % 2 == 0; }
bool t_divisibleby(const Value& v, CallArgs& a) {
    const Value& n = operand(a);
    return n.is_int() && n.as_int() != 0 && v.is_int() && v.as_int() % n.as_int() == 0;
}
bool t_lower(const Value& v, CallArgs&) {
    const std::string s = to_str(v);
    return s == ascii_lower(s) && s != ascii_upper(s);
}
bool t_upper(const Value& v, CallArgs&) {
    const std::string s = to_str(v);
    return s == ascii_upper(s) && s != ascii_lower(s);
}

constexpr std::pair<std::string_view, TestFn> kTests[] = {
    {"!=", t_ne},
    {"<", t_lt},
    {"<=", t_le},
    {"==", t_eq},
    {">", t_gt},
    {">=", t_ge},
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"even", t_even},
    {"false", t_false},
    {"float", t_float},
    {"ge", t_ge},
    {"greaterthan", t_gt},
    {"gt", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"lessthan", t_lt},
    {"lower", t_lower},
    {"lt", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_sequence},
    {"string", t_string},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

}  // namespace

TestFn find_test(std::string_view name) {
    for (const auto& [n, t] : kTests)
        if (n == name) return t;
    return nullptr;
}

}  // namespace inferscale::jinja
