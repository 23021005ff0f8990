#include "template/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>

#include "template/error.h"

namespace inferscale::jinja {
namespace {

using Type = Token::Type;

// How deep blocks, expressions and unary operators may nest together (an expression level counts
// about three). Real chat templates nest a few levels; a hostile one nested thousands deep would
// otherwise exhaust the stack of the recursive descent.
constexpr int kMaxNesting = 256;

class Parser {
  public:
    explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

    Body parse_template() {
        std::string end;
        Body body = parse_body({}, end);
        check_called_names();
        return body;
    }

  private:
    // One level deeper for the life of the guard; past kMaxNesting the template is refused.
    class Nesting {
      public:
        Nesting(int& depth, int line) : depth_(depth) {
            if (++depth_ > kMaxNesting) {
                fail("nested more than " + std::to_string(kMaxNesting) + " levels deep", line);
            }
        }
        ~Nesting() { --depth_; }
        Nesting(const Nesting&) = delete;
        Nesting& operator=(const Nesting&) = delete;

      private:
        int& depth_;
    };

    // A called name must be a global function or a name the template binds (a macro, a
    // variable, a parameter), so that a template calling anything else fails when parsed.
    void check_called_names() const {
        for (const auto& [name, line] : called_names_) {
            if (global_functions().find(name) != nullptr) continue;
            if (std::find(bound_names_.begin(), bound_names_.end(), name) != bound_names_.end())
                continue;
            fail("unsupported function '" + name + "'", line);
        }
    }

    std::string bind_name() {
        std::string name = expect_name();
        bound_names_.push_back(name);
        return name;
    }

    const Token& peek(std::size_t ahead = 0) const {
        const std::size_t i = std::min(pos_ + ahead, t_.size() - 1);
        return t_[i];
    }
    const Token& next() {
        const Token& t = peek();
        if (pos_ < t_.size() - 1) ++pos_;
        return t;
    }
    bool is_op(std::string_view op, std::size_t ahead = 0) const {
        return peek(ahead).type == Type::Op && peek(ahead).text == op;
    }
    bool is_name(std::string_view name, std::size_t ahead = 0) const {
        return peek(ahead).type == Type::Name && peek(ahead).text == name;
    }
    bool accept_op(std::string_view op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool accept_name(std::string_view name) {
        if (!is_name(name)) return false;
        next();
        return true;
    }
    [[noreturn]] void unexpected(std::string_view what) const {
        const Token& t = peek();
        const std::string got = t.type == Type::End        ? "end of template"
                                : t.type == Type::BlockEnd ? "'%}'"
                                : t.type == Type::VarEnd   ? "'}}'"
                                                           : "'" + t.text + "'";
        fail("expected " + std::string(what) + ", got " + got, t.line);
    }
    void expect_op(std::string_view op) {
        if (!accept_op(op)) unexpected("'" + std::string(op) + "'");
    }
    std::string expect_name() {
        if (peek().type != Type::Name) unexpected("a name");
        return next().text;
    }
    void expect_block_end() {
        if (peek().type != Type::BlockEnd) unexpected("'%}'");
        next();
    }

    // Statements up to one of `ends` ({% end... %} and friends), whose word is stored in `end`.
    Body parse_body(std::initializer_list<std::string_view> ends, std::string& end) {
        const Nesting nesting(depth_, peek().line);
        Body body;
        while (true) {
            const Token& t = peek();
            if (t.type == Type::End) {
                if (ends.size() != 0)
                    fail("missing {% " + std::string(*(ends.end() - 1)) + " %}", t.line);
                return body;
            }
            if (t.type == Type::Text) {
                auto s = stmt(StmtKind::Text, t.line);
                s->text = next().text;
                body.push_back(std::move(s));
            } else if (t.type == Type::VarBegin) {
                next();
                auto s = stmt(StmtKind::Output, t.line);
                s->expr = parse_expression();
                if (peek().type != Type::VarEnd) unexpected("'}}'");
                next();
                body.push_back(std::move(s));
            } else if (t.type == Type::BlockBegin) {
                const Token& word = peek(1);
                for (std::string_view e : ends) {
                    if (word.type == Type::Name && word.text == e) {
                        next();
                        end = next().text;
                        return body;
                    }
                }
                next();
                body.push_back(parse_statement());
            } else {
                unexpected("text or a tag");
            }
        }
    }

    static StmtPtr stmt(StmtKind kind, int line) {
        auto s = std::make_unique<Stmt>();
        s->kind = kind;
        s->line = line;
        return s;
    }

    StmtPtr parse_statement() {
        const int line = peek().line;
        if (peek().type != Type::Name) unexpected("a statement name");
        const std::string word = next().text;
        if (word == "if") return parse_if(line);
        if (word == "for") return parse_for(line);
        if (word == "set") return parse_set(line);
        if (word == "macro") return parse_macro(line);
        if (word == "generation") {
            auto s = stmt(StmtKind::Block, line);
            expect_block_end();
            std::string end;
            s->body = parse_body({"endgeneration"}, end);
            expect_block_end();
            return s;
        }
        if (word == "break" || word == "continue") {
            expect_block_end();
            return stmt(word == "break" ? StmtKind::Break : StmtKind::Continue, line);
        }
        fail("unsupported statement '" + word + "'", line);
    }

    StmtPtr parse_if(int line) {
        auto s = stmt(StmtKind::If, line);
        s->expr = parse_expression();
        expect_block_end();
        std::string end;
        s->body = parse_body({"elif", "else", "endif"}, end);
        if (end == "elif") {
            s->else_body.push_back(parse_if(peek().line));
            return s;
        }
        if (end == "else") {
            expect_block_end();
            s->else_body = parse_body({"endif"}, end);
        }
        expect_block_end();
        return s;
    }

    StmtPtr parse_for(int line) {
        auto s = stmt(StmtKind::For, line);
        do {
            s->targets.push_back(bind_name());
        } while (accept_op(","));
        if (!accept_name("in")) unexpected("'in'");
        s->expr = parse_expression(/*with_conditional=*/false);
        if (accept_name("if")) s->filter = parse_expression();
        if (is_name("recursive")) fail("unsupported: recursive for loops", peek().line);
        expect_block_end();
        std::string end;
        s->body = parse_body({"else", "endfor"}, end);
        if (end == "else") {
            expect_block_end();
            s->else_body = parse_body({"endfor"}, end);
        }
        expect_block_end();
        return s;
    }

    StmtPtr parse_set(int line) {
        auto s = stmt(StmtKind::Set, line);
        s->targets.push_back(bind_name());
        if (accept_op(".")) {
            s->attribute_target = true;
            s->targets.push_back(expect_name());
        } else {
            while (accept_op(",")) s->targets.push_back(bind_name());
        }
        if (peek().type == Type::BlockEnd) {
            if (s->attribute_target || s->targets.size() != 1)
                fail("a {% set %} block takes one name", line);
            next();
            s->kind = StmtKind::SetBlock;
            std::string end;
            s->body = parse_body({"endset"}, end);
            expect_block_end();
            return s;
        }
        expect_op("=");
        s->expr = parse_tuple_or_expression();
        expect_block_end();
        return s;
    }

    StmtPtr parse_macro(int line) {
        auto s = stmt(StmtKind::Macro, line);
        s->text = bind_name();
        expect_op("(");
        while (!accept_op(")")) {
            if (!s->targets.empty()) expect_op(",");
            s->targets.push_back(bind_name());
            s->defaults.push_back(accept_op("=") ? parse_expression() : nullptr);
        }
        expect_block_end();
        std::string end;
        s->body = parse_body({"endmacro"}, end);
        expect_block_end();
        return s;
    }

    static ExprPtr node(ExprKind kind, int line) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->line = line;
        return e;
    }
    static ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
        auto e = node(ExprKind::Binary, line);
        e->name = std::move(op);
        e->children.push_back(std::move(left));
        e->children.push_back(std::move(right));
        return e;
    }

    ExprPtr parse_tuple_or_expression() {
        const int line = peek().line;
        ExprPtr first = parse_expression();
        if (!is_op(",")) return first;
        auto t = node(ExprKind::Tuple, line);
        t->children.push_back(std::move(first));
        while (accept_op(",")) t->children.push_back(parse_expression());
        return t;
    }

    ExprPtr parse_expression(bool with_conditional = true) {
        const Nesting nesting(depth_, peek().line);
        ExprPtr e = parse_or();
        if (!with_conditional) return e;
        while (is_name("if")) {
            const int line = next().line;
            auto c = node(ExprKind::Conditional, line);
            c->children.push_back(std::move(e));
            c->children.push_back(parse_or());
            c->children.push_back(accept_name("else") ? parse_expression() : nullptr);
            e = std::move(c);
        }
        return e;
    }

    // One left-associative level: `operand (op operand)*`, op one of `ops` (operators or the
    // keywords and/or).
    ExprPtr parse_level(std::initializer_list<std::string_view> ops, ExprPtr (Parser::*operand)()) {
        ExprPtr e = (this->*operand)();
        while (true) {
            const Token& t = peek();
            const bool matched = (t.type == Type::Op || t.type == Type::Name) &&
                                 std::find(ops.begin(), ops.end(), t.text) != ops.end();
            if (!matched) return e;
            next();
            e = binary(t.text, std::move(e), (this->*operand)(), t.line);
        }
    }

    ExprPtr parse_or() { return parse_level({"or"}, &Parser::parse_and); }
    ExprPtr parse_and() { return parse_level({"and"}, &Parser::parse_not); }

    ExprPtr parse_not() {
        const Nesting nesting(depth_, peek().line);
        if (is_name("not")) {
            auto e = node(ExprKind::Unary, next().line);
            e->name = "not";
            e->children.push_back(parse_not());
            return e;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        ExprPtr e = parse_math1();
        while (true) {
            const int line = peek().line;
            std::string op;
            for (std::string_view o : {"==", "!=", "<", ">", "<=", ">="})
                if (is_op(o)) op = o;
            if (!op.empty()) {
                next();
            } else if (is_name("in")) {
                next();
                op = "in";
            } else if (is_name("not") && is_name("in", 1)) {
                next();
                next();
                op = "not in";
            } else {
                return e;
            }
            e = binary(op, std::move(e), parse_math1(), line);
        }
    }

    // Jinja's precedence, loosest first: + -, then ~, then * / // %, then **.
    ExprPtr parse_math1() { return parse_level({"+", "-"}, &Parser::parse_concat); }
    ExprPtr parse_concat() { return parse_level({"~"}, &Parser::parse_math2); }
    ExprPtr parse_math2() { return parse_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
    ExprPtr parse_pow() { return parse_level({"**"}, &Parser::parse_filtered_unary); }
    ExprPtr parse_filtered_unary() { return parse_unary(true); }

    ExprPtr parse_unary(bool with_filters) {
        const Nesting nesting(depth_, peek().line);
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            const Token& op = next();
            e = node(ExprKind::Unary, op.line);
            e->name = op.text;
            e->children.push_back(parse_unary(false));
        } else {
            e = parse_postfix(parse_primary());
        }
        return with_filters ? parse_filters(std::move(e)) : std::move(e);
    }

    ExprPtr parse_primary() {
        const Token& t = peek();
        ExprPtr e = node(ExprKind::Literal, t.line);
        switch (t.type) {
            case Type::Name:
                next();
                if (t.text == "true" || t.text == "True") {
                    e->literal = true;
                } else if (t.text == "false" || t.text == "False") {
                    e->literal = false;
                } else if (t.text == "none" || t.text == "None") {
                    e->literal = None{};
                } else {
                    e->kind = ExprKind::Name;
                    e->name = t.text;
                }
                return e;
            case Type::String: {
                std::string s;
                while (peek().type == Type::String) s += next().text;
                e->literal = std::move(s);
                return e;
            }
            case Type::Int:
                e->literal = next().int_value;
                return e;
            case Type::Float:
                e->literal = next().float_value;
                return e;
            default:
                break;
        }
        if (accept_op("(")) {
            if (accept_op(")")) {
                e->kind = ExprKind::Tuple;
                return e;
            }
            ExprPtr inner = parse_expression();
            if (is_op(",")) {
                e->kind = ExprKind::Tuple;
                e->children.push_back(std::move(inner));
                while (accept_op(",") && !is_op(")")) e->children.push_back(parse_expression());
                inner = std::move(e);
            }
            expect_op(")");
            return inner;
        }
        if (accept_op("[")) {
            e->kind = ExprKind::List;
            while (!accept_op("]")) {
                if (!e->children.empty()) expect_op(",");
                if (accept_op("]")) break;
                e->children.push_back(parse_expression());
            }
            return e;
        }
        if (accept_op("{")) {
            e->kind = ExprKind::Dict;
            while (!accept_op("}")) {
                if (!e->children.empty()) expect_op(",");
                if (accept_op("}")) break;
                e->children.push_back(parse_expression());
                expect_op(":");
                e->children.push_back(parse_expression());
            }
            return e;
        }
        unexpected("an expression");
    }

    ExprPtr parse_postfix(ExprPtr e) {
        while (true) {
            const int line = peek().line;
            if (accept_op(".")) {
                if (peek().type == Type::Int) {
                    auto item = node(ExprKind::Item, line);
                    item->children.push_back(std::move(e));
                    auto index = node(ExprKind::Literal, line);
                    index->literal = next().int_value;
                    item->children.push_back(std::move(index));
                    e = std::move(item);
                    continue;
                }
                auto a = node(ExprKind::Attribute, line);
                a->name = expect_name();
                a->children.push_back(std::move(e));
                e = std::move(a);
            } else if (accept_op("[")) {
                e = parse_subscript(std::move(e), line);
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr object, int line) {
        ExprPtr parts[3];
        int part = 0;
        bool slice = false;
        while (!accept_op("]")) {
            if (accept_op(":")) {
                slice = true;
                if (++part > 2) unexpected("']'");
                continue;
            }
            if (parts[part]) unexpected("':' or ']'");
            parts[part] = parse_expression();
        }
        auto e = node(slice ? ExprKind::Slice : ExprKind::Item, line);
        e->children.push_back(std::move(object));
        if (!slice && !parts[0]) fail("empty subscript", line);
        for (int i = 0; i < (slice ? 3 : 1); ++i) e->children.push_back(std::move(parts[i]));
        return e;
    }

    // Appends the arguments of `( ... )` to e's children and kwargs.
    void parse_arguments(Expr& e) {
        expect_op("(");
        bool first = true;
        while (!accept_op(")")) {
            if (!first) expect_op(",");
            first = false;
            if (accept_op(")")) break;
            if (is_op("*") || is_op("**")) fail("unsupported: *args and **kwargs", peek().line);
            if (peek().type == Type::Name && is_op("=", 1)) {
                std::string name = next().text;
                next();
                e.kwargs.emplace_back(std::move(name), parse_expression());
            } else {
                e.children.push_back(parse_expression());
            }
        }
    }

    // Calls are checked here (methods) and when the whole template is parsed (names).
    ExprPtr parse_call(ExprPtr callee) {
        if (callee->kind == ExprKind::Name) called_names_.emplace_back(callee->name, callee->line);
        if (callee->kind == ExprKind::Attribute && !is_method_name(callee->name))
            fail("unsupported method '" + callee->name + "'", callee->line);
        auto e = node(ExprKind::Call, peek().line);
        e->children.push_back(std::move(callee));
        parse_arguments(*e);
        return e;
    }

    ExprPtr parse_filters(ExprPtr e) {
        while (true) {
            const int line = peek().line;
            if (accept_op("|")) {
                auto f = node(ExprKind::Filter, line);
                f->name = expect_name();
                f->filter = find_filter(f->name);
                if (f->filter == nullptr) fail("unsupported filter '" + f->name + "'", line);
                f->children.push_back(std::move(e));
                if (is_op("(")) parse_arguments(*f);
                e = std::move(f);
            } else if (accept_name("is")) {
                auto t = node(ExprKind::Test, line);
                t->negated = accept_name("not");
                t->name = expect_name();
                t->test = find_test(t->name);
                if (t->test == nullptr) fail("unsupported test '" + t->name + "'", line);
                t->children.push_back(std::move(e));
                if (is_op("(")) {
                    parse_arguments(*t);
                } else if (starts_test_argument()) {
                    t->children.push_back(parse_postfix(parse_primary()));
                }
                e = std::move(t);
            } else if (is_op("(")) {
                e = parse_call(std::move(e));
            } else {
                return e;
            }
        }
    }

    bool starts_test_argument() const {
        const Token& t = peek();
        if (t.type == Type::String || t.type == Type::Int || t.type == Type::Float) return true;
        if (t.type == Type::Op) return t.text == "[" || t.text == "{";
        if (t.type != Type::Name) return false;
        for (std::string_view kw : {"else", "or", "and", "if", "in", "not", "is"})
            if (t.text == kw) return false;
        return true;
    }

    const std::vector<Token>& t_;
    std::size_t pos_ = 0;
    std::vector<std::string> bound_names_;
    std::vector<std::pair<std::string, int>> called_names_;
    int depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace inferscale::jinja
