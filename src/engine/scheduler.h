#pragma once
// Scheduler: decides what each engine step computes. One token budget per step is shared by
// every sequence, with no separate prefill and decode phases: running sequences go first (a
// decode token each, or the next piece of a chunked prefill), then waiting ones are admitted
// in arrival order while budget and blocks last. An admitted prompt starts after its longest
// prefix-cache hit and after its injected memory; one whose next prompt block a running
// sequence is still computing (n copies of one prompt, a burst sharing a system prompt) waits
// for that block to reach the prefix cache instead of computing it again, letting later
// waiting sequences pass. When blocks run out, the most recently
// admitted running sequence is preempted: its blocks are dropped (cached ones stay in the
// prefix cache) and it is recomputed later from its tokens. Background sequences
// (Sequence::background, e.g. fact extraction) come last everywhere: they get what foreground
// sequences leave of a step, are admitted only while no foreground sequence waits, and are
// preempted first.
//
// Host-side only: it sees block ids and token counts, never tensors, models or backends.
// Sequences are borrowed: the caller keeps each alive until finish() returns.

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/sequence.h"
#include "kv/prefix_cache.h"

namespace inferscale::engine {

struct SchedulerOptions {
    std::int64_t max_step_tokens = 512;  // new tokens per step, all sequences together
    std::int64_t max_step_seqs = 64;     // sequences per step
    std::int64_t block_size = 16;
};

// Tokens [start, start + count) of `seq` are computed this step.
struct ScheduledRun {
    Sequence* seq = nullptr;
    std::int64_t start = 0;
    std::int64_t count = 0;
    bool sample = false;  // the run ends at the sequence's last token: sample the next one
};

// The engine writes `seq`'s memory KV for token positions [first_token, seq->injected_tokens)
// into seq->blocks before the step runs (earlier positions came from the prefix cache).
struct Injection {
    Sequence* seq = nullptr;
    std::int64_t first_token = 0;
};

struct StepPlan {
    std::vector<ScheduledRun> runs;
    std::vector<Injection> injections;
    std::vector<Sequence*> preempted;  // lost their blocks this step (release their chunks)
    std::int64_t num_tokens = 0;
    bool empty() const { return runs.empty(); }
};

class Scheduler {
  public:
    // `cache` (and the BlockPool under it) must outlive the scheduler.
    Scheduler(kv::PrefixCache& cache, const SchedulerOptions& options);

    // Queues a new sequence (status Waiting). Its prompt must be non-empty.
    void add(Sequence* seq);
    StepPlan schedule();
    // The planned step ran: every run's tokens (and injected memory) now have KV. Caches the
    // blocks that became full. Sampled tokens may already be appended to the sequences.
    void complete(const StepPlan& plan);
    // Takes the sequence out of the queues and frees its blocks (status Finished).
    void finish(Sequence* seq);

    // Waiting sequences that cannot be admitted until the engine holds their memory chunks,
    // in admission order, at most `limit`. Marks them WaitingForMemory.
    std::vector<Sequence*> needing_memory(std::size_t limit);

    std::size_t num_waiting() const { return waiting_.size(); }
    std::size_t num_running() const { return running_.size(); }
    const SchedulerOptions& options() const { return options_; }

  private:
    // Leading full prompt blocks the prefix cache holds, as an admission would match them.
    std::vector<kv::BlockContent> cacheable_blocks(const Sequence& seq,
                                                   std::vector<std::string>& extras) const;
    bool needs_memory(const Sequence& seq);
    // A running sequence is computing a prompt block `seq` would next take from the prefix
    // cache once it is there.
    bool waits_for_shared_prefix(const Sequence& seq);
    // Admits `seq` into `plan` with at most `budget` tokens; false when it does not fit now.
    bool admit(Sequence* seq, std::int64_t budget, StepPlan& plan);
    // schedule()'s two passes over one class of sequences (foreground or background): the
    // running ones' next tokens, then admissions from the waiting queue.
    void run_running(bool background, std::int64_t& budget, StepPlan& plan);
    void admit_waiting(bool background, std::int64_t& budget, StepPlan& plan);
    bool has_seq_room(const StepPlan& plan) const {
        return static_cast<std::int64_t>(plan.runs.size()) < options_.max_step_seqs;
    }
    bool grow(Sequence* seq, std::int64_t tokens);
    void preempt(Sequence* seq, StepPlan& plan);
    // The running sequence to preempt when blocks run out: the most recently admitted
    // background one, else the most recently admitted.
    Sequence* preemption_victim() const;
    void cache_full_blocks(Sequence* seq);

    kv::PrefixCache& cache_;
    SchedulerOptions options_;
    std::deque<Sequence*> waiting_;
    std::vector<Sequence*> running_;  // in admission order
};

}  // namespace inferscale::engine
