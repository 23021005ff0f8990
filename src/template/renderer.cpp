#include "template/renderer.h"

#include "template/builtins.h"
#include "template/error.h"
#include "template/operations.h"

namespace inferscale::jinja {
namespace {

std::optional<std::int64_t> slice_bound(const Value& v) {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int()) fail("slice indices must be integers or None");
    return v.as_int();
}

// Jinja's `loop` inside a for loop at item i of items.
Value loop_variable(const ValueList& items, std::size_t index) {
    const auto i = static_cast<std::int64_t>(index);
    const auto n = static_cast<std::int64_t>(items.size());
    ValueDict loop;
    loop.set("index", i + 1);
    loop.set("index0", i);
    loop.set("revindex", n - i);
    loop.set("revindex0", n - i - 1);
    loop.set("first", i == 0);
    loop.set("last", i == n - 1);
    loop.set("length", n);
    loop.set("depth", 1);
    loop.set("depth0", 0);
    loop.set("previtem", index > 0 ? items[index - 1] : Value::undefined("previtem"));
    loop.set("nextitem",
             index + 1 < items.size() ? items[index + 1] : Value::undefined("nextitem"));
    loop.set("cycle", Callable{"cycle", [index](CallArgs& args) -> Value {
                                   if (args.positional.empty()) fail("no items for cycling given");
                                   return args.positional[index % args.positional.size()];
                               }});
    return loop;
}

}  // namespace

void Renderer::Scope::set(const std::string& name, Value value) {
    for (auto& [k, v] : vars)
        if (k == name) {
            v = std::move(value);
            return;
        }
    vars.emplace_back(name, std::move(value));
}

void Renderer::render(const Body& body, std::string& out) { run(body, out); }

Renderer::Flow Renderer::run(const Body& body, std::string& out) {
    for (const StmtPtr& s : body) {
        const Flow flow = run(*s, out);
        if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
}

Renderer::Flow Renderer::run(const Stmt& s, std::string& out) {
    try {
        switch (s.kind) {
            case StmtKind::Text:
                out += s.text;
                break;
            case StmtKind::Output:
                append_str(out, eval(*s.expr));
                break;
            case StmtKind::If:
                return run(eval(*s.expr).truthy() ? s.body : s.else_body, out);
            case StmtKind::For:
                return run_for(s, out);
            case StmtKind::Set:
                run_set(s, eval(*s.expr));
                break;
            case StmtKind::SetBlock: {
                std::string captured;
                run(s.body, captured);
                run_set(s, std::move(captured));
                break;
            }
            case StmtKind::Macro:
                scope_->set(s.text, make_macro(s));
                break;
            case StmtKind::Block:
                return run(s.body, out);
            case StmtKind::Break:
                return Flow::Break;
            case StmtKind::Continue:
                return Flow::Continue;
        }
    } catch (TemplateError& e) {
        if (e.line == 0) e.line = s.line;
        throw;
    }
    return Flow::Normal;
}

void Renderer::run_set(const Stmt& s, Value value) {
    if (s.attribute_target) {
        const Value ns = lookup(s.targets[0]);
        if (!ns.is_namespace())
            fail("can only assign attributes of a namespace, not of '" + s.targets[0] + "'");
        ns.namespace_attributes().set(s.targets[1], std::move(value));
        return;
    }
    if (s.targets.size() == 1) {
        scope_->set(s.targets[0], std::move(value));
        return;
    }
    const auto items = iterate(value);
    if (items.size() != s.targets.size()) fail("wrong number of values to unpack");
    for (std::size_t i = 0; i < s.targets.size(); ++i) scope_->set(s.targets[i], items[i]);
}

Renderer::Flow Renderer::run_for(const Stmt& s, std::string& out) {
    const auto all = iterate(eval(*s.expr));
    Scope loop_scope{scope_, {}};
    const EnterScope enter(*this, loop_scope);
    const auto bind = [&](const Value& item) {
        if (s.targets.size() == 1) {
            loop_scope.set(s.targets[0], item);
            return;
        }
        const auto parts = iterate(item);
        if (parts.size() != s.targets.size()) fail("wrong number of values to unpack in for loop");
        for (std::size_t i = 0; i < s.targets.size(); ++i) loop_scope.set(s.targets[i], parts[i]);
    };
    Items items = all;
    if (s.filter) {
        ValueList kept;
        for (const Value& item : all) {
            bind(item);
            if (eval(*s.filter).truthy()) kept.push_back(item);
        }
        items = Items(std::make_shared<const ValueList>(std::move(kept)));
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
        bind(items[i]);
        loop_scope.set("loop", loop_variable(items.list(), i));
        if (run(s.body, out) == Flow::Break) break;
    }
    if (items.empty()) run(s.else_body, out);
    return Flow::Normal;
}

Value Renderer::make_macro(const Stmt& s) {
    Scope* defined_in = scope_;
    return Callable{
        s.text, [this, &s, defined_in](CallArgs& args) { return call_macro(s, defined_in, args); }};
}

Value Renderer::call_macro(const Stmt& s, Scope* defined_in, CallArgs& args) {
    if (macro_depth_ >= kMaxMacroDepth)
        fail("macro calls nest deeper than " + std::to_string(kMaxMacroDepth));
    if (args.positional.size() > s.targets.size())
        fail("macro '" + s.text + "' takes " + std::to_string(s.targets.size()) + " arguments");
    Scope call_scope{defined_in, {}};
    for (std::size_t i = 0; i < s.targets.size(); ++i) {
        const Value* given = args.get(i, s.targets[i]);
        if (given != nullptr) {
            call_scope.set(s.targets[i], *given);
        } else {
            call_scope.set(s.targets[i],
                           s.defaults[i] ? eval(*s.defaults[i]) : Value::undefined(s.targets[i]));
        }
    }
    const EnterScope enter(*this, call_scope);
    ++macro_depth_;
    std::string out;
    try {
        run(s.body, out);
    } catch (...) {
        --macro_depth_;
        throw;
    }
    --macro_depth_;
    return out;
}

Value Renderer::lookup(const std::string& name) const {
    for (const Scope* s = scope_; s != nullptr; s = s->parent)
        for (const auto& [k, v] : s->vars)
            if (k == name) return v;
    if (const Value* v = context_.find(name)) return *v;
    if (const Value* v = global_functions().find(name)) return *v;
    return Value::undefined(name);
}

CallArgs Renderer::eval_arguments(const Expr& e, std::size_t first_child) {
    CallArgs args;
    for (std::size_t i = first_child; i < e.children.size(); ++i)
        args.positional.push_back(eval(*e.children[i]));
    for (const auto& [name, value] : e.kwargs) args.named.emplace_back(name, eval(*value));
    return args;
}

Value Renderer::eval_call(const Expr& e) {
    const Value callee = eval(*e.children[0]);
    if (callee.is_undefined()) fail("'" + callee.undefined_name() + "' is undefined", e.line);
    if (!callee.is_callable()) fail("'" + callee.type_name() + "' object is not callable", e.line);
    CallArgs args = eval_arguments(e, 1);
    return callee.as_callable().call(args);
}

Value Renderer::eval_binary(const Expr& e) {
    const Value left = eval(*e.children[0]);
    if (e.name == "and") return left.truthy() ? eval(*e.children[1]) : left;
    if (e.name == "or") return left.truthy() ? left : eval(*e.children[1]);
    return binary_op(e.name, left, eval(*e.children[1]));
}

Value Renderer::eval(const Expr& e) {
    switch (e.kind) {
        case ExprKind::Literal:
            return e.literal;
        case ExprKind::Name:
            return lookup(e.name);
        case ExprKind::Attribute:
            return get_attribute(eval(*e.children[0]), e.name);
        case ExprKind::Item:
            return get_item(eval(*e.children[0]), eval(*e.children[1]));
        case ExprKind::Slice: {
            const Value object = eval(*e.children[0]);
            Value bounds[3];
            for (int i = 0; i < 3; ++i)
                if (e.children[i + 1]) bounds[i] = eval(*e.children[i + 1]);
            return get_slice(object, slice_bound(bounds[0]), slice_bound(bounds[1]),
                             slice_bound(bounds[2]));
        }
        case ExprKind::Call:
            return eval_call(e);
        case ExprKind::Filter: {
            const Value input = eval(*e.children[0]);
            CallArgs args = eval_arguments(e, 1);
            return e.filter(input, args);
        }
        case ExprKind::Test: {
            const Value input = eval(*e.children[0]);
            CallArgs args = eval_arguments(e, 1);
            return e.test(input, args) != e.negated;
        }
        case ExprKind::Unary: {
            const Value v = eval(*e.children[0]);
            if (e.name == "not") return !v.truthy();
            if (e.name == "-") return binary_op("-", Value(0), v);
            return binary_op("+", Value(0), v);
        }
        case ExprKind::Binary:
            return eval_binary(e);
        case ExprKind::Conditional:
            if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
            return e.children[2] ? eval(*e.children[2]) : Value::undefined("else");
        case ExprKind::List:
        case ExprKind::Tuple: {
            ValueList items;
            items.reserve(e.children.size());
            for (const ExprPtr& c : e.children) items.push_back(eval(*c));
            return items;
        }
        case ExprKind::Dict: {
            ValueDict d;
            for (std::size_t i = 0; i + 1 < e.children.size(); i += 2)
                d.set(to_str(eval(*e.children[i])), eval(*e.children[i + 1]));
            return d;
        }
    }
    return {};
}

}  // namespace inferscale::jinja
