#include "template/string_ops.h"

namespace inferscale::jinja {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
char to_lower(char c) { return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c; }
char to_upper(char c) { return is_lower(c) ? static_cast<char>(c - 'a' + 'A') : c; }

}  // namespace

std::string python_strip(std::string_view s, std::optional<std::string_view> chars, StripSide side) {
    const auto strip = [&](char c) { return chars ? chars->find(c) != std::string_view::npos : is_space(c); };
    std::size_t b = 0, e = s.size();
    if (side != StripSide::Right)
        while (b < e && strip(s[b])) ++b;
    if (side != StripSide::Left)
        while (e > b && strip(s[e - 1])) --e;
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
            while (i < s.size() && is_space(s[i])) ++i;
            if (i >= s.size()) break;
            if (maxsplit >= 0 && static_cast<long>(out.size()) == maxsplit) {
                std::size_t e = s.size();
                while (e > i && is_space(s[e - 1])) --e;
                out.emplace_back(s.substr(i, e - i));
                break;
            }
            std::size_t e = i;
            while (e < s.size() && !is_space(s[e])) ++e;
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

std::string python_replace(std::string_view s, std::string_view from, std::string_view to, long count) {
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
