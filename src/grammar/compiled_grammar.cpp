// Vocabulary and CompiledGrammar::compile: for each automaton state that reads bytes (in rules
// reachable from the root), one walk over the sorted vocabulary, sharing the work of common
// prefixes, from a stack that holds just that state above a "context" bottom. A token is
// accepted when some path reads all its bytes, uncertain when none does but some path ran past
// the rule with a next byte the rule's follow set admits, rejected otherwise; once no path is
// left, every token under the same prefix shares the verdict and is skipped.

#include <algorithm>
#include <array>
#include <numeric>
#include <unordered_map>

#include "base/timer.h"
#include "grammar/compiled_tables.h"
#include "grammar/matcher.h"
#include "grammar/rule_set.h"
#include "grammar/stack_state.h"

namespace inferscale::grammar {

std::size_t mask_words(std::int64_t vocab_size) {
    return static_cast<std::size_t>((vocab_size + 31) / 32);
}

Vocabulary::Vocabulary(std::vector<std::string> token_bytes, std::vector<bool> is_special,
                       std::vector<std::int32_t> end_tokens)
    : token_bytes_(std::move(token_bytes)),
      is_special_(std::move(is_special)),
      is_end_(token_bytes_.size(), false),
      end_tokens_(std::move(end_tokens)) {
    IS_CHECK(is_special_.size() == token_bytes_.size());
    for (std::int32_t id : end_tokens_) {
        IS_CHECK(id >= 0 && static_cast<std::size_t>(id) < token_bytes_.size()) << id;
        is_end_[id] = true;
    }
    for (std::size_t id = 0; id < token_bytes_.size(); ++id) {
        if (!is_special_[id] && !is_end_[id] && !token_bytes_[id].empty()) {
            sorted_.push_back(static_cast<std::int32_t>(id));
        }
    }
    std::sort(sorted_.begin(), sorted_.end(), [this](std::int32_t a, std::int32_t b) {
        return token_bytes_[a] != token_bytes_[b] ? token_bytes_[a] < token_bytes_[b] : a < b;
    });
    sorted_lcp_.assign(sorted_.size(), 0);
    for (std::size_t i = 1; i < sorted_.size(); ++i) {
        const std::string& a = token_bytes_[sorted_[i - 1]];
        const std::string& b = token_bytes_[sorted_[i]];
        std::size_t n = 0;
        while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
        sorted_lcp_[i] = static_cast<std::int32_t>(n);
    }
}

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const Vocabulary> vocab,
                                 std::shared_ptr<const CompiledTables> tables, double compile_ms)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      tables_(std::move(tables)),
      compile_ms_(compile_ms) {}

namespace {

struct Level {
    std::vector<std::int32_t> tops;
    bool popped = false;     // the closure that made this level ran past the rule
    bool uncertain = false;  // some path ran past the rule, with an admissible next byte, before
};

// The rules reachable from the root through calls (inlined rules are not called).
std::vector<char> reachable_rules(const RuleSet& rules) {
    std::vector<char> seen(rules.rule_start.size(), 0);
    std::vector<std::int32_t> stack{rules.root};
    seen[rules.root] = 1;
    while (!stack.empty()) {
        std::int32_t r = stack.back();
        stack.pop_back();
        for (std::size_t s = 0; s < rules.states.size(); ++s) {
            const auto& st = rules.states[s];
            if (st.rule != r) continue;
            for (auto c = st.call_begin; c < st.call_end; ++c) {
                std::int32_t callee = rules.calls[c].rule;
                if (!seen[callee]) {
                    seen[callee] = 1;
                    stack.push_back(callee);
                }
            }
        }
    }
    return seen;
}

struct VectorHash {
    std::size_t operator()(const std::vector<std::int64_t>& v) const {
        std::uint64_t h = 0x9E3779B97F4A7C15ULL;
        for (std::int64_t x : v) {
            h ^= static_cast<std::uint64_t>(x) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
        }
        return static_cast<std::size_t>(h);
    }
};

// Classes of states that no token can tell apart: same rule, finality and calls (exactly), and
// byte edges into states of the same class, refined `depth` times (deeper than the longest
// token). States of one class get the same token sets, so a long bounded repetition
// (maxLength: 300) costs about as many vocabulary walks as one of `depth` repetitions.
std::vector<std::int32_t> equivalence_classes(const RuleSet& rules, std::size_t depth) {
    std::size_t n = rules.states.size();
    std::vector<std::int32_t> cls(n);
    std::unordered_map<std::vector<std::int64_t>, std::int32_t, VectorHash> ids;
    std::vector<std::int64_t> sig;
    auto assign = [&](std::size_t s) {
        auto [it, inserted] = ids.emplace(sig, static_cast<std::int32_t>(ids.size()));
        return it->second;
    };
    for (std::size_t s = 0; s < n; ++s) {
        const auto& st = rules.states[s];
        sig.assign({st.rule, st.final, st.pure_end});
        for (auto c = st.call_begin; c < st.call_end; ++c) {
            sig.push_back(rules.calls[c].rule);
            sig.push_back(rules.calls[c].target);
        }
        cls[s] = assign(s);
    }
    std::size_t count = ids.size();
    std::vector<std::int32_t> next(n);
    std::vector<std::array<std::int64_t, 3>> edges;
    for (std::size_t level = 0; level < depth; ++level) {
        ids.clear();
        for (std::size_t s = 0; s < n; ++s) {
            const auto& st = rules.states[s];
            edges.clear();
            for (auto e = st.byte_begin; e < st.byte_end; ++e) {
                const auto& edge = rules.byte_edges[e];
                edges.push_back({edge.lo, edge.hi, cls[edge.target]});
            }
            std::sort(edges.begin(), edges.end());
            sig.assign({cls[s]});
            for (const auto& e : edges) {
                std::size_t k = sig.size();
                if (k >= 4 && sig[k - 1] == e[2] && sig[k - 2] + 1 == e[0]) {
                    sig[k - 2] = e[1];  // adjacent range into the same class
                } else {
                    sig.insert(sig.end(), {e[0], e[1], e[2]});
                }
            }
            next[s] = assign(s);
        }
        std::swap(cls, next);
        if (ids.size() == count) break;  // stable: no token length tells more apart
        count = ids.size();
    }
    return cls;
}

class TableBuilder {
  public:
    TableBuilder(const RuleSet& rules, const Vocabulary& vocab)
        : rules_(rules), vocab_(vocab), walker_(rules, pool_) {
        // Tokens starting with byte b end where those starting with a later byte begin.
        const auto& sorted = vocab_.sorted_tokens();
        first_byte_end_.fill(0);
        for (std::size_t i = 0; i < sorted.size(); ++i) {
            auto b = static_cast<std::uint8_t>(vocab_.token_bytes(sorted[i])[0]);
            first_byte_end_[b] = static_cast<std::uint32_t>(i + 1);
        }
        for (int b = 1; b < 256; ++b) {
            first_byte_end_[b] = std::max(first_byte_end_[b], first_byte_end_[b - 1]);
        }
    }

    CompiledTables build() {
        CompiledTables t;
        t.words = mask_words(vocab_.size());
        t.state_table.assign(rules_.states.size(), -1);
        std::vector<char> live = reachable_rules(rules_);
        std::size_t longest = 0;
        for (std::int32_t id : vocab_.sorted_tokens()) {
            longest = std::max(longest, vocab_.token_bytes(id).size());
        }
        std::vector<std::int32_t> cls = equivalence_classes(rules_, longest + 1);
        std::unordered_map<std::int32_t, std::int32_t> table_of_class;
        for (std::size_t s = 0; s < rules_.states.size(); ++s) {
            if (!live[rules_.states[s].rule] || !rules_.reads_bytes(static_cast<std::int32_t>(s))) {
                continue;
            }
            auto known = table_of_class.find(cls[s]);
            if (known != table_of_class.end()) {
                t.state_table[s] = known->second;
                continue;
            }
            walk(static_cast<std::int32_t>(s));
            t.state_table[s] = static_cast<std::int32_t>(t.tables.size());
            table_of_class.emplace(cls[s], t.state_table[s]);
            store(t);
        }
        return t;
    }

  private:
    void walk(std::int32_t state) {
        const auto& sorted = vocab_.sorted_tokens();
        const auto& lcp = vocab_.sorted_lcp();
        const ByteSet& follow = rules_.follow[rules_.states[state].rule];
        if (levels_.empty()) levels_.resize(1);
        levels_[0].tops.assign(1, pool_.get(state, kContextParent));
        levels_[0].popped = false;
        levels_[0].uncertain = false;
        std::size_t valid = 0;  // levels_[0..valid] hold the previous token's prefix
        std::size_t n = sorted.size();
        std::size_t i = 0;
        while (i < n) {
            const std::string& bytes = vocab_.token_bytes(sorted[i]);
            std::size_t len = bytes.size();
            std::size_t d = std::min<std::size_t>(valid, i == 0 ? 0 : lcp[i]);
            if (levels_.size() < len + 1) levels_.resize(len + 1);
            bool pruned = false;
            for (; d < len; ++d) {
                Level& cur = levels_[d];
                Level& next = levels_[d + 1];
                auto b = static_cast<std::uint8_t>(bytes[d]);
                next.uncertain = cur.uncertain || (cur.popped && byte_set_has(follow, b));
                StepFlags flags;
                if (cur.tops.empty()) {
                    next.tops.clear();
                } else {
                    walker_.step(cur.tops, b, next.tops, flags);
                }
                next.popped = flags.context_popped;
                valid = d + 1;
                if (next.tops.empty() && !next.popped) {
                    // Nothing is left under bytes[0..d]: all of them share one verdict.
                    std::size_t end = i + 1;
                    if (d == 0) {
                        end = first_byte_end_[b];
                    } else {
                        while (end < n && static_cast<std::size_t>(lcp[end]) >= d + 1) ++end;
                    }
                    if (next.uncertain) {
                        for (; i < end; ++i) uncertain_.push_back(static_cast<std::int32_t>(i));
                    }
                    i = end;
                    pruned = true;
                    break;
                }
            }
            if (pruned) continue;
            const Level& last = levels_[len];
            if (!last.tops.empty() || last.popped) {
                accepted_.push_back(sorted[i]);
            } else if (last.uncertain) {
                uncertain_.push_back(static_cast<std::int32_t>(i));
            }
            ++i;
        }
    }

    void store(CompiledTables& t) {
        CompiledTables::StateTable table;
        table.dense = accepted_.size() > t.words;
        if (table.dense) {
            table.accepted_begin = static_cast<std::uint32_t>(t.dense_words.size());
            t.dense_words.resize(t.dense_words.size() + t.words, 0);
            for (std::int32_t id : accepted_) {
                t.dense_words[table.accepted_begin + id / 32] |= 1u << (id % 32);
            }
        } else {
            table.accepted_begin = static_cast<std::uint32_t>(t.sparse_ids.size());
            table.accepted_count = static_cast<std::uint32_t>(accepted_.size());
            t.sparse_ids.insert(t.sparse_ids.end(), accepted_.begin(), accepted_.end());
        }
        table.uncertain_begin = static_cast<std::uint32_t>(t.uncertain.size());
        t.uncertain.insert(t.uncertain.end(), uncertain_.begin(), uncertain_.end());
        table.uncertain_end = static_cast<std::uint32_t>(t.uncertain.size());
        t.tables.push_back(table);
        accepted_.clear();
        uncertain_.clear();
    }

    const RuleSet& rules_;
    const Vocabulary& vocab_;
    NodePool pool_;
    StackWalker walker_;
    std::vector<Level> levels_;
    std::vector<std::int32_t> accepted_;   // token ids, of the state being walked
    std::vector<std::int32_t> uncertain_;  // positions in sorted_tokens(), ascending
    std::array<std::uint32_t, 256> first_byte_end_{};
};

}  // namespace

std::shared_ptr<const CompiledGrammar> CompiledGrammar::compile(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab) {
    Timer timer;
    auto tables = std::make_shared<CompiledTables>(TableBuilder(grammar->rules(), *vocab).build());
    double ms = timer.millis();
    return std::make_shared<const CompiledGrammar>(std::move(grammar), std::move(vocab),
                                                   std::move(tables), ms);
}

}  // namespace inferscale::grammar
