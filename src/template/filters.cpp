// Jinja's filters as transformers' environment has them (tojson is transformers' own).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include "template/builtins.h"
#include "template/error.h"
#include "template/json_value.h"
#include "template/operations.h"
#include "template/string_ops.h"

namespace inferscale::jinja {
namespace {

std::string string_arg(const CallArgs& args, std::size_t i, std::string_view name,
                       std::string fallback) {
    const Value* v = args.get(i, name);
    return v == nullptr ? fallback : to_str(*v);
}

bool bool_arg(const CallArgs& args, std::size_t i, std::string_view name) {
    const Value* v = args.get(i, name);
    return v != nullptr && v->truthy();
}

// `a.b.0`: Jinja's attribute paths for selectattr, map, join, sort.
Value attribute_path(const Value& item, std::string_view path) {
    Value v = item;
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = path.find('.', start);
        const std::string part(
            path.substr(start, dot == std::string_view::npos ? dot : dot - start));
        // Digits index a list; past 64 bits they index nothing, as the key they then are.
        std::int64_t n = 0;
        const bool index = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
            return c >= '0' && c <= '9';
        }) && std::from_chars(part.data(), part.data() + part.size(), n).ec == std::errc();
        v = v.is_undefined() ? v : get_item(v, index ? Value(n) : Value(part));
        if (dot == std::string_view::npos) return v;
        start = dot + 1;
    }
}

Value f_trim(const Value& in, CallArgs& args) {
    const Value* chars = args.get(0, "chars");
    const std::string set = chars && !chars->is_none() ? to_str(*chars) : "";
    return python_strip(
        to_str(in),
        chars && !chars->is_none() ? std::optional<std::string_view>(set) : std::nullopt,
        StripSide::Both);
}

Value f_length(const Value& in, CallArgs&) {
    if (in.is_string()) return static_cast<std::int64_t>(utf8_length(in.as_string()));
    if (in.is_list()) return static_cast<std::int64_t>(in.as_list().size());
    if (in.is_dict()) return static_cast<std::int64_t>(in.as_dict().size());
    if (in.is_undefined()) return 0;
    fail("object of type '" + in.type_name() + "' has no len()");
}

Value f_tojson(const Value& in, CallArgs& args) {
    JsonFormat f;
    f.ensure_ascii = bool_arg(args, 0, "ensure_ascii");
    if (const Value* indent = args.get(1, "indent"); indent && !indent->is_none()) {
        f.indent = static_cast<int>(indent->as_int());
        f.item_separator = ",";
    }
    if (const Value* seps = args.get(2, "separators"); seps && !seps->is_none()) {
        const ValueList& pair = seps->as_list();
        if (pair.size() != 2) fail("tojson: separators must be a pair");
        f.item_separator = to_str(pair[0]);
        f.key_separator = to_str(pair[1]);
    }
    f.sort_keys = bool_arg(args, 3, "sort_keys");
    return to_json(in, f);
}

Value f_join(const Value& in, CallArgs& args) {
    const std::string sep = string_arg(args, 0, "d", "");
    const Value* attribute = args.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(in)) {
        if (!first) out += sep;
        first = false;
        append_str(out, attribute ? attribute_path(item, to_str(*attribute)) : item);
    }
    return out;
}

Value f_list(const Value& in, CallArgs&) { return iterate(in).list(); }

Value f_first(const Value& in, CallArgs&) {
    const auto items = iterate(in);
    return items.empty() ? Value::undefined("first") : items.front();
}

Value f_last(const Value& in, CallArgs&) {
    const auto items = iterate(in);
    return items.empty() ? Value::undefined("last") : items.back();
}

Value f_default(const Value& in, CallArgs& args) {
    const bool use_default = in.is_undefined() || (bool_arg(args, 1, "boolean") && !in.truthy());
    if (!use_default) return in;
    const Value* fallback = args.get(0, "default_value");
    return fallback ? *fallback : Value("");
}

Value f_items(const Value& in, CallArgs&) {
    ValueList out;
    if (in.is_undefined()) return out;
    if (!in.is_dict()) fail("items: expected a mapping, got '" + in.type_name() + "'");
    for (const auto& [k, v] : in.as_dict().entries()) out.emplace_back(ValueList{k, v});
    return out;
}

Value f_string(const Value& in, CallArgs&) { return to_str(in); }
Value f_lower(const Value& in, CallArgs&) { return ascii_lower(to_str(in)); }
Value f_upper(const Value& in, CallArgs&) { return ascii_upper(to_str(in)); }
Value f_title(const Value& in, CallArgs&) { return python_title(to_str(in)); }
Value f_capitalize(const Value& in, CallArgs&) { return python_capitalize(to_str(in)); }
Value f_safe(const Value& in, CallArgs&) { return in; }

Value f_replace(const Value& in, CallArgs& args) {
    const Value* count = args.get(2, "count");
    return python_replace(to_str(in), string_arg(args, 0, "old", ""),
                          string_arg(args, 1, "new", ""),
                          count && !count->is_none() ? static_cast<long>(count->as_int()) : -1);
}

// int(x) of a float; one outside 64 bits (Python has big ints) or inf or nan ends the render.
std::int64_t float_to_int(double x) {
    if (!(x > -0x1p63 && x < 0x1p63)) fail("cannot convert " + float_repr(x) + " to a 64-bit int");
    return static_cast<std::int64_t>(x);
}

Value f_int(const Value& in, CallArgs& args) {
    if (in.is_int()) return in;
    if (in.is_bool()) return std::int64_t{in.as_bool()};
    if (in.is_float()) return float_to_int(in.as_float());
    const Value* fallback = args.get(0, "default");
    try {
        if (in.is_string()) return float_to_int(std::stod(in.as_string()));
    } catch (const std::exception&) {
    }
    return fallback ? *fallback : Value(0);
}

Value f_float(const Value& in, CallArgs& args) {
    if (in.is_number() || in.is_bool()) return in.as_number();
    const Value* fallback = args.get(0, "default");
    try {
        if (in.is_string()) return std::stod(in.as_string());
    } catch (const std::exception&) {
    }
    return fallback ? *fallback : Value(0.0);
}

Value f_abs(const Value& in, CallArgs&) {
    if (in.is_int()) {
        if (in.as_int() == std::numeric_limits<std::int64_t>::min())
            fail("integer overflow in abs");
        return in.as_int() < 0 ? -in.as_int() : in.as_int();
    }
    return std::fabs(in.as_number());
}

Value f_round(const Value& in, CallArgs& args) {
    const Value* precision = args.get(0, "precision");
    const double scale = std::pow(10.0, precision ? precision->as_number() : 0.0);
    const std::string method = string_arg(args, 1, "method", "common");
    const double x = in.as_number() * scale;
    const double r = method == "floor"  ? std::floor(x)
                     : method == "ceil" ? std::ceil(x)
                                        : std::round(x);
    return r / scale;
}

// select/reject/selectattr/rejectattr: keep the items whose test result equals `keep`.
Value filter_items(const Value& in, CallArgs& args, bool by_attribute, bool keep) {
    const std::size_t first_test_arg = by_attribute ? 1 : 0;
    const std::string attribute = by_attribute ? string_arg(args, 0, "attribute", "") : "";
    const Value* test_name = args.get(first_test_arg, "");
    TestFn test = nullptr;
    if (test_name != nullptr) {
        test = find_test(to_str(*test_name));
        if (test == nullptr) fail("no test named '" + to_str(*test_name) + "'");
    }
    CallArgs test_args;
    for (std::size_t i = first_test_arg + 1; i < args.positional.size(); ++i)
        test_args.positional.push_back(args.positional[i]);
    ValueList out;
    for (const Value& item : iterate(in)) {
        const Value subject = by_attribute ? attribute_path(item, attribute) : item;
        const bool passed = test ? test(subject, test_args) : subject.truthy();
        if (passed == keep) out.push_back(item);
    }
    return out;
}

Value f_select(const Value& in, CallArgs& args) { return filter_items(in, args, false, true); }
Value f_reject(const Value& in, CallArgs& args) { return filter_items(in, args, false, false); }
Value f_selectattr(const Value& in, CallArgs& args) { return filter_items(in, args, true, true); }
Value f_rejectattr(const Value& in, CallArgs& args) { return filter_items(in, args, true, false); }

Value f_map(const Value& in, CallArgs& args) {
    ValueList out;
    if (const Value* attribute = args.get(99, "attribute")) {
        const Value* fallback = args.get(99, "default");
        for (const Value& item : iterate(in)) {
            Value v = attribute_path(item, to_str(*attribute));
            out.push_back(v.is_undefined() && fallback ? *fallback : v);
        }
        return out;
    }
    if (args.positional.empty()) fail("map: expected a filter name or attribute=");
    const std::string name = to_str(args.positional[0]);
    const FilterFn filter = find_filter(name);
    if (filter == nullptr) fail("no filter named '" + name + "'");
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.named = args.named;
    for (const Value& item : iterate(in)) out.push_back(filter(item, rest));
    return out;
}

Value sort_key(const Value& item, const CallArgs& args) {
    const Value* attribute = args.get(2, "attribute");
    Value key = attribute ? attribute_path(item, to_str(*attribute)) : item;
    if (key.is_string() && !bool_arg(args, 1, "case_sensitive")) key = ascii_lower(key.as_string());
    return key;
}

Value f_sort(const Value& in, CallArgs& args) {
    ValueList items = iterate(in).list();
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        return less_than(sort_key(a, args), sort_key(b, args));
    });
    if (bool_arg(args, 0, "reverse")) std::reverse(items.begin(), items.end());
    return items;
}

Value f_dictsort(const Value& in, CallArgs& args) {
    CallArgs none;
    ValueList pairs = f_items(in, none).as_list();
    const bool by_value = string_arg(args, 1, "by", "key") == "value";
    const bool case_sensitive = bool_arg(args, 0, "case_sensitive");
    const auto key = [&](const Value& pair) {
        Value k = pair.as_list()[by_value ? 1 : 0];
        return k.is_string() && !case_sensitive ? Value(ascii_lower(k.as_string())) : k;
    };
    std::stable_sort(pairs.begin(), pairs.end(),
                     [&](const Value& a, const Value& b) { return less_than(key(a), key(b)); });
    if (bool_arg(args, 2, "reverse")) std::reverse(pairs.begin(), pairs.end());
    return pairs;
}

Value f_reverse(const Value& in, CallArgs&) {
    if (in.is_string()) return get_slice(in, std::nullopt, std::nullopt, -1);
    ValueList items = iterate(in).list();
    std::reverse(items.begin(), items.end());
    return items;
}

Value f_unique(const Value& in, CallArgs&) {
    ValueList out;
    for (const Value& item : iterate(in))
        if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    return out;
}

Value f_sum(const Value& in, CallArgs& args) {
    const Value* attribute = args.get(0, "attribute");
    const Value* start = args.get(1, "start");
    Value total = start ? *start : Value(0);
    for (const Value& item : iterate(in))
        total = binary_op("+", total, attribute ? attribute_path(item, to_str(*attribute)) : item);
    return total;
}

Value extreme(const Value& in, bool want_max) {
    const auto items = iterate(in);
    if (items.empty()) return Value::undefined(want_max ? "max" : "min");
    Value best = items.front();
    for (const Value& item : items)
        if (want_max ? less_than(best, item) : less_than(item, best)) best = item;
    return best;
}
Value f_min(const Value& in, CallArgs&) { return extreme(in, false); }
Value f_max(const Value& in, CallArgs&) { return extreme(in, true); }

Value f_indent(const Value& in, CallArgs& args) {
    const Value* width = args.get(0, "width");
    const std::string pad =
        width && width->is_string()
            ? width->as_string()
            : std::string(width ? static_cast<std::size_t>(width->as_int()) : 4, ' ');
    const bool first = bool_arg(args, 1, "first");
    const bool blank = bool_arg(args, 2, "blank");
    const std::string text = to_str(in);
    std::string out;
    std::size_t start = 0;
    for (std::size_t line = 0;; ++line) {
        const std::size_t nl = text.find('\n', start);
        const std::string_view piece =
            std::string_view(text).substr(start, nl == std::string::npos ? nl : nl - start);
        if ((line > 0 || first) && (blank || !piece.empty())) out += pad;
        out += piece;
        if (nl == std::string::npos) break;
        out += '\n';
        start = nl + 1;
    }
    return out;
}

constexpr std::pair<std::string_view, FilterFn> kFilters[] = {
    {"abs", f_abs},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"first", f_first},
    {"float", f_float},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
    for (const auto& [n, f] : kFilters)
        if (n == name) return f;
    return nullptr;
}

}  // namespace inferscale::jinja
