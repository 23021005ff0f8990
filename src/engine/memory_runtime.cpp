#include "engine/memory_runtime.h"

#include <unordered_map>


namespace inferscale::engine {
namespace {

const jinja::ChatTemplate* template_of(const LocalModel& lm) {
    return lm.chat_template() ? &*lm.chat_template() : nullptr;
}

// A scaffold piece as a chunk: encoded alone from position 0 (the header with its BOS, so its
// KV is exactly what a normal prefill of the prompt computes).
engine::ChunkRequest scaffold_request(const LocalModel& lm, const char* name,
                                      const std::vector<std::int32_t>& tokens) {
    engine::ChunkRequest r;
    r.identity.fact_id = std::string("scaffold:") + name;
    r.identity.model = lm.kv_identity();
    r.identity.text_hash = memory::text_hash(
        std::string_view(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4));
    r.fact_tokens = tokens;
    return r;
}

}  // namespace

Result<std::unique_ptr<MemoryRuntime>> MemoryRuntime::create(LocalModel& lm,
                                                             const MemoryOptions& options) {
    inject::MemoryScaffold scaffold =
        IS_TRY(inject::build_memory_scaffold(lm.tokenizer(), template_of(lm), lm.block_size()));
    engine::ChunkEncoder encoder = IS_TRY(engine::ChunkEncoder::create(
        lm.backend(), lm.model(), lm.kv(), lm.blocks(), lm.workspace()));
    memory::ChunkPoolOptions pool_options;
    pool_options.device_capacity_bytes = options.device_pool_bytes;
    // A request whose chunks find no device room reads them from host memory instead of
    // waiting or failing.
    pool_options.serve_from_host = true;
    pool_options.host_capacity_bytes = options.host_pool_bytes;
    pool_options.disk_dir = options.disk_dir;
    std::unique_ptr<memory::ChunkPool> pool =
        IS_TRY(memory::ChunkPool::open(lm.backend(), std::move(pool_options)));
    std::unique_ptr<MemoryRuntime> rt(new MemoryRuntime(lm, options, std::move(scaffold),
                                                        std::move(encoder), std::move(pool)));
    const engine::ChunkRequest reqs[] = {
        scaffold_request(lm, "header", rt->scaffold_.header),
        scaffold_request(lm, "footer", rt->scaffold_.footer),
        scaffold_request(lm, "empty", rt->scaffold_.empty_memory),
    };
    std::vector<memory::KvChunk> chunks = IS_TRY(rt->encoder_.encode(reqs));
    rt->header_ = std::move(chunks[0]);
    rt->footer_ = std::move(chunks[1]);
    rt->empty_ = std::move(chunks[2]);
    return rt;
}

memory::ChunkIdentity MemoryRuntime::identity_of(const MemoryFact& fact) const {
    memory::ChunkIdentity id;
    id.fact_id = fact.id;
    id.text_hash = fact.text_hash.empty() ? memory::text_hash(fact.text) : fact.text_hash;
    id.model = lm_->kv_identity();
    id.window = fact.window;
    id.mode = options_.encoding;
    return id;
}

Result<std::vector<memory::ChunkLease>> MemoryRuntime::acquire(std::span<const MemoryFact> facts,
                                                               bool ordered,
                                                               memory::PromotionOrder order,
                                                               std::size_t* encoded) {
    std::vector<memory::ChunkIdentity> ids;
    ids.reserve(facts.size());
    for (const MemoryFact& f : facts) ids.push_back(identity_of(f));
    std::vector<memory::ChunkLease> leases = IS_TRY(pool_->get_many(ids, ordered, order));
    std::vector<engine::ChunkRequest> misses;
    std::vector<std::size_t> miss_index;
    for (std::size_t i = 0; i < facts.size(); ++i) {
        if (leases[i]) continue;
        engine::ChunkRequest r;
        r.identity = ids[i];
        r.fact_tokens = IS_TRY(inject::fact_token_ids(lm_->tokenizer(), facts[i].text));
        if (options_.encoding == memory::EncodingMode::AfterHeader)
            r.context_tokens = scaffold_.header;
        r.context_tokens.insert(r.context_tokens.end(), facts[i].context_tokens.begin(),
                                facts[i].context_tokens.end());
        misses.push_back(std::move(r));
        miss_index.push_back(i);
    }
    if (encoded) *encoded = misses.size();
    if (!misses.empty()) {
        std::vector<memory::KvChunk> chunks = IS_TRY(encoder_.encode(
            misses, [this](std::size_t bytes) { return pool_->allocate_device(bytes); }));
        for (std::size_t j = 0; j < chunks.size(); ++j)
            leases[miss_index[j]] = IS_TRY(pool_->put(std::move(chunks[j])));
    }
    return leases;
}

Result<std::vector<MemoryFact>> prompt_order(std::span<const MemoryFact> ranked) {
    std::vector<MemoryFact> out;
    std::unordered_map<std::string, const MemoryFact*> seen;
    for (const MemoryFact& f : ranked) {
        auto [it, inserted] = seen.emplace(f.id, &f);
        if (!inserted) {
            if (it->second->text != f.text)
                return make_error("memory fact '" + f.id + "' appears twice with different text");
            continue;
        }
        out.push_back(f);
    }
    return std::vector<MemoryFact>(out.rbegin(), out.rend());
}

Result<MemoryPrompt> memory_prompt(const LocalModel& lm, const inject::MemoryScaffold& scaffold,
                                   std::span<const MemoryFact> facts,
                                   std::span<const jinja::ChatMessage> messages) {
    MemoryPrompt out;
    out.fact_tokens.reserve(facts.size());
    for (const MemoryFact& f : facts)
        out.fact_tokens.push_back(IS_TRY(inject::fact_token_ids(lm.tokenizer(), f.text)));
    out.tokens = inject::memory_stream(scaffold, out.fact_tokens);
    out.memory_tokens = static_cast<std::int64_t>(out.tokens.size());
    const std::vector<std::int32_t> conversation = IS_TRY(inject::conversation_token_ids(
        lm.tokenizer(), template_of(lm), {messages.begin(), messages.end()}, out.tokens.front()));
    out.tokens.insert(out.tokens.end(), conversation.begin(), conversation.end());
    return out;
}

}  // namespace inferscale::engine
