#pragma once
// The front door for model files: a GGUF file or a Hugging Face directory (config.json plus
// model.safetensors or a sharded index) becomes a ModelConfig, a WeightStore in the Hugging Face
// layout (see weight_store.h) and the tokenizer inputs. Every failure (missing file, corrupt or
// truncated data, unsupported architecture or tensor type, missing or misshapen weight) is an
// Error with a message naming the file and the field or tensor; nothing crashes.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/model_config.h"
#include "model/weight_store.h"
#include "tokenizer/vocab_data.h"

namespace inferscale::model {

struct ModelFiles {
    ModelConfig config;
    WeightStore weights;
    tokenizer::VocabData gguf_vocab;  // filled for GGUF, empty for a Hugging Face directory
    std::string tokenizer_json_path;  // HF directory: its tokenizer.json (empty if none, and
                                      // for GGUF)
    std::string chat_template;        // jinja source from GGUF or the HF directory; may be empty
    // All end-of-sequence ids, config.eos_token_id first (HF: config.json then
    // generation_config.json; GGUF: eos then end-of-turn id).
    std::vector<std::int64_t> eos_token_ids;
};

// Progress in tensors loaded: (done, total).
using LoadProgress = std::function<void(std::size_t done, std::size_t total)>;

struct LoadOptions {
    // GGUF only: keep block-quantized matrices in block form (tensor DType::Q8_0 ...) for a
    // backend that computes on blocks; off dequantizes everything to f32.
    bool keep_quantized = false;
};

// `path`: a .gguf file, or a directory holding config.json and safetensors weights. The weights
// are validated with validate_llama_weights before returning.
Result<ModelFiles> load_model_files(const std::string& path, const LoadProgress& progress = {},
                                    const LoadOptions& options = {});

// Checks that every weight the Llama-family forward pass reads is present with the shape
// `config` implies and a floating-point host dtype (block-quantized allowed for matrices only):
// an Error naming the first bad tensor.
Status validate_llama_weights(const ModelConfig& config, const WeightStore& weights);

}  // namespace inferscale::model
