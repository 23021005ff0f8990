// The str and dict methods templates call (`s.strip()`, `d.items()`); Jinja's immutable
// sandbox allows no method that changes a list or dict.

#include <string_view>

#include "template/builtins.h"
#include "template/error.h"
#include "template/operations.h"
#include "template/string_ops.h"

namespace inferscale::jinja {
namespace {

std::optional<std::string> optional_string(const CallArgs& args, std::size_t i,
                                           std::string_view name) {
    const Value* v = args.get(i, name);
    if (v == nullptr || v->is_none()) return std::nullopt;
    return to_str(*v);
}

long long_arg(const CallArgs& args, std::size_t i, std::string_view name, long fallback) {
    const Value* v = args.get(i, name);
    return v == nullptr || v->is_none() ? fallback : static_cast<long>(v->as_int());
}

Value strip_method(const std::string& s, CallArgs& args, StripSide side) {
    const auto chars = optional_string(args, 0, "chars");
    return python_strip(s, chars ? std::optional<std::string_view>(*chars) : std::nullopt, side);
}

bool affix_matches(const std::string& s, const Value& affix, bool prefix) {
    if (affix.is_list()) {
        for (const Value& a : affix.as_list())
            if (affix_matches(s, a, prefix)) return true;
        return false;
    }
    const std::string a = to_str(affix);
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

Value split_result(std::vector<std::string> parts) {
    ValueList out;
    out.reserve(parts.size());
    for (std::string& p : parts) out.emplace_back(std::move(p));
    return out;
}

Value string_method(const std::string& s, std::string_view name, CallArgs& args) {
    if (name == "strip") return strip_method(s, args, StripSide::Both);
    if (name == "lstrip") return strip_method(s, args, StripSide::Left);
    if (name == "rstrip") return strip_method(s, args, StripSide::Right);
    if (name == "lower") return ascii_lower(s);
    if (name == "upper") return ascii_upper(s);
    if (name == "title") return python_title(s);
    if (name == "capitalize") return python_capitalize(s);
    if (name == "split") {
        const auto sep = optional_string(args, 0, "sep");
        return split_result(python_split(s,
                                         sep ? std::optional<std::string_view>(*sep) : std::nullopt,
                                         long_arg(args, 1, "maxsplit", -1)));
    }
    if (name == "splitlines") {
        std::vector<std::string> lines = python_split(s, "\n", -1);
        if (!lines.empty() && lines.back().empty()) lines.pop_back();
        return split_result(std::move(lines));
    }
    if (name == "startswith" || name == "endswith") {
        const Value* affix = args.get(0, "prefix");
        if (affix == nullptr) fail(std::string(name) + "() takes an argument");
        return affix_matches(s, *affix, name == "startswith");
    }
    if (name == "replace") {
        return python_replace(s, to_str(args.positional.at(0)), to_str(args.positional.at(1)),
                              long_arg(args, 2, "count", -1));
    }
    if (name == "find" || name == "count") {
        const std::string needle = to_str(args.positional.at(0));
        if (name == "find") {
            const std::size_t at = s.find(needle);
            return at == std::string::npos
                       ? std::int64_t{-1}
                       : static_cast<std::int64_t>(utf8_length(s.substr(0, at)));
        }
        return static_cast<std::int64_t>(python_split(s, needle, -1).size() - 1);
    }
    if (name == "join") {
        std::string out;
        bool first = true;
        for (const Value& item : iterate(args.positional.at(0))) {
            if (!first) out += s;
            first = false;
            append_str(out, item);
        }
        return out;
    }
    if (name == "removeprefix" || name == "removesuffix") {
        const Value& affix = args.positional.at(0);
        const bool prefix = name == "removeprefix";
        if (!affix_matches(s, affix, prefix)) return s;
        const std::size_t n = to_str(affix).size();
        return prefix ? s.substr(n) : s.substr(0, s.size() - n);
    }
    if (name == "isdigit" || name == "isspace") {
        if (s.empty()) return false;
        for (char c : s) {
            const bool ok =
                name == "isdigit"
                    ? (c >= '0' && c <= '9')
                    : python_strip(std::string(1, c), std::nullopt, StripSide::Both).empty();
            if (!ok) return false;
        }
        return true;
    }
    return Value::undefined(std::string(name));
}

Value dict_method(const Value& d, std::string_view name, CallArgs& args) {
    const ValueDict& dict = d.as_dict();
    if (name == "get") {
        const Value* key = args.get(0, "key");
        const Value* v = key && key->is_string() ? dict.find(key->as_string()) : nullptr;
        if (v != nullptr) return *v;
        const Value* fallback = args.get(1, "default");
        return fallback ? *fallback : Value(None{});
    }
    ValueList out;
    for (const auto& [k, v] : dict.entries()) {
        if (name == "items") out.emplace_back(ValueList{k, v});
        if (name == "keys") out.emplace_back(k);
        if (name == "values") out.push_back(v);
    }
    return out;
}

constexpr std::string_view kStringMethods[] = {
    "capitalize", "count",      "endswith",     "find",         "isdigit", "isspace", "join",
    "lower",      "lstrip",     "removeprefix", "removesuffix", "replace", "rstrip",  "split",
    "splitlines", "startswith", "strip",        "title",        "upper"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values"};

// The table's own copy of `name` (static, so a callable may keep it), or empty.
template <std::size_t N>
std::string_view listed(const std::string_view (&names)[N], std::string_view name) {
    for (std::string_view n : names)
        if (n == name) return n;
    return {};
}

}  // namespace

bool is_method_name(std::string_view name) {
    return name == "cycle" || !listed(kStringMethods, name).empty() ||
           !listed(kDictMethods, name).empty();
}

Value find_method(const Value& object, std::string_view name) {
    if (object.is_string()) {
        if (const std::string_view method = listed(kStringMethods, name); !method.empty())
            return Callable{std::string(method), [s = object.as_string(), method](CallArgs& args) {
                                return string_method(s, method, args);
                            }};
    }
    if (object.is_dict()) {
        if (const std::string_view method = listed(kDictMethods, name); !method.empty())
            return Callable{std::string(method), [object, method](CallArgs& args) {
                                return dict_method(object, method, args);
                            }};
    }
    return Value::undefined(std::string(name));
}

}  // namespace inferscale::jinja
