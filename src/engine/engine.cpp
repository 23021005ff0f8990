#include "engine/engine.h"

#include <algorithm>

#include "base/log.h"
#include "base/timer.h"
#include "engine/chunk_invalidator.h"
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
    tokenizer::IncrementalDecoder decoder;
    Usage usage;
    bool sent_first = false;
    // Milestones for log_requests, seconds since submit.
    Timer since_submit;
    double t_queued = 0, t_memory = 0, t_admitted = 0, t_first = 0;
    // kv mode: the facts in prompt order, and while memory is ready, their pinned chunks and
    // the plan that writes them.
    std::vector<MemoryFact> facts;
    std::vector<inject::ChunkLease> leases;
    inject::InjectPlan plan;
};

// Hears facts being added (on the store's writing thread) and queues them for the step loop.
class Engine::FactQueue final : public memory::FactListener {
  public:
    void on_fact_added(const memory::Fact& fact) override { push(fact); }
    void on_fact_changed(const memory::Fact& fact) override { push(fact); }
    std::vector<memory::Fact> take(std::size_t n) {
        std::lock_guard lock(mutex_);
        n = std::min(n, queue_.size());
        std::vector<memory::Fact> out(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
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

namespace {

// Where each piece of the memory stream starts, and the key the prefix cache gets for every
// block: the identities of the chunks whose KV lands in it.
std::vector<std::string> memory_block_keys(std::span<const std::int64_t> piece_lengths,
                                           std::span<const std::string> piece_keys,
                                           std::int64_t blocks, std::int64_t block_size) {
    std::vector<std::string> keys(static_cast<std::size_t>(blocks));
    std::int64_t begin = 0;
    for (std::size_t p = 0; p < piece_lengths.size(); ++p) {
        const std::int64_t end = begin + piece_lengths[p];
        for (std::int64_t b = begin / block_size; b < blocks && b * block_size < end; ++b)
            keys[static_cast<std::size_t>(b)] += piece_keys[p] + '\x1e';
        begin = end;
    }
    return keys;
}

// The plan's spans from KV position `first` on (earlier positions came from the cache).
std::vector<inject::InjectSpan> spans_from(const inject::InjectPlan& plan, std::int64_t first) {
    std::vector<inject::InjectSpan> out;
    for (inject::InjectSpan s : plan.spans) {
        const std::int64_t skip = std::clamp<std::int64_t>(first - s.first_position, 0, s.num_rows);
        if (skip == s.num_rows) continue;
        s.first_row += skip;
        s.first_position += skip;
        s.num_rows -= skip;
        out.push_back(s);
    }
    return out;
}

}  // namespace

Engine::Engine(LocalModel& model, memory::MemoryStore* store,
               const retrieval::Retriever* retriever, const EngineOptions& options)
    : model_(model),
      store_(store),
      retriever_(retriever),
      options_(options),
      cache_(model.blocks(), options.prefix_caching),
      scheduler_(cache_, SchedulerOptions{model.workspace().limits.max_tokens,
                                          std::min(model.workspace().limits.max_seqs,
                                                   model.workspace().limits.max_logit_rows),
                                          model.block_size()}) {}

Result<std::unique_ptr<Engine>> Engine::start(LocalModel& model, memory::MemoryStore* store,
                                              const retrieval::Retriever* retriever,
                                              const EngineOptions& options) {
    std::unique_ptr<Engine> e(new Engine(model, store, retriever, options));
    if (store != nullptr && retriever != nullptr && model.chat_template()) {
        e->runtime_ = IS_TRY(MemoryRuntime::create(model, options.memory));
        e->invalidator_ = std::make_unique<ChunkInvalidator>(e->runtime_->pool());
        IS_RETURN_IF_ERROR(store->add_listener(e->invalidator_.get(), false));
        if (options.background_encode_window >= 0) {
            e->added_facts_ = std::make_unique<FactQueue>();
            IS_RETURN_IF_ERROR(store->add_listener(e->added_facts_.get(), false));
        }
    }
    if (options.decode_graphs && model.backend().supports_graphs()) {
        model::DecodeGraphOptions graph_options;
        graph_options.max_kv_len = static_cast<std::int32_t>(model.max_context());
        e->graphs_ = IS_TRY(model::DecodeGraphRunner::create(model.model(), model.kv(),
                                                             model.workspace(), graph_options));
    }
    e->stats_.kv_blocks_total = model.blocks().num_blocks();
    e->thread_ = std::thread([raw = e.get()] { raw->loop(); });
    return e;
}

Engine::~Engine() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (invalidator_) store_->remove_listener(invalidator_.get());
    if (added_facts_) store_->remove_listener(added_facts_.get());
}

// ---- submission (caller's thread) ---------------------------------------------------------

Result<std::unique_ptr<Engine::Active>> Engine::prepare(EngineRequest request) {
    if (Status st = sampling::validate(request.sampling); !st.ok())
        return make_error(ErrorKind::InvalidArgument, st.error().message);
    const LocalModel& lm = model_;
    auto a = std::make_unique<Active>(lm, request.sampling);
    std::vector<std::int32_t>& tokens = a->seq.tokens;
    const bool with_memory = request.memory_mode != MemoryMode::None;

    if (request.prompt) {
        if (with_memory)
            return make_error(ErrorKind::InvalidArgument, "memory needs a chat request");
        tokens = lm.tokenizer().encode(*request.prompt, /*add_special=*/true);
    } else {
        if (!lm.chat_template())
            return make_error(ErrorKind::InvalidArgument, "the model has no chat template");
        if (request.messages.empty())
            return make_error(ErrorKind::InvalidArgument, "messages must not be empty");
        if (!with_memory) {
            tokens = lm.tokenizer().encode(lm.chat_template()->render(request.messages, true),
                                           /*add_special=*/false, /*parse_special=*/true);
        }
    }
    if (with_memory) {
        if (request.user.empty())
            return make_error(ErrorKind::InvalidArgument, "memory needs a user");
        if (!runtime_)
            return make_error(ErrorKind::InvalidArgument, "this server has no memory store");
        const bool known = IS_TRY(store_->has_user(request.user));
        if (!known)
            return make_error(ErrorKind::NotFound, "unknown user '" + request.user + "'");
        std::string question;
        for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it)
            if (it->role == "user") {
                question = it->content;
                break;
            }
        const std::vector<MemoryFact> ranked = IS_TRY(retrieve_memory_facts(
            lm, *store_, *retriever_, request.user, question, request.retrieval));
        a->facts = IS_TRY(prompt_order(ranked));
        const inject::MemoryScaffold& scaffold = runtime_->scaffold();
        std::vector<std::vector<std::int32_t>> fact_tokens;
        for (const MemoryFact& f : a->facts)
            fact_tokens.push_back(IS_TRY(inject::fact_token_ids(lm.tokenizer(), f.text)));
        tokens = inject::memory_stream(scaffold, fact_tokens);
        const auto memory_len = static_cast<std::int64_t>(tokens.size());
        const std::vector<std::int32_t> conversation = inject::conversation_token_ids(
            lm.tokenizer(), &*lm.chat_template(), request.messages, tokens.front());
        tokens.insert(tokens.end(), conversation.begin(), conversation.end());
        a->usage.memory_tokens = memory_len;
        // One user's blocks never serve another's, even for identical text.
        a->seq.cache_salt = "user\x1f" + request.user + '\x1f';
        if (request.memory_mode == MemoryMode::Kv) {
            const std::int64_t bs = lm.block_size();
            a->seq.injected_tokens = memory_len / bs * bs;
            std::vector<std::int64_t> lengths{static_cast<std::int64_t>(scaffold.header.size())};
            std::vector<std::string> keys{"scaffold:header"};
            if (a->facts.empty()) {
                lengths.push_back(static_cast<std::int64_t>(scaffold.empty_memory.size()));
                keys.push_back("scaffold:empty");
            }
            for (std::size_t i = 0; i < a->facts.size(); ++i) {
                lengths.push_back(static_cast<std::int64_t>(fact_tokens[i].size()));
                keys.push_back(runtime_->identity_of(a->facts[i]).key());
            }
            lengths.push_back(static_cast<std::int64_t>(scaffold.footer.size()));
            keys.push_back("scaffold:footer");
            a->seq.memory_block_keys =
                memory_block_keys(lengths, keys, a->seq.injected_tokens / bs, bs);
        } else {
            a->facts.clear();
        }
    }
    const auto prompt_len = static_cast<std::int64_t>(tokens.size());
    if (prompt_len == 0) return make_error(ErrorKind::InvalidArgument, "the prompt is empty");
    if (prompt_len >= lm.max_context())
        return make_error(ErrorKind::InvalidArgument,
                          "the prompt has " + std::to_string(prompt_len) +
                              " tokens; the model's context holds " +
                              std::to_string(lm.max_context()));
    a->seq.prompt_len = prompt_len;
    a->seq.max_len = std::min<std::int64_t>(prompt_len + request.sampling.max_tokens,
                                            lm.max_context());
    a->usage.prompt_tokens = prompt_len;
    return a;
}

Result<std::shared_ptr<RequestStream>> Engine::submit(EngineRequest request) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return make_error(ErrorKind::Unavailable, "the engine is shutting down");
        if (in_flight_ >= options_.max_requests)
            return make_error(ErrorKind::Unavailable,
                              "the server is at its limit of " +
                                  std::to_string(options_.max_requests) + " requests in flight");
        ++in_flight_;  // reserved now, so concurrent submits cannot overshoot
    }
    auto prepared = prepare(std::move(request));
    std::lock_guard lock(mutex_);
    if (!prepared.ok()) {
        --in_flight_;
        return std::move(prepared).error();
    }
    std::unique_ptr<Active> a = std::move(prepared).value();
    a->seq.id = next_id_++;
    std::shared_ptr<RequestStream> stream = a->stream;
    a->t_queued = a->since_submit.seconds();
    incoming_.push_back(std::move(a));
    wake_.notify_all();
    return stream;
}

EngineStats Engine::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

// ---- the step loop --------------------------------------------------------------------------

void Engine::take_new_requests() {
    std::deque<std::unique_ptr<Active>> taken;
    {
        std::lock_guard lock(mutex_);
        taken.swap(incoming_);
    }
    for (auto& a : taken) {
        Sequence* seq = &a->seq;
        active_.emplace(seq->id, std::move(a));
        scheduler_.add(seq);
    }
}

void Engine::end(Active& a, StreamEvent event) {
    if (options_.log_requests)
        IS_LOG(Info) << "request " << a.seq.id << ": queued " << a.t_queued * 1e3 << " ms, memory "
                     << a.t_memory * 1e3 << " ms, admitted " << a.t_admitted * 1e3
                     << " ms, first token " << a.t_first * 1e3 << " ms, done "
                     << a.since_submit.seconds() * 1e3 << " ms; prompt " << a.usage.prompt_tokens
                     << ", injected " << a.usage.injected_tokens << ", generated "
                     << a.usage.completion_tokens << ", preempted " << a.seq.preemptions;
    event.finished = true;
    event.usage = a.usage;
    const bool cancelled = a.stream->cancelled();
    const bool failed = event.error.has_value();
    a.stream->push(std::move(event));
    scheduler_.finish(&a.seq);
    active_.erase(a.seq.id);  // destroys a
    std::lock_guard lock(mutex_);
    --in_flight_;
    if (cancelled) ++stats_.requests_cancelled;
    else if (failed) ++stats_.requests_failed;
    else ++stats_.requests_finished;
}

void Engine::fail(Active& a, Error error) {
    StreamEvent event;
    event.error = std::move(error);
    end(a, std::move(event));
}

void Engine::drop_cancelled() {
    std::vector<Active*> gone;
    for (auto& [id, a] : active_)
        if (a->stream->cancelled()) gone.push_back(a.get());
    for (Active* a : gone) fail(*a, make_error("cancelled"));
}

Result<std::size_t> Engine::encode_missing(std::span<const MemoryFact> facts, std::size_t& budget) {
    std::vector<MemoryFact> missing;
    for (const MemoryFact& f : facts)
        if (!runtime_->pool().tier_of(runtime_->identity_of(f))) missing.push_back(f);
    const std::size_t now = std::min(budget, missing.size());
    if (now == 0) return missing.size();
    // Encoding runs its sequences in scratch blocks: make room from the prefix cache, or try
    // again after running requests have freed some.
    std::int64_t scratch = static_cast<std::int64_t>(runtime_->scaffold().header.size());
    for (std::size_t i = 0; i < now; ++i)
        scratch += static_cast<std::int64_t>(missing[i].context_tokens.size() + missing[i].text.size());
    const auto blocks = static_cast<std::int32_t>(scratch / model_.block_size() + 2 * now + 1);
    std::vector<kv::BlockId> probe;
    if (!cache_.allocate(blocks, probe)) return missing.size();
    model_.blocks().release(probe);
    // acquire() encodes what it misses and adds it to the pool; the leases end at once.
    IS_TRY(runtime_->acquire(std::span(missing).first(now)));
    budget -= now;
    return missing.size() - now;
}

void Engine::prepare_memory() {
    if (!runtime_) return;
    std::size_t budget = options_.encode_facts_per_step;
    for (Sequence* seq : scheduler_.needing_memory(options_.memory_prepare_ahead)) {
        Active& a = *active_.at(seq->id);
        auto still_missing = encode_missing(a.facts, budget);
        if (!still_missing.ok()) {
            fail(a, std::move(still_missing).error());
            continue;
        }
        if (*still_missing > 0) continue;  // encoding goes on in later iterations
        auto leases = runtime_->acquire(a.facts);
        if (!leases.ok()) {
            // A device tier full of other requests' pinned chunks frees up as they start.
            if (leases.error().kind == ErrorKind::Unavailable &&
                runtime_->pool().stats().pinned_chunks > 0)
                continue;
            fail(a, std::move(leases).error());
            continue;
        }
        std::vector<const inject::KvChunk*> body;
        for (const inject::ChunkLease& l : *leases) body.push_back(l.get());
        if (body.empty()) body.push_back(&runtime_->empty_memory_chunk());
        auto plan = inject::make_memory_plan(runtime_->header_chunk(), body,
                                             runtime_->footer_chunk(), model_.block_size());
        if (!plan.ok()) {
            fail(a, std::move(plan).error());
            continue;
        }
        IS_CHECK(plan->loaded_tokens == seq->injected_tokens &&
                 std::equal(plan->token_ids.begin(), plan->token_ids.end(), seq->tokens.begin()))
            << "the memory plan disagrees with the prompt laid out at submit";
        a.leases = std::move(leases).value();
        a.plan = std::move(plan).value();
        seq->memory_ready = true;
        seq->status = SequenceStatus::Waiting;
        a.t_memory = a.since_submit.seconds();
    }
    if (budget == options_.encode_facts_per_step) encode_in_background(budget);
}

void Engine::encode_in_background(std::size_t budget) {
    if (!added_facts_) return;
    for (const memory::Fact& fact : added_facts_->take(budget)) {
        // Failures here cost nothing but a later on-demand encode: the request path retries.
        auto facts = memory_facts(model_, *store_, fact.user, std::span(&fact, 1),
                                  options_.background_encode_window);
        if (!facts.ok()) continue;
        std::size_t one = 1;
        (void)encode_missing(*facts, one);
    }
}

Status Engine::inject(const Injection& injection) {
    Active& a = *active_.at(injection.seq->id);
    const std::vector<inject::InjectSpan> spans = spans_from(a.plan, injection.first_token);
    IS_RETURN_IF_ERROR(runtime_->injector().inject(spans, a.seq.blocks, model_.kv()));
    a.usage.injected_tokens = a.seq.injected_tokens - injection.first_token;
    {
        std::lock_guard lock(mutex_);
        stats_.injected_tokens += static_cast<std::uint64_t>(a.usage.injected_tokens);
    }
    // The KV is in the blocks now; the chunks may be demoted again.
    a.leases.clear();
    a.plan = {};
    a.seq.memory_ready = false;
    return {};
}

void Engine::emit(Active& a, std::int32_t token) {
    Sequence& seq = a.seq;
    StreamEvent event;
    if (!a.sent_first) {
        a.sent_first = true;
        a.t_first = a.since_submit.seconds();
        event.first_token = true;
        a.usage.cached_tokens = seq.num_cached + a.usage.injected_tokens;
        std::lock_guard lock(mutex_);
        stats_.cached_tokens += static_cast<std::uint64_t>(seq.num_cached);
    }
    bool done = false;
    if (!a.params.ignore_eos && model_.is_end_of_generation(token)) {
        done = true;
    } else {
        seq.tokens.push_back(token);
        ++a.usage.completion_tokens;
        event.new_tokens = 1;
        event.text = a.stops.push(a.decoder.push(token));
        done = a.stops.stopped();
        if (!done && static_cast<std::int64_t>(seq.tokens.size()) >= seq.max_len) {
            event.finish_reason = "length";
            done = true;
        }
    }
    if (!done) {
        a.stream->push(std::move(event));
        return;
    }
    if (!a.stops.stopped()) {
        event.text += a.stops.push(a.decoder.flush());
        if (!a.stops.stopped()) event.text += a.stops.flush();
    }
    end(a, std::move(event));
}

Status Engine::run_step(StepPlan& plan) {
    for (const Injection& injection : plan.injections) IS_RETURN_IF_ERROR(inject(injection));
    step_ids_.clear();
    step_positions_.clear();
    step_seqs_.clear();
    bool greedy = true;
    bool decode_only = true;
    for (const ScheduledRun& run : plan.runs) {
        decode_only = decode_only && run.count == 1 && run.sample;
        if (run.start == run.seq->num_cached || run.start == run.seq->injected_tokens) {
            Active& a = *active_.at(run.seq->id);
            if (a.t_admitted == 0) a.t_admitted = a.since_submit.seconds();
        }
        const Sequence& seq = *run.seq;
        step_ids_.insert(step_ids_.end(), seq.tokens.begin() + run.start,
                         seq.tokens.begin() + run.start + run.count);
        for (std::int64_t p = run.start; p < run.start + run.count; ++p)
            step_positions_.push_back(static_cast<std::int32_t>(p));
        model::BatchSequence bs;
        bs.num_tokens = static_cast<std::int32_t>(run.count);
        bs.kv_len = static_cast<std::int32_t>(run.start + run.count);
        bs.pages = seq.blocks;
        step_seqs_.push_back(bs);
        if (run.sample && active_.at(seq.id)->params.temperature > 0.0f) greedy = false;
    }
    model::ForwardBatch batch;
    batch.token_ids = step_ids_;
    batch.positions = step_positions_;
    batch.sequences = step_seqs_;
    batch.logits = model::LogitsSelection::LastPerSequence;
    const std::size_t rows = plan.runs.size();
    const auto vocab = static_cast<std::size_t>(model_.config().vocab_size);
    if (greedy && decode_only && graphs_ && graphs_->bucket_for(static_cast<std::int64_t>(rows)) > 0) {
        sampled_.resize(rows);
        IS_RETURN_IF_ERROR(graphs_->decode(batch, sampled_));
    } else if (greedy) {
        sampled_.resize(rows);
        IS_RETURN_IF_ERROR(model_.model().forward_greedy(batch, model_.kv(), model_.workspace(), sampled_));
    } else {
        logits_.resize(rows * vocab);
        IS_RETURN_IF_ERROR(model_.model().forward(batch, model_.kv(), model_.workspace(), logits_));
    }
    scheduler_.complete(plan);
    std::int64_t computed = 0, sampled = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        const ScheduledRun& run = plan.runs[r];
        computed += run.count;
        if (!run.sample) continue;
        ++sampled;
        Active& a = *active_.at(run.seq->id);
        const std::int32_t token =
            greedy ? sampled_[r]
                   : a.sampler.sample(std::span<const float>(logits_).subspan(r * vocab, vocab));
        emit(a, token);
    }
    std::lock_guard lock(mutex_);
    ++stats_.steps;
    stats_.computed_tokens += static_cast<std::uint64_t>(computed);
    stats_.generated_tokens += static_cast<std::uint64_t>(sampled);
    return {};
}

void Engine::loop() {
    while (true) {
        take_new_requests();
        {
            std::lock_guard lock(mutex_);
            if (stopping_) break;
        }
        drop_cancelled();
        prepare_memory();
        StepPlan plan = scheduler_.schedule();
        for (Sequence* seq : plan.preempted) {
            Active& a = *active_.at(seq->id);
            a.leases.clear();
            a.plan = {};
            std::lock_guard lock(mutex_);
            ++stats_.preemptions;
        }
        if (!plan.empty()) {
            if (Status st = run_step(plan); !st.ok()) {
                for (const ScheduledRun& run : plan.runs)
                    if (active_.count(run.seq->id)) fail(*active_.at(run.seq->id), st.error());
            }
        }
        {
            std::unique_lock lock(mutex_);
            stats_.waiting = scheduler_.num_waiting();
            stats_.running = scheduler_.num_running();
            stats_.waiting_for_memory = static_cast<std::size_t>(std::count_if(
                active_.begin(), active_.end(), [](const auto& kv) {
                    return kv.second->seq.status == SequenceStatus::WaitingForMemory;
                }));
            stats_.kv_blocks_used = model_.blocks().num_blocks() - cache_.num_available();
            stats_.kv_blocks_cached = cache_.num_cached();
            if (runtime_) {
                stats_.chunk_pool = runtime_->pool().stats();
                stats_.chunk_pool_device_capacity = runtime_->pool().options().device_capacity_bytes;
                stats_.chunk_pool_host_capacity = runtime_->pool().options().host_capacity_bytes;
            }
            stats_.facts_to_encode = added_facts_ ? added_facts_->size() : 0;
            if (plan.empty() && incoming_.empty() && !stopping_ && stats_.facts_to_encode == 0) {
                // Idle, or only requests waiting for memory: sleep until new work arrives,
                // looking again now and then for cancellations and freed room.
                wake_.wait_for(lock, std::chrono::milliseconds(active_.empty() ? 1000 : 5));
            }
        }
    }
    for (auto& [id, a] : active_) {
        StreamEvent event;
        event.finished = true;
        event.error = make_error(ErrorKind::Unavailable, "the engine stopped");
        a->stream->push(std::move(event));
    }
    active_.clear();
}

}  // namespace inferscale::engine
