#include "inject/inject_plan.h"

#include <string>

namespace inferscale::inject {

Result<InjectPlan> make_inject_plan(std::span<const memory::KvChunk* const> stream,
                                    std::int64_t protected_tokens, std::int64_t block_size) {
    if (block_size < 1) return make_error("inject plan: block size must be >= 1");
    if (stream.empty()) return make_error("inject plan: no chunks");
    InjectPlan plan;
    plan.block_size = block_size;
    for (const memory::KvChunk* chunk : stream) {
        if (chunk == nullptr || chunk->num_tokens() == 0)
            return make_error("inject plan: a chunk is missing or empty");
        if (!chunk->same_layout(*stream.front()))
            return make_error("inject plan: chunk '" + chunk->identity().fact_id +
                              "' has another KV layout (a different model?)");
        plan.token_ids.insert(plan.token_ids.end(), chunk->token_ids().begin(),
                              chunk->token_ids().end());
    }
    plan.memory_tokens = static_cast<std::int64_t>(plan.token_ids.size());
    plan.protected_tokens = protected_tokens;
    plan.loaded_tokens = plan.memory_tokens / block_size * block_size;
    if (plan.loaded_tokens == 0)
        return make_error("inject plan: the memory (" + std::to_string(plan.memory_tokens) +
                          " tokens) is shorter than one block");
    if (protected_tokens > plan.loaded_tokens)
        return make_error("inject plan: memory token " + std::to_string(plan.loaded_tokens) +
                          " would be recomputed; the facts end at " +
                          std::to_string(protected_tokens) + " (footer too short)");

    std::int64_t pos = 0;
    for (const memory::KvChunk* chunk : stream) {
        if (pos >= plan.loaded_tokens) break;
        const std::int64_t rows = std::min(chunk->num_tokens(), plan.loaded_tokens - pos);
        plan.spans.push_back({chunk, 0, rows, pos});
        pos += chunk->num_tokens();
    }
    return plan;
}

Result<InjectPlan> make_memory_plan(const memory::KvChunk& header,
                                    std::span<const memory::KvChunk* const> facts,
                                    const memory::KvChunk& footer, std::int64_t block_size) {
    std::vector<const memory::KvChunk*> stream;
    stream.reserve(facts.size() + 2);
    stream.push_back(&header);
    std::int64_t facts_end = header.num_tokens();
    for (const memory::KvChunk* f : facts) {
        if (f == nullptr) return make_error("inject plan: a fact chunk is missing");
        stream.push_back(f);
        facts_end += f->num_tokens();
    }
    stream.push_back(&footer);
    return make_inject_plan(stream, facts_end, block_size);
}

}  // namespace inferscale::inject
