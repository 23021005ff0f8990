// The request half of an Engine: submission, the step loop, sampling and streaming.
// The memory half is engine_memory.cpp.

#include "engine/engine.h"

#include <algorithm>
#include <string_view>

#include "base/log.h"
#include "engine/chunk_invalidator.h"
#include "engine/engine_active.h"
#include "engine/warm_up.h"

namespace inferscale::engine {

Engine::Engine(LocalModel& model, memory::MemoryStore* store,
               const retrieval::FactRetriever* retriever, const EngineOptions& options)
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
                                              const retrieval::FactRetriever* retriever,
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
    if (options.warm_up && model.backend().wants_warm_up()) {
        const WarmUpReport warm = IS_TRY(
            warm_up(model, e->graphs_ ? &*e->graphs_ : nullptr,
                    e->scheduler_.options().max_step_seqs));
        IS_LOG(Info) << "warm-up: " << warm.steps << " step shapes in "
                     << static_cast<int>(warm.seconds * 1000) << " ms"
                     << (e->graphs_ ? ", " + std::to_string(e->graphs_->graphs_captured()) +
                                          " decode graphs recorded"
                                    : std::string())
                     << (warm.skipped > 0 ? " (" + std::to_string(warm.skipped) +
                                                " skipped: too few KV blocks)"
                                          : std::string());
    }
    if (e->graphs_ && !e->graphs_->graph_error().empty()) {
        IS_LOG(Warn) << "decode steps run without graphs: " << e->graphs_->graph_error();
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
    for (const sampling::LogitBias& b : request.sampling.logit_bias)
        if (b.token >= lm.config().vocab_size)
            return make_error(ErrorKind::InvalidArgument,
                              "logit_bias token " + std::to_string(b.token) +
                                  " is outside the vocabulary");
    auto a = std::make_unique<Active>(lm, request.sampling);
    std::vector<std::int32_t>& tokens = a->seq.tokens;
    bool with_memory = request.memory_mode != MemoryMode::None;

    if (request.prompt || request.messages.empty()) {
        if (with_memory)
            return make_error(ErrorKind::InvalidArgument, "memory needs a chat request");
        if (request.prompt) {
            tokens = lm.tokenizer().encode(*request.prompt, /*add_special=*/true);
        } else {
            const std::int64_t vocab = lm.config().vocab_size;
            for (std::int32_t id : request.prompt_token_ids)
                if (id < 0 || id >= vocab)
                    return make_error(ErrorKind::InvalidArgument,
                                      "token id " + std::to_string(id) +
                                          " is outside the vocabulary");
            tokens = std::move(request.prompt_token_ids);
        }
    } else {
        if (!lm.chat_template())
            return make_error(ErrorKind::InvalidArgument, "the model has no chat template");
        // A user with no facts (never seen, or all forgotten) is answered as mode None: apps
        // set `user` for abuse tracking whether or not they keep memories here.
        if (with_memory && runtime_ && !request.user.empty())
            with_memory = IS_TRY(store_->has_facts(request.user));
        // The memory prompt renders its own system turn, which the template's tool section
        // would have to share: not supported.
        if (with_memory && !request.tools.is_none())
            return make_error(ErrorKind::InvalidArgument,
                              "memory is not supported with tools the chat template renders");
        if (!with_memory) tokens = IS_TRY(lm.encode_chat(request.messages, true, request.tools));
    }
    if (with_memory) IS_RETURN_IF_ERROR(lay_out_memory(*a, request));
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
    a->keep_prompt_logits = request.keep_prompt_logits;
    if (request.grammar) {
        if (&request.grammar->vocabulary() != &lm.grammars().vocabulary())
            return make_error(ErrorKind::InvalidArgument,
                              "the grammar was compiled for another model's vocabulary");
        if (request.sampling.ignore_eos)
            return make_error(ErrorKind::InvalidArgument,
                              "ignore_eos cannot be combined with a grammar");
        a->matcher.emplace(request.grammar);
    }
    if (request.prompt_logprobs) {
        if (request.sampling.logprobs < 0)
            return make_error(ErrorKind::InvalidArgument,
                              "prompt log-probabilities need a logprobs count");
        if (with_memory)
            return make_error(ErrorKind::InvalidArgument,
                              "prompt log-probabilities are not computed with memory");
        a->want_prompt_logprobs = true;
        a->seq.compute_whole_prompt = true;
    }
    a->seq.background = request.background;
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
    EngineStats s;
    {
        std::lock_guard lock(mutex_);
        s = stats_;
    }
    if (runtime_) {  // the pool is thread-safe; counting its pinned chunks walks every entry
        s.chunk_pool = runtime_->pool().stats();
        s.chunk_pool_device_capacity = runtime_->pool().options().device_capacity_bytes;
        s.chunk_pool_host_capacity = runtime_->pool().options().host_capacity_bytes;
        s.transfers = model_.backend().transfer_totals();
    }
    return s;
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
    if (options_.log_requests) {
        IS_LOG(Info) << "request " << a.seq.id << ": queued " << a.t_queued * 1e3 << " ms, memory "
                     << a.t_memory * 1e3 << " ms, admitted " << a.t_admitted * 1e3
                     << " ms, first token " << a.t_first * 1e3 << " ms, done "
                     << a.since_submit.seconds() * 1e3 << " ms; prompt " << a.usage.prompt_tokens
                     << ", injected " << a.usage.injected_tokens << ", generated "
                     << a.usage.completion_tokens << ", preempted " << a.seq.preemptions;
    }
    event.finished = true;
    event.usage = a.usage;
    event.admitted_seconds = a.t_admitted;
    event.first_token_seconds = a.t_first;
    event.finished_seconds = a.since_submit.seconds();
    const bool cancelled = a.stream->cancelled();
    const bool failed = event.error.has_value();
    const bool hit_length = std::string_view(event.finish_reason) == "length";
    const std::int64_t prompt_tokens = a.usage.prompt_tokens;
    // From entering the engine to its chunks being held (requests with memory only).
    const double memory_wait = a.t_memory > 0 ? a.t_memory - a.t_queued : -1.0;
    a.stream->push(std::move(event));
    scheduler_.finish(&a.seq);
    active_.erase(a.seq.id);  // destroys a
    std::lock_guard lock(mutex_);
    --in_flight_;
    if (cancelled) ++stats_.requests_cancelled;
    else if (failed) ++stats_.requests_failed;
    else ++stats_.requests_finished;
    if (!cancelled && !failed && hit_length) ++stats_.requests_finished_length;
    stats_.prompt_tokens += static_cast<std::uint64_t>(prompt_tokens);
    if (memory_wait >= 0) {
        ++stats_.memory_requests;
        stats_.memory_wait_seconds += memory_wait;
    }
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

namespace {

LogprobEntry logprob_entry(const tokenizer::Tokenizer& tok, sampling::TokenLogprob t) {
    return {tok.decode_piece(t.token), t.logprob};
}

TokenLogprobs token_logprobs(const tokenizer::Tokenizer& tok,
                             const sampling::SampledLogprobs& logprobs) {
    TokenLogprobs entry{logprob_entry(tok, logprobs.sampled), {}};
    for (const sampling::TokenLogprob& t : logprobs.top) entry.top.push_back(logprob_entry(tok, t));
    return entry;
}

}  // namespace

void Engine::emit(Active& a, std::int32_t token, std::span<const float> logits,
                  const sampling::SampledLogprobs* logprobs) {
    Sequence& seq = a.seq;
    StreamEvent event;
    if (!a.sent_first) {
        a.sent_first = true;
        a.t_first = a.since_submit.seconds();
        event.first_token = true;
        if (a.keep_prompt_logits) event.prompt_logits.assign(logits.begin(), logits.end());
        if (a.want_prompt_logprobs) {
            const tokenizer::Tokenizer& tok = model_.tokenizer();
            TokenLogprobs first{{tok.decode_piece(seq.tokens.front()), 0.0f}, {}};
            first.scored = false;
            event.prompt_logprobs.push_back(std::move(first));
            for (const sampling::SampledLogprobs& lp : a.prompt_logprobs)
                event.prompt_logprobs.push_back(token_logprobs(tok, lp));
        }
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
        event.token_ids.push_back(token);
        if (logprobs) event.logprobs.push_back(token_logprobs(model_.tokenizer(), *logprobs));
        event.text = a.stops.push(a.decoder.push(token));
        // A complete answer of a grammar that admits nothing more ends here.
        done = a.stops.stopped() || (a.matcher && a.matcher->finished());
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
    // One request chosen on an idle engine (Active::layered) is injected layer group by layer
    // group inside the forward; it is prepared last, as the injector holds one prepared
    // injection.
    const Injection* layered = nullptr;
    for (const Injection& injection : plan.injections) {
        if (layered == nullptr && active_.at(injection.seq->id)->layered) {
            layered = &injection;
            continue;
        }
        IS_RETURN_IF_ERROR(inject(injection));
    }
    if (layered != nullptr) IS_RETURN_IF_ERROR(prepare_layered(*layered));
    const Status stepped = run_forward(plan);
    finish_layered();  // when the forward failed before doing it
    return stepped;
}

Status Engine::run_forward(StepPlan& plan) {
    step_ids_.clear();
    step_positions_.clear();
    step_seqs_.clear();
    bool greedy = true;
    bool decode_only = true;
    // Some request wants log-probabilities or adjusts its logits (bias, penalties): the logits
    // come to the host and every row is sampled there.
    bool host_logits = false;
    // Some request wants its prompt's log-probabilities: every token's row comes back.
    bool all_rows = false;
    for (const ScheduledRun& run : plan.runs) {
        decode_only = decode_only && run.count == 1 && run.sample;
        Active& a = *active_.at(run.seq->id);
        if (a.t_admitted == 0) a.t_admitted = a.since_submit.seconds();  // its first run
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
        if (run.sample && a.params.temperature > 0.0f) greedy = false;
        if (run.sample && (a.params.logprobs >= 0 || a.params.adjusts_logits() ||
                           (a.keep_prompt_logits && !a.sent_first)))
            host_logits = true;
        if (a.want_prompt_logprobs && run.start < seq.prompt_len - 1) all_rows = true;
    }
    host_logits = host_logits || all_rows;
    // Constrained requests: each sampled row's allowed tokens, every token for the others.
    const std::size_t words = grammar::mask_words(model_.config().vocab_size);
    bool masked = false;
    for (const ScheduledRun& run : plan.runs)
        masked = masked || (run.sample && active_.at(run.seq->id)->matcher.has_value());
    step_masks_.clear();
    if (masked) {
        step_masks_.assign(plan.runs.size() * words, ~0u);
        for (std::size_t r = 0; r < plan.runs.size(); ++r) {
            Active& a = *active_.at(plan.runs[r].seq->id);
            if (plan.runs[r].sample && a.matcher)
                a.matcher->fill_next_token_mask(std::span(step_masks_).subspan(r * words, words));
        }
    }
    const auto row_mask = [&](std::size_t r) {
        return masked ? std::span<const std::uint32_t>(step_masks_).subspan(r * words, words)
                      : std::span<const std::uint32_t>();
    };
    model::ForwardBatch batch;
    batch.token_ids = step_ids_;
    batch.positions = step_positions_;
    batch.sequences = step_seqs_;
    batch.logits =
        all_rows ? model::LogitsSelection::AllTokens : model::LogitsSelection::LastPerSequence;
    const model::LayerHook hook = layered_ != nullptr ? layered_hook() : model::LayerHook();
    if (layered_ != nullptr) batch.before_layer = &hook;
    const std::size_t rows = plan.runs.size();
    const auto vocab = static_cast<std::size_t>(model_.config().vocab_size);
    const Timer forward;
    const bool device_argmax = greedy && !host_logits;
    last_step_graphed_ = false;
    if (device_argmax && masked) batch.allowed_tokens = step_masks_;
    if (device_argmax && !masked && decode_only && graphs_ && layered_ == nullptr &&
        graphs_->bucket_for(static_cast<std::int64_t>(rows)) > 0) {
        sampled_.resize(rows);
        last_step_graphed_ = true;
        IS_RETURN_IF_ERROR(graphs_->decode(batch, sampled_));
    } else if (device_argmax) {
        sampled_.resize(rows);
        IS_RETURN_IF_ERROR(
            model_.model().forward_greedy(batch, model_.kv(), model_.workspace(), sampled_));
    } else {
        logits_.resize((all_rows ? step_ids_.size() : rows) * vocab);
        IS_RETURN_IF_ERROR(model_.model().forward(batch, model_.kv(), model_.workspace(), logits_));
    }
    const double forward_seconds = forward.seconds();
    last_forward_ms_ = forward_seconds * 1e3;
    // The forward has read the layered request's chunks; release them before sampling can
    // end (and free) the request.
    finish_layered();
    scheduler_.complete(plan);
    std::int64_t computed = 0, sampled = 0;
    const auto logits_row = [&](std::size_t row) {
        return std::span<const float>(logits_).subspan(row * vocab, vocab);
    };
    for (std::size_t r = 0; r < rows; ++r) {
        const ScheduledRun& run = plan.runs[r];
        const auto first_row = static_cast<std::size_t>(computed);  // with all_rows
        computed += run.count;
        Active& a = *active_.at(run.seq->id);
        if (all_rows && a.want_prompt_logprobs) {
            // Row p predicts prompt token p + 1; a recompute finds its entry there already.
            const std::int64_t end = std::min(run.start + run.count, run.seq->prompt_len - 1);
            for (std::int64_t p = run.start; p < end; ++p) {
                if (static_cast<std::int64_t>(a.prompt_logprobs.size()) != p) continue;
                a.prompt_logprobs.push_back(sampling::sampled_logprobs(
                    logits_row(first_row + static_cast<std::size_t>(p - run.start)),
                    run.seq->tokens[static_cast<std::size_t>(p + 1)], a.params.logprobs));
            }
        }
        if (!run.sample) continue;
        ++sampled;
        const std::span<const float> row =
            device_argmax ? std::span<const float>()
                          : logits_row(all_rows ? static_cast<std::size_t>(computed) - 1 : r);
        const std::int32_t token = device_argmax ? sampled_[r] : a.sampler.sample(row, row_mask(r));
        if (a.matcher) {
            if (Status st = a.matcher->accept_token(token); !st.ok()) {
                fail(a, make_error(ErrorKind::Failed,
                              "structured output: the grammar refused the sampled token: " +
                                  st.error().message));
                continue;
            }
        }
        std::optional<sampling::SampledLogprobs> lp;
        if (a.params.logprobs >= 0) lp = sampling::sampled_logprobs(row, token, a.params.logprobs);
        emit(a, token, row, lp ? &*lp : nullptr);
    }
    std::lock_guard lock(mutex_);
    ++stats_.steps;
    stats_.forward_seconds += forward_seconds;
    stats_.computed_tokens += static_cast<std::uint64_t>(computed);
    stats_.generated_tokens += static_cast<std::uint64_t>(sampled);
    return {};
}

void Engine::log_step(const StepPlan& plan, double memory_ms, double schedule_ms,
                      double step_ms) const {
    LogLine line(LogLevel::Debug, __FILE__, __LINE__);
    line.stream() << "step: " << plan.runs.size() << " runs, " << plan.num_tokens << " tokens, "
                  << plan.injections.size() << " injections; memory " << memory_ms
                  << " ms, schedule " << schedule_ms << " ms, forward " << last_forward_ms_
                  << " ms";
    if (last_step_graphed_) {
        const model::DecodeGraphRunner::StepTimes& t = graphs_->last_step_times();
        line.stream() << " (graph: staging " << t.stage_ms << " ms, device wait " << t.wait_ms
                      << " ms)";
    }
    line.stream() << ", step " << step_ms << " ms";
}

void Engine::loop() {
    while (true) {
        const Timer iteration;
        take_new_requests();
        {
            std::lock_guard lock(mutex_);
            if (stopping_) break;
        }
        drop_cancelled();
        const double memory_start_ms = iteration.millis();
        prepare_memory();
        const double memory_ms = iteration.millis() - memory_start_ms;
        StepPlan plan = scheduler_.schedule();
        for (Sequence* seq : plan.preempted) {
            active_.at(seq->id)->release_memory();
            std::lock_guard lock(mutex_);
            ++stats_.preemptions;
        }
        if (!plan.empty()) {
            const double step_start_ms = iteration.millis();
            if (Status st = run_step(plan); !st.ok()) {
                for (const ScheduledRun& run : plan.runs)
                    if (active_.count(run.seq->id)) fail(*active_.at(run.seq->id), st.error());
            }
            if (log_enabled(LogLevel::Debug)) {
                log_step(plan, memory_ms, step_start_ms - memory_start_ms - memory_ms,
                         iteration.millis() - step_start_ms);
            }
        }
        {
            std::unique_lock lock(mutex_);
            if (!plan.empty()) stats_.step_seconds += iteration.seconds();
            stats_.waiting = scheduler_.num_waiting();
            stats_.running = scheduler_.num_running();
            stats_.waiting_for_memory = static_cast<std::size_t>(std::count_if(
                active_.begin(), active_.end(), [](const auto& kv) {
                    return kv.second->seq.status == SequenceStatus::WaitingForMemory;
                }));
            // Counting the cache's unused blocks walks all of them: at most every 50 ms while
            // steps run, and whenever the loop goes idle.
            if (plan.empty() || since_block_count_.seconds() > 0.05) {
                stats_.kv_blocks_used = model_.blocks().num_blocks() - cache_.num_available();
                stats_.kv_blocks_cached = cache_.num_cached();
                since_block_count_.reset();
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
