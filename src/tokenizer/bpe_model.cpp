#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {
namespace {

std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
}

struct Candidate {
    double priority;  // higher merges first
    std::int32_t left, right;
    std::uint32_t left_end, right_end;  // to detect stale entries after neighbouring merges
    std::int32_t merged;
    bool operator<(const Candidate& o) const {
        if (priority != o.priority) return priority < o.priority;
        return left > o.left;  // ties: leftmost first
    }
};

}  // namespace

BpeModel::BpeModel(std::vector<std::string> tokens, Mode mode)
    : mode_(mode), tokens_(std::move(tokens)) {
    ids_.reserve(tokens_.size());
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        ids_.emplace(tokens_[i], static_cast<std::int32_t>(i));  // first id wins on duplicates
    }
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        auto it = ids_.find(name);
        byte_ids_[b] = it == ids_.end() ? -1 : it->second;
    }
}

Status BpeModel::add_merge(std::string_view left, std::string_view right) {
    auto l = ids_.find(std::string(left));
    auto r = ids_.find(std::string(right));
    auto m = ids_.find(std::string(left) + std::string(right));
    if (l == ids_.end() || r == ids_.end() || m == ids_.end()) {
        return make_error("merge '" + std::string(left) + " " + std::string(right) +
                          "' uses a token that is not in the vocabulary");
    }
    const auto rank = static_cast<std::int32_t>(merges_.size());
    merges_.emplace(pair_key(l->second, r->second), std::make_pair(rank, m->second));
    return {};
}

void BpeModel::set_scores(std::vector<float> scores, std::vector<bool> mergeable) {
    scores_ = std::move(scores);
    mergeable_ = std::move(mergeable);
}

std::optional<std::int32_t> BpeModel::token_to_id(std::string_view text) const {
    auto it = ids_.find(std::string(text));
    if (it == ids_.end()) return std::nullopt;
    return it->second;
}

std::string_view BpeModel::id_to_token(std::int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) return {};
    return tokens_[static_cast<std::size_t>(id)];
}

std::vector<BpeModel::Symbol> BpeModel::initial_symbols(std::string_view word) const {
    std::vector<Symbol> symbols;
    auto push = [&](std::int32_t id, std::size_t begin, std::size_t end, bool unknown) {
        if (unknown && fuse_unk_ && !symbols.empty() && symbols.back().unknown) {
            symbols.back().end = static_cast<std::uint32_t>(end);
            return;
        }
        symbols.push_back({id, static_cast<std::uint32_t>(begin), static_cast<std::uint32_t>(end),
                           0, 0, unknown});
    };
    std::size_t pos = 0;
    while (pos < word.size()) {
        char32_t cp = 0;
        std::size_t n = utf8_sequence_at(word, pos, &cp);
        if (n == 0) n = 1;
        const std::string_view ch = word.substr(pos, n);
        auto it = ids_.find(std::string(ch));
        if (it != ids_.end()) {
            push(it->second, pos, pos + n, false);
        } else if (mode_ == Mode::Scores) {
            push(-1, pos, pos + n, false);  // may still merge; byte fallback at the end
        } else {
            bool all_bytes = byte_fallback_;
            for (std::size_t i = 0; all_bytes && i < n; ++i) {
                all_bytes = byte_ids_[static_cast<unsigned char>(ch[i])] >= 0;
            }
            if (all_bytes) {
                for (std::size_t i = 0; i < n; ++i) {
                    push(byte_ids_[static_cast<unsigned char>(ch[i])], pos + i, pos + i + 1, false);
                }
            } else if (unk_id_ >= 0) {
                push(unk_id_, pos, pos + n, true);
            }
        }
        pos += n;
    }
    for (std::size_t i = 0; i < symbols.size(); ++i) {
        symbols[i].prev = static_cast<std::int32_t>(i) - 1;
        symbols[i].next = i + 1 < symbols.size() ? static_cast<std::int32_t>(i + 1) : -1;
    }
    return symbols;
}

bool BpeModel::pair_priority(std::string_view word, const Symbol& a, const Symbol& b,
                             double* priority, std::int32_t* merged) const {
    if (mode_ == Mode::MergeRanks) {
        if (a.id < 0 || b.id < 0) return false;
        auto it = merges_.find(pair_key(a.id, b.id));
        if (it == merges_.end()) return false;
        *priority = -static_cast<double>(it->second.first);
        *merged = it->second.second;
        return true;
    }
    auto it = ids_.find(std::string(word.substr(a.begin, b.end - a.begin)));
    if (it == ids_.end()) return false;
    const auto id = static_cast<std::size_t>(it->second);
    if (id < mergeable_.size() && !mergeable_[id]) return false;
    *priority = id < scores_.size() ? scores_[id] : 0.0;
    *merged = it->second;
    return true;
}

void BpeModel::merge_symbols(std::string_view word, std::vector<Symbol>& symbols) const {
    std::priority_queue<Candidate> queue;
    auto consider = [&](std::int32_t left, std::int32_t right) {
        if (left < 0 || right < 0) return;
        const Symbol& a = symbols[static_cast<std::size_t>(left)];
        const Symbol& b = symbols[static_cast<std::size_t>(right)];
        double priority = 0;
        std::int32_t merged = -1;
        if (pair_priority(word, a, b, &priority, &merged)) {
            queue.push({priority, left, right, a.end, b.end, merged});
        }
    };
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
        consider(static_cast<std::int32_t>(i), static_cast<std::int32_t>(i + 1));
    }
    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& a = symbols[static_cast<std::size_t>(c.left)];
        if (a.begin == a.end || a.next != c.right || a.end != c.left_end) continue;
        Symbol& b = symbols[static_cast<std::size_t>(c.right)];
        if (b.end != c.right_end) continue;
        a.id = c.merged;
        a.end = b.end;
        a.unknown = false;
        a.next = b.next;
        if (b.next >= 0) symbols[static_cast<std::size_t>(b.next)].prev = c.left;
        b.begin = b.end;  // marks b as merged away
        consider(a.prev, c.left);
        consider(c.left, a.next);
    }
}

void BpeModel::encode(std::string_view word, std::vector<std::int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges_) {
        auto it = ids_.find(std::string(word));
        if (it != ids_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    std::vector<Symbol> symbols = initial_symbols(word);
    merge_symbols(word, symbols);
    for (std::int32_t i = symbols.empty() ? -1 : 0; i >= 0;
         i = symbols[static_cast<std::size_t>(i)].next) {
        const Symbol& s = symbols[static_cast<std::size_t>(i)];
        if (s.id >= 0) {
            out.push_back(s.id);
            continue;
        }
        // Scores mode: a character with no token of its own.
        for (std::uint32_t k = s.begin; k < s.end; ++k) {
            const std::int32_t byte_id = byte_ids_[static_cast<unsigned char>(word[k])];
            if (byte_id >= 0) {
                out.push_back(byte_id);
            } else if (unk_id_ >= 0) {
                out.push_back(unk_id_);
                break;
            }
        }
    }
}

}  // namespace inferscale::tokenizer
