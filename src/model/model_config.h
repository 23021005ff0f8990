#pragma once
// ModelConfig: the architecture hyperparameters of a Llama-family decoder (Llama, Mistral, Qwen2
// as flags), filled from a Hugging Face config.json or from GGUF metadata.

#include <cstdint>
#include <string>
#include <vector>

namespace inferscale::model {

enum class Architecture { Llama, Mistral, Qwen2 };

// Llama-3.1 "llama3" frequency scaling; factor == 0 means no scaling.
struct RopeScaling {
    float factor = 0.0f;
    float low_freq_factor = 1.0f;
    float high_freq_factor = 4.0f;
    std::int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
    Architecture architecture = Architecture::Llama;
    std::int64_t vocab_size = 0;
    std::int64_t hidden_size = 0;
    std::int64_t intermediate_size = 0;
    std::int64_t num_layers = 0;
    std::int64_t num_heads = 0;
    std::int64_t num_kv_heads = 0;
    std::int64_t head_dim = 0;  // hidden_size / num_heads unless the config says otherwise
    std::int64_t max_position_embeddings = 0;
    // Sliding-window attention span in tokens (0: none). The engine has no windowed attention,
    // so it keeps contexts within the window, where full attention is the same computation.
    std::int64_t sliding_window = 0;
    float rms_norm_eps = 1e-5f;
    float rope_theta = 10000.0f;
    RopeScaling rope_scaling;
    // Per-pair divisors of the rotary frequencies, [head_dim / 2] f32 (a GGUF's rope_freqs.weight,
    // how llama.cpp's converter stores "llama3" scaling); empty: none.
    std::vector<float> rope_freq_factors;
    bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
    bool tie_word_embeddings = false;
    std::int64_t bos_token_id = -1;
    std::int64_t eos_token_id = -1;  // the primary end-of-sequence id; tokenizer may add more
    std::string name;                // for display: the model directory or file name
};

}  // namespace inferscale::model
