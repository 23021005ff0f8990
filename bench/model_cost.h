#pragma once
// What a Llama-family forward step must at least move and compute, from the config and the
// bytes the model's weights take (block-quantized ones as stored).
//   FLOPs: 2 per multiply-add. Matmuls: 2 x (q, k, v, o, gate, up, down params) per new token,
//   plus 2 x vocab x hidden per logit row (the LM head runs only on those rows). Attention:
//   a new token at KV index j attends to j + 1 keys, costing 4 x heads x head_dim x (j + 1)
//   per layer (QK^T and PV); causal, so a prefill of L tokens costs 2 x h x d x L(L+1) per
//   layer, not 4 x h x d x L^2. Norms, RoPE, SwiGLU, biases are ignored (O(hidden) per token).
//   Bytes: every weight but the embedding table is read once per step (the embedding gives one
//   row per token), plus the K and V of every cached token each sequence attends to. This is
//   a lower bound: activations and logits traffic are left out.

#include <cstdint>

#include "model/model_config.h"

namespace inferscale::bench {

struct ModelCost {
    // Weights that take `total_weight_bytes`, the embedding table `embedding_table_bytes` of
    // them (a model's own, block-quantized ones as stored).
    ModelCost(const model::ModelConfig& c, double total_weight_bytes, double embedding_table_bytes,
              std::size_t kv_elem_bytes)
        : config(c), kv_elem(kv_elem_bytes), weight_bytes(total_weight_bytes),
          embedding_bytes(embedding_table_bytes) {}

    model::ModelConfig config;
    std::size_t kv_elem;
    double weight_bytes = 0;     // every weight, embedding included
    double embedding_bytes = 0;  // the embedding table

    double q_dim() const { return double(config.num_heads) * double(config.head_dim); }
    double kv_dim() const { return double(config.num_kv_heads) * double(config.head_dim); }

    // Parameters of the per-token matmuls of all layers (no embedding, no LM head).
    double layer_matmul_params() const {
        const double h = double(config.hidden_size), ffn = double(config.intermediate_size);
        return double(config.num_layers) * (2.0 * h * q_dim() + 2.0 * h * kv_dim() + 3.0 * h * ffn);
    }
    double head_params() const { return double(config.vocab_size) * double(config.hidden_size); }

    // Every weight, embedding included: what the model occupies.
    double total_weight_bytes() const { return weight_bytes; }
    // The weights one step must read (all but the embedding table, unless it is the head).
    double step_weight_bytes() const {
        return weight_bytes - (config.tie_word_embeddings ? 0.0 : embedding_bytes);
    }
    // K and V of one token over all layers.
    double kv_bytes_per_token() const {
        return 2.0 * double(config.num_layers) * kv_dim() * double(kv_elem);
    }

    // FLOPs of `n` new tokens ending at KV length `kv_len` (one sequence), logits not included.
    double sequence_flops(double n, double kv_len) const {
        const double first = kv_len - n;
        const double keys = n * first + n * (n + 1.0) / 2.0;  // sum over new j of (j + 1)
        return 2.0 * layer_matmul_params() * n +
               4.0 * double(config.num_layers) * q_dim() * keys;
    }
    double logits_flops(double rows) const { return 2.0 * head_params() * rows; }
};

}  // namespace inferscale::bench
