#pragma once
// Grammar stacks: a stack is a chain of nodes (automaton state, parent node), hash-consed in a
// NodePool so that stacks share their tails and a set of stacks is a set of node ids. The
// parent's state is where the caller resumes once the rule ends. A set of stacks is kept
// "closed": every node in it reads bytes (calls already entered, ended rules already popped).
// A stack bottoms out in kRootParent (popping it: the grammar may end) or, for the compile-time
// walks of one rule's context, in kContextParent (popping it: the token runs past the rule).

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/rule_set.h"

namespace inferscale::grammar {

constexpr std::int32_t kRootParent = -1;
constexpr std::int32_t kContextParent = -2;

class NodePool {
  public:
    NodePool();
    std::int32_t get(std::int32_t state, std::int32_t parent);
    std::int32_t state(std::int32_t node) const { return nodes_[node].state; }
    std::int32_t parent(std::int32_t node) const { return nodes_[node].parent; }
    std::size_t size() const { return nodes_.size(); }
    void clear();

  private:
    struct Node {
        std::int32_t state;
        std::int32_t parent;
    };
    void grow();
    std::vector<Node> nodes_;
    std::vector<std::uint64_t> keys_;  // open addressing; kEmpty marks a free slot
    std::vector<std::int32_t> values_;
    std::uint64_t mask_ = 0;
};

// What a closure ran into besides byte-reading nodes.
struct StepFlags {
    bool root_popped = false;     // a stack ended the grammar
    bool context_popped = false;  // a stack ran past the rule (kContextParent)
};

// Closure and byte steps over sets of nodes. Borrows the rules and the pool.
class StackWalker {
  public:
    StackWalker(const RuleSet& rules, NodePool& pool) : rules_(rules), pool_(pool) {}

    // Appends the closure of `node` (entered calls, popped ends) to `out`.
    void close(std::int32_t node, std::vector<std::int32_t>& out, StepFlags& flags);
    // Reads byte b from every node of `tops` (closed sets); the closed result goes to `out`
    // (cleared first), sorted by state.
    void step(std::span<const std::int32_t> tops, std::uint8_t b, std::vector<std::int32_t>& out,
              StepFlags& flags);

  private:
    void begin_pass();
    void expand(std::int32_t node, std::vector<std::int32_t>& out, StepFlags& flags);

    const RuleSet& rules_;
    NodePool& pool_;
    std::vector<std::uint32_t> seen_;  // per node: the pass that last reached it
    std::uint32_t pass_ = 0;
};

// A closed set of full stacks (from the root rule) and whether the grammar may end here.
class StackState {
  public:
    explicit StackState(const RuleSet& rules);
    void reset();
    // Reads `bytes`; false (state unchanged) if some byte is not allowed.
    bool advance(std::string_view bytes);
    // Whether `bytes` could be read from `from` (a closed subset of tops()), without changing
    // anything but the pool.
    bool can_read(std::span<const std::int32_t> from, std::string_view bytes);

    const std::vector<std::int32_t>& tops() const { return tops_; }
    bool can_end() const { return can_end_; }
    NodePool& pool() { return pool_; }
    StackWalker& walker() { return walker_; }
    const RuleSet& rules() const { return rules_; }

    // Scratch for the matcher's checks of uncertain tokens: the stacks after d bytes and
    // whether the grammar could end there.
    std::vector<std::vector<std::int32_t>> levels;
    std::vector<char> level_ended;

  private:
    const RuleSet& rules_;
    NodePool pool_;
    StackWalker walker_;
    std::vector<std::int32_t> tops_;
    bool can_end_ = false;
    std::vector<std::int32_t> a_;  // scratch
    std::vector<std::int32_t> b_;
};

}  // namespace inferscale::grammar
