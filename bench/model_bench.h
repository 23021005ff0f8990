#pragma once
// ModelBench: one random-weight LlamaModel plus a KV cache and a workspace sized for every
// measurement gpu_bench makes, and the measurements themselves. Each returns per-step timings
// plus what the timed step had to move and compute (see model_cost.h), so the caller can set
// them against measured bandwidth and GEMM rate.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_support.h"
#include "bench/model_cost.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"
#include "model/decode_graphs.h"
#include "model/llama_model.h"

namespace inferscale::bench {

struct ModelBenchOptions {
    std::int64_t context = 1024;         // KV length the decode measurements run at
    std::int64_t prompt = 32;            // TTFT prompt length
    std::int64_t prefill_len = 2048;     // the single-sequence prefill
    std::int64_t prefill_seqs = 16;      // the batched prefill: seqs x prefill_seq_len
    std::int64_t prefill_seq_len = 1024;
    std::vector<std::int64_t> decode_batches{64, 128, 256};
    std::uint64_t seed = 1;
    model::WeightQuant quant = model::WeightQuant::None;  // block types of the random weights
    // Logits land in pinned host memory (CUDA): a pageable 256 x 128K f32 copy would add
    // several ms of staging to every batched decode step.
    bool pinned_logits = false;
    // Decode rows run through DecodeGraphRunner (padded buckets, device argmax, only the ids
    // read back); graphs where the backend has them. False: plain forward with host logits.
    bool decode_runner = true;
    // The runner's bound on KV length (its attention launches are sized from it); 0: just
    // what the measurements need. A serving engine records for its whole context window.
    std::int64_t decode_max_kv_len = 0;
    // KV already in each sequence of the batched prefill before its new tokens (a serving
    // step's prompt chunks after injected memory).
    std::int64_t prefill_context = 0;
    // KV cache size in tokens, at least what the measurements need (a server's is far larger).
    std::int64_t kv_tokens = 0;
    // The KV cache's dtype: the backend's (unset) or F8_E4M3 (scales of 1; the random K/V are
    // drawn in E4M3's range).
    std::optional<tensor::DType> kv_dtype;
    // Sequences take their pages from a random permutation of every block instead of in
    // order (a long-running server's pages are scattered over its whole cache).
    bool shuffle_pages = false;
};

struct Measurement {
    Samples samples;               // ms per timed step
    std::int64_t new_tokens = 0;   // per timed step
    std::int64_t logit_rows = 0;   // per timed step
    std::int64_t kv_len = 0;       // per sequence, at the first timed step
    double flops = 0.0;            // per timed step (model_cost.h), logits included
    double bytes = 0.0;            // per timed step: weights + KV read
    bool logits_finite = true;     // of the last step
};

class ModelBench {
  public:
    // Builds the model (random weights on the device), the KV cache and the workspace.
    static Result<std::unique_ptr<ModelBench>> create(tensor::Backend& backend, StepTimer& timer,
                                                      const model::ModelConfig& config,
                                                      const ModelBenchOptions& options,
                                                      const Progress& progress);
    ~ModelBench();

    const ModelCost& cost() const { return cost_; }
    std::int64_t kv_bytes() const;
    double create_seconds() const { return create_seconds_; }

    // Batch 1: prefills `context` tokens (timed once into `prefill_ms`), then times decode steps.
    Result<Measurement> decode_single(double* prefill_ms);
    // A fresh `prompt`-token sequence: the whole forward with its logits.
    Result<Measurement> ttft();
    // `seqs` sequences of `len` new tokens after `context` tokens of KV each, in one
    // ForwardBatch.
    Result<Measurement> prefill(std::int64_t seqs, std::int64_t len, std::int64_t context = 0);
    // `batch` sequences one token each at KV length `context`. The cache holds random K/V
    // rather than prefilled ones: attention reads the same bytes either way, and prefilling
    // 256 x 1K tokens would cost more than the whole measurement.
    Result<Measurement> decode_batch(std::int64_t batch);

    // Called around every timed step (not warm-ups), e.g. to record a per-op profile.
    void set_step_hooks(std::function<void()> before, std::function<void()> after);
    // Buckets the decode runner has recorded as graphs (0 without graphs).
    int graphs_captured() const;
    // Why the runner fell back to eager steps; empty when it did not.
    std::string graph_error() const;

  private:
    struct Impl;
    ModelBench(std::unique_ptr<Impl> impl, const ModelCost& cost);

    std::unique_ptr<Impl> impl_;
    ModelCost cost_;
    double create_seconds_ = 0.0;
};

}  // namespace inferscale::bench
