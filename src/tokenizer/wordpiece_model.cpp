#include "tokenizer/wordpiece_model.h"

#include "base/check.h"
#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {

WordPieceModel::WordPieceModel(std::vector<std::string> tokens, std::int32_t unk_id,
                               std::string continuing_prefix, std::size_t max_input_chars_per_word)
    : tokens_(std::move(tokens)),
      unk_id_(unk_id),
      prefix_(std::move(continuing_prefix)),
      max_chars_(max_input_chars_per_word) {
    IS_CHECK(unk_id_ >= 0 && unk_id_ < size());
    ids_.reserve(tokens_.size());
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        ids_.emplace(tokens_[i], static_cast<std::int32_t>(i));  // first id wins on duplicates
    }
}

void WordPieceModel::encode(std::string_view word, std::vector<std::int32_t>& out) const {
    // Character boundaries: the greedy match shrinks a candidate one character at a time.
    std::vector<std::size_t> bounds;
    for (std::size_t pos = 0; pos < word.size();) {
        bounds.push_back(pos);
        char32_t cp = 0;
        const std::size_t n = utf8_sequence_at(word, pos, &cp);
        pos += n == 0 ? 1 : n;
    }
    if (bounds.size() > max_chars_) {
        out.push_back(unk_id_);
        return;
    }
    bounds.push_back(word.size());
    const std::size_t first = out.size();
    std::string candidate;
    std::size_t start = 0;  // index into bounds
    while (start + 1 < bounds.size()) {
        std::size_t end = bounds.size() - 1;
        std::int32_t found = -1;
        for (; end > start; --end) {
            candidate.assign(start > 0 ? prefix_ : std::string());
            candidate.append(word.substr(bounds[start], bounds[end] - bounds[start]));
            const auto it = ids_.find(candidate);
            if (it != ids_.end()) {
                found = it->second;
                break;
            }
        }
        if (found < 0) {
            out.resize(first);
            out.push_back(unk_id_);
            return;
        }
        out.push_back(found);
        start = end;
    }
}

std::optional<std::int32_t> WordPieceModel::token_to_id(std::string_view text) const {
    const auto it = ids_.find(std::string(text));
    if (it == ids_.end()) return std::nullopt;
    return it->second;
}

std::string_view WordPieceModel::id_to_token(std::int32_t id) const {
    if (id < 0 || id >= size()) return {};
    return tokens_[static_cast<std::size_t>(id)];
}

}  // namespace inferscale::tokenizer
