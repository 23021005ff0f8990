// NodePool (an open-addressing hash of (state, parent) pairs), the closure and byte steps, and
// the matcher's set of stacks.

#include "grammar/stack_state.h"

#include <algorithm>

namespace inferscale::grammar {
namespace {

constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

std::uint64_t key_of(std::int32_t state, std::int32_t parent) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(state)) << 32) |
           static_cast<std::uint32_t>(parent);
}

std::uint64_t hash_of(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

}  // namespace

NodePool::NodePool() { clear(); }

void NodePool::clear() {
    nodes_.clear();
    keys_.assign(1024, kEmpty);
    values_.assign(1024, 0);
    mask_ = 1023;
}

void NodePool::grow() {
    std::vector<std::uint64_t> keys(keys_.size() * 2, kEmpty);
    std::vector<std::int32_t> values(keys_.size() * 2, 0);
    std::uint64_t mask = keys.size() - 1;
    for (std::size_t i = 0; i < keys_.size(); ++i) {
        if (keys_[i] == kEmpty) continue;
        std::uint64_t slot = hash_of(keys_[i]) & mask;
        while (keys[slot] != kEmpty) slot = (slot + 1) & mask;
        keys[slot] = keys_[i];
        values[slot] = values_[i];
    }
    keys_ = std::move(keys);
    values_ = std::move(values);
    mask_ = mask;
}

std::int32_t NodePool::get(std::int32_t state, std::int32_t parent) {
    std::uint64_t k = key_of(state, parent);
    std::uint64_t slot = hash_of(k) & mask_;
    while (keys_[slot] != kEmpty) {
        if (keys_[slot] == k) return values_[slot];
        slot = (slot + 1) & mask_;
    }
    auto id = static_cast<std::int32_t>(nodes_.size());
    nodes_.push_back({state, parent});
    keys_[slot] = k;
    values_[slot] = id;
    if (nodes_.size() * 2 > keys_.size()) grow();
    return id;
}

void StackWalker::begin_pass() {
    if (seen_.size() < pool_.size()) seen_.resize(pool_.size() + 1024, 0);
    if (++pass_ == 0) {
        std::fill(seen_.begin(), seen_.end(), 0);
        pass_ = 1;
    }
}

void StackWalker::expand(std::int32_t node, std::vector<std::int32_t>& out, StepFlags& flags) {
    if (static_cast<std::size_t>(node) >= seen_.size()) seen_.resize(pool_.size() + 1024, 0);
    if (seen_[node] == pass_) return;
    seen_[node] = pass_;
    std::int32_t s = pool_.state(node);
    std::int32_t parent = pool_.parent(node);
    const RuleSet::State& st = rules_.states[s];
    if (st.byte_begin != st.byte_end) out.push_back(node);
    for (auto c = st.call_begin; c < st.call_end; ++c) {
        const RuleSet::Call& call = rules_.calls[c];
        std::int32_t frame =
            rules_.states[call.target].pure_end ? parent : pool_.get(call.target, parent);
        expand(pool_.get(rules_.rule_start[call.rule], frame), out, flags);
    }
    if (st.final) {
        if (parent == kRootParent) {
            flags.root_popped = true;
        } else if (parent == kContextParent) {
            flags.context_popped = true;
        } else {
            expand(parent, out, flags);
        }
    }
}

void StackWalker::close(std::int32_t node, std::vector<std::int32_t>& out, StepFlags& flags) {
    begin_pass();
    expand(node, out, flags);
}

void StackWalker::step(std::span<const std::int32_t> tops, std::uint8_t b,
                       std::vector<std::int32_t>& out, StepFlags& flags) {
    out.clear();
    begin_pass();
    for (std::int32_t node : tops) {
        std::int32_t s = pool_.state(node);
        const RuleSet::State& st = rules_.states[s];
        if (!byte_set_has(st.bytes, b)) continue;
        std::int32_t parent = pool_.parent(node);
        for (auto e = st.byte_begin; e < st.byte_end; ++e) {
            const RuleSet::ByteEdge& edge = rules_.byte_edges[e];
            if (b >= edge.lo && b <= edge.hi) expand(pool_.get(edge.target, parent), out, flags);
        }
    }
    if (out.size() > 1) {
        std::sort(out.begin(), out.end(), [this](std::int32_t x, std::int32_t y) {
            std::int32_t sx = pool_.state(x);
            std::int32_t sy = pool_.state(y);
            return sx != sy ? sx < sy : x < y;
        });
    }
}

StackState::StackState(const RuleSet& rules) : rules_(rules), walker_(rules, pool_) { reset(); }

void StackState::reset() {
    pool_.clear();
    tops_.clear();
    StepFlags flags;
    walker_.close(pool_.get(rules_.rule_start[rules_.root], kRootParent), tops_, flags);
    std::sort(tops_.begin(), tops_.end(), [this](std::int32_t x, std::int32_t y) {
        return pool_.state(x) != pool_.state(y) ? pool_.state(x) < pool_.state(y) : x < y;
    });
    can_end_ = flags.root_popped;
}

bool StackState::advance(std::string_view bytes) {
    if (bytes.empty()) return true;
    a_.assign(tops_.begin(), tops_.end());
    StepFlags flags;
    for (char c : bytes) {
        if (a_.empty()) return false;
        flags = StepFlags{};
        walker_.step(a_, static_cast<std::uint8_t>(c), b_, flags);
        std::swap(a_, b_);
    }
    if (a_.empty() && !flags.root_popped) return false;
    std::swap(tops_, a_);
    can_end_ = flags.root_popped;
    return true;
}

bool StackState::can_read(std::span<const std::int32_t> from, std::string_view bytes) {
    a_.assign(from.begin(), from.end());
    StepFlags flags;
    for (char c : bytes) {
        if (a_.empty()) return false;
        flags = StepFlags{};
        walker_.step(a_, static_cast<std::uint8_t>(c), b_, flags);
        std::swap(a_, b_);
    }
    return !a_.empty() || flags.root_popped || bytes.empty();
}

}  // namespace inferscale::grammar
