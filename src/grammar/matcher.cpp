// Matcher: the mask from the compiled tables of the current stack tops, plus the uncertain
// tokens of each top checked byte by byte against the full stacks (sharing the work of common
// prefixes, as the compile-time walk does).

#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "grammar/compiled_tables.h"
#include "grammar/rule_set.h"
#include "grammar/stack_state.h"

namespace inferscale::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)),
      state_(std::make_unique<StackState>(grammar_->grammar().rules())) {}

Matcher::~Matcher() = default;
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;

void Matcher::reset() {
    state_->reset();
    ended_ = false;
}

bool Matcher::can_end() const { return state_->can_end(); }

bool Matcher::finished() const { return ended_ || (state_->tops().empty() && state_->can_end()); }

namespace {

void set_bit(std::span<std::uint32_t> words, std::int32_t id) {
    words[static_cast<std::size_t>(id) / 32] |= 1u << (id % 32);
}
bool has_bit(std::span<const std::uint32_t> words, std::int32_t id) {
    return (words[static_cast<std::size_t>(id) / 32] >> (id % 32)) & 1;
}

}  // namespace

void Matcher::fill_next_token_mask(std::span<std::uint32_t> words) {
    const Vocabulary& vocab = grammar_->vocabulary();
    const CompiledTables& t = grammar_->tables();
    IS_CHECK(words.size() == mask_words(vocab.size())) << words.size();
    std::memset(words.data(), 0, words.size_bytes());
    if (state_->can_end()) {
        for (std::int32_t id : vocab.end_tokens()) set_bit(words, id);
    }
    if (ended_) return;
    const std::vector<std::int32_t>& tops = state_->tops();
    const std::vector<std::int32_t>& sorted = vocab.sorted_tokens();
    NodePool& pool = state_->pool();
    std::size_t g = 0;
    while (g < tops.size()) {
        std::int32_t s = pool.state(tops[g]);
        std::size_t g_end = g + 1;
        while (g_end < tops.size() && pool.state(tops[g_end]) == s) ++g_end;
        std::span<const std::int32_t> group(tops.data() + g, g_end - g);
        g = g_end;
        std::int32_t index = t.state_table[s];
        IS_CHECK(index >= 0) << "state " << s << " has no table";
        const CompiledTables::StateTable& table = t.tables[index];
        if (table.dense) {
            const std::uint32_t* src = t.dense_words.data() + table.accepted_begin;
            for (std::size_t w = 0; w < words.size(); ++w) words[w] |= src[w];
        } else {
            const std::int32_t* ids = t.sparse_ids.data() + table.accepted_begin;
            for (std::uint32_t k = 0; k < table.accepted_count; ++k) set_bit(words, ids[k]);
        }
        // The uncertain tokens, in byte order: levels[d] holds the stacks after d bytes of the
        // previous token, reused up to the common prefix.
        auto& levels = state_->levels;
        auto& ended = state_->level_ended;
        if (levels.empty()) {
            levels.resize(1);
            ended.resize(1);
        }
        levels[0].assign(group.begin(), group.end());
        ended[0] = 0;
        const std::string* prev = nullptr;
        for (std::uint32_t u = table.uncertain_begin; u < table.uncertain_end; ++u) {
            std::int32_t id = sorted[t.uncertain[u]];
            if (has_bit(words, id)) continue;
            const std::string& bytes = vocab.token_bytes(id);
            std::size_t d = 0;
            if (prev != nullptr) {
                std::size_t limit = std::min(prev->size(), bytes.size());
                while (d < limit && (*prev)[d] == bytes[d]) ++d;
            }
            if (levels.size() < bytes.size() + 1) {
                levels.resize(bytes.size() + 1);
                ended.resize(bytes.size() + 1);
            }
            for (; d < bytes.size(); ++d) {
                StepFlags flags;
                if (levels[d].empty()) {
                    levels[d + 1].clear();
                } else {
                    state_->walker().step(levels[d], static_cast<std::uint8_t>(bytes[d]),
                                          levels[d + 1], flags);
                }
                ended[d + 1] = flags.root_popped;
            }
            prev = &bytes;
            if (!levels[bytes.size()].empty() || ended[bytes.size()]) set_bit(words, id);
        }
    }
}

Status Matcher::accept_token(std::int32_t token) {
    const Vocabulary& vocab = grammar_->vocabulary();
    if (token < 0 || token >= vocab.size()) {
        return make_error(ErrorKind::InvalidArgument,
                          "token " + std::to_string(token) + " is out of range");
    }
    if (ended_) return make_error(ErrorKind::InvalidArgument, "the grammar has already ended");
    if (vocab.is_end_token(token)) {
        if (!state_->can_end()) {
            return make_error(ErrorKind::InvalidArgument,
                              "end token " + std::to_string(token) + " before the grammar can end");
        }
        ended_ = true;
        return {};
    }
    const std::string& bytes = vocab.token_bytes(token);
    if (vocab.is_special(token) || bytes.empty() || !state_->advance(bytes)) {
        return make_error(ErrorKind::InvalidArgument,
                          "token " + std::to_string(token) + " is not allowed by the grammar");
    }
    return {};
}

Status Matcher::accept_bytes(std::string_view bytes) {
    if (ended_) return make_error(ErrorKind::InvalidArgument, "the grammar has already ended");
    if (!state_->advance(bytes)) {
        return make_error(ErrorKind::InvalidArgument, "the grammar does not allow these bytes");
    }
    return {};
}

bool Matcher::token_allowed_slow(std::int32_t token) {
    const Vocabulary& vocab = grammar_->vocabulary();
    if (token < 0 || token >= vocab.size() || ended_) return false;
    if (vocab.is_end_token(token)) return state_->can_end();
    const std::string& bytes = vocab.token_bytes(token);
    if (vocab.is_special(token) || bytes.empty()) return false;
    std::vector<std::int32_t> tops = state_->tops();
    return state_->can_read(tops, bytes);
}

}  // namespace inferscale::grammar
