#pragma once
// The memory prompt scaffold of the reference ("reverse-ranked-memory-block-safe-v1"): the
// system prompt, rendered by the model's chat template around a placeholder, split into a
// header and a footer; the facts go between them (best-ranked last, nearest the question); the
// footer is padded with single newline TOKENS to at least B - 1 tokens so that, after block
// alignment, only footer tokens are recomputed. The question is templated as a conversation of
// its own and appended, with a duplicated BOS dropped. Both KV and prompt injection use this
// exact token stream, so at w = 0 the two modes see identical token ids.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::inject {

inline constexpr std::string_view kMemorySystemPrompt =
    "You are a helpful assistant that remembers details from past conversations. Answer "
    "questions based on the conversation history provided. The following is a conversation "
    "history between two people:\n\n";
inline constexpr std::string_view kMemoryPlaceholder = "<<<LOCOMO_JASPER_MEMORY_GOES_HERE>>>";
inline constexpr std::string_view kEmptyMemoryText = "(No relevant memories found)\n";
inline constexpr std::string_view kQueryPrefix =
    "Based on the conversation above, answer concisely.\nQuestion: ";

struct MemoryScaffold {
    std::string header_text;                 // the rendered system turn before the placeholder
    std::string footer_text;                 // ... and after it
    std::vector<std::int32_t> header;        // encode(header_text): BOS included if rendered
    std::vector<std::int32_t> footer;        // [newline] * max(0, B - 1 - |close|) ‖ close
    std::vector<std::int32_t> empty_memory;  // encode(kEmptyMemoryText), used with no facts
    std::int64_t block_size = 0;
};

// `tmpl` may be null (no chat template: a "SYSTEM: " / "USER: " fallback). An Error when the
// template drops the placeholder, a piece tokenizes to nothing, or "\n" is not one token.
Result<MemoryScaffold> build_memory_scaffold(const tokenizer::Tokenizer& tok,
                                             const jinja::ChatTemplate* tmpl,
                                             std::int64_t block_size);

// A fact's tokens: encode(strip(text) + "\n"), no BOS, special-token text kept as plain text
// (a stored fact cannot smuggle in control tokens). An Error when it is empty.
Result<std::vector<std::int32_t>> fact_token_ids(const tokenizer::Tokenizer& tok,
                                                 std::string_view text);

// The pieces of M in order: header, the facts in the given (prompt) order (the empty-memory
// line when there are none), footer. `tokens` views `scaffold` or `facts`; `fact` indexes facts.
struct MemoryPiece {
    enum class Kind { Header, EmptyMemory, Fact, Footer } kind;
    std::size_t fact = 0;
    std::span<const std::int32_t> tokens;
};
std::vector<MemoryPiece> memory_pieces(const MemoryScaffold& scaffold,
                                       std::span<const std::vector<std::int32_t>> facts);

// M = the pieces' tokens, concatenated.
std::vector<std::int32_t> memory_stream(const MemoryScaffold& scaffold,
                                        std::span<const std::vector<std::int32_t>> facts);

// The question as its own chat turn with the generation prompt. `memory_first` is M's first
// token: when it and the query both start with the tokenizer's BOS, the query's is dropped.
Result<std::vector<std::int32_t>> query_token_ids(const tokenizer::Tokenizer& tok,
                                                  const jinja::ChatTemplate* tmpl,
                                                  std::string_view question,
                                                  std::optional<std::int32_t> memory_first);
// A whole conversation after the memory, the same way: the last user message carries the
// question prefix. A single user message gives exactly query_token_ids. An Error when the
// template rejects the conversation.
Result<std::vector<std::int32_t>> conversation_token_ids(const tokenizer::Tokenizer& tok,
                                                         const jinja::ChatTemplate* tmpl,
                                                         std::vector<jinja::ChatMessage> messages,
                                                         std::optional<std::int32_t> memory_first);

std::string strip_whitespace(std::string_view text);

}  // namespace inferscale::inject
