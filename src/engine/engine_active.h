#pragma once
// The engine's per-request state and its fact queue: private to engine.cpp and
// engine_memory.cpp, which share them.

#include <algorithm>
#include <deque>
#include <mutex>

#include "base/timer.h"
#include "grammar/matcher.h"
#include "engine/engine.h"
#include "inject/inject_plan.h"
#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::engine {

struct Engine::Active {
    Active(const LocalModel& lm, const sampling::SamplingParams& p)
        : params(p), sampler(p), stops(p.stop), decoder(lm.tokenizer()) {}

    Sequence seq;
    std::shared_ptr<RequestStream> stream = std::make_shared<RequestStream>();
    sampling::SamplingParams params;
    sampling::Sampler sampler;
    sampling::StopMatcher stops;
    // Structured output (EngineRequest::grammar): where the answer is in the grammar.
    std::optional<grammar::Matcher> matcher;
    tokenizer::IncrementalDecoder decoder;
    Usage usage;
    bool sent_first = false;
    bool keep_prompt_logits = false;  // EngineRequest::keep_prompt_logits
    // EngineRequest::prompt_logprobs: those of prompt tokens 1, 2, ... as their predicting
    // rows are computed (a recompute after preemption adds none).
    bool want_prompt_logprobs = false;
    std::vector<sampling::SampledLogprobs> prompt_logprobs;
    // Milestones for log_requests, seconds since submit.
    Timer since_submit;
    double t_queued = 0, t_memory = 0, t_admitted = 0, t_first = 0;
    // kv mode: the facts in prompt order, and while memory is ready, their pinned chunks and
    // the plan that writes them.
    std::vector<MemoryFact> facts;
    std::vector<memory::ChunkLease> leases;
    inject::InjectPlan plan;
    // Memory became ready on an idle engine: injected layer group by layer group inside its
    // first forward (EngineOptions::layered_host_chunks).
    bool layered = false;

    // Every chunk's bytes are on the device (promotions from host memory done).
    bool chunks_arrived() const {
        return std::all_of(leases.begin(), leases.end(),
                           [](const memory::ChunkLease& l) { return l.ready(); });
    }

    // The transfer after which layers 0..layer of every chunk are on the device (transfers
    // finish in ticket order, so the latest chunk's ticket covers them all); 0: none in flight.
    std::uint64_t layers_ticket(std::int64_t layer) const {
        std::uint64_t ticket = 0;
        for (const memory::ChunkLease& l : leases)
            ticket = std::max(ticket, l.layers_ticket(layer));
        return ticket;
    }

    // Lets the chunks go (injected, or the blocks were lost to preemption): a later
    // admission needs them fetched again.
    void release_memory() {
        leases.clear();
        plan = {};
        layered = false;
        seq.memory_ready = false;
    }
};

// Hears facts being added (on the store's writing thread) and queues them for the step loop.
class Engine::FactQueue final : public memory::FactListener {
  public:
    void on_fact_added(const memory::Fact& fact) override { push(fact); }
    void on_fact_changed(const memory::Fact& fact) override { push(fact); }
    std::vector<memory::Fact> take(std::size_t n) {
        std::lock_guard lock(mutex_);
        n = std::min(n, queue_.size());
        std::vector<memory::Fact> out(queue_.begin(),
                                      queue_.begin() + static_cast<std::ptrdiff_t>(n));
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
        return out;
    }
    std::size_t size() const {
        std::lock_guard lock(mutex_);
        return queue_.size();
    }

  private:
    void push(const memory::Fact& fact) {
        std::lock_guard lock(mutex_);
        queue_.push_back(fact);
    }
    mutable std::mutex mutex_;
    std::deque<memory::Fact> queue_;
};

}  // namespace inferscale::engine
