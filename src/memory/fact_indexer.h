#pragma once
// FactIndexer: keeps a BM25 index in step with a MemoryStore, so search sees every committed
// fact change of this process at once.

#include <memory>

#include "base/result.h"
#include "memory/memory_store.h"
#include "retrieval/bm25_index.h"

namespace inferscale::memory {

class FactIndexer final : public FactListener {
  public:
    // Indexes every stored fact and registers for changes. `store` and `index` must outlive
    // the returned indexer, which unregisters itself when destroyed.
    static Result<std::unique_ptr<FactIndexer>> attach(MemoryStore& store,
                                                       retrieval::Bm25Index& index);
    ~FactIndexer() override;
    FactIndexer(const FactIndexer&) = delete;
    FactIndexer& operator=(const FactIndexer&) = delete;

    void on_fact_added(const Fact& fact) override;
    void on_fact_changed(const Fact& fact) override;
    void on_fact_deleted(const std::string& user, FactId fact_id) override;
    void on_user_deleted(const std::string& user, const std::vector<FactId>& fact_ids) override;

  private:
    FactIndexer(MemoryStore& store, retrieval::Bm25Index& index) : store_(store), index_(index) {}
    MemoryStore& store_;
    retrieval::Bm25Index& index_;
};

}  // namespace inferscale::memory
