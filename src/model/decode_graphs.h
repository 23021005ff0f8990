#pragma once
// DecodeGraphRunner: decode steps of a LlamaModel replayed from recorded graphs, one per
// batch-size bucket. A step pads its batch to the smallest bucket that holds it, stages the
// metadata (one host-to-device copy into the same workspace addresses every time), replays
// the bucket's graph (layers, head, device argmax) and reads back only the sampled ids. The
// first step of a bucket runs eagerly (building the GEMM plans) and then records the graph.
// Attention launches are sized from `max_kv_len`, not from the step, so one recording serves
// every KV length up to it.
//
// The model, KV storage and workspace are borrowed: they must outlive the runner and must not
// move (graphs bake in their addresses). On a backend without graphs (CPU, the profiler) or
// with use_graphs off, the same padded steps run eagerly.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"
#include "model/forward_workspace.h"
#include "model/llama_model.h"

namespace inferscale::model {

struct DecodeGraphOptions {
    // Padded batch sizes, ascending; sizes over the workspace limits are dropped.
    std::vector<std::int64_t> buckets{1, 2, 4, 8, 16, 32, 64, 128, 256};
    // Bound on every sequence's KV length (new token included) in every step; required.
    std::int32_t max_kv_len = 0;
    bool use_graphs = true;
};

class DecodeGraphRunner {
  public:
    // An Error when max_kv_len is not positive or no bucket fits the workspace.
    static Result<DecodeGraphRunner> create(LlamaModel& model, kv::KvStorage& kv,
                                            ForwardWorkspace& ws,
                                            const DecodeGraphOptions& options);

    // One decode step: every sequence has one new token; logits must be LastPerSequence.
    // Writes ids [num seqs] (greedy) and, when `logits` is not empty, logits
    // [num seqs, vocab] f32 (an extra copy, for tests). An Error (nothing run) when the batch
    // is malformed, larger than the largest bucket or longer than max_kv_len.
    Status decode(const ForwardBatch& batch, std::span<std::int32_t> ids,
                  std::span<float> logits = {});

    // The bucket a batch of `num_seqs` runs in; 0 when none holds it.
    std::int64_t bucket_for(std::int64_t num_seqs) const;
    bool graphs_enabled() const { return use_graphs_; }
    int graphs_captured() const;
    // Why graphs were turned off after a failed capture; empty otherwise.
    const std::string& graph_error() const { return graph_error_; }

    // Host time of the last decode's parts (diagnosis): staging the metadata, and waiting for
    // the device after the step was enqueued (about the step's device time when the host is
    // not the bottleneck).
    struct StepTimes {
        double stage_ms = 0;
        double wait_ms = 0;
    };
    const StepTimes& last_step_times() const { return times_; }

  private:
    struct Bucket {
        std::int64_t size = 0;
        std::unique_ptr<tensor::CapturedGraph> graph;
    };

    DecodeGraphRunner() = default;

    LlamaModel* model_ = nullptr;
    tensor::Backend* backend_ = nullptr;
    kv::KvStorage* kv_ = nullptr;
    ForwardWorkspace* ws_ = nullptr;
    std::int32_t max_kv_len_ = 0;
    bool use_graphs_ = false;
    std::string graph_error_;
    std::vector<Bucket> buckets_;
    StepTimes times_;
};

}  // namespace inferscale::model
