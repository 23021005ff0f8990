#pragma once
// Renderer: runs a parsed template (ast.h) over a context of variables, with Jinja's scoping:
// a for loop or a macro call opens a scope, `set` writes to the innermost one, a namespace is
// the way to carry a value out of a loop. One Renderer serves one render call.

#include <string>
#include <utility>
#include <vector>

#include "template/ast.h"

namespace inferscale::jinja {

class Renderer {
  public:
    explicit Renderer(const ValueDict& context) : context_(context) {}

    // Appends the output to `out`; throws TemplateError with the failing statement's line.
    void render(const Body& body, std::string& out);

  private:
    struct Scope {
        Scope* parent = nullptr;
        std::vector<std::pair<std::string, Value>> vars;
        void set(const std::string& name, Value value);
    };
    enum class Flow { Normal, Break, Continue };
    // Makes `scope` the innermost scope until it goes out of scope itself.
    class EnterScope {
      public:
        EnterScope(Renderer& r, Scope& scope) : r_(r), outer_(r.scope_) { r.scope_ = &scope; }
        ~EnterScope() { r_.scope_ = outer_; }
        EnterScope(const EnterScope&) = delete;
        EnterScope& operator=(const EnterScope&) = delete;

      private:
        Renderer& r_;
        Scope* outer_;
    };

    Flow run(const Body& body, std::string& out);
    Flow run(const Stmt& s, std::string& out);
    Flow run_for(const Stmt& s, std::string& out);
    void run_set(const Stmt& s, Value value);
    Value make_macro(const Stmt& s);
    Value call_macro(const Stmt& s, Scope* defined_in, CallArgs& args);

    Value eval(const Expr& e);
    Value lookup(const std::string& name) const;
    Value eval_binary(const Expr& e);
    Value eval_call(const Expr& e);
    CallArgs eval_arguments(const Expr& e, std::size_t first_child);

    // Python's recursion limit, in effect: a template's runaway recursion fails the render.
    static constexpr int kMaxMacroDepth = 200;

    const ValueDict& context_;
    Scope root_;
    int macro_depth_ = 0;
    Scope* scope_ = &root_;
};

}  // namespace inferscale::jinja
