#pragma once
// The token sets CompiledGrammar keeps per automaton state that reads bytes: the tokens it
// accepts on its own rule's context (a bitmask when many, else a list of ids) and the uncertain
// ones (positions in Vocabulary::sorted_tokens(), ascending) to check against the whole stack.

#include <cstdint>
#include <vector>

namespace inferscale::grammar {

struct CompiledTables {
    struct StateTable {
        bool dense = false;                 // accepted as mask words, else as a list of ids
        std::uint32_t accepted_begin = 0;   // into dense_words (a mask) or sparse_ids
        std::uint32_t accepted_count = 0;   // tokens (sparse) or 0 (dense)
        std::uint32_t uncertain_begin = 0;  // into uncertain
        std::uint32_t uncertain_end = 0;
    };
    std::vector<std::int32_t> state_table;  // per RuleSet state: index into tables, -1 if none
    std::vector<StateTable> tables;
    std::vector<std::uint32_t> dense_words;
    std::vector<std::int32_t> sparse_ids;
    std::vector<std::int32_t> uncertain;
    std::size_t words = 0;  // mask_words(vocab size)

    // Totals, for logs and benchmarks.
    std::size_t num_uncertain() const { return uncertain.size(); }
};

}  // namespace inferscale::grammar
