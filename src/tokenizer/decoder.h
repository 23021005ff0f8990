#pragma once
// Decoder: the tokenizer.json "decoder" stage as a flat chain of steps (a Sequence is flattened
// at load), each turning the list of token strings into a new list, as HF's decode_chain does.

#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace inferscale::tokenizer {

struct DecoderStep {
    enum class Kind { ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, WordPiece };
    Kind kind = Kind::ByteLevel;
    std::string a, b;  // Replace: pattern, content; Metaspace: replacement; Strip: content;
                       // WordPiece: the continuing-subword prefix
    PrependScheme prepend_scheme = PrependScheme::Always;  // Metaspace
    std::size_t start = 0, stop = 0;                       // Strip
    bool cleanup = false;  // WordPiece: glue punctuation and contractions back (" ." -> ".")
};

class Decoder {
  public:
    void add(DecoderStep step) { steps_.push_back(std::move(step)); }
    // Joins the decoded tokens; with no steps, tokens are joined with spaces (HF's default).
    // Invalid UTF-8 becomes U+FFFD as in HF, unless `raw_bytes`: then the bytes stay as they
    // are (a token holding part of a multi-byte character gives that part).
    std::string decode(std::vector<std::string> tokens, bool raw_bytes = false) const;

  private:
    std::vector<DecoderStep> steps_;
};

}  // namespace inferscale::tokenizer
