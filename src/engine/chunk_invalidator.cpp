#include "engine/chunk_invalidator.h"

#include <charconv>
#include <unordered_map>

namespace inferscale::engine {

std::string chunk_fact_id(memory::FactId id) { return std::to_string(id); }

Result<std::size_t> erase_stale_chunks(memory::MemoryStore& store, memory::ChunkPool& pool,
                                       std::span<const MemoryFact> encoded) {
    std::vector<memory::FactId> ids;
    std::vector<const MemoryFact*> checked;
    for (const MemoryFact& f : encoded) {
        memory::FactId id = 0;
        const char* end = f.id.data() + f.id.size();
        const auto parsed = std::from_chars(f.id.data(), end, id);
        if (parsed.ec != std::errc() || parsed.ptr != end) continue;
        ids.push_back(id);
        checked.push_back(&f);
    }
    std::unordered_map<std::string, std::string> stored;
    for (memory::Fact& fact : IS_TRY(store.get_facts(ids)))
        stored.emplace(chunk_fact_id(fact.id), std::move(fact.text));
    std::size_t erased = 0;
    for (const MemoryFact* f : checked) {
        const auto it = stored.find(f->id);
        if (it == stored.end() || it->second != f->text) erased += pool.erase(f->id);
    }
    return erased;
}

void ChunkInvalidator::on_fact_changed(const memory::Fact& fact) {
    dropped_ += pool_->erase(chunk_fact_id(fact.id));
}

void ChunkInvalidator::on_fact_deleted(const std::string& user, memory::FactId fact_id) {
    dropped_ += pool_->erase(chunk_fact_id(fact_id));
}

void ChunkInvalidator::on_user_deleted(const std::string& user,
                                       const std::vector<memory::FactId>& fact_ids) {
    for (memory::FactId id : fact_ids) dropped_ += pool_->erase(chunk_fact_id(id));
}

}  // namespace inferscale::engine
