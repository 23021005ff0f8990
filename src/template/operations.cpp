#include "template/operations.h"

#include <cmath>
#include <limits>

#include "template/builtins.h"
#include "template/error.h"

namespace inferscale::jinja {
namespace {

[[noreturn]] void undefined_error(const Value& v) {
    fail("'" + v.undefined_name() + "' is undefined");
}

[[noreturn]] void operand_error(std::string_view op, const Value& a, const Value& b) {
    if (a.is_undefined()) undefined_error(a);
    if (b.is_undefined()) undefined_error(b);
    fail("unsupported operand types for " + std::string(op) + ": '" + a.type_name() + "' and '" +
         b.type_name() + "'");
}

bool integral(const Value& v) { return v.is_int() || v.is_bool(); }
std::int64_t integer(const Value& v) {
    return v.is_bool() ? std::int64_t{v.as_bool()} : v.as_int();
}
bool numeric(const Value& v) { return v.is_number() || v.is_bool(); }

// Python's ints do not overflow; ours end the render instead of wrapping.
[[noreturn]] void overflow(std::string_view op) {
    fail("integer overflow in '" + std::string(op) + "'");
}

std::int64_t checked_power(std::int64_t base, std::int64_t exponent) {
    std::int64_t r = 1;
    for (; exponent > 0; exponent >>= 1) {
        if ((exponent & 1) && __builtin_mul_overflow(r, base, &r)) overflow("**");
        if (exponent > 1 && __builtin_mul_overflow(base, base, &base)) overflow("**");
    }
    return r;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    if (a == std::numeric_limits<std::int64_t>::min() && b == -1) overflow("//");
    std::int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

Value repeat(const Value& seq, std::int64_t n) {
    // A bound the sandbox lacks: "x" * 10**12 would exhaust memory before it failed.
    constexpr std::int64_t kMaxRepeated = 1 << 24;
    const auto size =
        static_cast<std::int64_t>(seq.is_string() ? seq.as_string().size() : seq.as_list().size());
    if (n > 0 && size > 0 && n > kMaxRepeated / size)
        fail("repetition is limited to " + std::to_string(kMaxRepeated) + " bytes or items");
    if (seq.is_string()) {
        std::string out;
        for (std::int64_t i = 0; i < n; ++i) out += seq.as_string();
        return out;
    }
    ValueList out;
    for (std::int64_t i = 0; i < n; ++i)
        out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
    return out;
}

Value arithmetic(std::string_view op, const Value& a, const Value& b) {
    if (!numeric(a) || !numeric(b)) operand_error(op, a, b);
    if (op == "/") {
        if (b.as_number() == 0) fail("division by zero");
        return a.as_number() / b.as_number();
    }
    if (integral(a) && integral(b)) {
        const std::int64_t x = integer(a), y = integer(b);
        std::int64_t r = 0;
        if (op == "+") {
            if (__builtin_add_overflow(x, y, &r)) overflow(op);
            return r;
        }
        if (op == "-") {
            if (__builtin_sub_overflow(x, y, &r)) overflow(op);
            return r;
        }
        if (op == "*") {
            if (__builtin_mul_overflow(x, y, &r)) overflow(op);
            return r;
        }
        if (op == "**") {
            if (y < 0) return std::pow(static_cast<double>(x), static_cast<double>(y));
            return checked_power(x, y);
        }
        if (y == 0) fail("integer division or modulo by zero");
        if (op == "//") return floor_div(x, y);
        if (y == -1) return std::int64_t{0};  // %, where x // -1 may not fit
        return x - floor_div(x, y) * y;       // %
    }
    const double x = a.as_number(), y = b.as_number();
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "**") return std::pow(x, y);
    if (y == 0) fail("float division by zero");
    if (op == "//") return std::floor(x / y);
    return x - std::floor(x / y) * y;
}

std::int64_t clamp_index(std::int64_t i, std::int64_t size) {
    return i < 0 ? std::max<std::int64_t>(0, i + size) : std::min(i, size);
}

}  // namespace

ValueList utf8_characters(std::string_view text) {
    ValueList out;
    for (std::size_t i = 0; i < text.size();) {
        std::size_t n = 1;
        while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
        out.emplace_back(std::string(text.substr(i, n)));
        i += n;
    }
    return out;
}

bool less_than(const Value& a, const Value& b) {
    if (numeric(a) && numeric(b)) {
        if (integral(a) && integral(b)) return integer(a) < integer(b);
        return a.as_number() < b.as_number();
    }
    if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
    if (a.is_list() && b.is_list()) {
        const ValueList& x = a.as_list();
        const ValueList& y = b.as_list();
        for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!(x[i] == y[i])) return less_than(x[i], y[i]);
        }
        return x.size() < y.size();
    }
    operand_error("<", a, b);
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
    if (op == "==") return a == b;
    if (op == "!=") return !(a == b);
    if (op == "<") return less_than(a, b);
    if (op == ">") return less_than(b, a);
    if (op == "<=") return !less_than(b, a);
    if (op == ">=") return !less_than(a, b);
    if (op == "in") return contains(b, a);
    if (op == "not in") return !contains(b, a);
    if (op == "~") {
        std::string s = to_str(a);
        append_str(s, b);
        return s;
    }
    if (op == "+") {
        if (a.is_string() && b.is_string()) return a.as_string() + b.as_string();
        if (a.is_list() && b.is_list()) {
            ValueList out = a.as_list();
            out.insert(out.end(), b.as_list().begin(), b.as_list().end());
            return out;
        }
    }
    if (op == "*") {
        if ((a.is_string() || a.is_list()) && integral(b)) return repeat(a, integer(b));
        if ((b.is_string() || b.is_list()) && integral(a)) return repeat(b, integer(a));
    }
    return arithmetic(op, a, b);
}

bool contains(const Value& container, const Value& item) {
    if (container.is_string()) {
        if (!item.is_string()) fail("'in <string>' requires string as left operand");
        return container.as_string().find(item.as_string()) != std::string::npos;
    }
    if (container.is_list()) {
        for (const Value& v : container.as_list())
            if (v == item) return true;
        return false;
    }
    if (container.is_dict()) return item.is_string() && container.as_dict().find(item.as_string());
    if (container.is_undefined()) return false;
    fail("argument of type '" + container.type_name() + "' is not iterable");
}

Value get_attribute(const Value& object, std::string_view name) {
    if (object.is_undefined()) undefined_error(object);
    Value method = find_method(object, name);
    if (!method.is_undefined()) return method;
    const ValueDict* attrs = object.is_dict()        ? &object.as_dict()
                             : object.is_namespace() ? &object.namespace_attributes()
                                                     : nullptr;
    if (attrs != nullptr)
        if (const Value* v = attrs->find(name)) return *v;
    return Value::undefined(std::string(name));
}

Value get_item(const Value& object, const Value& key) {
    if (object.is_undefined()) undefined_error(object);
    if (key.is_string()) {
        if (object.is_dict())
            if (const Value* v = object.as_dict().find(key.as_string())) return *v;
        return get_attribute(object, key.as_string());
    }
    if (integral(key) && (object.is_list() || object.is_string())) {
        const ValueList chars =
            object.is_string() ? utf8_characters(object.as_string()) : ValueList{};
        const ValueList& items = object.is_list() ? object.as_list() : chars;
        const auto size = static_cast<std::int64_t>(items.size());
        std::int64_t i = integer(key);
        if (i < 0) i += size;
        if (i >= 0 && i < size) return items[static_cast<std::size_t>(i)];
    }
    return Value::undefined(to_str(key));
}

Value get_slice(const Value& object, std::optional<std::int64_t> start,
                std::optional<std::int64_t> stop, std::optional<std::int64_t> step) {
    if (object.is_undefined()) undefined_error(object);
    if (!object.is_list() && !object.is_string())
        fail("'" + object.type_name() + "' cannot be sliced");
    const ValueList chars = object.is_string() ? utf8_characters(object.as_string()) : ValueList{};
    const ValueList& items = object.is_list() ? object.as_list() : chars;
    const auto size = static_cast<std::int64_t>(items.size());
    const std::int64_t by = step.value_or(1);
    if (by == 0) fail("slice step cannot be zero");
    ValueList out;
    if (by > 0) {
        const std::int64_t b = start ? clamp_index(*start, size) : 0;
        const std::int64_t e = stop ? clamp_index(*stop, size) : size;
        for (std::int64_t i = b; i < e; i += by) out.push_back(items[static_cast<std::size_t>(i)]);
    } else {
        const auto bound = [size](std::int64_t i) {
            return i < 0 ? std::max<std::int64_t>(-1, i + size) : std::min(i, size - 1);
        };
        const std::int64_t b = start ? bound(*start) : size - 1;
        const std::int64_t e = stop ? bound(*stop) : -1;
        for (std::int64_t i = b; i > e; i += by) out.push_back(items[static_cast<std::size_t>(i)]);
    }
    if (object.is_list()) return out;
    std::string s;
    for (const Value& c : out) s += c.as_string();
    return s;
}

Items iterate(const Value& v) {
    if (v.is_list()) return Items(v.list_ptr());
    if (v.is_dict()) {
        ValueList keys;
        for (const auto& [k, item] : v.as_dict().entries()) keys.emplace_back(k);
        return Items(std::make_shared<const ValueList>(std::move(keys)));
    }
    if (v.is_string())
        return Items(std::make_shared<const ValueList>(utf8_characters(v.as_string())));
    if (v.is_undefined()) return Items(std::make_shared<const ValueList>());
    fail("'" + v.type_name() + "' object is not iterable");
}

}  // namespace inferscale::jinja
