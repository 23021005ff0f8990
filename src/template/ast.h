#pragma once
// The parsed template: expression and statement nodes. Every node keeps its source line so
// that a render error names it.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/builtins.h"
#include "template/value.h"

namespace inferscale::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
    Literal,      // literal
    Name,         // name
    Attribute,    // children[0].name
    Item,         // children[0][children[1]]
    Slice,        // children[0][children[1]:children[2]:children[3]] (null children are omitted)
    Call,         // children[0](children[1..], kwargs)
    Filter,       // children[0] | name(children[1..], kwargs)
    Test,         // children[0] is [not] name(children[1..])
    Unary,        // name children[0]: "not", "-", "+"
    Binary,       // children[0] name children[1]
    Conditional,  // children[0] if children[1] else children[2] (children[2] may be null)
    List,         // [children...]
    Tuple,        // (children...), a list at run time
    Dict,         // {children[0]: children[1], children[2]: children[3], ...}
};

struct Expr {
    ExprKind kind;
    int line = 0;
    Value literal;
    std::string name;  // name, attribute, filter, test or operator
    std::vector<ExprPtr> children;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    bool negated = false;       // Test: `is not`
    FilterFn filter = nullptr;  // Filter: resolved when parsed
    TestFn test = nullptr;      // Test: resolved when parsed
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // if expr: body else else_body (an elif is an If inside else_body)
    For,       // for targets in expr [if filter]: body else else_body
    Set,       // set targets = expr; an attribute target is targets {namespace, attribute}
    SetBlock,  // set targets[0]: body
    Macro,     // macro text(targets = defaults): body
    Block,     // body rendered in place ({% generation %})
    Break,
    Continue,
};

struct Stmt {
    StmtKind kind;
    int line = 0;
    std::string text;
    ExprPtr expr;
    ExprPtr filter;
    std::vector<std::string> targets;
    std::vector<ExprPtr> defaults;  // Macro: one per parameter, null when none
    bool attribute_target = false;  // Set: `ns.attr = ...`
    Body body;
    Body else_body;
};

}  // namespace inferscale::jinja
