#pragma once
// Engine: serves many requests at once on one LocalModel. submit() runs on the caller's
// thread (tokenizing, and for memory requests retrieving the user's facts and laying out the
// memory prompt); one step-loop thread owns the model, the KV cache and the chunk pool and
// runs Scheduler steps: continuous batching with chunked prefill, prefix caching, preemption
// by recompute, memory chunks fetched or encoded for a request while others keep decoding
// (WaitingForMemory), injection into the request's blocks, sampling and streaming.
// Cancelling a stream ends its request at the next step and frees its blocks.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "base/timer.h"
#include "engine/chunk_invalidator.h"
#include "engine/local_model.h"
#include "engine/memory_retrieval.h"
#include "engine/memory_runtime.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/scheduler.h"
#include "memory/memory_store.h"
#include "model/decode_graphs.h"
#include "retrieval/fact_retriever.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"

namespace inferscale::engine {

struct EngineOptions {
    bool prefix_caching = true;
    std::size_t max_requests = 256;  // queued and running together; more is Unavailable
    // Waiting requests whose memory chunks are fetched or encoded ahead of admission.
    std::size_t memory_prepare_ahead = 64;
    // Facts encoded per step-loop iteration, so encoding one user's memory delays the other
    // requests' steps by a bounded amount.
    std::size_t encode_facts_per_step = 32;
    // >= 0: facts added to the store are encoded in the background, after this many context
    // turns (the window requests will ask for), when no request waits for memory.
    int background_encode_window = -1;
    // Decode steps replayed from recorded graphs where the backend has them (CUDA).
    bool decode_graphs = true;
    // An idle engine starts a kv request at once, even while its chunks are still coming up
    // from host memory: each layer group is injected inside the forward as its copies land
    // (ForwardBatch::before_layer), so the transfer overlaps the layers before it. While
    // other requests run, a request waits for its whole promotion instead, so no one else's
    // step waits on the bus, and is injected in one op.
    bool layered_host_chunks = true;
    // Before the first request, one step of each shape class (engine/warm_up.h) on backends
    // that tune or record per shape (Backend::wants_warm_up).
    bool warm_up = true;
    // One stderr line per finished request with where its time went (diagnosis).
    bool log_requests = false;
    MemoryOptions memory;
};

struct EngineStats {
    std::size_t waiting = 0;             // queued, WaitingForMemory included
    std::size_t waiting_for_memory = 0;
    std::size_t running = 0;
    std::size_t facts_to_encode = 0;     // added facts queued for background encoding
    std::int32_t kv_blocks_total = 0;
    std::int32_t kv_blocks_used = 0;     // held by requests (the prefix cache's unused ones not)
    std::int32_t kv_blocks_cached = 0;   // held by the prefix cache
    std::uint64_t requests_finished = 0;         // answered: stop or length
    std::uint64_t requests_finished_length = 0;  // of which cut at their token limit
    std::uint64_t requests_cancelled = 0;
    std::uint64_t requests_failed = 0;
    std::uint64_t prompt_tokens = 0;     // of ended requests, injected memory included
    std::uint64_t computed_tokens = 0;   // run through the model (prompt and decode)
    std::uint64_t injected_tokens = 0;
    std::uint64_t cached_tokens = 0;     // prefix-cache hits
    std::uint64_t generated_tokens = 0;
    std::uint64_t preemptions = 0;
    std::uint64_t steps = 0;
    double step_seconds = 0;     // wall time of the loop iterations that ran a step
    double forward_seconds = 0;  // of which in the model's forward (device time and its sync)
    std::uint64_t memory_requests = 0;  // ended requests whose chunks were made ready
    double memory_wait_seconds = 0;     // their time from entering the engine to that point
    std::optional<memory::ChunkPoolStats> chunk_pool;  // with memory
    std::size_t chunk_pool_device_capacity = 0;         // bytes
    std::size_t chunk_pool_host_capacity = 0;
    tensor::TransferTotals transfers;  // the backend's transfer stream, with memory
};

class Engine {
  public:
    // Starts the step loop. `model` must outlive the engine. `store` and `retriever` (may be
    // null: no memory requests) too. An Error when the memory runtime cannot be created.
    static Result<std::unique_ptr<Engine>> start(LocalModel& model, memory::MemoryStore* store,
                                                 const retrieval::FactRetriever* retriever,
                                                 const EngineOptions& options = {});
    // Stops the loop; requests still in flight finish with an error event.
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Validates, prepares and queues a request. Errors: InvalidArgument (bad sampling, empty
    // or over-long prompt, no chat template), Unavailable (too many requests in flight).
    // Thread-safe.
    Result<std::shared_ptr<RequestStream>> submit(EngineRequest request);

    EngineStats stats() const;
    const LocalModel& model() const { return model_; }
    // The chunk pool's invalidation hook (see ChunkInvalidator); null without memory.
    MemoryRuntime* memory_runtime() { return runtime_.get(); }

  private:
    struct Active;

    Engine(LocalModel& model, memory::MemoryStore* store, const retrieval::FactRetriever* retriever,
           const EngineOptions& options);
    Result<std::unique_ptr<Active>> prepare(EngineRequest request);
    // Retrieves the user's facts and lays out M ‖ conversation as the request's prompt, with
    // what kv mode injects (engine_memory.cpp).
    Status lay_out_memory(Active& a, const EngineRequest& request);

    void loop();
    void take_new_requests();
    void drop_cancelled();
    void prepare_memory();
    // Encodes up to `budget` of `facts` that no pool tier holds; returns how many are still
    // missing afterwards (0: all in the pool), or an Error from encoding.
    Result<std::size_t> encode_missing(std::span<const MemoryFact> facts, std::size_t& budget);
    // MemoryRuntime::acquire, then erase_stale_chunks over `facts` when it encoded any.
    Result<std::vector<memory::ChunkLease>> acquire_memory(
        std::span<const MemoryFact> facts, bool ordered = true,
        memory::PromotionOrder order = memory::PromotionOrder::WholeChunks);
    void encode_in_background(std::size_t budget);
    Status run_step(StepPlan& plan);
    // The step's forward and what follows it (sampling, streaming), after its injections.
    Status run_forward(StepPlan& plan);
    // The debug line of a step that ran (INFERSCALE_LOG=debug).
    void log_step(const StepPlan& plan, double memory_ms, double schedule_ms,
                  double step_ms) const;
    // Writes the injection's memory KV into its blocks (the device first waits for chunks
    // still being promoted).
    Status inject(const Injection& injection);
    // Prepares the injection of a request whose chunks are still arriving; run_step's forward
    // injects it layer group by layer group (layered_hook) and then releases its chunks.
    Status prepare_layered(const Injection& injection);
    // The injection's memory tokens, into the request's usage and the engine's stats.
    void count_injected(Active& a, const Injection& injection);
    model::LayerHook layered_hook();
    void finish_layered();
    // `logits`: the row the token was sampled from (empty when it was picked on the device);
    // `logprobs`: the token's log-probabilities when the request asked for them, else null.
    void emit(Active& a, std::int32_t token, std::span<const float> logits,
              const sampling::SampledLogprobs* logprobs);
    // Sends the request's last event (finished, with usage) and frees everything it holds.
    void end(Active& a, StreamEvent event);
    void fail(Active& a, Error error);

    LocalModel& model_;
    memory::MemoryStore* store_;
    const retrieval::FactRetriever* retriever_;
    EngineOptions options_;
    std::unique_ptr<MemoryRuntime> runtime_;
    kv::PrefixCache cache_;
    Scheduler scheduler_;
    std::unique_ptr<ChunkInvalidator> invalidator_;
    class FactQueue;  // facts added to the store, for background encoding
    std::unique_ptr<FactQueue> added_facts_;
    std::optional<model::DecodeGraphRunner> graphs_;  // greedy decode-only steps

    // Shared with submit() and stats().
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::unique_ptr<Active>> incoming_;
    std::size_t in_flight_ = 0;
    EngineStats stats_;
    bool stopping_ = false;

    // Step-loop thread only.
    std::unordered_map<std::uint64_t, std::unique_ptr<Active>> active_;
    std::atomic<std::uint64_t> next_id_{1};
    std::vector<std::int32_t> step_ids_, step_positions_, sampled_;
    // The step's allowed-token masks, one row of mask words per sampled row, when a request
    // in it has a grammar.
    std::vector<std::uint32_t> step_masks_;
    std::vector<model::BatchSequence> step_seqs_;
    std::vector<float> logits_;
    Timer since_block_count_;  // since the KV-block gauges were last counted
    double last_forward_ms_ = 0;      // of the last step (debug log)
    bool last_step_graphed_ = false;  // it ran through graphs_
    Active* layered_ = nullptr;       // the step's layer-by-layer injection (prepare_layered)
    std::thread thread_;
};

}  // namespace inferscale::engine
