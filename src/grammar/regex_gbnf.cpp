// Regex -> GBNF: a recursive descent over the pattern that writes GBNF as it goes. Characters
// JSON must escape become their escape sequences: `"` is `\"`, `\` is `\\`, newline `\n`.

#include "grammar/regex_gbnf.h"

#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"

namespace inferscale::grammar {

std::string gbnf_literal(std::string_view bytes) {
    static const char* kHex = "0123456789ABCDEF";
    std::string out = "\"";
    for (char c : bytes) {
        auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (u < 0x20 || u == 0x7F) {
            out += "\\x";
            out += kHex[u >> 4];
            out += kHex[u & 15];
        } else {
            out += c;
        }
    }
    return out + "\"";
}

namespace {

// The JSON encoding of one code point inside a string.
std::string json_char(std::uint32_t cp) {
    switch (cp) {
        case '"':
            return "\\\"";
        case '\\':
            return "\\\\";
        case '\n':
            return "\\n";
        case '\r':
            return "\\r";
        case '\t':
            return "\\t";
        case '\b':
            return "\\b";
        case '\f':
            return "\\f";
        default:
            break;
    }
    std::string out;
    if (cp < 0x20) {
        static const char* kHex = "0123456789abcdef";
        out = "\\u00";
        out += kHex[cp >> 4];
        out += kHex[cp & 15];
        return out;
    }
    append_utf8(out, cp);
    return out;
}

// A code point written inside a GBNF class.
std::string class_char(std::uint32_t cp) {
    static const char* kHex = "0123456789ABCDEF";
    bool plain = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9');
    if (plain || cp >= 0x80) {
        std::string out;
        append_utf8(out, cp);
        return out;
    }
    return std::string("\\x") + kHex[cp >> 4] + kHex[cp & 15];
}

bool needs_escape(std::uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\'; }

class RegexParser {
  public:
    RegexParser(std::string_view p, std::string any_char) : p_(p), any_(std::move(any_char)) {}

    Result<std::string> run() {
        bool start_anchor = !p_.empty() && p_[0] == '^';
        if (start_anchor) p_.remove_prefix(1);
        bool end_anchor =
            !p_.empty() && p_.back() == '$' && (p_.size() < 2 || p_[p_.size() - 2] != '\\');
        if (end_anchor) p_.remove_suffix(1);
        std::string body = IS_TRY(alternatives());
        if (pos_ < p_.size()) return fail("unbalanced `)`");
        std::string out = "(" + body + ")";
        if (!start_anchor) out = any_ + "* " + out;
        if (!end_anchor) out += " " + any_ + "*";
        return out;
    }

  private:
    Error fail(const std::string& what) const {
        return make_error(ErrorKind::InvalidArgument, what);
    }
    bool at_end() const { return pos_ >= p_.size(); }
    char peek() const { return at_end() ? '\0' : p_[pos_]; }

    Result<std::string> alternatives() {
        std::string out = IS_TRY(sequence());
        while (peek() == '|') {
            ++pos_;
            out += " | " + IS_TRY(sequence());
        }
        return out;
    }

    Result<std::string> sequence() {
        std::string out;
        while (!at_end() && peek() != '|' && peek() != ')') {
            std::string atom_text = IS_TRY(atom());
            atom_text = IS_TRY(quantifier(atom_text));
            out += (out.empty() ? "" : " ") + atom_text;
        }
        return out.empty() ? std::string("\"\"") : out;
    }

    Result<std::string> quantifier(std::string atom_text) {
        char c = peek();
        std::string q;
        if (c == '*' || c == '+' || c == '?') {
            q = std::string(1, c);
            ++pos_;
        } else if (c == '{') {
            std::size_t close = p_.find('}', pos_);
            if (close == std::string_view::npos) return fail("unterminated `{`");
            std::string_view inner = p_.substr(pos_ + 1, close - pos_ - 1);
            for (char d : inner) {
                if (!(d >= '0' && d <= '9') && d != ',')
                    return fail("bad repetition `{" + std::string(inner) + "}`");
            }
            if (inner.empty() || inner[0] == ',')
                return fail("bad repetition `{" + std::string(inner) + "}`");
            q = "{" + std::string(inner) + "}";
            pos_ = close + 1;
        } else {
            return atom_text;
        }
        if (peek() == '?') ++pos_;  // lazy: the same language
        if (peek() == '*' || peek() == '+' || peek() == '{') return fail("nested quantifier");
        return "(" + atom_text + ")" + q;
    }

    Result<std::uint32_t> plain_char() {
        std::uint32_t cp = 0;
        int len = decode_utf8(p_.substr(pos_), cp);
        if (len <= 0) return fail("invalid UTF-8");
        pos_ += static_cast<std::size_t>(len);
        return cp;
    }

    // Ranges of a class escape (\d \w \s), or empty for others.
    static std::vector<CodeRange> class_escape(char e) {
        switch (e) {
            case 'd':
            case 'D':
                return {{'0', '9'}};
            case 'w':
            case 'W':
                return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
            case 's':
            case 'S':
                return {{'\t', '\r'}, {' ', ' '}};
            default:
                return {};
        }
    }

    // One escaped character after `\` (not a class escape).
    Result<std::uint32_t> escaped_char(char e) {
        switch (e) {
            case 'n':
                return std::uint32_t{'\n'};
            case 'r':
                return std::uint32_t{'\r'};
            case 't':
                return std::uint32_t{'\t'};
            case 'f':
                return std::uint32_t{'\f'};
            case 'v':
                return std::uint32_t{'\v'};
            default:
                break;
        }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            return fail(std::string("escape `\\") + e + "` is not supported");
        }
        return static_cast<std::uint32_t>(static_cast<unsigned char>(e));
    }

    // Code point ranges -> GBNF: plain characters as one class, those JSON escapes as
    // alternatives spelled escaped.
    static std::string ranges_gbnf(const std::vector<CodeRange>& ranges) {
        std::string cls;
        std::vector<std::string> alts;
        for (const CodeRange& r : ranges) {
            for (std::uint32_t cp = r.first; cp <= r.second && cp < 0x80; ++cp) {
                if (needs_escape(cp)) alts.push_back(gbnf_literal(json_char(cp)));
            }
            std::vector<CodeRange> parts{r};
            for (std::uint32_t bad : {std::uint32_t{'"'}, std::uint32_t{'\\'}}) {
                std::vector<CodeRange> next;
                for (const CodeRange& x : parts) {
                    if (bad < x.first || bad > x.second) {
                        next.push_back(x);
                        continue;
                    }
                    if (x.first < bad) next.emplace_back(x.first, bad - 1);
                    if (x.second > bad) next.emplace_back(bad + 1, x.second);
                }
                parts = std::move(next);
            }
            for (CodeRange x : parts) {
                if (x.second < 0x20) continue;
                x.first = std::max<std::uint32_t>(x.first, 0x20);
                cls += class_char(x.first);
                if (x.second > x.first) cls += "-" + class_char(x.second);
            }
        }
        if (!cls.empty()) alts.insert(alts.begin(), "[" + cls + "]");
        if (alts.empty()) return "";
        if (alts.size() == 1) return alts[0];
        std::string out = "(";
        for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        return out + ")";
    }

    // Ranges -> the complement's GBNF, never emitting a character JSON escapes.
    static std::string negated_gbnf(const std::vector<CodeRange>& ranges) {
        std::vector<CodeRange> excluded = ranges;
        excluded.emplace_back(0, 0x1F);
        excluded.emplace_back('"', '"');
        excluded.emplace_back('\\', '\\');
        std::vector<CodeRange> allowed = complement_ranges(normalize_ranges(excluded), 0x10FFFF);
        remove_surrogates(allowed);
        return ranges_gbnf(allowed);
    }

    Result<std::string> char_class() {
        ++pos_;  // [
        bool negated = false;
        if (peek() == '^') {
            negated = true;
            ++pos_;
        }
        std::vector<CodeRange> ranges;
        bool first = true;
        while (true) {
            if (at_end()) return fail("unterminated `[`");
            if (peek() == ']' && !first) break;
            first = false;
            std::uint32_t lo = 0;
            if (peek() == '\\') {
                ++pos_;
                char e = peek();
                ++pos_;
                auto cls = class_escape(e);
                if (!cls.empty()) {
                    if (e >= 'A' && e <= 'Z')
                        return fail(std::string("`\\") + e + "` inside a class is not supported");
                    ranges.insert(ranges.end(), cls.begin(), cls.end());
                    continue;
                }
                lo = IS_TRY(escaped_char(e));
            } else {
                lo = IS_TRY(plain_char());
            }
            std::uint32_t hi = lo;
            if (peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
                ++pos_;
                if (peek() == '\\') {
                    ++pos_;
                    char e = peek();
                    ++pos_;
                    hi = IS_TRY(escaped_char(e));
                } else {
                    hi = IS_TRY(plain_char());
                }
                if (hi < lo) return fail("reversed range in a class");
            }
            ranges.emplace_back(lo, hi);
        }
        ++pos_;  // ]
        ranges = normalize_ranges(std::move(ranges));
        std::string out = negated ? negated_gbnf(ranges) : ranges_gbnf(ranges);
        if (out.empty()) return fail("a class that matches nothing");
        return out;
    }

    Result<std::string> atom() {
        char c = peek();
        if (c == '(') {
            ++pos_;
            if (peek() == '?') {
                if (p_.substr(pos_, 2) != "?:")
                    return fail("lookaround and named groups are not supported");
                pos_ += 2;
            }
            std::string inner = IS_TRY(alternatives());
            if (peek() != ')') return fail("unterminated `(`");
            ++pos_;
            return "(" + inner + ")";
        }
        if (c == '[') return char_class();
        if (c == '.') {
            ++pos_;
            return negated_gbnf({{'\n', '\n'}, {'\r', '\r'}});
        }
        if (c == '^' || c == '$') return fail("anchors are only supported at the ends");
        if (c == '*' || c == '+' || c == '?' || c == '{')
            return fail(std::string("nothing to repeat before `") + c + "`");
        if (c == '\\') {
            ++pos_;
            if (at_end()) return fail("trailing `\\`");
            char e = peek();
            ++pos_;
            if (e >= '1' && e <= '9') return fail("backreferences are not supported");
            if (e == 'b' || e == 'B') return fail("word boundaries are not supported");
            auto cls = class_escape(e);
            if (!cls.empty()) {
                return (e >= 'A' && e <= 'Z') ? negated_gbnf(normalize_ranges(cls))
                                              : ranges_gbnf(cls);
            }
            return gbnf_literal(json_char(IS_TRY(escaped_char(e))));
        }
        return gbnf_literal(json_char(IS_TRY(plain_char())));
    }

    std::string_view p_;
    std::string any_;
    std::size_t pos_ = 0;
};

}  // namespace

Result<std::string> regex_to_gbnf(std::string_view pattern, const std::string& any_char) {
    return RegexParser(pattern, any_char).run();
}

}  // namespace inferscale::grammar
