#pragma once
// InjectBenchHarness: the per-request work inject_bench times, at a real model's shape with
// random weights and random (but resident, correctly shaped) memory chunks.
//
// The memory stream is the reference's scaffold: M = header ‖ k facts ‖ footer, then the query.
// A kv request composes the InjectPlan, allocates the sequence's blocks, injects every loaded
// token of M with ONE Injector::inject (one fused gather + RoPE + scatter op over all layers),
// then forwards the tail of M (< block_size tokens, footer padding) plus the query with the
// last token's logits. A prompt request forwards all of M plus the query. Blocks go back to the
// pool after every request. Fact chunks come from a pool of `pool_facts` resident chunks and
// requests rotate through it, so consecutive requests do not read the same chunk bytes.
//
// Host tier: the same facts also sit in one pinned host slab; a host-tier kv request first
// copies each selected fact into a device staging chunk (one async copy per chunk on the
// backend's stream), then injects from the staging chunks. The header and footer stay
// resident: they are shared by every request of the model.
//
// Timing goes through StepMarks: CUDA events on the backend's stream (what the GPU saw, host
// work in between included, since the stream idles while the host composes), or the host
// clock after a synchronize on the CPU backend (dry runs).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/result.h"
#include "base/timer.h"
#include "bench/bench_support.h"
#include "inject/injector.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "memory/kv_chunk.h"
#include "model/forward_workspace.h"
#include "model/llama_model.h"

namespace inferscale::bench {

class ProfilingBackend;

struct InjectShape {
    std::int64_t header_tokens = 60;
    std::int64_t fact_tokens = 25;
    std::int64_t footer_tokens = 15;  // B - 1 newline pads + close: the tail never holds a fact
    std::int64_t query_tokens = 30;   // question (~20) + query template (~10)
    std::int64_t max_k = 50;
    std::int64_t pool_facts = 100;    // resident fact chunks (and as many in the host slab)
    std::int64_t block_size = 16;
    std::uint64_t seed = 1;

    std::int64_t memory_tokens(std::int64_t k) const {
        return header_tokens + k * fact_tokens + footer_tokens;
    }
    std::int64_t prompt_tokens(std::int64_t k) const { return memory_tokens(k) + query_tokens; }
};

// Timestamps along the backend's stream: start(), mark() any number of times, finish() waits
// and returns the ms from start to every mark, the last entry being finish itself.
class StepMarks {
  public:
    StepMarks(tensor::Backend& backend, cudaStream_t stream, bool use_events, int max_marks = 4);
    ~StepMarks();
    StepMarks(const StepMarks&) = delete;
    StepMarks& operator=(const StepMarks&) = delete;

    void start();
    void mark();
    std::vector<double> finish();

  private:
    tensor::Backend& backend_;
    cudaStream_t stream_;
    bool use_events_;
    std::vector<cudaEvent_t> events_;  // [max_marks + 2]
    std::vector<double> host_ms_;
    int used_ = 0;
    Timer clock_;
};

// One kv request's times, ms from the start (facts selected).
struct KvRequestTimes {
    double issued_ms = 0.0;    // host tier: the first layer groups' copies issued, the
                               // injection prepared (0 on the GPU tier)
    double injected_ms = 0.0;  // GPU tier: plan + blocks + inject done (host tier: 0, its
                               // injection runs layer group by layer group inside the forward)
    double total_ms = 0.0;     // first-token logits on the host
};

// What one inject op did.
struct InjectOpTimes {
    double op_ms = 0.0;    // the inject_chunks op alone (events around the kernel launch)
    double call_ms = 0.0;  // Injector::inject: metadata staging and upload included
    std::size_t bytes = 0; // chunk K and V read + page K and V written
    std::int64_t tokens = 0;
};

class InjectBenchHarness {
  public:
    // Builds the random model, KV pages, workspace, the chunk pools and the host slab.
    // `cuda`: the backend is the CUDA one (pinned host slab, event timing). Errors: out of
    // memory, a bad config.
    static Result<std::unique_ptr<InjectBenchHarness>> create(tensor::Backend& backend,
                                                              bool cuda,
                                                              const model::ModelConfig& config,
                                                              const InjectShape& shape,
                                                              const Progress& progress);
    ~InjectBenchHarness();

    const InjectShape& shape() const { return shape_; }
    std::int64_t chunk_bytes() const { return chunk_bytes_; }
    std::int64_t kv_bytes_per_token() const;

    // `offset` picks facts offset, offset + 1, ... (mod pool_facts) of the pool.
    Result<KvRequestTimes> kv_request(std::int64_t k, std::int64_t offset, bool host_tier,
                                      StepMarks& marks);
    Result<double> prompt_request(std::int64_t k, std::int64_t offset, StepMarks& marks);
    // Plan, blocks, then one inject timed alone, no forward: `marks` around the whole
    // Injector::inject call (call_ms); with `prof` (CUDA) the injector runs through it and
    // op_ms is the inject_chunks op's own time, else op_ms = call_ms.
    Result<InjectOpTimes> inject_only(std::int64_t k, std::int64_t offset, ProfilingBackend* prof,
                                      StepMarks& marks);

    // The last request's logits [vocab] f32, on the host.
    std::span<const float> logits() const;
    bool logits_finite() const;
    std::int64_t blocks_in_use() const;

  private:
    struct Impl;
    InjectBenchHarness(std::unique_ptr<Impl> impl, const InjectShape& shape);

    std::unique_ptr<Impl> impl_;
    InjectShape shape_;
    std::int64_t chunk_bytes_ = 0;
};

}  // namespace inferscale::bench
