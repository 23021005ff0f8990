#pragma once
// Normalizer: the tokenizer.json "normalizer" stage as a flat list of steps (a Sequence is
// flattened at load). Applied to each piece of text between added tokens, as HF does.

#include <string>
#include <string_view>
#include <vector>

namespace inferscale::tokenizer {

// BertNormalizer's switches (HF tokenizers): clean_text drops control characters and turns
// whitespace into spaces; handle_chinese_chars puts spaces around CJK ideographs; strip_accents
// drops nonspacing marks after NFD.
struct BertNormalizerOptions {
    bool clean_text = true;
    bool handle_chinese_chars = true;
    bool strip_accents = true;
    bool lowercase = true;
};

struct NormalizerStep {
    enum class Kind { Nfc, Nfd, Nfkc, Nfkd, Lowercase, Prepend, Replace, Strip, Bert };
    Kind kind = Kind::Nfc;
    std::string a;  // Prepend: the prefix; Replace: the pattern
    std::string b;  // Replace: the replacement
    bool left = false, right = false;  // Strip
    BertNormalizerOptions bert;        // Bert
};

class Normalizer {
  public:
    void add(NormalizerStep step) { steps_.push_back(std::move(step)); }
    bool empty() const { return steps_.empty(); }
    // `text` must be valid UTF-8; the result is valid UTF-8.
    std::string normalize(std::string_view text) const;

  private:
    std::vector<NormalizerStep> steps_;
};

}  // namespace inferscale::tokenizer
