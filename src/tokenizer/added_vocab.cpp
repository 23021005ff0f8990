#include "tokenizer/added_vocab.h"

#include <algorithm>
#include <cctype>

#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {
namespace {

// Code point ending just before byte `pos` (text is valid UTF-8).
char32_t char_before(std::string_view text, std::size_t pos, std::size_t* start) {
    std::size_t s = pos - 1;
    while (s > 0 && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
    char32_t cp = 0;
    if (utf8_sequence_at(text, s, &cp) == 0) cp = 0;
    *start = s;
    return cp;
}

bool is_word_char(char32_t cp) {
    // HF's single_word check uses "is alphanumeric or underscore"; ASCII plus non-space
    // non-ASCII letters covers the tokens models actually mark single_word.
    return cp == '_' || (cp < 128 && std::isalnum(static_cast<int>(cp))) ||
           (cp >= 128 && !is_unicode_whitespace(cp));
}

}  // namespace

void AddedVocab::add(AddedToken token) {
    if (token.content.empty()) return;
    auto existing = by_content_.find(token.content);
    if (existing != by_content_.end()) {
        tokens_[existing->second] = token;
        match_text_[existing->second] = token.content;
        by_id_[token.id] = existing->second;
        return;
    }
    by_id_[token.id] = tokens_.size();
    by_content_[token.content] = tokens_.size();
    match_text_.push_back(token.content);
    tokens_.push_back(std::move(token));
}

void AddedVocab::set_match_text(std::int32_t index, std::string text) {
    match_text_[static_cast<std::size_t>(index)] = std::move(text);
}

const AddedToken* AddedVocab::find_by_id(std::int32_t id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocab::find_by_content(std::string_view content) const {
    auto it = by_content_.find(std::string(content));
    return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocab::has_normalized_tokens() const {
    for (const AddedToken& t : tokens_) {
        if (t.normalized) return true;
    }
    return false;
}

std::vector<Segment> AddedVocab::split(std::string_view text, bool normalized,
                                       bool parse_special) const {
    std::vector<Segment> out;
    std::size_t start_offset = 0;  // end of the last emitted piece
    std::size_t pos = 0;
    while (pos < text.size()) {
        // Leftmost-longest: the longest candidate token starting at pos.
        std::size_t best = tokens_.size();
        std::size_t best_len = 0;
        for (std::size_t i = 0; i < tokens_.size(); ++i) {
            const AddedToken& t = tokens_[i];
            if (t.normalized != normalized) continue;
            const std::string& m = match_text_[i];
            if (m.size() > best_len && text.compare(pos, m.size(), m) == 0) {
                best = i;
                best_len = m.size();
            }
        }
        if (best == tokens_.size()) {
            ++pos;
            continue;
        }
        const AddedToken& t = tokens_[best];
        std::size_t begin = pos, end = pos + best_len;
        pos = end;
        if (t.special && !parse_special) continue;
        if (t.single_word) {
            std::size_t unused = 0;
            char32_t after = 0;
            const bool left_ok = begin == 0 || !is_word_char(char_before(text, begin, &unused));
            const bool right_ok = end == text.size() || utf8_sequence_at(text, end, &after) == 0 ||
                                  !is_word_char(after);
            if (!left_ok || !right_ok) continue;
        }
        if (t.lstrip) {
            std::size_t s = begin;
            while (s > start_offset) {
                std::size_t prev = 0;
                if (!is_unicode_whitespace(char_before(text, s, &prev))) break;
                s = prev;
            }
            begin = s;
        }
        if (t.rstrip) {
            char32_t cp = 0;
            std::size_t n = 0;
            while (end < text.size() && (n = utf8_sequence_at(text, end, &cp)) != 0 &&
                   is_unicode_whitespace(cp)) {
                end += n;
            }
            pos = std::max(pos, end);
        }
        if (begin > start_offset) {
            out.push_back(
                {std::string(text.substr(start_offset, begin - start_offset)), -1, start_offset});
        }
        out.push_back({std::string(text.substr(begin, end - begin)), t.id, begin});
        start_offset = end;
    }
    if (start_offset < text.size()) {
        out.push_back({std::string(text.substr(start_offset)), -1, start_offset});
    }
    return out;
}

}  // namespace inferscale::tokenizer
