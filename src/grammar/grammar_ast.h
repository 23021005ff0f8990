#pragma once
// The parsed form of GBNF before it becomes byte automata (rule_set.h): one expression tree per
// rule. Literals and character classes are in code points; the automaton builder encodes them
// as UTF-8.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace inferscale::grammar {

struct Expr {
    enum class Kind {
        Empty,    // matches ""
        Literal,  // code points in `text` (UTF-8), in order
        Class,    // one code point in `ranges` (already complemented for [^...]); `.` is a class
        Ref,      // the rule `rule` (index into AstGrammar::rules)
        Seq,      // children in order
        Alt,      // one of children
        Repeat,   // children[0] between min and max times (max -1: unbounded)
    };
    Kind kind = Kind::Empty;
    std::string text;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;  // inclusive, sorted, disjoint
    int rule = -1;
    int min = 0;
    int max = 0;
    std::vector<Expr> children;
};

struct AstRule {
    std::string name;
    Expr body;
    bool defined = false;
    int line = 0;  // where it was first named, for errors
    int column = 0;
};

struct AstGrammar {
    std::vector<AstRule> rules;
    int root = -1;
};

}  // namespace inferscale::grammar
