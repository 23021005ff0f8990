#pragma once
// ModelConfig: the architecture hyperparameters of a Llama-family decoder (Llama, Mistral, Qwen2,
// Gemma 3 as flags), filled from a Hugging Face config.json or from GGUF metadata.

#include <cstdint>
#include <string>
#include <vector>

namespace inferscale::model {

enum class Architecture { Llama, Mistral, Qwen2, Gemma3 };

// The MLP's gate activation: SwiGLU's silu, or GeGLU's gelu (tanh approximation).
enum class Activation { Silu, GeluTanh };

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
    // Sliding-window attention span in tokens (0: none). Without a pattern the engine keeps
    // contexts within the window, where full attention is the same computation.
    std::int64_t sliding_window = 0;
    // > 0: layers attend within sliding_window, except every pattern-th (layer + 1 a multiple
    // of it), which attends to the whole context (Gemma 3: 6). See layer_window.
    std::int64_t sliding_window_pattern = 0;
    // RoPE base of the sliding-window layers (Gemma 3: 10000); 0: rope_theta, as global layers.
    float rope_local_theta = 0.0f;
    // The attention scale is query_pre_attn_scalar^-1/2; 0: head_dim's.
    float query_pre_attn_scalar = 0.0f;
    float rms_norm_eps = 1e-5f;
    float rope_theta = 10000.0f;
    RopeScaling rope_scaling;
    // Per-pair divisors of the rotary frequencies, [head_dim / 2] f32 (a GGUF's rope_freqs.weight,
    // how llama.cpp's converter stores "llama3" scaling); empty: none.
    std::vector<float> rope_freq_factors;
    bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
    bool tie_word_embeddings = false;
    // Gemma 3: embeddings times sqrt(hidden_size), RMSNorm of each q and k head before RoPE,
    // RMSNorm of the attention and MLP outputs before their residual adds, GeGLU.
    bool scale_embeddings = false;
    bool qk_norm = false;
    bool sublayer_output_norms = false;
    Activation activation = Activation::Silu;
    std::int64_t bos_token_id = -1;
    std::int64_t eos_token_id = -1;  // the primary end-of-sequence id; tokenizer may add more
    std::string name;                // for display: the model directory or file name

    // The attention window of `layer`: sliding_window on a windowed layer, else 0 (all).
    std::int64_t layer_window(std::int64_t layer) const {
        if (sliding_window_pattern <= 0 || (layer + 1) % sliding_window_pattern == 0) return 0;
        return sliding_window;
    }
    // Whether the engine computes the sliding window (else it keeps contexts within it).
    bool windowed_attention() const { return sliding_window_pattern > 0; }
};

// Whether llama.cpp rotates this architecture's Q/K in interleaved pairs (NORM rotary, whose
// GGUF rows the loader un-permutes) rather than NeoX halves.
inline bool ggml_interleaves_qk(Architecture a) {
    return a == Architecture::Llama || a == Architecture::Mistral;
}

}  // namespace inferscale::model
