#pragma once
// RuleSet: a grammar as one byte automaton per rule (deterministic where that stays small).
// A state reads bytes (byte edges), calls rules (call edges: run the rule, then go to the
// target) and may be final (its rule may end there). State ids are global over all rules.
// Small non-recursive rules without unbounded repetition are inlined into their callers, so a
// grammar position's "own rule" context (matcher.h) reaches as far as possible.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "grammar/grammar_ast.h"

namespace inferscale::grammar {

using ByteSet = std::array<std::uint64_t, 4>;

inline bool byte_set_has(const ByteSet& set, std::uint8_t b) {
    return (set[b >> 6] >> (b & 63)) & 1;
}
inline void byte_set_add(ByteSet& set, std::uint8_t b) {
    set[b >> 6] |= std::uint64_t{1} << (b & 63);
}

struct RuleSet {
    struct ByteEdge {
        std::uint8_t lo;  // inclusive
        std::uint8_t hi;  // inclusive
        std::int32_t target;
    };
    struct Call {
        std::int32_t rule;
        std::int32_t target;  // where the caller goes once the rule ends
    };
    struct State {
        std::int32_t rule = 0;
        std::uint32_t byte_begin = 0;  // byte_edges[byte_begin, byte_end)
        std::uint32_t byte_end = 0;
        std::uint32_t call_begin = 0;  // calls[call_begin, call_end)
        std::uint32_t call_end = 0;
        bool final = false;
        // Final with no edges: a call that returns here is a tail call (no frame is pushed).
        bool pure_end = false;
        ByteSet bytes{};  // the bytes some byte edge reads
    };

    std::vector<State> states;
    std::vector<ByteEdge> byte_edges;
    std::vector<Call> calls;
    std::vector<std::int32_t> rule_start;  // per rule
    std::vector<std::string> rule_names;
    // Per rule: the bytes that may come right after the rule ends (one-byte lookahead).
    std::vector<ByteSet> follow;
    std::int32_t root = 0;

    bool reads_bytes(std::int32_t s) const { return states[s].byte_begin != states[s].byte_end; }
};

// Errors (InvalidArgument): left recursion (named), a rule too large to build.
Result<RuleSet> build_rule_set(const AstGrammar& ast);

}  // namespace inferscale::grammar
