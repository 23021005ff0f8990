#include "template/string_ops.h"

#include <cstdint>

namespace inferscale::jinja {
namespace {

// Python's str.isspace() code points.
bool is_python_space(std::uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// The byte length of the code point starting at s[i] when it is whitespace, else 0.
std::size_t space_at(std::string_view s, std::size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) return 0;  // inside a code point
    const std::size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (i + n > s.size()) return 0;
    std::uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (std::size_t k = 1; k < n; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    return is_python_space(cp) ? n : 0;
}

// The byte length of the whitespace code point that ends at s[e - 1], else 0.
std::size_t space_before(std::string_view s, std::size_t e) {
    std::size_t b = e - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80 && e - b < 4) --b;
    return space_at(s, b) == e - b ? e - b : 0;
}
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
char to_lower(char c) { return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c; }
char to_upper(char c) { return is_lower(c) ? static_cast<char>(c - 'a' + 'A') : c; }

}  // namespace

std::string python_strip(std::string_view s, std::optional<std::string_view> chars,
                         StripSide side) {
    std::size_t b = 0, e = s.size();
    if (chars) {
        const auto strip = [&](char c) { return chars->find(c) != std::string_view::npos; };
        if (side != StripSide::Right)
            while (b < e && strip(s[b])) ++b;
        if (side != StripSide::Left)
            while (e > b && strip(s[e - 1])) --e;
        return std::string(s.substr(b, e - b));
    }
    if (side != StripSide::Right)
        while (b < e && space_at(s, b) > 0) b += space_at(s, b);
    if (side != StripSide::Left)
        while (e > b && space_before(s, e) > 0) e -= space_before(s, e);
    return std::string(s.substr(b, e - b));
}

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = to_lower(c);
    return out;
}

std::string ascii_upper(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = to_upper(c);
    return out;
}

std::string python_title(std::string_view s) {
    std::string out(s);
    bool in_word = false;
    for (char& c : out) {
        const bool letter = is_lower(c) || is_upper(c);
        c = letter ? (in_word ? to_lower(c) : to_upper(c)) : c;
        in_word = letter;
    }
    return out;
}

std::string python_capitalize(std::string_view s) {
    std::string out = ascii_lower(s);
    if (!out.empty()) out[0] = to_upper(out[0]);
    return out;
}

std::vector<std::string> python_split(std::string_view s, std::optional<std::string_view> sep,
                                      long maxsplit) {
    std::vector<std::string> out;
    if (!sep) {
        std::size_t i = 0;
        while (true) {
            while (i < s.size() && space_at(s, i) > 0) i += space_at(s, i);
            if (i >= s.size()) break;
            if (maxsplit >= 0 && static_cast<long>(out.size()) == maxsplit) {
                out.push_back(python_strip(s.substr(i), std::nullopt, StripSide::Right));
                break;
            }
            std::size_t e = i;
            while (e < s.size() && space_at(s, e) == 0) ++e;
            out.emplace_back(s.substr(i, e - i));
            i = e;
        }
        return out;
    }
    std::size_t start = 0;
    while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
        const std::size_t at = sep->empty() ? std::string_view::npos : s.find(*sep, start);
        if (at == std::string_view::npos) break;
        out.emplace_back(s.substr(start, at - start));
        start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
}

std::string python_replace(std::string_view s, std::string_view from, std::string_view to,
                           long count) {
    std::string out;
    std::size_t start = 0;
    long done = 0;
    while (count < 0 || done < count) {
        const std::size_t at = from.empty() ? std::string_view::npos : s.find(from, start);
        if (at == std::string_view::npos) break;
        out.append(s.substr(start, at - start));
        out.append(to);
        start = at + from.size();
        ++done;
    }
    out.append(s.substr(start));
    return out;
}

}  // namespace inferscale::jinja
