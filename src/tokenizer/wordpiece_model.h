#pragma once
// WordPieceModel: BERT's greedy longest-match-first subword split. A word is cut into the
// longest vocabulary prefix, then the longest "##"-prefixed continuation, and so on; a word with
// a part no token covers, or longer than max_input_chars_per_word characters, is one [UNK]
// (HF tokenizers' WordPiece).

#include <string>
#include <unordered_map>

#include "tokenizer/subword_model.h"

namespace inferscale::tokenizer {

class WordPieceModel final : public SubwordModel {
  public:
    // `tokens` is the vocabulary as id -> text; ids are dense. `unk_id` must be one of them.
    WordPieceModel(std::vector<std::string> tokens, std::int32_t unk_id,
                   std::string continuing_prefix, std::size_t max_input_chars_per_word);

    void encode(std::string_view word, std::vector<std::int32_t>& out) const override;
    std::optional<std::int32_t> token_to_id(std::string_view text) const override;
    std::string_view id_to_token(std::int32_t id) const override;
    std::int64_t size() const override { return static_cast<std::int64_t>(tokens_.size()); }

  private:
    std::vector<std::string> tokens_;
    std::unordered_map<std::string, std::int32_t> ids_;
    std::int32_t unk_id_;
    std::string prefix_;
    std::size_t max_chars_;
};

}  // namespace inferscale::tokenizer
