#pragma once
// GGUF model loading: llama / mistral / qwen2 GGUF files (v2, v3) -> ModelConfig, VocabData and
// a WeightStore in the Hugging Face layout. Every tensor is converted to F32 (quantized types
// dequantized) in store-owned memory, except unpermuted F32 tensors, which stay zero-copy views
// into the mapped file; with `keep_quantized`, block-quantized matrices keep their blocks
// (DType::Q8_0 ...), as views or, for permuted Q/K, as store-owned copies. For llama-style rotary
// (llama, mistral) the converter's interleaving of Q/K rows is undone so that rows are in Hugging
// Face rotate_half order. rope_freqs.weight (Llama 3.1-style scaling) becomes
// ModelConfig::rope_freq_factors, not a store tensor.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/weight_store.h"
#include "tokenizer/vocab_data.h"

namespace inferscale::model {

struct GgufModel {
    ModelConfig config;
    tokenizer::VocabData vocab;
    std::string chat_template;  // tokenizer.chat_template, empty when absent
    std::vector<std::int64_t> eos_token_ids;  // eos id, then the end-of-turn id when different
};

using GgufProgress = std::function<void(std::size_t done, std::size_t total)>;

// Loads the GGUF file at `path` into `store`. An Error names the file and the problem.
Result<GgufModel> load_gguf_model(const std::string& path, WeightStore& store,
                                  const GgufProgress& progress = {}, bool keep_quantized = false);

// The tokenizer vocabulary a GGUF file carries (tokenizer.ggml.*), without loading its weights.
Result<tokenizer::VocabData> read_gguf_vocab(const GgufFile& g);

// Converts rows of a llama-arch GGUF attn_q/attn_k weight (or bias, row_len 1) from the
// converter's interleaved order back to rotate_half order, in place. `rows` = n_heads * head_dim.
void unpermute_qk_rows(float* data, std::int64_t rows, std::int64_t row_len, std::int64_t n_heads);
// The same on rows of `row_bytes` bytes of any layout (block-quantized rows included).
void unpermute_qk_row_bytes(std::uint8_t* data, std::int64_t rows, std::size_t row_bytes,
                            std::int64_t n_heads);

}  // namespace inferscale::model
