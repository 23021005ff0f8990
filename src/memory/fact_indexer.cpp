#include "memory/fact_indexer.h"

namespace inferscale::memory {

Result<std::unique_ptr<FactIndexer>> FactIndexer::attach(MemoryStore& store,
                                                         retrieval::Bm25Index& index) {
    std::unique_ptr<FactIndexer> indexer(new FactIndexer(store, index));
    IS_RETURN_IF_ERROR(store.add_listener(indexer.get(), /*replay_existing=*/true));
    return indexer;
}

FactIndexer::~FactIndexer() { store_.remove_listener(this); }

void FactIndexer::on_fact_added(const Fact& fact) { index_.upsert(fact.user, fact.id, fact.text); }

void FactIndexer::on_fact_changed(const Fact& fact) {
    index_.upsert(fact.user, fact.id, fact.text);
}

void FactIndexer::on_fact_deleted(const std::string& user, FactId fact_id) {
    index_.remove(fact_id);
}

void FactIndexer::on_user_deleted(const std::string& user, const std::vector<FactId>& fact_ids) {
    index_.remove_user(user);
}

}  // namespace inferscale::memory
