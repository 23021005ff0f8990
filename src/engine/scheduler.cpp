#include "engine/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace inferscale::engine {

Scheduler::Scheduler(kv::PrefixCache& cache, const SchedulerOptions& options)
    : cache_(cache), options_(options) {
    IS_CHECK(options.max_step_tokens > 0 && options.max_step_seqs > 0 && options.block_size > 0);
}

void Scheduler::add(Sequence* seq) {
    IS_CHECK(seq->prompt_len > 0 &&
             seq->tokens.size() >= static_cast<std::size_t>(seq->prompt_len));
    IS_CHECK(seq->injected_tokens % options_.block_size == 0 &&
             seq->injected_tokens < seq->prompt_len);
    seq->status = SequenceStatus::Waiting;
    waiting_.push_back(seq);
}

std::vector<kv::BlockContent> Scheduler::cacheable_blocks(const Sequence& seq,
                                                          std::vector<std::string>& extras) const {
    if (!cache_.enabled()) return {};
    // At least the last token is always computed: its logits pick the next token.
    const std::size_t n = (seq.tokens.size() - 1) / static_cast<std::size_t>(options_.block_size);
    extras.resize(n);
    std::vector<kv::BlockContent> out(n);
    const auto bs = static_cast<std::size_t>(options_.block_size);
    for (std::size_t i = 0; i < n; ++i) {
        extras[i] = seq.block_extra(i);
        out[i] = {std::span(seq.tokens).subspan(i * bs, bs), extras[i]};
    }
    return out;
}

bool Scheduler::needs_memory(const Sequence& seq) {
    if (seq.injected_tokens == 0) return false;
    if (!cache_.enabled()) return true;
    std::vector<std::string> extras;
    const auto blocks = cacheable_blocks(seq, extras);
    const auto injected_blocks =
        static_cast<std::size_t>(seq.injected_tokens / options_.block_size);
    return cache_.match(std::span(blocks).first(std::min(blocks.size(), injected_blocks)),
                        nullptr) < injected_blocks;
}

bool Scheduler::waits_for_shared_prefix(const Sequence& seq) {
    if (!cache_.enabled() || seq.compute_whole_prompt) return false;
    std::vector<std::string> extras;
    const auto blocks = cacheable_blocks(seq, extras);
    const std::size_t hits = cache_.match(blocks, nullptr);
    if (hits == blocks.size()) return false;
    const std::size_t shared_len = (hits + 1) * static_cast<std::size_t>(options_.block_size);
    for (const Sequence* other : running_) {
        // It caches block `hits` only when that block is full before its last token and not
        // cached by it yet (a block it cached and that got evicted is not coming back).
        if (other->num_cache_inserted > static_cast<std::int64_t>(hits) ||
            other->tokens.size() <= shared_len ||
            !std::equal(seq.tokens.begin(), seq.tokens.begin() + shared_len, other->tokens.begin()))
            continue;
        bool same_keys = true;
        for (std::size_t i = 0; i <= hits && same_keys; ++i)
            same_keys = other->block_extra(i) == extras[i];
        if (same_keys) return true;
    }
    return false;
}

std::vector<Sequence*> Scheduler::needing_memory(std::size_t limit) {
    std::vector<Sequence*> out;
    for (Sequence* seq : waiting_) {
        if (out.size() >= limit) break;
        if (seq->memory_ready || !needs_memory(*seq)) continue;
        seq->status = SequenceStatus::WaitingForMemory;
        out.push_back(seq);
    }
    return out;
}

bool Scheduler::grow(Sequence* seq, std::int64_t tokens) {
    const auto needed =
        static_cast<std::int32_t>((tokens + options_.block_size - 1) / options_.block_size);
    const auto missing = needed - static_cast<std::int32_t>(seq->blocks.size());
    return missing <= 0 || cache_.allocate(missing, seq->blocks);
}

void Scheduler::preempt(Sequence* seq, StepPlan& plan) {
    cache_.pool().release(seq->blocks);
    seq->blocks.clear();
    seq->num_computed = 0;
    seq->num_cached = 0;
    seq->num_cache_inserted = 0;
    seq->memory_ready = false;
    seq->status = SequenceStatus::Waiting;
    ++seq->preemptions;
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    waiting_.push_front(seq);
    plan.preempted.push_back(seq);
}

Sequence* Scheduler::preemption_victim() const {
    const auto background = std::find_if(running_.rbegin(), running_.rend(),
                                         [](const Sequence* s) { return s->background; });
    return background != running_.rend() ? *background : running_.back();
}

bool Scheduler::admit(Sequence* seq, std::int64_t budget, StepPlan& plan) {
    std::vector<std::string> extras;
    const auto blocks = cacheable_blocks(*seq, extras);
    std::vector<kv::BlockId> matched;
    const std::size_t hits = seq->compute_whole_prompt ? 0 : cache_.match(blocks, &matched);
    const std::int64_t cached = static_cast<std::int64_t>(hits) * options_.block_size;
    const bool inject = seq->injected_tokens > cached;
    if (inject && !seq->memory_ready) {
        cache_.pool().release(matched);
        seq->status = SequenceStatus::WaitingForMemory;
        return false;
    }
    const std::int64_t start = std::max(cached, seq->injected_tokens);
    const std::int64_t count =
        std::min<std::int64_t>(static_cast<std::int64_t>(seq->tokens.size()) - start, budget);
    seq->blocks = std::move(matched);
    if (!grow(seq, start + count)) {
        cache_.pool().release(seq->blocks);
        seq->blocks.clear();
        return false;
    }
    seq->status = SequenceStatus::Running;
    seq->num_computed = cached;
    seq->num_cached = cached;
    seq->num_cache_inserted = static_cast<std::int64_t>(hits);
    if (inject) plan.injections.push_back({seq, cached});
    plan.runs.push_back(
        {seq, start, count, start + count == static_cast<std::int64_t>(seq->tokens.size())});
    plan.num_tokens += count;
    return true;
}

void Scheduler::run_running(bool background, std::int64_t& budget, StepPlan& plan) {
    // A copy, as preemption edits running_.
    const std::vector<Sequence*> running = running_;
    for (Sequence* seq : running) {
        if (seq->background != background) continue;
        if (seq->status != SequenceStatus::Running) continue;  // preempted below
        if (budget == 0 || !has_seq_room(plan)) break;
        const std::int64_t count = std::min<std::int64_t>(
            static_cast<std::int64_t>(seq->tokens.size()) - seq->num_computed, budget);
        IS_CHECK(count > 0) << "running sequence " << seq->id << " has nothing to compute";
        bool fits = grow(seq, seq->num_computed + count);
        while (!fits) {
            Sequence* victim = preemption_victim();
            preempt(victim, plan);
            if (victim == seq) break;
            fits = grow(seq, seq->num_computed + count);
        }
        if (!fits) continue;
        plan.runs.push_back(
            {seq, seq->num_computed, count,
             seq->num_computed + count == static_cast<std::int64_t>(seq->tokens.size())});
        plan.num_tokens += count;
        budget -= count;
    }
}

void Scheduler::admit_waiting(bool background, std::int64_t& budget, StepPlan& plan) {
    // In arrival order; one that waits for its memory lets later ones pass.
    for (auto it = waiting_.begin(); it != waiting_.end() && budget > 0 && has_seq_room(plan);) {
        Sequence* seq = *it;
        const std::size_t runs_before = plan.runs.size();
        if (seq->background != background || waits_for_shared_prefix(*seq)) {
            ++it;
        } else if (admit(seq, budget, plan)) {
            budget -= plan.runs[runs_before].count;
            running_.push_back(seq);
            it = waiting_.erase(it);
        } else if (seq->status == SequenceStatus::WaitingForMemory) {
            ++it;
        } else {
            break;  // out of blocks: keep arrival order
        }
    }
}

StepPlan Scheduler::schedule() {
    StepPlan plan;
    std::int64_t budget = options_.max_step_tokens;
    // Foreground sequences first, running ones then waiting ones; background ones after
    // them, in the same order, and those waiting only when no foreground one still waits.
    for (const bool background : {false, true}) {
        run_running(background, budget, plan);
        // Nothing is admitted in a step that had to preempt: blocks are short.
        if (!plan.preempted.empty()) break;
        if (background && std::any_of(waiting_.begin(), waiting_.end(),
                                       [](const Sequence* s) { return !s->background; }))
            break;
        admit_waiting(background, budget, plan);
    }
    return plan;
}

void Scheduler::cache_full_blocks(Sequence* seq) {
    if (!cache_.enabled()) return;
    const auto bs = options_.block_size;
    const std::int64_t full = seq->num_computed / bs;
    for (std::int64_t i = seq->num_cache_inserted; i < full; ++i) {
        const std::string extra = seq->block_extra(static_cast<std::size_t>(i));
        cache_.insert(seq->blocks, static_cast<std::size_t>(i),
                      {std::span(seq->tokens).subspan(static_cast<std::size_t>(i * bs),
                                                      static_cast<std::size_t>(bs)),
                       extra});
    }
    seq->num_cache_inserted = std::max(seq->num_cache_inserted, full);
}

void Scheduler::complete(const StepPlan& plan) {
    for (const ScheduledRun& run : plan.runs) {
        if (run.seq->status != SequenceStatus::Running) continue;
        run.seq->num_computed = run.start + run.count;
        cache_full_blocks(run.seq);
    }
}

void Scheduler::finish(Sequence* seq) {
    if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end())
        running_.erase(it);
    if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end())
        waiting_.erase(it);
    cache_.pool().release(seq->blocks);
    seq->blocks.clear();
    seq->status = SequenceStatus::Finished;
}

}  // namespace inferscale::engine
