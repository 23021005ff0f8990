#include "template/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "template/error.h"

namespace inferscale::jinja {

const Value* ValueDict::find(std::string_view key) const {
    for (const auto& [k, v] : entries_)
        if (k == key) return &v;
    return nullptr;
}

void ValueDict::set(std::string key, Value value) {
    for (auto& [k, v] : entries_)
        if (k == key) {
            v = std::move(value);
            return;
        }
    entries_.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::get(std::size_t index, std::string_view name) const {
    if (index < positional.size()) return &positional[index];
    for (const auto& [k, v] : named)
        if (k == name) return &v;
    return nullptr;
}

void Value::wrong_type(const char* what) const {
    fail("expected " + std::string(what) + ", got '" + type_name() + "'");
}

double Value::as_number() const {
    if (is_int()) return static_cast<double>(as_int());
    if (is_bool()) return as_bool() ? 1.0 : 0.0;
    if (!is_float()) wrong_type("a number");
    return as_float();
}

bool Value::truthy() const {
    switch (v_.index()) {
        case 0:
        case 1:
            return false;
        case 2:
            return as_bool();
        case 3:
            return as_int() != 0;
        case 4:
            return as_float() != 0.0;
        case 5:
            return !as_string().empty();
        case 6:
            return !as_list().empty();
        case 7:
            return as_dict().size() != 0;
        default:
            return true;
    }
}

std::string Value::type_name() const {
    static constexpr const char* kNames[] = {"undefined", "NoneType", "bool", "int",
                                             "float",     "str",      "list", "dict",
                                             "Namespace", "function"};
    return kNames[v_.index()];
}

bool Value::operator==(const Value& other) const {
    const bool numeric = (is_number() || is_bool()) && (other.is_number() || other.is_bool());
    if (numeric) {
        if (is_float() || other.is_float()) return as_number() == other.as_number();
        const auto as_i = [](const Value& v) {
            return v.is_bool() ? std::int64_t{v.as_bool()} : v.as_int();
        };
        return as_i(*this) == as_i(other);
    }
    if (v_.index() != other.v_.index()) return false;
    switch (v_.index()) {
        case 0:
        case 1:
            return true;
        case 5:
            return as_string() == other.as_string();
        case 6:
            return as_list() == other.as_list();
        case 7: {
            const auto& a = as_dict().entries();
            const auto& b = other.as_dict();
            if (a.size() != b.size()) return false;
            for (const auto& [k, v] : a) {
                const Value* w = b.find(k);
                if (w == nullptr || !(*w == v)) return false;
            }
            return true;
        }
        case 8:
            return std::get<Namespace>(v_).attributes == std::get<Namespace>(other.v_).attributes;
        case 9:
            return std::get<9>(v_) == std::get<9>(other.v_);
        default:
            return false;
    }
}

std::string float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);  // -d.ddde+XX, shortest round-trip digits
    const std::size_t e = sci.find('e');
    const int exponent = std::stoi(sci.substr(e + 1));
    std::string sign;
    std::string mantissa = sci.substr(0, e);
    if (mantissa[0] == '-') {
        sign = "-";
        mantissa.erase(0, 1);
    }
    std::string digits;
    for (char c : mantissa)
        if (c != '.') digits += c;
    if (exponent < -4 || exponent >= 16) {
        std::string out = sign + digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        std::snprintf(buf, sizeof buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        return out + buf;
    }
    if (exponent < 0) return sign + "0." + std::string(-exponent - 1, '0') + digits;
    const auto int_digits = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() <= int_digits)
        return sign + digits + std::string(int_digits - digits.size(), '0') + ".0";
    return sign + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

namespace {

void append_string_repr(std::string& out, const std::string& s) {
    const bool has_single = s.find('\'') != std::string::npos;
    const bool has_double = s.find('"') != std::string::npos;
    const char quote = has_single && !has_double ? '"' : '\'';
    out += quote;
    for (unsigned char c : s) {
        if (c == quote || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    out += quote;
}

void append(std::string& out, const Value& v, bool repr) {
    if (v.is_undefined()) return;
    if (v.is_none()) {
        out += "None";
    } else if (v.is_bool()) {
        out += v.as_bool() ? "True" : "False";
    } else if (v.is_int()) {
        out += std::to_string(v.as_int());
    } else if (v.is_float()) {
        out += float_repr(v.as_float());
    } else if (v.is_string()) {
        if (repr) {
            append_string_repr(out, v.as_string());
        } else {
            out += v.as_string();
        }
    } else if (v.is_list()) {
        out += '[';
        bool first = true;
        for (const Value& item : v.as_list()) {
            if (!first) out += ", ";
            first = false;
            append(out, item, true);
        }
        out += ']';
    } else if (v.is_dict() || v.is_namespace()) {
        const ValueDict& d = v.is_dict() ? v.as_dict() : v.namespace_attributes();
        out += v.is_dict() ? "{" : "<Namespace {";
        bool first = true;
        for (const auto& [k, item] : d.entries()) {
            if (!first) out += ", ";
            first = false;
            append_string_repr(out, k);
            out += ": ";
            append(out, item, true);
        }
        out += v.is_dict() ? "}" : "}>";
    } else {
        out += "<function " + v.as_callable().name + ">";
    }
}

}  // namespace

void append_str(std::string& out, const Value& v) { append(out, v, false); }

std::string to_str(const Value& v) {
    std::string out;
    append(out, v, false);
    return out;
}

std::size_t utf8_length(std::string_view text) {
    std::size_t n = 0;
    for (unsigned char c : text)
        if ((c & 0xC0) != 0x80) ++n;
    return n;
}

}  // namespace inferscale::jinja
