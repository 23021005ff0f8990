#include "engine/chunk_invalidator.h"

namespace inferscale::engine {

std::string chunk_fact_id(memory::FactId id) { return std::to_string(id); }

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
