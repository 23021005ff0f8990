#pragma once
// SubwordModel: the tokenizer.json "model" stage, which turns one pre-tokenized piece into
// token ids over a fixed vocabulary (BpeModel, WordPieceModel).

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace inferscale::tokenizer {

class SubwordModel {
  public:
    virtual ~SubwordModel() = default;
    // Appends the ids of `word` (valid UTF-8) to `out`.
    virtual void encode(std::string_view word, std::vector<std::int32_t>& out) const = 0;
    virtual std::optional<std::int32_t> token_to_id(std::string_view text) const = 0;
    // Empty string_view for ids outside the vocabulary.
    virtual std::string_view id_to_token(std::int32_t id) const = 0;
    virtual std::int64_t size() const = 0;
};

}  // namespace inferscale::tokenizer
