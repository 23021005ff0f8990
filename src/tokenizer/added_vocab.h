#pragma once
// AddedVocab: tokens matched literally in the text before any model runs (HF "added_tokens":
// special tokens such as <|im_start|> and user-added ones). Matching is leftmost-longest, and
// honours lstrip/rstrip/single_word/special the way HF's AddedVocabulary does.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace inferscale::tokenizer {

struct AddedToken {
    std::string content;
    std::int32_t id = -1;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
    bool single_word = false;
    bool normalized = false;  // matched on normalized text rather than raw text
};

// A run of text: either an added token (id >= 0) or plain text for the model (id == -1).
struct Segment {
    std::string text;
    std::int32_t id = -1;
    std::size_t offset = 0;  // byte offset of the segment in the text that was split
};

class AddedVocab {
  public:
    void add(AddedToken token);
    // Splits `text` on the tokens whose `normalized` flag equals `normalized`; special tokens
    // only when parse_special. `match_text` maps a token to the string searched for (its
    // normalized content for normalized tokens).
    std::vector<Segment> split(std::string_view text, bool normalized, bool parse_special) const;
    void set_match_text(std::int32_t index, std::string text);

    const std::vector<AddedToken>& tokens() const { return tokens_; }
    const AddedToken* find_by_id(std::int32_t id) const;
    const AddedToken* find_by_content(std::string_view content) const;
    bool has_normalized_tokens() const;

  private:
    std::vector<AddedToken> tokens_;
    std::vector<std::string> match_text_;  // per token
    std::unordered_map<std::int32_t, std::size_t> by_id_;
    std::unordered_map<std::string, std::size_t> by_content_;
};

}  // namespace inferscale::tokenizer
