// GBNF parser: a recursive descent over the text that records line and column for errors.
// A rule's body runs until the next `name ::=` or the end of the text, so rules may span lines
// freely (llama.cpp asks for a newline inside parentheses or after `|`; everything it accepts
// is accepted here).

#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <unordered_map>

#include "grammar/utf8_ranges.h"

namespace inferscale::grammar {
namespace {

constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRepeat = 100000;

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

class Parser {
  public:
    explicit Parser(std::string_view text) : text_(text) {}

    Result<AstGrammar> parse() {
        skip_space();
        while (!at_end()) {
            IS_RETURN_IF_ERROR(parse_rule());
            skip_space();
        }
        auto root = names_.find("root");
        if (root == names_.end()) return error_at(0, "the grammar has no `root` rule");
        grammar_.root = root->second;
        for (const AstRule& rule : grammar_.rules) {
            if (!rule.defined) {
                return make_error(ErrorKind::InvalidArgument,
                                  "GBNF line " + std::to_string(rule.line) + ", column " +
                                      std::to_string(rule.column) + ": undefined rule `" +
                                      rule.name + "`");
            }
        }
        return std::move(grammar_);
    }

  private:
    bool at_end() const { return pos_ >= text_.size(); }
    char peek(std::size_t ahead = 0) const {
        return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
    }

    void line_col(std::size_t pos, int& line, int& col) const {
        line = 1;
        col = 1;
        for (std::size_t i = 0; i < pos && i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
    }
    Error error_at(std::size_t pos, const std::string& message) const {
        int line = 0;
        int col = 0;
        line_col(pos, line, col);
        return make_error(ErrorKind::InvalidArgument, "GBNF line " + std::to_string(line) +
                                                          ", column " + std::to_string(col) + ": " +
                                                          message);
    }

    void skip_space() {
        while (!at_end()) {
            char c = peek();
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
                ++pos_;
            } else if (c == '#') {
                while (!at_end() && peek() != '\n') ++pos_;
            } else {
                break;
            }
        }
    }

    std::string_view read_name() {
        std::size_t start = pos_;
        while (!at_end() && is_name_char(peek())) ++pos_;
        return text_.substr(start, pos_ - start);
    }

    // Whether the text at the cursor is `name ::=` (the start of the next rule).
    bool at_rule_start() const {
        std::size_t p = pos_;
        if (p >= text_.size() || !is_name_char(text_[p])) return false;
        while (p < text_.size() && is_name_char(text_[p])) ++p;
        while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
        return text_.substr(p, 3) == "::=";
    }

    int rule_index(std::string_view name, std::size_t pos) {
        auto it = names_.find(std::string(name));
        if (it != names_.end()) return it->second;
        AstRule rule;
        rule.name = std::string(name);
        line_col(pos, rule.line, rule.column);
        grammar_.rules.push_back(std::move(rule));
        int index = static_cast<int>(grammar_.rules.size()) - 1;
        names_.emplace(std::string(name), index);
        return index;
    }

    Status parse_rule() {
        std::size_t start = pos_;
        std::string_view name = read_name();
        if (name.empty()) return error_at(pos_, "expected a rule name");
        skip_space();
        if (text_.substr(pos_, 3) != "::=") return error_at(pos_, "expected `::=`");
        pos_ += 3;
        int index = rule_index(name, start);
        if (grammar_.rules[index].defined) {
            return error_at(start, "rule `" + std::string(name) + "` is defined twice");
        }
        Expr body = IS_TRY(parse_alternatives(0));
        if (!at_end() && !at_rule_start()) {
            return error_at(pos_, std::string("unexpected `") + peek() + "`");
        }
        grammar_.rules[index].body = std::move(body);
        grammar_.rules[index].defined = true;
        return {};
    }

    Result<Expr> parse_alternatives(int depth) {
        Expr alt;
        alt.kind = Expr::Kind::Alt;
        while (true) {
            alt.children.push_back(IS_TRY(parse_sequence(depth)));
            skip_space();
            if (peek() != '|') break;
            ++pos_;
        }
        if (alt.children.size() == 1) return std::move(alt.children[0]);
        return alt;
    }

    Result<Expr> parse_sequence(int depth) {
        Expr seq;
        seq.kind = Expr::Kind::Seq;
        while (true) {
            skip_space();
            if (at_end() || peek() == '|' || peek() == ')' || at_rule_start()) break;
            std::size_t start = pos_;
            char c = peek();
            if (c == '"') {
                seq.children.push_back(IS_TRY(parse_literal()));
            } else if (c == '[') {
                seq.children.push_back(IS_TRY(parse_class()));
            } else if (c == '.') {
                ++pos_;
                Expr any;
                any.kind = Expr::Kind::Class;
                any.ranges = {{0, kMaxCodePoint}};
                remove_surrogates(any.ranges);
                seq.children.push_back(std::move(any));
            } else if (c == '(') {
                ++pos_;
                Expr group = IS_TRY(parse_alternatives(depth + 1));
                skip_space();
                if (peek() != ')') return error_at(pos_, "expected `)`");
                ++pos_;
                seq.children.push_back(std::move(group));
            } else if (is_name_char(c)) {
                std::string_view name = read_name();
                Expr ref;
                ref.kind = Expr::Kind::Ref;
                ref.rule = rule_index(name, start);
                seq.children.push_back(std::move(ref));
            } else {
                return error_at(pos_, std::string("unexpected `") + c + "`");
            }
            IS_RETURN_IF_ERROR(parse_postfix(seq.children.back()));
        }
        if (seq.children.size() == 1) return std::move(seq.children[0]);
        if (seq.children.empty()) seq.kind = Expr::Kind::Empty;
        return seq;
    }

    Status parse_postfix(Expr& element) {
        while (true) {
            // A postfix operator must follow its element on the same line or after spaces.
            std::size_t save = pos_;
            while (peek() == ' ' || peek() == '\t') ++pos_;
            char c = peek();
            int min = 0;
            int max = 0;
            if (c == '*') {
                ++pos_;
                min = 0;
                max = -1;
            } else if (c == '+') {
                ++pos_;
                min = 1;
                max = -1;
            } else if (c == '?') {
                ++pos_;
                min = 0;
                max = 1;
            } else if (c == '{') {
                std::size_t start = pos_;
                ++pos_;
                skip_space();
                int lo = 0;
                if (peek() != ',') lo = IS_TRY(parse_int());
                skip_space();
                int hi = lo;
                if (peek() == ',') {
                    ++pos_;
                    skip_space();
                    hi = peek() == '}' ? -1 : IS_TRY(parse_int());
                    skip_space();
                }
                if (peek() != '}') return error_at(pos_, "expected `}`");
                ++pos_;
                if (hi != -1 && hi < lo) return error_at(start, "repetition {m,n} with n < m");
                min = lo;
                max = hi;
            } else {
                pos_ = save;
                return {};
            }
            Expr repeat;
            repeat.kind = Expr::Kind::Repeat;
            repeat.min = min;
            repeat.max = max;
            repeat.children.push_back(std::move(element));
            element = std::move(repeat);
        }
    }

    Result<int> parse_int() {
        std::size_t start = pos_;
        long value = 0;
        while (peek() >= '0' && peek() <= '9') {
            value = value * 10 + (peek() - '0');
            if (value > kMaxRepeat) return error_at(start, "repetition count too large");
            ++pos_;
        }
        if (pos_ == start) return error_at(pos_, "expected a number");
        return static_cast<int>(value);
    }

    // One character of a literal or class: a UTF-8 sequence or an escape.
    Result<std::uint32_t> parse_char() {
        std::size_t start = pos_;
        if (at_end()) return error_at(pos_, "unexpected end of text");
        char c = peek();
        if (c == '\\') {
            ++pos_;
            char e = peek();
            ++pos_;
            int digits = 0;
            switch (e) {
                case 'n':
                    return std::uint32_t{'\n'};
                case 'r':
                    return std::uint32_t{'\r'};
                case 't':
                    return std::uint32_t{'\t'};
                case '0':
                    return std::uint32_t{0};
                case '\\':
                case '"':
                case '[':
                case ']':
                case '-':
                case '/':
                case '\'':
                case '^':
                    return static_cast<std::uint32_t>(static_cast<unsigned char>(e));
                case 'x':
                    digits = 2;
                    break;
                case 'u':
                    digits = 4;
                    break;
                case 'U':
                    digits = 8;
                    break;
                default:
                    return error_at(start, std::string("unknown escape `\\") + e + "`");
            }
            std::uint32_t value = 0;
            for (int i = 0; i < digits; ++i) {
                int h = hex_value(peek());
                if (h < 0) return error_at(pos_, "expected a hex digit");
                value = value * 16 + static_cast<std::uint32_t>(h);
                ++pos_;
            }
            if (value > kMaxCodePoint) return error_at(start, "code point out of range");
            return value;
        }
        std::uint32_t cp = 0;
        int len = decode_utf8(text_.substr(pos_), cp);
        if (len <= 0) return error_at(pos_, "invalid UTF-8");
        pos_ += static_cast<std::size_t>(len);
        return cp;
    }

    Result<Expr> parse_literal() {
        std::size_t start = pos_;
        ++pos_;  // "
        Expr lit;
        lit.kind = Expr::Kind::Literal;
        while (true) {
            if (at_end() || peek() == '\n') return error_at(start, "unterminated literal");
            if (peek() == '"') break;
            append_utf8(lit.text, IS_TRY(parse_char()));
        }
        ++pos_;
        if (lit.text.empty()) lit.kind = Expr::Kind::Empty;
        return lit;
    }

    Result<Expr> parse_class() {
        std::size_t start = pos_;
        ++pos_;  // [
        bool negated = false;
        if (peek() == '^') {
            negated = true;
            ++pos_;
        }
        std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
        while (true) {
            if (at_end()) return error_at(start, "unterminated character class");
            if (peek() == ']') break;
            std::uint32_t lo = IS_TRY(parse_char());
            std::uint32_t hi = lo;
            if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
                ++pos_;
                std::size_t at = pos_;
                hi = IS_TRY(parse_char());
                if (hi < lo) return error_at(at, "character range is reversed");
            }
            ranges.emplace_back(lo, hi);
        }
        ++pos_;
        Expr cls;
        cls.kind = Expr::Kind::Class;
        cls.ranges = normalize_ranges(std::move(ranges));
        if (negated) cls.ranges = complement_ranges(cls.ranges, kMaxCodePoint);
        remove_surrogates(cls.ranges);
        if (cls.ranges.empty()) return error_at(start, "character class matches nothing");
        return cls;
    }

    std::string_view text_;
    std::size_t pos_ = 0;
    AstGrammar grammar_;
    std::unordered_map<std::string, int> names_;
};

}  // namespace

Result<AstGrammar> parse_gbnf(std::string_view text) { return Parser(text).parse(); }

}  // namespace inferscale::grammar
