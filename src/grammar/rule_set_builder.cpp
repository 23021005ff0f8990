// AstGrammar -> RuleSet: Thompson construction per rule (inlining small rules), epsilon removal,
// subset construction (kept only while small), then the checks and tables the matcher needs:
// left recursion, nullable rules, one-byte follow sets. The automata's sizes are counted from the
// expressions before anything is built, so a short grammar whose nested repetitions multiply
// (`x+++...`, `((x{0,9}){0,9})...`) is refused at once rather than after building millions of
// states.

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "grammar/rule_set.h"
#include "grammar/utf8_ranges.h"

namespace inferscale::grammar {
namespace {

constexpr int kInlineMaxSize = 256;
// Limits for the whole grammar, not per rule (a grammar of many rules costs their sum).
constexpr std::size_t kMaxDfaStates = 4096;  // per rule
constexpr std::size_t kMaxStates = 1 << 20;
constexpr std::size_t kMaxEpsilonWork = 1 << 24;
constexpr std::size_t kMaxDfaWork = 1 << 24;

// A rule automaton under construction (local state ids).
struct Nfa {
    struct S {
        std::vector<RuleSet::ByteEdge> bytes;
        std::vector<RuleSet::Call> calls;
        std::vector<int> eps;
        bool final = false;
    };
    std::vector<S> s;
    int add() {
        s.emplace_back();
        return static_cast<int>(s.size()) - 1;
    }
};

// How big an expression is once expanded (saturating), and whether it repeats without bound.
struct Size {
    long size = 0;
    bool unbounded = false;
};

class Builder {
  public:
    explicit Builder(const AstGrammar& ast) : ast_(ast) {}

    Result<RuleSet> build() {
        analyze_rules();
        RuleSet rs;
        int n = static_cast<int>(ast_.rules.size());
        rs.rule_start.assign(n, -1);
        rs.rule_names.resize(n);
        for (int r = 0; r < n; ++r) rs.rule_names[r] = ast_.rules[r].name;
        std::size_t total = 0;
        for (int r = 0; r < n; ++r) {
            std::size_t states = add_sat(1, count_states(ast_.rules[r].body));
            total = add_sat(total, states);
            if (states > kMaxStates) {
                return make_error(ErrorKind::InvalidArgument,
                                  "grammar rule `" + ast_.rules[r].name + "` is too large");
            }
            if (total > kMaxStates) {
                return make_error(ErrorKind::InvalidArgument, "grammar is too large");
            }
        }
        for (int r = 0; r < n; ++r) {
            Nfa nfa;
            int start = nfa.add();
            int end = build_expr(ast_.rules[r].body, start, nfa);
            nfa.s[end].final = true;
            auto without_epsilons = remove_epsilons(nfa);
            if (!without_epsilons) {
                return make_error(ErrorKind::InvalidArgument,
                                  "grammar rule `" + ast_.rules[r].name + "` is too large");
            }
            append_rule(r, std::move(*without_epsilons), rs);
        }
        rs.root = ast_.root;
        IS_RETURN_IF_ERROR(check_left_recursion(rs));
        compute_follow(rs);
        return rs;
    }

  private:
    static constexpr std::size_t kCountMax = std::size_t{1} << 40;

    static std::size_t add_sat(std::size_t a, std::size_t b) { return std::min(a + b, kCountMax); }
    static std::size_t mul_sat(std::size_t a, std::size_t times) {
        return times != 0 && a > kCountMax / times ? kCountMax : a * times;
    }

    // The size of a rule's body, each rule's once (a chain of rules each calling the previous
    // twice would otherwise take exponential time); a rule reached again while its own size is
    // being computed is recursive, so unbounded.
    Size rule_size(int rule, std::vector<int>& visiting) {
        if (rule_size_[rule]) return *rule_size_[rule];
        if (std::find(visiting.begin(), visiting.end(), rule) != visiting.end()) {
            return {1 << 20, true};
        }
        visiting.push_back(rule);
        Size s = expr_size(ast_.rules[rule].body, visiting);
        visiting.pop_back();
        rule_size_[rule] = s;
        return s;
    }

    Size expr_size(const Expr& e, std::vector<int>& visiting) {
        switch (e.kind) {
            case Expr::Kind::Empty:
                return {0, false};
            case Expr::Kind::Literal:
                return {static_cast<long>(e.text.size()), false};
            case Expr::Kind::Class:
                return {static_cast<long>(e.ranges.size()) * 2, false};
            case Expr::Kind::Ref:
                return rule_size(e.rule, visiting);
            case Expr::Kind::Seq:
            case Expr::Kind::Alt: {
                Size total;
                for (const Expr& c : e.children) {
                    Size s = expr_size(c, visiting);
                    total.size = std::min<long>(total.size + s.size, 1 << 20);
                    total.unbounded |= s.unbounded;
                }
                return total;
            }
            case Expr::Kind::Repeat: {
                Size s = expr_size(e.children[0], visiting);
                long times = e.max < 0 ? std::max(e.min, 1) : e.max;
                return {std::min<long>(s.size * times, 1 << 20), s.unbounded || e.max < 0};
            }
        }
        return {};
    }

    // Which rules are inlined at their call sites: not recursive, bounded and small.
    void analyze_rules() {
        int n = static_cast<int>(ast_.rules.size());
        inline_.assign(n, false);
        rule_size_.assign(n, std::nullopt);
        rule_states_.assign(n, std::nullopt);
        for (int r = 0; r < n; ++r) {
            std::vector<int> visiting;
            Size s = rule_size(r, visiting);
            inline_[r] = !s.unbounded && s.size <= kInlineMaxSize && r != ast_.root;
        }
    }

    // The byte-range sequences of a class's UTF-8 encodings, worked out once per class.
    const std::vector<std::vector<ByteRange>>& class_sequences(const Expr& e) {
        auto [it, added] = class_sequences_.try_emplace(&e);
        if (added) {
            for (const CodeRange& range : e.ranges) {
                auto seqs = utf8_sequences(range.first, range.second);
                it->second.insert(it->second.end(), std::make_move_iterator(seqs.begin()),
                                  std::make_move_iterator(seqs.end()));
            }
        }
        return it->second;
    }

    // How many states build_expr(e) adds (saturating at kCountMax), each inlined rule's counted
    // once.
    std::size_t count_states(const Expr& e) {
        switch (e.kind) {
            case Expr::Kind::Empty:
                return 0;
            case Expr::Kind::Literal:
                return e.text.size();
            case Expr::Kind::Class: {
                std::size_t n = 1;
                for (const auto& seq : class_sequences(e)) n += seq.size() - 1;
                return n;
            }
            case Expr::Kind::Ref: {
                if (!inline_[e.rule]) return 1;
                auto& n = rule_states_[e.rule];
                if (!n) n = add_sat(1, count_states(ast_.rules[e.rule].body));
                return *n;
            }
            case Expr::Kind::Seq: {
                std::size_t n = 0;
                for (const Expr& c : e.children) n = add_sat(n, count_states(c));
                return n;
            }
            case Expr::Kind::Alt: {
                std::size_t n = 1;
                for (const Expr& c : e.children) n = add_sat(n, 1 + count_states(c));
                return n;
            }
            case Expr::Kind::Repeat: {
                std::size_t copy = 1 + count_states(e.children[0]);
                auto copies = static_cast<std::size_t>(e.max < 0 ? e.min + 1 : e.max);
                return add_sat(1, mul_sat(copy, copies));
            }
        }
        return 0;
    }

    void add_class(const Expr& e, int from, int to, Nfa& nfa) {
        for (const auto& seq : class_sequences(e)) {
            int cur = from;
            for (std::size_t i = 0; i < seq.size(); ++i) {
                int next = i + 1 == seq.size() ? to : nfa.add();
                nfa.s[cur].bytes.push_back({seq[i].first, seq[i].second, next});
                cur = next;
            }
        }
    }

    // Adds `e` starting at state `from`; returns the state where it ends.
    int build_expr(const Expr& e, int from, Nfa& nfa) {
        switch (e.kind) {
            case Expr::Kind::Empty:
                return from;
            case Expr::Kind::Literal: {
                int cur = from;
                for (char c : e.text) {
                    int next = nfa.add();
                    auto b = static_cast<std::uint8_t>(c);
                    nfa.s[cur].bytes.push_back({b, b, next});
                    cur = next;
                }
                return cur;
            }
            case Expr::Kind::Class: {
                int to = nfa.add();
                add_class(e, from, to, nfa);
                return to;
            }
            case Expr::Kind::Ref: {
                if (inline_[e.rule]) {
                    int start = nfa.add();
                    nfa.s[from].eps.push_back(start);
                    return build_expr(ast_.rules[e.rule].body, start, nfa);
                }
                int to = nfa.add();
                nfa.s[from].calls.push_back({e.rule, to});
                return to;
            }
            case Expr::Kind::Seq: {
                int cur = from;
                for (const Expr& c : e.children) cur = build_expr(c, cur, nfa);
                return cur;
            }
            case Expr::Kind::Alt: {
                int to = nfa.add();
                for (const Expr& c : e.children) {
                    int start = nfa.add();
                    nfa.s[from].eps.push_back(start);
                    nfa.s[build_expr(c, start, nfa)].eps.push_back(to);
                }
                return to;
            }
            case Expr::Kind::Repeat: {
                const Expr& child = e.children[0];
                int cur = from;
                for (int i = 0; i < e.min; ++i) {
                    int start = nfa.add();
                    nfa.s[cur].eps.push_back(start);
                    cur = build_expr(child, start, nfa);
                }
                if (e.max < 0) {
                    int loop = nfa.add();
                    nfa.s[cur].eps.push_back(loop);
                    int start = nfa.add();
                    nfa.s[loop].eps.push_back(start);
                    nfa.s[build_expr(child, start, nfa)].eps.push_back(loop);
                    return loop;
                }
                int to = nfa.add();
                nfa.s[cur].eps.push_back(to);
                for (int i = e.min; i < e.max; ++i) {
                    int start = nfa.add();
                    nfa.s[cur].eps.push_back(start);
                    cur = build_expr(child, start, nfa);
                    nfa.s[cur].eps.push_back(to);
                }
                return to;
            }
        }
        return from;
    }

    // The same language without epsilon edges, state 0 the start, unreachable states dropped;
    // nullopt when the grammar's rules together take more than kMaxEpsilonWork steps (nested
    // loops such as `x+++...` or a chain of optional items `("a"?){0,2500}` make closures span
    // much of the rule).
    std::optional<Nfa> remove_epsilons(const Nfa& in) {
        std::size_t& work = epsilon_work_;
        int n = static_cast<int>(in.s.size());
        std::vector<int> order;  // new id -> old id
        std::vector<int> id(n, -1);
        Nfa out;
        auto visit = [&](int s) {
            if (id[s] < 0) {
                id[s] = static_cast<int>(order.size());
                order.push_back(s);
                out.add();
            }
            return id[s];
        };
        visit(0);
        std::vector<int> stack;
        std::vector<int> closure;  // the states `seen` marks, cleared one by one (not all n)
        std::vector<char> seen(n);
        for (std::size_t i = 0; i < order.size(); ++i) {
            int s = order[i];
            for (int c : closure) seen[c] = 0;
            closure.assign(1, s);
            stack.assign(1, s);
            seen[s] = 1;
            Nfa::S merged;
            while (!stack.empty()) {
                int c = stack.back();
                stack.pop_back();
                const Nfa::S& cs = in.s[c];
                work += 1 + cs.bytes.size() + cs.calls.size() + cs.eps.size();
                if (work > kMaxEpsilonWork) return std::nullopt;
                merged.final |= cs.final;
                merged.bytes.insert(merged.bytes.end(), cs.bytes.begin(), cs.bytes.end());
                merged.calls.insert(merged.calls.end(), cs.calls.begin(), cs.calls.end());
                for (int e : cs.eps) {
                    if (!seen[e]) {
                        seen[e] = 1;
                        closure.push_back(e);
                        stack.push_back(e);
                    }
                }
            }
            for (auto& b : merged.bytes) b.target = visit(b.target);
            for (auto& c : merged.calls) c.target = visit(c.target);
            out.s[i] = std::move(merged);
        }
        return out;
    }

    // Subset construction; the NFA itself when the DFA would be too large or the grammar's rules
    // together take more than kMaxDfaWork steps to build (sets of many NFA states each).
    Nfa determinize(const Nfa& nfa) {
        std::size_t& work = dfa_work_;
        std::map<std::vector<int>, int> ids;
        std::vector<std::vector<int>> sets;
        Nfa dfa;
        auto id_of = [&](std::vector<int> set) {
            std::sort(set.begin(), set.end());
            set.erase(std::unique(set.begin(), set.end()), set.end());
            auto it = ids.find(set);
            if (it != ids.end()) return it->second;
            int id = dfa.add();
            ids.emplace(set, id);
            sets.push_back(std::move(set));
            return id;
        };
        id_of({0});
        std::vector<std::vector<int>> by_byte(256);
        for (std::size_t d = 0; d < sets.size(); ++d) {
            if (sets.size() > kMaxDfaStates) return nfa;
            std::vector<int> set = sets[d];
            for (auto& v : by_byte) v.clear();
            std::map<int, std::vector<int>> by_rule;
            bool final = false;
            for (int s : set) {
                final |= nfa.s[s].final;
                work += 1 + nfa.s[s].calls.size();
                for (const auto& e : nfa.s[s].bytes) work += e.hi - e.lo + 1;
                if (work > kMaxDfaWork) return nfa;
                for (const auto& e : nfa.s[s].bytes) {
                    for (int b = e.lo; b <= e.hi; ++b) by_byte[b].push_back(e.target);
                }
                for (const auto& c : nfa.s[s].calls) by_rule[c.rule].push_back(c.target);
            }
            Nfa::S out;
            out.final = final;
            int b = 0;
            while (b < 256) {
                if (by_byte[b].empty()) {
                    ++b;
                    continue;
                }
                int hi = b;
                while (hi + 1 < 256 && by_byte[hi + 1] == by_byte[b]) ++hi;
                int target = id_of(by_byte[b]);
                out.bytes.push_back(
                    {static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(hi), target});
                b = hi + 1;
            }
            for (auto& [rule, targets] : by_rule) out.calls.push_back({rule, id_of(targets)});
            dfa.s[d] = std::move(out);
        }
        return dfa;
    }

    void append_rule(int rule, const Nfa& eps_free, RuleSet& rs) {
        Nfa nfa = determinize(eps_free);
        auto base = static_cast<std::int32_t>(rs.states.size());
        rs.rule_start[rule] = base;
        for (const Nfa::S& s : nfa.s) {
            RuleSet::State st;
            st.rule = rule;
            st.final = s.final;
            std::vector<RuleSet::ByteEdge> edges = s.bytes;
            std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
                return a.target != b.target ? a.target < b.target : a.lo < b.lo;
            });
            st.byte_begin = static_cast<std::uint32_t>(rs.byte_edges.size());
            for (const auto& e : edges) {
                auto& edges_out = rs.byte_edges;
                if (edges_out.size() > st.byte_begin &&
                    edges_out.back().target == base + e.target && edges_out.back().hi + 1 >= e.lo) {
                    edges_out.back().hi = std::max(edges_out.back().hi, e.hi);
                } else {
                    edges_out.push_back({e.lo, e.hi, base + e.target});
                }
                for (int b = e.lo; b <= e.hi; ++b)
                    byte_set_add(st.bytes, static_cast<std::uint8_t>(b));
            }
            st.byte_end = static_cast<std::uint32_t>(rs.byte_edges.size());
            std::set<std::pair<int, int>> calls;
            for (const auto& c : s.calls) calls.emplace(c.rule, base + c.target);
            st.call_begin = static_cast<std::uint32_t>(rs.calls.size());
            for (const auto& [r, t] : calls) rs.calls.push_back({r, t});
            st.call_end = static_cast<std::uint32_t>(rs.calls.size());
            st.pure_end = st.final && st.byte_begin == st.byte_end && st.call_begin == st.call_end;
            rs.states.push_back(st);
        }
    }

    // A rule that can call itself before reading a byte would make the stack grow forever.
    Status check_left_recursion(const RuleSet& rs) {
        int n = static_cast<int>(rs.rule_start.size());
        std::vector<char> nullable(n, 0);
        // Fixpoint: a rule is nullable if a final state is reachable through nullable calls.
        auto reach_final = [&](int r, std::vector<int>* left_calls) {
            std::vector<int> stack{rs.rule_start[r]};
            std::set<int> seen{rs.rule_start[r]};
            bool final = false;
            while (!stack.empty()) {
                int s = stack.back();
                stack.pop_back();
                const auto& st = rs.states[s];
                final |= st.final;
                for (auto c = st.call_begin; c < st.call_end; ++c) {
                    if (left_calls) left_calls->push_back(rs.calls[c].rule);
                    if (nullable[rs.calls[c].rule] && seen.insert(rs.calls[c].target).second) {
                        stack.push_back(rs.calls[c].target);
                    }
                }
            }
            return final;
        };
        for (bool changed = true; changed;) {
            changed = false;
            for (int r = 0; r < n; ++r) {
                if (!nullable[r] && reach_final(r, nullptr)) {
                    nullable[r] = 1;
                    changed = true;
                }
            }
        }
        std::vector<std::vector<int>> left(n);
        for (int r = 0; r < n; ++r) reach_final(r, &left[r]);
        // Cycle search in the left-call graph.
        std::vector<int> color(n, 0);
        std::function<int(int)> dfs = [&](int r) -> int {
            color[r] = 1;
            for (int t : left[r]) {
                if (color[t] == 1) return t;
                if (color[t] == 0) {
                    int found = dfs(t);
                    if (found >= 0) return found;
                }
            }
            color[r] = 2;
            return -1;
        };
        for (int r = 0; r < n; ++r) {
            if (color[r] == 0) {
                int found = dfs(r);
                if (found >= 0) {
                    return make_error(
                        ErrorKind::InvalidArgument,
                        "grammar rule `" + ast_.rules[found].name + "` is left-recursive");
                }
            }
        }
        nullable_ = std::move(nullable);
        return {};
    }

    // first(s): bytes readable from state s; empty(s): s can end its rule without a byte.
    void compute_follow(RuleSet& rs) {
        int ns = static_cast<int>(rs.states.size());
        int nr = static_cast<int>(rs.rule_start.size());
        std::vector<ByteSet> first(ns);
        std::vector<char> empty(ns, 0);
        auto merge = [](ByteSet& into, const ByteSet& from) {
            bool changed = false;
            for (int i = 0; i < 4; ++i) {
                std::uint64_t v = into[i] | from[i];
                changed |= v != into[i];
                into[i] = v;
            }
            return changed;
        };
        for (bool changed = true; changed;) {
            changed = false;
            for (int s = 0; s < ns; ++s) {
                const auto& st = rs.states[s];
                changed |= merge(first[s], st.bytes);
                if (st.final && !empty[s]) empty[s] = 1, changed = true;
                for (auto c = st.call_begin; c < st.call_end; ++c) {
                    int start = rs.rule_start[rs.calls[c].rule];
                    int target = rs.calls[c].target;
                    changed |= merge(first[s], first[start]);
                    if (empty[start]) {
                        changed |= merge(first[s], first[target]);
                        if (empty[target] && !empty[s]) empty[s] = 1, changed = true;
                    }
                }
            }
        }
        rs.follow.assign(nr, ByteSet{});
        for (bool changed = true; changed;) {
            changed = false;
            for (int s = 0; s < ns; ++s) {
                const auto& st = rs.states[s];
                for (auto c = st.call_begin; c < st.call_end; ++c) {
                    int callee = rs.calls[c].rule;
                    int target = rs.calls[c].target;
                    changed |= merge(rs.follow[callee], first[target]);
                    if (empty[target]) changed |= merge(rs.follow[callee], rs.follow[st.rule]);
                }
            }
        }
    }

    const AstGrammar& ast_;
    std::vector<bool> inline_;
    std::vector<std::optional<Size>> rule_size_;
    std::size_t epsilon_work_ = 0;
    std::size_t dfa_work_ = 0;
    std::vector<std::optional<std::size_t>> rule_states_;  // inlined rules' state counts
    std::unordered_map<const Expr*, std::vector<std::vector<ByteRange>>> class_sequences_;
    std::vector<char> nullable_;
};

}  // namespace

Result<RuleSet> build_rule_set(const AstGrammar& ast) { return Builder(ast).build(); }

}  // namespace inferscale::grammar
