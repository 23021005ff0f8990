// The memory half of an Engine: laying out a memory request at submit, fetching or encoding its
// chunks in the step loop (WaitingForMemory), background encoding of added facts, injection.

#include <algorithm>

#include "engine/engine.h"
#include "engine/engine_active.h"
#include "engine/memory_retrieval.h"
#include "inject/memory_prompt.h"

namespace inferscale::engine {
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

Status Engine::lay_out_memory(Active& a, const EngineRequest& request) {
    const LocalModel& lm = model_;
    std::vector<std::int32_t>& tokens = a.seq.tokens;
    if (request.user.empty())
        return make_error(ErrorKind::InvalidArgument, "memory needs a user");
    if (!runtime_)
        return make_error(ErrorKind::InvalidArgument, "this server has no memory store");
    // Injection rotates every layer's keys with one RoPE table (inject::Injector).
    if (request.memory_mode == MemoryMode::Kv && !lm.model().one_rope_base())
        return make_error(ErrorKind::InvalidArgument,
                          "memory mode kv needs one RoPE base in every layer, which " +
                              lm.config().name +
                              " does not have (Gemma 3); use memory mode prompt");
    std::string question;
    for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it)
        if (it->role == "user") {
            question = it->content;
            break;
        }
    const std::vector<MemoryFact> ranked = IS_TRY(retrieve_memory_facts(
        lm, *store_, *retriever_, request.user, question, request.retrieval));
    std::vector<RetrievedFact> retrieved;
    for (const MemoryFact& f : ranked) retrieved.push_back({f.id, f.text, f.score});
    a.stream->set_memory_facts(std::move(retrieved));
    a.facts = IS_TRY(prompt_order(ranked));
    const inject::MemoryScaffold& scaffold = runtime_->scaffold();
    MemoryPrompt prompt = IS_TRY(memory_prompt(lm, scaffold, a.facts, request.messages));
    tokens = std::move(prompt.tokens);
    const std::int64_t memory_len = prompt.memory_tokens;
    a.usage.memory_tokens = memory_len;
    // One user's blocks never serve another's, even for identical text.
    a.seq.cache_salt = "user\x1f" + request.user + '\x1f';
    if (request.memory_mode == MemoryMode::Kv) {
        const std::int64_t bs = lm.block_size();
        a.seq.injected_tokens = memory_len / bs * bs;
        std::vector<std::int64_t> lengths;
        std::vector<std::string> keys;
        using Kind = inject::MemoryPiece::Kind;
        for (const auto& piece : inject::memory_pieces(scaffold, prompt.fact_tokens)) {
            lengths.push_back(static_cast<std::int64_t>(piece.tokens.size()));
            keys.push_back(piece.kind == Kind::Fact
                               ? runtime_->identity_of(a.facts[piece.fact]).key()
                           : piece.kind == Kind::Header ? "scaffold:header"
                           : piece.kind == Kind::Footer ? "scaffold:footer"
                                                        : "scaffold:empty");
        }
        a.seq.memory_block_keys =
            memory_block_keys(lengths, keys, a.seq.injected_tokens / bs, bs);
    } else {
        a.facts.clear();
    }
    return {};
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
        scratch +=
            static_cast<std::int64_t>(missing[i].context_tokens.size() + missing[i].text.size());
    const auto blocks = static_cast<std::int32_t>(scratch / model_.block_size() + 2 * now + 1);
    std::vector<kv::BlockId> probe;
    if (!cache_.allocate(blocks, probe)) return missing.size();
    model_.blocks().release(probe);
    // acquire_memory() encodes what it misses and adds it to the pool; the leases end at once.
    IS_TRY(acquire_memory(std::span(missing).first(now)));
    budget -= now;
    return missing.size() - now;
}

Result<std::vector<memory::ChunkLease>> Engine::acquire_memory(std::span<const MemoryFact> facts,
                                                               bool ordered,
                                                               memory::PromotionOrder order) {
    std::size_t encoded = 0;
    std::vector<memory::ChunkLease> leases =
        IS_TRY(runtime_->acquire(facts, ordered, order, &encoded));
    // A fact deleted or changed while its chunk was encoded: drop the chunk (a lease keeps it
    // readable until the request ends).
    if (encoded > 0) IS_TRY(erase_stale_chunks(*store_, runtime_->pool(), facts));
    return leases;
}

void Engine::prepare_memory() {
    if (!runtime_) return;
    std::size_t budget = options_.encode_facts_per_step;
    bool layered_chosen = false;
    // A device tier full of other requests' pinned chunks frees up as they start: a request
    // that finds no room for its encodings or promotions tries again in a later pass.
    const auto wait_for_room = [&](const Error& e) {
        return e.kind == ErrorKind::Unavailable && runtime_->pool().stats().pinned_chunks > 0;
    };
    for (Sequence* seq : scheduler_.needing_memory(options_.memory_prepare_ahead)) {
        Active& a = *active_.at(seq->id);
        if (a.leases.empty()) {  // once held, its chunks stay: no need to look for misses
            auto still_missing = encode_missing(a.facts, budget);
            if (!still_missing.ok()) {
                if (!wait_for_room(still_missing.error()))
                    fail(a, std::move(still_missing).error());
                continue;
            }
            if (*still_missing > 0) continue;  // encoding goes on in later iterations
        }
        // One request at a time on an idle engine goes layer by layer; others wait until
        // their chunks are up (WaitingForMemory).
        const bool layered =
            options_.layered_host_chunks && !layered_chosen && scheduler_.num_running() == 0;
        if (a.leases.empty() && !a.facts.empty()) {
            // Promotions from host or disk copy on the transfer stream while others compute.
            auto leases = acquire_memory(a.facts, /*ordered=*/false,
                                         layered ? memory::PromotionOrder::ByLayerGroup
                                                 : memory::PromotionOrder::WholeChunks);
            if (!leases.ok()) {
                if (!wait_for_room(leases.error())) fail(a, std::move(leases).error());
                continue;
            }
            a.leases = std::move(leases).value();
        }
        if (!layered && !a.chunks_arrived()) continue;
        layered_chosen = layered_chosen || layered;
        a.layered = layered;
        std::vector<const memory::KvChunk*> body;
        for (const memory::ChunkLease& l : a.leases) body.push_back(l.get());
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
        a.plan = std::move(plan).value();
        seq->memory_ready = true;
        seq->status = SequenceStatus::Waiting;
        a.t_memory = a.since_submit.seconds();
    }
    if (budget == options_.encode_facts_per_step) encode_in_background(budget);
}

void Engine::encode_in_background(std::size_t budget) {
    if (!added_facts_) return;
    std::vector<memory::Fact> taken = added_facts_->take(budget);
    // One encoding pass (and one read of the turns) per user, not per fact.
    std::stable_sort(taken.begin(), taken.end(),
                     [](const memory::Fact& x, const memory::Fact& y) { return x.user < y.user; });
    for (auto first = taken.begin(); first != taken.end();) {
        const auto last = std::find_if(first, taken.end(), [&](const memory::Fact& f) {
            return f.user != first->user;
        });
        // Failures here cost nothing but a later on-demand encode: the request path retries.
        auto facts = memory_facts(model_, *store_, first->user, std::span(first, last),
                                  options_.background_encode_window);
        if (facts.ok()) (void)encode_missing(*facts, budget);
        first = last;
    }
}

void Engine::count_injected(Active& a, const Injection& injection) {
    a.usage.injected_tokens = a.seq.injected_tokens - injection.first_token;
    std::lock_guard lock(mutex_);
    stats_.injected_tokens += static_cast<std::uint64_t>(a.usage.injected_tokens);
}

Status Engine::inject(const Injection& injection) {
    Active& a = *active_.at(injection.seq->id);
    const std::vector<inject::InjectSpan> spans = spans_from(a.plan, injection.first_token);
    // A layered request that shares its step with another: the device waits for the whole
    // promotion (0 when every chunk has arrived).
    model_.backend().order_after(a.layers_ticket(model_.config().num_layers - 1));
    IS_RETURN_IF_ERROR(runtime_->injector().inject(spans, a.seq.blocks, model_.kv()));
    count_injected(a, injection);
    a.release_memory();  // the KV is in the blocks now; the chunks may be demoted again
    return {};
}

Status Engine::prepare_layered(const Injection& injection) {
    Active& a = *active_.at(injection.seq->id);
    const std::vector<inject::InjectSpan> spans = spans_from(a.plan, injection.first_token);
    IS_RETURN_IF_ERROR(runtime_->injector().prepare(spans, a.seq.blocks, model_.kv()));
    count_injected(a, injection);
    layered_ = &a;
    return {};
}

model::LayerHook Engine::layered_hook() {
    return [this, walk = memory::LayerGroupWalk(model_.config().num_layers)](
               std::int64_t layer) mutable {
        walk.reach(layer, [this](std::int64_t, std::int64_t first, std::int64_t count) {
            if (count == 0) return;
            model_.backend().order_after(layered_->layers_ticket(first + count - 1));
            runtime_->injector().inject_layers(first, count);
        });
    };
}

void Engine::finish_layered() {
    if (layered_ == nullptr) return;
    layered_->release_memory();  // the forward that read the chunks has finished
    layered_ = nullptr;
}

}  // namespace inferscale::engine
