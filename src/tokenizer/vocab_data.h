#pragma once
// VocabData: a tokenizer's vocabulary as plain data, the shape GGUF stores it in. The GGUF loader
// fills it; Tokenizer::from_vocab builds a tokenizer from it. No dependency on model code.

#include <cstdint>
#include <string>
#include <vector>

namespace inferscale::tokenizer {

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : std::int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

struct VocabData {
    std::string model;         // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SPM)
    std::string pre;           // tokenizer.ggml.pre: pre-tokenizer name, e.g. "smollm",
                               // "llama-bpe", "qwen2"; from_vocab refuses names it lacks
    std::vector<std::string> tokens;     // id -> token text, as stored
    std::vector<float> scores;           // may be empty
    std::vector<TokenType> token_types;  // may be empty
    std::vector<std::string> merges;     // "a b" pairs, byte-level BPE only
    std::int64_t bos_id = -1;
    std::int64_t eos_id = -1;
    std::int64_t unk_id = -1;
    std::int64_t pad_id = -1;
    bool add_bos = false;
    bool add_space_prefix = false;
};

}  // namespace inferscale::tokenizer
