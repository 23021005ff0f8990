#pragma once
// LocalModel: everything needed to run one model in this process: its tokenizer and chat
// template, a backend, the model's weights on it, a paged KV cache with its block accounting,
// and a forward workspace. Built once by load(); the CLI and the engine share it.
//
// The backend is the CPU (activations and KV f32, GGUF block-quantized matrices kept in
// block form) or, in builds with INFERSCALE_CUDA, one GPU (weights, activations and KV bf16).
// With random_weights_config the weights are random at that config's shape (benchmarks at real
// scale without a download) while the tokenizer and chat template still come from model_path.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/gpu_memory_plan.h"
#include "grammar/grammar_cache.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "model/forward_workspace.h"
#include "model/llama_model.h"
#include "model/model_files.h"
#include "template/chat_template.h"
#include "tensor/backend.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::engine {

inline constexpr std::int64_t kDefaultCpuKvTokens = 32768;

struct LocalModelOptions {
    std::string model_path;
    tensor::Device device = tensor::Device::Cpu;
    int cuda_device = 0;              // GPU index when device is Cuda
    int num_threads = 0;              // CPU backend threads; 0: all cores
    // A Hugging Face config.json: random weights of its shape (LlamaModel::create_random, seeded
    // by random_seed) instead of model_path's weights. Prompt ids beyond the config's
    // vocabulary are rejected by generate(); sampled ids beyond the tokenizer's decode to "".
    std::string random_weights_config;
    std::uint64_t random_seed = 1;
    model::WeightQuant random_quant = model::WeightQuant::None;  // their block types
    std::int64_t max_context = 4096;  // tokens per sequence; capped by the model's positions
    // A Jinja file that replaces the model's own chat template; empty: the model's.
    std::string chat_template_path;
    // KV cache capacity in tokens, all sequences together. 0: on a GPU, what its memory leaves
    // (gpu_memory_plan.h); on the CPU, kDefaultCpuKvTokens.
    std::int64_t kv_tokens = 8192;
    // On a GPU: the share of its memory this process may hold, and the chunk pool's device tier
    // (unset: a share of what is left; see gpu_memory_plan.h) when `with_memory`.
    double gpu_memory_utilization = 0.9;
    std::optional<std::size_t> device_pool_bytes = std::nullopt;
    bool with_memory = false;
    std::int64_t max_batch_tokens = 512;  // new tokens per forward step
    std::int64_t max_batch_seqs = 64;
    // The KV cache's dtype: the backend's (unset) or F8_E4M3, whose per-(layer, head) scales
    // are calibrated at load (kv_scales.h). The chunk encoder writes chunks in the same dtype.
    std::optional<tensor::DType> kv_cache_dtype = std::nullopt;
};

class LocalModel {
  public:
    // An Error names what failed: the device (CUDA not built, no GPU), the model files, the chat
    // template (with its line, for a construct the interpreter does not support) or the
    // random-weights config, the tokenizer, or memory on the backend.
    static Result<std::unique_ptr<LocalModel>> load(const LocalModelOptions& options,
                                                    const model::LoadProgress& progress = {});

    const model::ModelConfig& config() const { return model_.config(); }
    const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
    // The model's chat template; nullopt when the files carry none we recognise.
    const std::optional<jinja::ChatTemplate>& chat_template() const { return chat_template_; }
    std::int64_t max_context() const { return max_context_; }
    // The token ids a chat request's prompt becomes: `messages` rendered with the chat
    // template (and the assistant's generation prompt when asked, `tools` as the template's
    // tools), special tokens parsed. An Error when the model has no chat template.
    Result<std::vector<std::int32_t>> encode_chat(const std::vector<jinja::ChatMessage>& messages,
                                                  bool add_generation_prompt,
                                                  const jinja::Value& tools = jinja::None{}) const;
    // What the weights and KV values are (part of memory chunk identities): the model path,
    // plus "@cuda" on the GPU (its bf16 KV differs from the CPU's) and the random-weights
    // config and seed.
    const std::string& model_name() const { return model_name_; }
    // What a memory chunk's values depend on: model_name() plus, with an FP8 cache, the dtype
    // and a digest of the calibrated scales.
    const std::string& kv_identity() const { return kv_identity_; }
    // The backend in words, for logs: "cpu" or the GPU's name.
    const std::string& device_description() const { return device_description_; }
    std::int64_t block_size() const { return kv_.layout().block_size; }
    // How the GPU's memory was shared out at load; nullopt on the CPU, or on a GPU whose memory
    // the backend could not report (then kv_tokens was taken as given).
    const std::optional<GpuMemoryPlan>& memory_plan() const { return memory_plan_; }
    bool is_end_of_generation(std::int32_t id) const;
    // Compiled grammars over this model's vocabulary (structured outputs), built on first use:
    // every id up to the model's vocab_size as the bytes it decodes to, special tokens never
    // allowed, the end-of-generation tokens allowed where a grammar may end. Thread-safe.
    grammar::GrammarCache& grammars() const;

    tensor::Backend& backend() { return *backend_; }
    model::LlamaModel& model() { return model_; }
    const model::LlamaModel& model() const { return model_; }
    kv::KvStorage& kv() { return kv_; }
    kv::BlockPool& blocks() { return blocks_; }
    model::ForwardWorkspace& workspace() { return workspace_; }

  private:
    LocalModel(std::unique_ptr<tensor::Backend> backend, model::LlamaModel model,
               kv::KvStorage kv, model::ForwardWorkspace workspace, tokenizer::Tokenizer tok)
        : backend_(std::move(backend)),
          model_(std::move(model)),
          kv_(std::move(kv)),
          blocks_(static_cast<std::int32_t>(kv_.layout().num_blocks)),
          workspace_(std::move(workspace)),
          tokenizer_(std::move(tok)) {}

    std::unique_ptr<tensor::Backend> backend_;  // declared first: destroyed last
    model::LlamaModel model_;
    kv::KvStorage kv_;
    kv::BlockPool blocks_;
    model::ForwardWorkspace workspace_;
    tokenizer::Tokenizer tokenizer_;
    std::optional<jinja::ChatTemplate> chat_template_;
    std::vector<std::int64_t> eos_ids_;
    std::int64_t max_context_ = 0;
    std::string model_name_;
    std::string kv_identity_;
    std::string device_description_;
    std::optional<GpuMemoryPlan> memory_plan_;
    mutable std::once_flag grammars_once_;
    mutable std::unique_ptr<grammar::GrammarCache> grammars_;
};

}  // namespace inferscale::engine
