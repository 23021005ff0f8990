#pragma once
// TokenizerModel: the immutable tables behind a Tokenizer. Internal to src/tokenizer; built by
// tokenizer_json.cpp and tokenizer_gguf.cpp.

#include <cstdint>
#include <memory>
#include <vector>

#include "tokenizer/added_vocab.h"
#include "tokenizer/subword_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::tokenizer {

struct TokenizerModel {
    Normalizer normalizer;
    PreTokenizer pre_tokenizer;
    std::unique_ptr<SubwordModel> subword;  // BpeModel or WordPieceModel
    AddedVocab added;
    Decoder decoder;
    std::vector<std::int32_t> prefix_ids;  // post-processor, single sequence
    std::vector<std::int32_t> suffix_ids;
    std::size_t truncation = 0;  // tokenizer.json truncation.max_length (ids in all); 0: none
    // llama.cpp SPM: a space goes before each raw-text run that starts the text or follows an
    // added token, before spaces become ▁.
    bool space_prefix_after_special = false;
    std::int32_t bos_id = -1;
    std::int32_t eos_id = -1;
    std::vector<std::int32_t> end_of_generation;
};

// Finishes a model (normalized match texts, bos/eos fallbacks, end-of-generation set) and wraps it.
Result<Tokenizer> make_tokenizer(std::shared_ptr<TokenizerModel> model);

}  // namespace inferscale::tokenizer
