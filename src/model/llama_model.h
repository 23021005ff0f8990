#pragma once
// LlamaModel: the Llama-family decoder (Llama, Mistral, Qwen2, Gemma 3 as flags of ModelConfig)
// on any tensor::Backend. It owns its weights in the backend's storage form and runs batched
// forward steps over a paged KV cache; it never reads or writes tensor memory itself.
// Per layer the op order is: norm, q/k/v projections, [capture K before RoPE and V], RoPE on
// q and k, KV page write, paged attention, o projection, residual, norm, SwiGLU MLP, residual.
// Gemma 3 adds a norm of each q and k head before RoPE and a norm of the attention and MLP
// outputs before each residual add, scales the embeddings, and gates its MLP with GeGLU; its
// sliding-window layers rotate with their own RoPE base and attend within the window.

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"
#include "model/forward_workspace.h"
#include "model/model_config.h"
#include "model/stacked_weight.h"
#include "model/weight_quant.h"
#include "model/weight_store.h"
#include "tensor/backend.h"

namespace inferscale::model {

struct LlamaModelOptions {
    // RoPE table length; 0 means config.max_position_embeddings. Positions must stay below it.
    std::int64_t max_positions = 0;
    // create_random only: the block types of the matrices (weight_quant.h).
    WeightQuant random_quant = WeightQuant::None;
};

// How LlamaModel::stage lays out a step (see there).
struct StageOptions {
    // > 0: pad a decode batch (one token per sequence, LastPerSequence, no capture) with
    // dummy sequences up to this many; their K/V writes are skipped (slot -1), their logit
    // rows are computed and ignored.
    std::int64_t pad_to = 0;
    // > 0: decode batches only; every kv_len must be <= this, and attention sizes its
    // launch from it (PagedAttentionArgs::fixed_max_kv_len).
    std::int32_t fixed_max_kv_len = 0;
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
    // every backend's ops accept (f32 on CPU, bf16 on CUDA), or with options.random_quant the
    // matrices and the embedding in that mix's block types. An Error when out of memory.
    static Result<LlamaModel> create_random(tensor::Backend& backend, const ModelConfig& config,
                                            std::uint64_t seed,
                                            const LlamaModelOptions& options = {});

    const ModelConfig& config() const { return config_; }
    // Bytes of every weight on the backend (blocks as stored), and of the embedding table.
    std::size_t weight_bytes() const;
    std::size_t embedding_bytes() const { return embed_.tensor.nbytes(); }
    tensor::Backend& backend() const { return *backend_; }
    std::int64_t max_positions() const { return max_positions_; }
    // The device RoPE tables forward rotates with (memory injection rotates chunks with the
    // same ones, so injected keys match prefilled keys bit for bit): the global layers' ones.
    const tensor::RopeTables& rope_tables() const { return rope_; }
    // Whether every layer rotates with rope_tables() (not so with Gemma 3's local RoPE base),
    // which memory injection needs.
    bool one_rope_base() const { return local_rope_.cos.empty(); }

    // The KV layout this model needs for a cache of `num_blocks` pages.
    kv::KvLayout kv_layout(std::int64_t num_blocks, std::int64_t block_size = 16) const;
    Result<ForwardWorkspace> create_workspace(const WorkspaceLimits& limits) const;

    // Rows of logits that forward returns for `batch`.
    static std::int64_t num_logit_rows(const ForwardBatch& batch);

    // Runs one step: writes the new tokens' K/V into `kv` and f32 logits
    // [num_logit_rows(batch), vocab] into `logits`. An Error (and no KV written) when the batch
    // is malformed or exceeds the workspace limits, the KV pages, or the RoPE table. Returns
    // once the device has finished.
    Status forward(const ForwardBatch& batch, kv::KvStorage& kv, ForwardWorkspace& ws,
                   std::span<float> logits);
    // The same step with greedy sampling on the backend: ids[r] = argmax of logit row r, and
    // only the ids [num_logit_rows(batch)] i32 come back to the host (a decode step of a 128K
    // vocabulary otherwise copies 512 KB of f32 logits per sequence). With
    // batch.allowed_tokens, each row's argmax is over its allowed tokens (-1 if none).
    Status forward_greedy(const ForwardBatch& batch, kv::KvStorage& kv, ForwardWorkspace& ws,
                          std::span<std::int32_t> ids);

    // ---- step pieces (forward is stage + enqueue + read_results; DecodeGraphRunner records
    // enqueue once per batch bucket and replays it) -----------------------------------------
    // Validates `batch`, packs its metadata into ws's pinned staging and uploads it with one
    // copy; remembers the step in ws.step. An Error (nothing enqueued) as for forward. The
    // staging is rewritten by the next stage: callers finish a step (read_results) first.
    Status stage(const ForwardBatch& batch, const kv::KvStorage& kv, ForwardWorkspace& ws,
                 const StageOptions& options = {});
    // Enqueues the staged step: every layer, then the head into ws.logits [ws.step.logit_rows,
    // vocab] f32 and, when `sample`, the argmax of each row into ws.sampled_ids. Reads only
    // device memory and ws.step: no allocation, no host copy, no synchronization, so it can be
    // recorded as a graph and replayed after any stage() with the same options and row count.
    void enqueue(kv::KvStorage& kv, ForwardWorkspace& ws, bool sample);
    // Waits for the device and copies out the first ids.size() sampled ids (a pinned bounce)
    // and the first logits.size() / vocab logit rows; either span may be empty.
    void read_results(ForwardWorkspace& ws, std::span<std::int32_t> ids, std::span<float> logits);

  private:
    struct LayerWeights {
        tensor::DeviceWeight input_norm;  // [hidden]
        // q [heads*d, hidden], k and v [kvh*d, hidden]: one stack where the dtypes agree.
        StackedWeight qkv;
        StackedWeight qkv_bias;  // [heads*d], [kvh*d] x2, or no parts
        tensor::DeviceWeight o;  // [hidden, heads*d]
        tensor::DeviceWeight post_norm;               // [hidden]: the MLP's input norm
        tensor::DeviceWeight gate, up, down;          // [ffn, hidden] x2, [hidden, ffn]
        // ModelConfig::qk_norm: [d] each; sublayer_output_norms: [hidden] each. Else empty.
        tensor::DeviceWeight q_norm, k_norm;
        tensor::DeviceWeight attn_out_norm, mlp_out_norm;
    };

    LlamaModel() = default;
    // Checks the config and builds the RoPE tables (with ggml's angles when `ggml_angles`, see
    // RopeParams): everything but the weights.
    static Result<LlamaModel> create_shell(tensor::Backend& backend, const ModelConfig& config,
                                           const LlamaModelOptions& options,
                                           bool ggml_angles = false);
    Status validate(const ForwardBatch& batch, const kv::KvStorage& kv,
                    const ForwardWorkspace& ws) const;
    void run_layer(std::int64_t layer, const tensor::PagedAttentionArgs& attn_args,
                   kv::KvStorage& kv, ForwardWorkspace& ws);

    tensor::Backend* backend_ = nullptr;
    ModelConfig config_;
    std::int64_t max_positions_ = 0;
    tensor::DeviceWeight embed_;       // [vocab, hidden]
    tensor::DeviceWeight final_norm_;  // [hidden]
    tensor::DeviceWeight lm_head_;     // [vocab, hidden]; empty when tied to embed_
    std::vector<LayerWeights> layers_;
    // Exact f32 tables, copied rather than uploaded as weights (a GPU would narrow weights).
    tensor::Buffer rope_buffer_;
    tensor::RopeTables rope_;        // cos, sin [max_positions, head_dim / 2] f32
    tensor::RopeTables local_rope_;  // the same at rope_local_theta; empty without one
};

}  // namespace inferscale::model
