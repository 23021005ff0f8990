#pragma once
// BpeModel: turns one pre-tokenized piece into token ids. Two merge orders:
//  - MergeRanks: HF tokenizers' BPE (merges applied lowest rank first, ties leftmost), with
//    optional byte_fallback (<0xNN> tokens), fuse_unk and ignore_merges.
//  - Scores: SentencePiece / llama.cpp SPM (merge the adjacent pair whose concatenation is a
//    vocab token with the highest score), unknown characters fall back to <0xNN> tokens.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "tokenizer/subword_model.h"

namespace inferscale::tokenizer {

class BpeModel final : public SubwordModel {
  public:
    enum class Mode { MergeRanks, Scores };

    // Takes the vocabulary as id -> text; ids are dense.
    BpeModel(std::vector<std::string> tokens, Mode mode);

    // MergeRanks mode: appends the next merge (its rank is the call order). Error when either
    // side or the concatenation is not in the vocabulary.
    Status add_merge(std::string_view left, std::string_view right);
    // Scores mode: per-token scores and which tokens may be produced by merging.
    void set_scores(std::vector<float> scores, std::vector<bool> mergeable);

    void set_unk_id(std::int32_t id) { unk_id_ = id; }
    void set_byte_fallback(bool on) { byte_fallback_ = on; }
    void set_fuse_unk(bool on) { fuse_unk_ = on; }
    void set_ignore_merges(bool on) { ignore_merges_ = on; }

    // Appends the ids of `word` (valid UTF-8) to `out`.
    void encode(std::string_view word, std::vector<std::int32_t>& out) const override;

    std::optional<std::int32_t> token_to_id(std::string_view text) const override;
    // Empty string_view for ids outside the vocabulary.
    std::string_view id_to_token(std::int32_t id) const override;
    std::int64_t size() const override { return static_cast<std::int64_t>(tokens_.size()); }

  private:
    struct Symbol {
        std::int32_t id;  // -1: a character with no token yet (Scores mode)
        std::uint32_t begin, end;
        std::int32_t prev, next;
        bool unknown;  // stands for unknown characters (fuse_unk)
    };
    std::vector<Symbol> initial_symbols(std::string_view word) const;
    void merge_symbols(std::string_view word, std::vector<Symbol>& symbols) const;
    bool pair_priority(std::string_view word, const Symbol& a, const Symbol& b, double* priority,
                       std::int32_t* merged) const;

    Mode mode_;
    std::vector<std::string> tokens_;
    std::unordered_map<std::string, std::int32_t> ids_;
    std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>>
        merges_;  // -> rank, id
    std::vector<float> scores_;
    std::vector<bool> mergeable_;
    std::array<std::int32_t, 256> byte_ids_{};
    std::int32_t unk_id_ = -1;
    bool byte_fallback_ = false;
    bool fuse_unk_ = false;
    bool ignore_merges_ = false;
};

}  // namespace inferscale::tokenizer
