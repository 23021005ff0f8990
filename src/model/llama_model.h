#pragma once
// LlamaModel: the Llama-family decoder (Llama, Mistral, Qwen2 as flags of ModelConfig) on any
// tensor::Backend. It owns its weights in the backend's storage form and runs batched forward
// steps over a paged KV cache; it never reads or writes tensor memory itself.
// Per layer the op order is: norm, q/k/v projections, [capture K before RoPE and V], RoPE on
// q and k, KV page write, paged attention, o projection, residual, norm, SwiGLU MLP, residual.

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"
#include "model/forward_workspace.h"
#include "model/model_config.h"
#include "model/weight_store.h"
#include "tensor/backend.h"

namespace inferscale::model {

struct LlamaModelOptions {
    // RoPE table length; 0 means config.max_position_embeddings. Positions must stay below it.
    std::int64_t max_positions = 0;
};

class LlamaModel {
  public:
    // Uploads every weight through `backend` (which must outlive the model); `weights` is only
    // read during the call. An Error names a missing or misshapen weight, or out of memory.
    static Result<LlamaModel> create(tensor::Backend& backend, const ModelConfig& config,
                                     const WeightStore& weights,
                                     const LlamaModelOptions& options = {});

    // Random weights made on the backend itself (no host copy, seconds for 8B on a GPU), for
    // benchmarks at real shapes: matrices ~ U(+-1/sqrt(in_features)) so activations stay
    // finite through any depth, the embedding ~ U(+-1), norm weights 1, biases small.
    // Deterministic per seed. Weights are in the backend's activation dtype, a storage form
    // every backend's ops accept (f32 on CPU, bf16 on CUDA). An Error when out of memory.
    static Result<LlamaModel> create_random(tensor::Backend& backend, const ModelConfig& config,
                                            std::uint64_t seed,
                                            const LlamaModelOptions& options = {});

    const ModelConfig& config() const { return config_; }
    std::int64_t max_positions() const { return max_positions_; }

    // The KV layout this model needs for a cache of `num_blocks` pages.
    kv::KvLayout kv_layout(std::int64_t num_blocks, std::int64_t block_size = 16) const;
    Result<ForwardWorkspace> create_workspace(const WorkspaceLimits& limits) const;

    // Rows of logits that forward returns for `batch`.
    static std::int64_t num_logit_rows(const ForwardBatch& batch);

    // Runs one step: writes the new tokens' K/V into `kv` and f32 logits
    // [num_logit_rows(batch), vocab] into `logits`. An Error (and no KV written) when the batch
    // is malformed or exceeds the workspace limits, the KV pages, or the RoPE table.
    Status forward(const ForwardBatch& batch, kv::KvStorage& kv, ForwardWorkspace& ws,
                   std::span<float> logits);

  private:
    struct LayerWeights {
        tensor::DeviceWeight input_norm;  // [hidden]
        tensor::DeviceWeight q, k, v,
            o;  // [heads*d, hidden], [kvh*d, hidden] x2, [hidden, heads*d]
        tensor::DeviceWeight q_bias, k_bias, v_bias;  // [heads*d], [kvh*d] x2, or empty
        tensor::DeviceWeight post_norm;               // [hidden]
        tensor::DeviceWeight gate, up, down;          // [ffn, hidden] x2, [hidden, ffn]
    };

    LlamaModel() = default;
    // Checks the config and builds the RoPE tables: everything but the weights.
    static Result<LlamaModel> create_shell(tensor::Backend& backend, const ModelConfig& config,
                                           const LlamaModelOptions& options);
    Status validate(const ForwardBatch& batch, const kv::KvStorage& kv, const ForwardWorkspace& ws,
                    std::span<float> logits) const;
    // Fills the host metadata in `ws` and copies it to the device.
    void stage_metadata(const ForwardBatch& batch, const kv::KvStorage& kv, ForwardWorkspace& ws);
    void run_layer(std::int64_t layer, std::int64_t n, const ForwardBatch& batch,
                   const tensor::PagedAttentionArgs& attn_args, kv::KvStorage& kv,
                   ForwardWorkspace& ws);

    tensor::Backend* backend_ = nullptr;
    ModelConfig config_;
    std::int64_t max_positions_ = 0;
    tensor::DeviceWeight embed_;       // [vocab, hidden]
    tensor::DeviceWeight final_norm_;  // [hidden]
    tensor::DeviceWeight lm_head_;     // [vocab, hidden]; empty when tied to embed_
    std::vector<LayerWeights> layers_;
    // Exact f32 tables, copied rather than uploaded as weights (a GPU would narrow weights).
    tensor::Buffer rope_buffer_;
    tensor::RopeTables rope_;  // cos, sin [max_positions, head_dim / 2] f32
};

}  // namespace inferscale::model
