#pragma once
// PreTokenizer: the tokenizer.json "pre_tokenizer" stage as a flat list of steps (a Sequence is
// flattened at load). Each step splits every piece further; the model then encodes each piece.
// Bert: whitespace separates pieces and is dropped; each punctuation character is a piece.

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/split_regex.h"

namespace inferscale::tokenizer {

// How a split treats the matched delimiter (HF SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

enum class PrependScheme { Always, First, Never };

struct PreTokenizerStep {
    enum class Kind { Split, Digits, ByteLevel, Metaspace, Bert };
    Kind kind = Kind::Split;
    SplitRegex regex;                                 // Split; ByteLevel when use_regex
    SplitBehavior behavior = SplitBehavior::Isolated;  // Split
    bool invert = false;                              // Split
    bool individual_digits = false;                   // Digits
    bool add_prefix_space = false;                    // ByteLevel
    bool use_regex = false;                           // ByteLevel
    std::string replacement;                          // Metaspace, e.g. "▁"
    PrependScheme prepend_scheme = PrependScheme::Always;  // Metaspace
    bool split = false;                               // Metaspace
};

struct Piece {
    std::string text;
    bool at_text_start = false;  // begins at offset 0 of the caller's text (Metaspace "first")
};

class PreTokenizer {
  public:
    void add(PreTokenizerStep step) { steps_.push_back(std::move(step)); }
    // Splits one normalized segment. Empty pieces are dropped, as HF does.
    std::vector<Piece> split(std::string text, bool at_text_start) const;

  private:
    std::vector<PreTokenizerStep> steps_;
};

}  // namespace inferscale::tokenizer
