#pragma once
// Constrained decoding against a vocabulary: Vocabulary (the model's tokens as bytes),
// CompiledGrammar (a Grammar prepared for one vocabulary, shared by requests) and Matcher
// (one request's position in the grammar: the allowed-next-token mask, advancing by tokens).
//
// How the mask is fast (XGrammar's scheme): each grammar rule is a byte automaton, and a
// matcher state is a set of stacks of automaton states. At compile time every automaton state
// that reads bytes gets, from one walk of the vocabulary's trie, the tokens it accepts and
// rejects on its own rule's context; the few tokens that run past the end of the rule are kept
// as "uncertain". At run time the mask is the union of the cached accepted sets of the current
// stack tops, plus the uncertain tokens checked against the whole stack.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "grammar/grammar.h"

namespace inferscale::grammar {

// The model's vocabulary as bytes, built once per model by the engine: token_bytes[id] is what
// the token decodes to (byte-level BPE already undone). Special tokens are never allowed by a
// grammar; end tokens (EOS, end of turn) are allowed exactly when the grammar can end. Tokens
// with no bytes that are neither are never allowed. Immutable; share it through shared_ptr.
// From a tokenizer::Tokenizer: is_special(id), is_end_of_generation(id), and the bytes of
// token_text(id) with the byte-level map undone (tokenizer/byte_level.h: byte_level_decode) for
// byte-level BPE (SmolLM2, Llama 3, Qwen2); for SentencePiece vocabularies ▁ is a space and
// <0xNN> the byte NN. Not decode(): it turns a token's partial UTF-8 sequence into U+FFFD.
class Vocabulary {
  public:
    // is_special.size() must equal token_bytes.size(); end tokens must be ids in range (an end
    // token counts as an end token whether or not it is flagged special).
    Vocabulary(std::vector<std::string> token_bytes, std::vector<bool> is_special,
               std::vector<std::int32_t> end_tokens);

    std::int64_t size() const { return static_cast<std::int64_t>(token_bytes_.size()); }
    const std::string& token_bytes(std::int32_t id) const { return token_bytes_[id]; }
    bool is_special(std::int32_t id) const { return is_special_[id]; }
    bool is_end_token(std::int32_t id) const { return is_end_[id]; }
    const std::vector<std::int32_t>& end_tokens() const { return end_tokens_; }
    // Ids of the tokens a grammar may allow (not special, not end, non-empty), sorted by bytes,
    // and for each the length of the prefix it shares with the one before it (0 for the first).
    const std::vector<std::int32_t>& sorted_tokens() const { return sorted_; }
    const std::vector<std::int32_t>& sorted_lcp() const { return sorted_lcp_; }

  private:
    std::vector<std::string> token_bytes_;
    std::vector<bool> is_special_;
    std::vector<bool> is_end_;
    std::vector<std::int32_t> end_tokens_;
    std::vector<std::int32_t> sorted_;
    std::vector<std::int32_t> sorted_lcp_;
};

// The number of 32-bit words of a mask over `vocab_size` tokens: (vocab_size + 31) / 32.
std::size_t mask_words(std::int64_t vocab_size);

struct CompiledTables;  // per automaton state token sets, compiled_tables.h

// A grammar prepared for one vocabulary (token sets per grammar position); immutable and shared
// by every request that uses the grammar. Compiling walks the vocabulary once per grammar
// position that reads bytes.
class CompiledGrammar {
  public:
    static std::shared_ptr<const CompiledGrammar> compile(std::shared_ptr<const Grammar> grammar,
                                                          std::shared_ptr<const Vocabulary> vocab);

    const Grammar& grammar() const { return *grammar_; }
    const Vocabulary& vocabulary() const { return *vocab_; }
    const CompiledTables& tables() const { return *tables_; }
    double compile_ms() const { return compile_ms_; }

    CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
                    std::shared_ptr<const CompiledTables> tables, double compile_ms);

  private:
    std::shared_ptr<const Grammar> grammar_;
    std::shared_ptr<const Vocabulary> vocab_;
    std::shared_ptr<const CompiledTables> tables_;
    double compile_ms_ = 0;
};

class StackState;  // the set of grammar stacks, stack_state.h

// One request's state. Not thread-safe; one Matcher per request. Scratch space is reused, so
// after warm-up fill_next_token_mask and accept_token allocate little (new stack nodes only).
class Matcher {
  public:
    explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);
    ~Matcher();
    Matcher(Matcher&&) noexcept;
    Matcher& operator=(Matcher&&) noexcept;

    // Words of the allowed-next-token bitmask: token t is allowed iff words[t / 32] >> (t % 32)
    // & 1. words.size() must be mask_words(vocab size). An end token is allowed iff can_end().
    // After finished() only the end tokens are set (if the grammar could end), else none.
    void fill_next_token_mask(std::span<std::uint32_t> words);
    // Advances by a token; an Error (InvalidArgument), with the state unchanged, if the token is
    // not allowed.
    Status accept_token(std::int32_t token);
    // Advances by raw bytes (forced text, e.g. a tool-call prefix); Error, state unchanged, if
    // the grammar does not allow them.
    Status accept_bytes(std::string_view bytes);
    // The output so far is a complete sentence of the grammar (an end token would be accepted).
    bool can_end() const;
    // An end token was accepted, or the grammar admits no further bytes: generation must stop.
    bool finished() const;
    // Back to the start of the grammar.
    void reset();
    // Whether accept_token(token) would succeed, checked byte by byte without the compiled
    // tables (slow: for tests and debugging).
    bool token_allowed_slow(std::int32_t token);

    const CompiledGrammar& compiled() const { return *grammar_; }

  private:
    std::shared_ptr<const CompiledGrammar> grammar_;
    std::unique_ptr<StackState> state_;
    bool ended_ = false;  // an end token was accepted
};

}  // namespace inferscale::grammar
