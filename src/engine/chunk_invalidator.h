#pragma once
// ChunkInvalidator: keeps a ChunkPool in step with a MemoryStore. Deleting a fact or a user in
// the store drops their chunks from every tier (device, host and disk); changing a fact's text
// drops its old chunks too (their text hash no longer matches, so they could only waste room).
// Chunks are keyed by the fact id as MemoryFact carries it: the store's FactId in decimal.
// Lives in engine because it joins memory and inject. Register it with
// MemoryStore::add_listener(&invalidator, false) and remove it before either object dies.
// Callbacks run on the store's writing thread, which ChunkPool::erase allows (memory is freed
// later on the backend's thread). An encoding that ends after its fact changed would outlive
// that drop (the erase ran before the put): erase_stale_chunks, called after the put, catches it.

#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/memory_runtime.h"
#include "memory/chunk_pool.h"
#include "memory/memory_store.h"
#include "memory/memory_types.h"

namespace inferscale::engine {

// The chunk-key form of a store fact id (what retrieve_memory_facts puts in MemoryFact::id).
std::string chunk_fact_id(memory::FactId id);

// Erases from `pool` the chunks of those `encoded` facts that `store` no longer holds with the
// same text, and returns how many chunks went. Called after the chunks were put, it closes the
// window a ChunkInvalidator leaves: the store calls its listeners under the lock this read
// takes, so each change is seen either by the listener (after the put) or here. Ids that are
// not store ids are left alone.
Result<std::size_t> erase_stale_chunks(memory::MemoryStore& store, memory::ChunkPool& pool,
                                       std::span<const MemoryFact> encoded);

class ChunkInvalidator : public memory::FactListener {
  public:
    // `pool` is not owned and must outlive the registration.
    explicit ChunkInvalidator(memory::ChunkPool& pool) : pool_(&pool) {}

    void on_fact_changed(const memory::Fact& fact) override;
    void on_fact_deleted(const std::string& user, memory::FactId fact_id) override;
    void on_user_deleted(const std::string& user,
                         const std::vector<memory::FactId>& fact_ids) override;

    std::size_t chunks_dropped() const { return dropped_; }

  private:
    memory::ChunkPool* pool_;
    std::size_t dropped_ = 0;  // written under the store's lock only
};

}  // namespace inferscale::engine
