#pragma once
// PrefixCache: computed, full KV blocks found again by everything their KV depends on, so a
// sequence whose tokens start like an earlier one's reuses those blocks instead of recomputing
// them. A cached block is known by (its parent block in the cache, its token ids, an extra
// string); the extra string carries what the tokens do not say: the identities of memory
// chunks whose KV was injected there and a per-user salt, so two users never share a block by
// accident. Lookups hash that key and then compare it in full, and the parent is the cached
// block itself rather than a hash of it, so a collision can never hand out a wrong block.
//
// The cache holds one BlockPool reference on each cached block. A block no sequence uses is
// evictable, least recently used first, when allocation runs short; its cached descendants go
// with it (nobody can use a child without its parent). Host-side only; not thread-safe (the
// engine's step loop owns it).

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace inferscale::kv {

struct PrefixCacheStats {
    std::uint64_t queried_blocks = 0;  // full blocks looked up by match()
    std::uint64_t hit_blocks = 0;      // ... found
    std::uint64_t evictions = 0;
};

// One full block of a sequence: its tokens and the extra part of its key.
struct BlockContent {
    std::span<const std::int32_t> tokens;  // [block_size]
    std::string_view extra;
};

class PrefixCache {
  public:
    // `pool` must outlive the cache. A disabled cache matches and keeps nothing.
    PrefixCache(BlockPool& pool, bool enabled);
    ~PrefixCache();
    PrefixCache(const PrefixCache&) = delete;
    PrefixCache& operator=(const PrefixCache&) = delete;

    bool enabled() const { return enabled_; }
    BlockPool& pool() { return pool_; }
    // The longest leading run of `blocks` (a sequence's first full blocks, in order) that is
    // cached. With `out`, appends those blocks to it, each with a new reference the caller
    // owns, and marks them recently used.
    std::size_t match(std::span<const BlockContent> blocks, std::vector<BlockId>* out);
    // Caches `blocks[index]` (computed, full) under `content`. Its parent `blocks[index - 1]`
    // must be cached already (index 0 has none); otherwise, or when the block or an equal key
    // is cached already, nothing happens.
    void insert(std::span<const BlockId> blocks, std::size_t index, const BlockContent& content);
    // Like BlockPool::allocate (all or nothing), evicting unused cached blocks when short.
    bool allocate(std::int32_t count, std::vector<BlockId>& out);
    // Blocks allocate() could hand out now: free ones plus unused cached ones.
    std::int32_t num_available() const;
    std::int32_t num_cached() const { return static_cast<std::int32_t>(by_block_.size()); }
    const PrefixCacheStats& stats() const { return stats_; }
    // Drops every unused cached block.
    void evict_all();

  private:
    struct Entry {
        BlockId block = 0;
        Entry* parent = nullptr;
        std::vector<std::int32_t> tokens;
        std::string extra;
        std::uint64_t lookup = 0;  // by_key_'s key
        std::vector<Entry*> children;
        std::list<Entry*>::iterator lru;  // in lru_: front is most recently used
        bool doomed = false;              // chosen (or under a chosen entry) by evict()
    };

    static std::uint64_t lookup_key(const Entry* parent, const BlockContent& content);
    Entry* find(const Entry* parent, const BlockContent& content) const;
    // Evicts unused blocks, least recently used first, until `count` are free or none is left.
    void evict(std::int32_t count);
    // Marks `e` and its descendants not yet marked for eviction; returns how many it marked.
    static std::int32_t doom(Entry* e);
    // Removes `e` and its descendants from the cache, dropping the cache's references.
    void erase(Entry* e);
    bool unused(const Entry* e) const { return pool_.ref_count(e->block) == 1; }

    BlockPool& pool_;
    bool enabled_;
    std::unordered_multimap<std::uint64_t, Entry*> by_key_;
    std::unordered_map<BlockId, std::unique_ptr<Entry>> by_block_;
    std::list<Entry*> lru_;
    PrefixCacheStats stats_;
};

}  // namespace inferscale::kv
