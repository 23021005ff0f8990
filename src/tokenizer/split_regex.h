#pragma once
// SplitRegex: a compiled PCRE2 pattern (UTF + UCP, so \s, \p{L}, \p{N} are Unicode-aware, like
// the Oniguruma regexes HF tokenizers use) that reports successive non-overlapping matches.
// Copies share the immutable compiled code; matching allocates its own match data, so one
// SplitRegex may be used from several threads.

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace inferscale::tokenizer {

class SplitRegex {
  public:
    static Result<SplitRegex> compile(std::string_view pattern);

    // Byte ranges [begin, end) of the matches, left to right. `text` must be valid UTF-8.
    std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

  private:
    struct Code;
    std::shared_ptr<const Code> code_;
};

// The pre-tokenizer patterns that model families use (tokenizer.json Split pieces and
// GGUF tokenizer.ggml.pre names).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace inferscale::tokenizer
