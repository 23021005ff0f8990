#pragma once
// Tokenizer: text <-> token ids for the model families we serve, built from a Hugging Face
// tokenizer.json or from the vocabulary a GGUF file carries.
//  - WordPiece (BERT: BertNormalizer, BertPreTokenizer, [CLS] ... [SEP])
//  - byte-level BPE (GPT-2 byte map) with the GPT-2/SmolLM2, Llama-3 and Qwen2 pre-splits
//  - SentencePiece-style BPE (▁ for spaces, <0xNN> byte fallback; merges or scores)
//  - added/special tokens matched in the text first (lstrip/rstrip/normalized as HF does)
// Encoding matches HF tokenizers id for id on the fixtures in tests/fixtures/tokenizer.
// A Tokenizer is immutable after construction; copies share its tables; it is safe to use from
// several threads. Invalid UTF-8 input is read as U+FFFD per bad subpart (never a crash).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tokenizer/vocab_data.h"

namespace inferscale::tokenizer {

struct TokenizerModel;  // the pipeline tables, tokenizer_model.h

class Tokenizer {
  public:
    // Errors: unreadable file, malformed JSON, unsupported model/normalizer/pre-tokenizer type.
    static Result<Tokenizer> from_json_file(const std::string& path);
    static Result<Tokenizer> from_json(std::string_view json_text);
    // GGUF vocab: model "gpt2" (byte-level BPE, split chosen from `pre`) or "llama" (SPM scores).
    static Result<Tokenizer> from_vocab(const VocabData& vocab);

    // add_special: add the BOS/EOS the tokenizer's post-processor (or GGUF add_bos) asks for.
    // parse_special: special tokens written in the text map to their ids; when false they are
    // tokenized as plain text (non-special added tokens still match, as in HF).
    // tokenizer.json's "truncation" (if any) applies, as in HF.
    std::vector<std::int32_t> encode(std::string_view text, bool add_special = true,
                                     bool parse_special = true) const;
    // encode(text, add_special) keeping at most `max_length` ids in all (0: no limit) in place of
    // tokenizer.json's truncation: the text's ids are cut at the end and the post-processor's
    // special ids stay, as HF truncates one sequence.
    std::vector<std::int32_t> encode_truncated(std::string_view text, std::size_t max_length,
                                               bool add_special = true) const;
    // tokenizer.json's truncation.max_length; 0 when it has none.
    std::size_t truncation_length() const;
    // Ids outside the vocabulary are skipped. Invalid byte sequences decode to U+FFFD.
    std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const;
    // The text `id` adds after other text (what a stream shows for it mid-sequence): unlike
    // decode({id}), a SentencePiece word start keeps its space (" Paris", not "Paris"). Taken
    // as decode({a, id}) minus decode({a}) for a plain one-letter token a; decode({id}) when
    // the vocabulary has none.
    std::string decode_piece(std::int32_t id) const;
    // The bytes `id` adds after other text: decode_piece without the UTF-8 repair, so a token
    // holding part of a multi-byte character gives those bytes (constrained decoding matches
    // output bytes).
    std::string token_bytes(std::int32_t id) const;

    std::int64_t vocab_size() const;
    std::int32_t bos_id() const;  // -1 when none
    std::int32_t eos_id() const;  // -1 when none
    // EOS plus end-of-turn tokens (<|im_end|>, <|eot_id|>, <|end_of_text|>, <|eom_id|>, ...).
    bool is_end_of_generation(std::int32_t id) const;
    // The id of a token given its text as stored (added token or vocabulary entry).
    std::optional<std::int32_t> token_id(std::string_view token_text) const;
    // The stored text of a token ("" for unknown ids); byte-level tokens are in mapped form.
    std::string_view token_text(std::int32_t id) const;
    bool is_special(std::int32_t id) const;

  private:
    explicit Tokenizer(std::shared_ptr<const TokenizerModel> model) : model_(std::move(model)) {}
    std::vector<std::int32_t> encode_ids(std::string_view text, bool add_special,
                                         bool parse_special, std::size_t max_length) const;
    std::string decode_ids(std::span<const std::int32_t> ids, bool skip_special,
                           bool raw_bytes) const;
    std::string piece(std::int32_t id, bool raw_bytes) const;
    friend Result<Tokenizer> make_tokenizer(std::shared_ptr<TokenizerModel> model);

    std::shared_ptr<const TokenizerModel> model_;
};

// Streaming decode: feed ids one at a time, get back only text that is final. Text is held back
// while the decoded tail is an incomplete UTF-8 sequence (shown as U+FFFD by decode). Each step
// decodes a short window starting at the previous commit point, so SentencePiece's leading-space
// strip and byte-fallback groups come out exactly as in a full decode. Concatenating every push
// and the final flush equals tokenizer.decode(all ids). Borrows the tokenizer, which must
// outlive it.
class IncrementalDecoder {
  public:
    explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false);
    std::string push(std::int32_t id);
    // Returns whatever is still held back (a partial sequence comes out as U+FFFD) and resets.
    std::string flush();

  private:
    const Tokenizer& tokenizer_;
    bool skip_special_;
    std::vector<std::int32_t> ids_;  // ids from the window start on
    std::size_t read_offset_ = 0;    // ids_[0, read_offset_) are already emitted
};

}  // namespace inferscale::tokenizer
