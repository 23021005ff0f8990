// ChunkPool's leases, LRU lists, accounting and self-check (chunk_pool.h).
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "base/log.h"
#include "memory/chunk_pool_entry.h"

namespace inferscale::memory {

using detail::is_pinned;
namespace fs = std::filesystem;

const char* chunk_tier_name(ChunkTier tier) {
    switch (tier) {
        case ChunkTier::Device:
            return "device";
        case ChunkTier::Host:
            return "host";
        case ChunkTier::Disk:
            return "disk";
    }
    return "?";
}

// ---- ChunkLease ---------------------------------------------------------------------------

bool ChunkLease::ready() const {
    return entry_ == nullptr || pool_->backend_->transfer_done(entry_->ticket);
}

std::uint64_t ChunkLease::layers_ticket(std::int64_t layer) const {
    if (entry_ == nullptr) return 0;
    return entry_->group_tickets[static_cast<std::size_t>(
        layer_group_of(layer, entry_->num_layers))];
}

ChunkLease& ChunkLease::operator=(ChunkLease&& other) noexcept {
    if (this != &other) {
        reset();
        pool_ = other.pool_;
        entry_ = other.entry_;
        chunk_ = other.chunk_;
        other.pool_ = nullptr;
        other.entry_ = nullptr;
        other.chunk_ = nullptr;
    }
    return *this;
}

void ChunkLease::reset() {
    if (pool_ != nullptr) pool_->unpin(entry_);
    pool_ = nullptr;
    entry_ = nullptr;
    chunk_ = nullptr;
}

// ---- bookkeeping --------------------------------------------------------------------------

namespace {

void count(TierStats& t, std::size_t bytes, int sign) {
    if (sign > 0) {
        t.bytes += bytes;
        ++t.chunks;
    } else {
        IS_CHECK(t.bytes >= bytes && t.chunks > 0);
        t.bytes -= bytes;
        --t.chunks;
    }
}

}  // namespace

void ChunkPool::account(const Entry& e, int sign) {
    if (e.device) count(stats_.device, e.bytes, sign);
    if (e.host != nullptr) count(stats_.host, e.bytes, sign);
    if (!e.path.empty()) count(stats_.disk, e.bytes, sign);
}

void ChunkPool::insert_locked(std::unique_ptr<Entry> e) {
    Entry* p = e.get();
    if (p->device) p->device_lru = device_lru_.insert(device_lru_.begin(), p);
    if (p->host != nullptr) p->host_lru = host_lru_.insert(host_lru_.begin(), p);
    account(*p, +1);
    by_fact_[p->identity.fact_id].push_back(p);
    auto [it, inserted] = entries_.emplace(p->key, std::move(e));
    IS_CHECK(inserted) << "chunk " << p->key << " inserted twice";
}

std::unique_ptr<ChunkPool::Entry> ChunkPool::detach_locked(Entry* e) {
    account(*e, -1);
    if (e->device) device_lru_.erase(e->device_lru);
    if (e->host != nullptr) host_lru_.erase(e->host_lru);
    auto& siblings = by_fact_[e->identity.fact_id];
    siblings.erase(std::find(siblings.begin(), siblings.end(), e));
    if (siblings.empty()) by_fact_.erase(e->identity.fact_id);
    auto it = entries_.find(e->key);
    IS_CHECK(it != entries_.end() && it->second.get() == e);
    std::unique_ptr<Entry> out = std::move(it->second);
    entries_.erase(it);
    return out;
}

void ChunkPool::remove_disk_file_locked(const std::string& path) {
    std::error_code ec;
    fs::remove(path, ec);
    fs::remove(fs::path(path).parent_path(), ec);  // only succeeds once the fact has no files
}

void ChunkPool::free_device_range_locked(const Entry& e) {
    const auto at = static_cast<const std::byte*>(e.device->data()) - device_base();
    device_ranges_.free(static_cast<std::size_t>(at), e.bytes, {e.read_fence, e.device_transfer});
}

void ChunkPool::free_host_range_locked(const Entry& e) {
    const auto at = static_cast<const std::byte*>(e.host) - host_base();
    host_ranges_.free(static_cast<std::size_t>(at), e.bytes,
                      {std::max(e.read_fence, e.host_fill_fence), e.host_transfer});
}

void ChunkPool::release_memory_locked(Entry& e) {
    if (e.device) {
        free_device_range_locked(e);
        e.device.reset();
    }
    if (e.host != nullptr) {
        free_host_range_locked(e);
        e.host_view.reset();
        e.host = nullptr;
    }
}

void ChunkPool::retire_locked(std::unique_ptr<Entry> e) {
    e->retired = true;
    if (!e->path.empty()) remove_disk_file_locked(e->path);
    e->path.clear();
    if (e->device) stats_.retired_bytes += e->bytes;
    retired_.push_back(std::move(e));  // released by collect_locked once unpinned and fenced
}

void ChunkPool::evict_locked(Entry* e) {
    IS_CHECK(!is_pinned(e)) << "evicting a leased chunk";
    fence_reads_locked();
    ++stats_.evictions;
    if (!e->path.empty()) remove_disk_file_locked(e->path);
    std::unique_ptr<Entry> gone = detach_locked(e);
    release_memory_locked(*gone);
}

void ChunkPool::fence_reads_locked() {
    if (unfenced_.empty()) return;
    const std::uint64_t fence = backend_->compute_fence();
    for (Entry* e : unfenced_) e->read_fence = std::max(e->read_fence, fence);
    unfenced_.clear();
}

void ChunkPool::collect_locked() {
    fence_reads_locked();
    auto keep = std::partition(retired_.begin(), retired_.end(),
                               [](const std::unique_ptr<Entry>& e) { return is_pinned(e.get()); });
    for (auto it = keep; it != retired_.end(); ++it) {
        if ((*it)->device) stats_.retired_bytes -= (*it)->bytes;
        release_memory_locked(**it);
    }
    retired_.erase(keep, retired_.end());
}

void ChunkPool::collect() {
    std::lock_guard lock(mutex_);
    collect_locked();
}

void ChunkPool::unpin(Entry* e) {
    std::lock_guard lock(mutex_);
    drop_pin_locked(e);
}

void ChunkPool::drop_pin_locked(Entry* e) {
    IS_CHECK(e->pins > 0);
    if (--e->pins > 0) return;
    e->host_view.reset();  // the last lease of host memory read in place
    unfenced_.push_back(e);
}

std::optional<ChunkTier> ChunkPool::tier_of(const ChunkIdentity& id) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id.key());
    if (it == entries_.end()) return std::nullopt;
    return it->second->tier();
}

std::size_t ChunkPool::size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

ChunkPoolStats ChunkPool::stats() const {
    std::lock_guard lock(mutex_);
    ChunkPoolStats s = stats_;
    s.pinned_chunks = 0;
    for (const auto& [key, e] : entries_) s.pinned_chunks += is_pinned(e.get()) ? 1 : 0;
    return s;
}

void ChunkPool::check_invariants() const {
    std::lock_guard lock(mutex_);
    TierStats device, host, disk;
    std::size_t in_facts = 0;
    std::size_t device_used = lent_device_, host_used = lent_host_;
    for (const auto& [key, e] : entries_) {
        IS_CHECK(key == e->key && key == e->identity.key()) << key;
        IS_CHECK(!e->retired) << key;
        IS_CHECK(e->device || e->host != nullptr || !e->path.empty()) << key << " held nowhere";
        if (e->device) {
            count(device, e->bytes, +1);
            device_used += RangeAllocator::aligned(e->bytes);
            const auto* at = static_cast<const std::byte*>(e->device->data());
            IS_CHECK(at >= device_base() &&
                     at + e->bytes <= device_base() + options_.device_capacity_bytes)
                << key;
            IS_CHECK(std::find(device_lru_.begin(), device_lru_.end(), e.get()) == e->device_lru)
                << key;
        }
        if (e->host != nullptr) {
            count(host, e->bytes, +1);
            host_used += RangeAllocator::aligned(e->bytes);
            const auto* at = static_cast<const std::byte*>(e->host);
            IS_CHECK(at >= host_base() &&
                     at + e->bytes <= host_base() + options_.host_capacity_bytes)
                << key;
            IS_CHECK(std::find(host_lru_.begin(), host_lru_.end(), e.get()) == e->host_lru) << key;
        }
        if (!e->path.empty()) {
            count(disk, e->bytes, +1);
            IS_CHECK(fs::exists(e->path)) << e->path;
        }
        IS_CHECK(!e->host_view || (e->host != nullptr && e->pins > 0)) << key;
        const auto f = by_fact_.find(e->identity.fact_id);
        IS_CHECK(f != by_fact_.end() &&
                 std::count(f->second.begin(), f->second.end(), e.get()) == 1)
            << key;
    }
    for (const auto& [fact, list] : by_fact_) {
        IS_CHECK(!list.empty()) << fact;
        in_facts += list.size();
    }
    IS_CHECK(in_facts == entries_.size());
    IS_CHECK(device_lru_.size() == device.chunks && host_lru_.size() == host.chunks);
    const std::pair<const TierStats*, const TierStats*> tiers[] = {
        {&stats_.device, &device}, {&stats_.host, &host}, {&stats_.disk, &disk}};
    for (int t = 0; t < 3; ++t)
        IS_CHECK(tiers[t].first->bytes == tiers[t].second->bytes &&
                 tiers[t].first->chunks == tiers[t].second->chunks)
            << chunk_tier_name(static_cast<ChunkTier>(t)) << " accounting";
    std::size_t retired = 0;
    for (const auto& e : retired_) {
        if (e->device) {
            retired += e->bytes;
            device_used += RangeAllocator::aligned(e->bytes);
        }
        if (e->host != nullptr) host_used += RangeAllocator::aligned(e->bytes);
    }
    IS_CHECK(retired == stats_.retired_bytes);
    IS_CHECK(device_used == device_ranges_.used())
        << device_used << " vs " << device_ranges_.used();
    IS_CHECK(host_used == host_ranges_.used()) << host_used << " vs " << host_ranges_.used();
    const std::uint64_t demand = stats_.hits() + stats_.misses;
    IS_CHECK(stats_.promotions <= demand &&
             stats_.host_hits + stats_.disk_hits == stats_.promotions + stats_.served_from_host)
        << "promotions " << stats_.promotions;
}

}  // namespace inferscale::memory
