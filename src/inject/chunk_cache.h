#pragma once
// ChunkCache: encoded chunks by identity (ChunkIdentity::key()), in memory on the backend.
// A stand-in for the tiered chunk pool: no eviction, no size bound. Pointers it hands out stay
// valid until the entry is erased or the cache cleared.

#include <cstddef>
#include <string>
#include <unordered_map>

#include "inject/kv_chunk.h"

namespace inferscale::inject {

class ChunkCache {
  public:
    const KvChunk* find(const ChunkIdentity& id) const {
        auto it = chunks_.find(id.key());
        return it == chunks_.end() ? nullptr : &it->second;
    }
    // Replaces an entry with the same identity.
    const KvChunk& insert(KvChunk chunk) {
        std::string key = chunk.identity().key();
        auto [it, inserted] = chunks_.insert_or_assign(std::move(key), std::move(chunk));
        return it->second;
    }
    bool erase(const ChunkIdentity& id) { return chunks_.erase(id.key()) > 0; }
    void clear() { chunks_.clear(); }
    std::size_t size() const { return chunks_.size(); }
    std::size_t bytes() const {
        std::size_t total = 0;
        for (const auto& [key, chunk] : chunks_) total += chunk.bytes();
        return total;
    }

  private:
    // unordered_map nodes do not move on rehash, so handed-out pointers survive inserts.
    std::unordered_map<std::string, KvChunk> chunks_;
};

}  // namespace inferscale::inject
