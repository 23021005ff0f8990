#include "template/lexer.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "base/utf8.h"
#include "template/error.h"

namespace inferscale::jinja {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
  public:
    explicit Lexer(std::string_view source) : src_(source) {
        // Jinja's keep_trailing_newline=False: one final newline is not part of the template.
        if (!src_.empty() && src_.back() == '\n') {
            src_.remove_suffix(1);
            if (!src_.empty() && src_.back() == '\r') src_.remove_suffix(1);
        }
    }

    std::vector<Token> run() {
        while (pos_ < src_.size()) {
            std::size_t tag = find_tag(pos_);
            std::string text(src_.substr(pos_, tag - pos_));
            const int text_line = line_;
            count_lines(pos_, tag);
            if (strip_next_) {
                text.erase(0, std::find_if_not(text.begin(), text.end(), is_space) - text.begin());
            }
            if (tag < src_.size()) trim_before_tag(text, tag);
            if (!text.empty()) tokens_.push_back({Token::Type::Text, std::move(text), text_line});
            strip_next_ = false;
            line_start_ = false;
            if (tag >= src_.size()) break;
            const char kind = src_[tag + 1];
            pos_ = tag + 2;
            if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
            if (kind == '#') {
                skip_comment();
            } else {
                lex_tag(kind == '%');
            }
        }
        tokens_.push_back({Token::Type::End, "", line_});
        return std::move(tokens_);
    }

  private:
    std::size_t find_tag(std::size_t from) const {
        for (std::size_t i = from; i + 1 < src_.size(); ++i) {
            if (src_[i] == '{' && std::strchr("{%#", src_[i + 1]) != nullptr) return i;
        }
        return src_.size();
    }

    void count_lines(std::size_t from, std::size_t to) {
        line_ += static_cast<int>(std::count(src_.begin() + from, src_.begin() + to, '\n'));
    }

    // `{%-` strips all whitespace before the tag; lstrip_blocks strips the spaces and tabs
    // between a line start and a block or comment tag unless it is written `{%+`.
    void trim_before_tag(std::string& text, std::size_t tag) const {
        const char kind = src_[tag + 1];
        const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
        if (sign == '-') {
            while (!text.empty() && is_space(text.back())) text.pop_back();
            return;
        }
        if (sign == '+' || kind == '{') return;
        const std::size_t nl = text.rfind('\n');
        const std::size_t line_begin = nl == std::string::npos ? 0 : nl + 1;
        if (nl == std::string::npos && !line_start_) return;
        if (std::all_of(text.begin() + line_begin, text.end(), is_space)) text.resize(line_begin);
    }

    // What follows a closing tag: `-` strips all whitespace; trim_blocks drops one newline after
    // a block or comment tag unless it is written `+%}`.
    void after_close(char sign, bool block) {
        if (sign == '-') {
            strip_next_ = true;
            std::size_t i = pos_;
            while (i < src_.size() && is_space(src_[i])) ++i;
            line_start_ = i > pos_ && src_[i - 1] == '\n';
            return;
        }
        if (block && sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
            ++pos_;
            ++line_;
            line_start_ = true;
        } else if (block && sign != '+' && src_.substr(pos_, 2) == "\r\n") {
            pos_ += 2;
            ++line_;
            line_start_ = true;
        }
    }

    void skip_comment() {
        const std::size_t end = src_.find("#}", pos_);
        if (end == std::string_view::npos) fail("unclosed comment", line_);
        count_lines(pos_, end);
        const char sign =
            end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
        pos_ = end + 2;
        after_close(sign, true);
    }

    void lex_tag(bool block) {
        tokens_.push_back({block ? Token::Type::BlockBegin : Token::Type::VarBegin, "", line_});
        int depth = 0;
        while (true) {
            while (pos_ < src_.size() && is_space(src_[pos_])) {
                if (src_[pos_] == '\n') ++line_;
                ++pos_;
            }
            if (pos_ >= src_.size()) fail(block ? "unclosed {% tag" : "unclosed {{ tag", line_);
            const std::string_view rest = src_.substr(pos_);
            const std::string_view close = block ? "%}" : "}}";
            char sign = '\0';
            std::size_t close_len = 0;
            if (depth == 0 || block) {
                if (rest.substr(0, 2) == close) close_len = 2;
                if ((rest[0] == '-' || rest[0] == '+') && rest.substr(1, 2) == close) {
                    sign = rest[0];
                    close_len = 3;
                }
            }
            if (close_len > 0) {
                pos_ += close_len;
                tokens_.push_back({block ? Token::Type::BlockEnd : Token::Type::VarEnd, "", line_});
                after_close(sign, block);
                return;
            }
            lex_expression_token(depth);
        }
    }

    void lex_expression_token(int& depth) {
        const char c = src_[pos_];
        if (is_name_start(c)) {
            std::size_t e = pos_;
            while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
            tokens_.push_back({Token::Type::Name, std::string(src_.substr(pos_, e - pos_)), line_});
            pos_ = e;
        } else if (is_digit(c)) {
            lex_number();
        } else if (c == '\'' || c == '"') {
            lex_string(c);
        } else {
            static constexpr const char* kOps[] = {
                "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
            for (const char* op : kOps) {
                const std::size_t n = std::strlen(op);
                if (src_.substr(pos_, n) == op) {
                    if (std::strchr("([{", op[0]) != nullptr) ++depth;
                    if (std::strchr(")]}", op[0]) != nullptr && n == 1) --depth;
                    tokens_.push_back({Token::Type::Op, op, line_});
                    pos_ += n;
                    return;
                }
            }
            fail(std::string("unexpected character '") + c + "'", line_);
        }
    }

    void lex_number() {
        std::size_t e = pos_;
        bool is_float = false;
        while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
        if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
            is_float = true;
            ++e;
            while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
            std::size_t x = e + 1;
            if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
            if (x < src_.size() && is_digit(src_[x])) {
                is_float = true;
                e = x;
                while (e < src_.size() && is_digit(src_[e])) ++e;
            }
        }
        std::string digits;
        for (char ch : src_.substr(pos_, e - pos_))
            if (ch != '_') digits += ch;
        Token t{is_float ? Token::Type::Float : Token::Type::Int, digits, line_};
        if (is_float) {
            // strtod, not stod: out of range is inf or 0 as in Python, not an exception.
            t.float_value = std::strtod(digits.c_str(), nullptr);
        } else {
            const auto [end, ec] =
                std::from_chars(digits.data(), digits.data() + digits.size(), t.int_value);
            if (ec != std::errc() || end != digits.data() + digits.size())
                fail("integer literal " + digits + " does not fit in 64 bits", line_);
        }
        tokens_.push_back(std::move(t));
        pos_ = e;
    }

    void lex_string(char quote) {
        const int start_line = line_;
        std::string out;
        std::size_t i = pos_ + 1;
        while (true) {
            if (i >= src_.size()) fail("unclosed string literal", start_line);
            const char c = src_[i];
            if (c == quote) break;
            if (c == '\n') ++line_;
            if (c != '\\' || i + 1 >= src_.size()) {
                out += c;
                ++i;
                continue;
            }
            const char e = src_[i + 1];
            i += 2;
            switch (e) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'v':
                    out += '\v';
                    break;
                case 'a':
                    out += '\a';
                    break;
                case '0':
                    out += '\0';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '\'':
                    out += '\'';
                    break;
                case '"':
                    out += '"';
                    break;
                case '\n':
                    ++line_;
                    break;
                case 'x':
                case 'u':
                case 'U': {
                    const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    std::uint32_t cp = 0;
                    const char* hex = src_.data() + i;
                    const auto [end, ec] =
                        i + n <= src_.size()
                            ? std::from_chars(hex, hex + n, cp, 16)
                            : std::from_chars_result{hex, std::errc::invalid_argument};
                    if (ec != std::errc() || end != hex + n)
                        fail("truncated \\" + std::string(1, e) + " escape in string literal",
                             line_);
                    if (cp > 0x10FFFF) fail("illegal Unicode character in string literal", line_);
                    append_utf8(out, cp);
                    i += n;
                    break;
                }
                default:
                    out += '\\';
                    out += e;
            }
        }
        tokens_.push_back({Token::Type::String, std::move(out), start_line});
        pos_ = i + 1;
    }

    std::string_view src_;
    std::size_t pos_ = 0;
    int line_ = 1;
    bool strip_next_ = false;
    bool line_start_ = true;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace inferscale::jinja
