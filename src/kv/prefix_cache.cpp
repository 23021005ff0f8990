#include "kv/prefix_cache.h"

#include <algorithm>

#include "base/check.h"

namespace inferscale::kv {
namespace {

std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

}  // namespace

PrefixCache::PrefixCache(BlockPool& pool, bool enabled) : pool_(pool), enabled_(enabled) {}

PrefixCache::~PrefixCache() {
    for (auto& [block, entry] : by_block_) pool_.release(block);
}

std::uint64_t PrefixCache::lookup_key(const Entry* parent, const BlockContent& content) {
    std::uint64_t h = 14695981039346656037ull;
    const BlockId parent_block = parent ? parent->block : -1;
    h = fnv1a(h, &parent_block, sizeof(parent_block));
    h = fnv1a(h, content.tokens.data(), content.tokens.size_bytes());
    const std::uint64_t extra_size = content.extra.size();
    h = fnv1a(h, &extra_size, sizeof(extra_size));
    return fnv1a(h, content.extra.data(), content.extra.size());
}

PrefixCache::Entry* PrefixCache::find(const Entry* parent, const BlockContent& content) const {
    auto [lo, hi] = by_key_.equal_range(lookup_key(parent, content));
    for (auto it = lo; it != hi; ++it) {
        Entry* e = it->second;
        if (e->parent == parent && e->extra == content.extra &&
            std::equal(e->tokens.begin(), e->tokens.end(), content.tokens.begin(),
                       content.tokens.end()))
            return e;
    }
    return nullptr;
}

std::size_t PrefixCache::match(std::span<const BlockContent> blocks, std::vector<BlockId>* out) {
    if (!enabled_) return 0;
    stats_.queried_blocks += blocks.size();
    const Entry* parent = nullptr;
    std::size_t n = 0;
    for (const BlockContent& content : blocks) {
        Entry* e = find(parent, content);
        if (!e) break;
        if (out) {
            pool_.add_ref(e->block);
            out->push_back(e->block);
            lru_.splice(lru_.begin(), lru_, e->lru);
        }
        parent = e;
        ++n;
    }
    stats_.hit_blocks += n;
    return n;
}

void PrefixCache::insert(std::span<const BlockId> blocks, std::size_t index,
                         const BlockContent& content) {
    if (!enabled_) return;
    IS_CHECK(index < blocks.size()) << "block index " << index << " of " << blocks.size();
    if (by_block_.count(blocks[index])) return;
    Entry* parent = nullptr;
    if (index > 0) {
        auto it = by_block_.find(blocks[index - 1]);
        if (it == by_block_.end()) return;
        parent = it->second.get();
    }
    if (find(parent, content)) return;
    auto e = std::make_unique<Entry>();
    e->block = blocks[index];
    e->parent = parent;
    e->tokens.assign(content.tokens.begin(), content.tokens.end());
    e->extra = std::string(content.extra);
    e->lookup = lookup_key(parent, content);
    lru_.push_front(e.get());
    e->lru = lru_.begin();
    if (parent) parent->children.push_back(e.get());
    by_key_.emplace(e->lookup, e.get());
    pool_.add_ref(e->block);
    by_block_.emplace(e->block, std::move(e));
}

void PrefixCache::erase(Entry* e) {
    IS_CHECK(unused(e)) << "evicting cached block " << e->block << " that a sequence uses";
    while (!e->children.empty()) erase(e->children.back());
    if (e->parent) {
        auto& siblings = e->parent->children;
        siblings.erase(std::find(siblings.begin(), siblings.end(), e));
    }
    auto [lo, hi] = by_key_.equal_range(e->lookup);
    for (auto it = lo; it != hi; ++it)
        if (it->second == e) {
            by_key_.erase(it);
            break;
        }
    lru_.erase(e->lru);
    const BlockId block = e->block;
    by_block_.erase(block);  // destroys e
    pool_.release(block);
    ++stats_.evictions;
}

std::int32_t PrefixCache::doom(Entry* e) {
    if (e->doomed) return 0;  // counted with an ancestor chosen earlier
    e->doomed = true;
    std::int32_t n = 1;
    for (Entry* child : e->children) n += doom(child);
    return n;
}

void PrefixCache::evict(std::int32_t count) {
    // One pass from the least recently used end: each unused entry taken frees itself and its
    // (necessarily unused) descendants. Erasing waits until the pass is over, so no iterator
    // dies under it, and in choice order: a later choice may be an ancestor of an earlier one,
    // never the other way round (a descendant of a chosen entry is doomed and skipped).
    std::int32_t freed = pool_.num_free();
    std::vector<Entry*> chosen;
    for (auto it = lru_.rbegin(); it != lru_.rend() && freed < count; ++it) {
        Entry* e = *it;
        if (e->doomed || !unused(e)) continue;
        freed += doom(e);
        chosen.push_back(e);
    }
    for (Entry* e : chosen) erase(e);
}

bool PrefixCache::allocate(std::int32_t count, std::vector<BlockId>& out) {
    if (pool_.num_free() < count) evict(count);
    return pool_.allocate(count, out);
}

std::int32_t PrefixCache::num_available() const {
    std::int32_t n = pool_.num_free();
    for (const auto& [block, e] : by_block_) n += unused(e.get()) ? 1 : 0;
    return n;
}

void PrefixCache::evict_all() { evict(pool_.num_blocks()); }

}  // namespace inferscale::kv
