#include "template/json_value.h"

#include <algorithm>
#include <cstdio>

#include "template/error.h"

namespace inferscale::jinja {
namespace {

void append_escape(std::string& out, std::uint32_t unit) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", unit);
    out += buf;
}

// A UTF-8 sequence starting at s[i] as a code point; i moves past it.
std::uint32_t decode_utf8(std::string_view s, std::size_t& i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    std::uint32_t cp = n == 1 ? c : c & (0x3F >> (n - 1));
    for (int k = 1; k < n && i + k < s.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    i += n;
    return cp;
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80 && ensure_ascii) {
            const std::uint32_t cp = decode_utf8(s, i);
            if (cp >= 0x10000) {
                append_escape(out, 0xD800 + ((cp - 0x10000) >> 10));
                append_escape(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
            } else {
                append_escape(out, cp);
            }
            continue;
        }
        ++i;
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20 || (c == 0x7f && ensure_ascii)) {
                    append_escape(out, c);
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += '"';
}

void append_json(std::string& out, const Value& v, const JsonFormat& f, int level) {
    if (v.is_none()) {
        out += "null";
    } else if (v.is_bool()) {
        out += v.as_bool() ? "true" : "false";
    } else if (v.is_int()) {
        out += std::to_string(v.as_int());
    } else if (v.is_float()) {
        const std::string r = float_repr(v.as_float());
        out += r == "nan" ? "NaN" : r == "inf" ? "Infinity" : r == "-inf" ? "-Infinity" : r;
    } else if (v.is_string()) {
        append_json_string(out, v.as_string(), f.ensure_ascii);
    } else if (v.is_list() || v.is_dict()) {
        const bool list = v.is_list();
        const std::size_t size = list ? v.as_list().size() : v.as_dict().size();
        if (size == 0) {
            out += list ? "[]" : "{}";
            return;
        }
        std::string inner_break;
        if (f.indent >= 0)
            inner_break = "\n" + std::string(static_cast<std::size_t>(f.indent * (level + 1)), ' ');
        out += list ? '[' : '{';
        out += inner_break;
        const std::string separator = f.item_separator + inner_break;
        if (list) {
            for (std::size_t i = 0; i < size; ++i) {
                if (i > 0) out += separator;
                append_json(out, v.as_list()[i], f, level + 1);
            }
        } else {
            std::vector<const std::pair<std::string, Value>*> entries;
            for (const auto& e : v.as_dict().entries()) entries.push_back(&e);
            if (f.sort_keys)
                std::stable_sort(entries.begin(), entries.end(),
                                 [](const auto* a, const auto* b) { return a->first < b->first; });
            for (std::size_t i = 0; i < entries.size(); ++i) {
                if (i > 0) out += separator;
                append_json_string(out, entries[i]->first, f.ensure_ascii);
                out += f.key_separator;
                append_json(out, entries[i]->second, f, level + 1);
            }
        }
        if (f.indent >= 0)
            out += "\n" + std::string(static_cast<std::size_t>(f.indent * level), ' ');
        out += list ? ']' : '}';
    } else {
        fail("Object of type " + v.type_name() + " is not JSON serializable");
    }
}

}  // namespace

std::string to_json(const Value& v, const JsonFormat& format) {
    std::string out;
    append_json(out, v, format, 0);
    return out;
}

Value from_json(const nlohmann::ordered_json& json) {
    switch (json.type()) {
        case nlohmann::ordered_json::value_t::null:
            return None{};
        case nlohmann::ordered_json::value_t::boolean:
            return json.get<bool>();
        case nlohmann::ordered_json::value_t::number_integer:
        case nlohmann::ordered_json::value_t::number_unsigned:
            return json.get<std::int64_t>();
        case nlohmann::ordered_json::value_t::number_float:
            return json.get<double>();
        case nlohmann::ordered_json::value_t::string:
            return json.get<std::string>();
        case nlohmann::ordered_json::value_t::array: {
            ValueList items;
            items.reserve(json.size());
            for (const auto& item : json) items.push_back(from_json(item));
            return items;
        }
        case nlohmann::ordered_json::value_t::object: {
            ValueDict d;
            for (const auto& [k, item] : json.items()) d.set(k, from_json(item));
            return d;
        }
        default:
            return Value::undefined("json");
    }
}

}  // namespace inferscale::jinja
