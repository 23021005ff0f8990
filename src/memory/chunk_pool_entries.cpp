// ChunkPool's leases, LRU lists, accounting and self-check (chunk_pool.h).
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "base/log.h"
#include "memory/chunk_pool_entry.h"

namespace inferscale::memory {

using detail::is_pinned;
using detail::relink;
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

void ChunkPool::account(const Entry& e, int sign) {
    TierStats& t = e.tier == ChunkTier::Device ? stats_.device
                   : e.tier == ChunkTier::Host ? stats_.host
                                               : stats_.disk;
    if (sign > 0) {
        t.bytes += e.bytes;
        ++t.chunks;
    } else {
        IS_CHECK(t.bytes >= e.bytes && t.chunks > 0);
        t.bytes -= e.bytes;
        --t.chunks;
    }
}

void ChunkPool::insert_locked(std::unique_ptr<Entry> e) {
    Entry* p = e.get();
    const ChunkTier tier = p->tier;
    p->tier = ChunkTier::Disk;  // so relink links it into no list before the real one
    relink(p, tier, device_lru_, host_lru_);
    account(*p, +1);
    by_fact_[p->identity.fact_id].push_back(p);
    auto [it, inserted] = entries_.emplace(p->key, std::move(e));
    IS_CHECK(inserted) << "chunk " << p->key << " inserted twice";
}

std::unique_ptr<ChunkPool::Entry> ChunkPool::detach_locked(Entry* e) {
    account(*e, -1);
    const ChunkTier tier = e->tier;
    relink(e, ChunkTier::Disk, device_lru_, host_lru_);
    e->tier = tier;
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

void ChunkPool::retire_locked(std::unique_ptr<Entry> e) {
    e->retired = true;
    if (e->tier == ChunkTier::Disk) {
        remove_disk_file_locked(e->path);
        return;  // holds no memory
    }
    if (e->tier == ChunkTier::Device) stats_.retired_bytes += e->bytes;
    retired_.push_back(std::move(e));
}

void ChunkPool::collect_locked() {
    // Host sources of finished promotions (transfers finish in ticket order).
    std::size_t done = 0;
    while (done < in_flight_.size() && backend_->transfer_done(in_flight_[done].first))
        backend_->free_host(in_flight_[done++].second);
    in_flight_.erase(in_flight_.begin(), in_flight_.begin() + static_cast<std::ptrdiff_t>(done));
    auto keep = std::partition(retired_.begin(), retired_.end(),
                               [](const std::unique_ptr<Entry>& e) { return is_pinned(e.get()); });
    for (auto it = keep; it != retired_.end(); ++it)
        if ((*it)->tier == ChunkTier::Device) stats_.retired_bytes -= (*it)->bytes;
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
    if (--e->pins == 0) e->host_view.reset();  // the last lease of host memory read in place
}

std::optional<ChunkTier> ChunkPool::tier_of(const ChunkIdentity& id) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id.key());
    if (it == entries_.end()) return std::nullopt;
    return it->second->tier;
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
    TierStats tiers[3];
    std::size_t in_facts = 0;
    for (const auto& [key, e] : entries_) {
        IS_CHECK(key == e->key && key == e->identity.key()) << key;
        IS_CHECK(!e->retired) << key;
        TierStats& t = tiers[static_cast<int>(e->tier)];
        t.bytes += e->bytes;
        ++t.chunks;
        // Its bytes are in exactly the tier it claims.
        IS_CHECK(e->device.has_value() == (e->tier == ChunkTier::Device)) << key;
        IS_CHECK((e->host != nullptr) == (e->tier == ChunkTier::Host)) << key;
        IS_CHECK(!e->path.empty() == (e->tier == ChunkTier::Disk)) << key;
        IS_CHECK(e->tier != ChunkTier::Device || e->device->bytes() >= e->bytes) << key;
        IS_CHECK(e->tier != ChunkTier::Disk || fs::exists(e->path)) << e->path;
        IS_CHECK(e->tier == ChunkTier::Device || e->pins == 0 ||
                 (e->tier == ChunkTier::Host && e->host_view))
            << key;
        IS_CHECK(!e->host_view || (e->tier == ChunkTier::Host && e->pins > 0)) << key;
        if (e->tier != ChunkTier::Disk) {
            const auto& lru = e->tier == ChunkTier::Device ? device_lru_ : host_lru_;
            IS_CHECK(std::find(lru.begin(), lru.end(), e.get()) == e->lru) << key;
        }
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
    IS_CHECK(device_lru_.size() == tiers[0].chunks && host_lru_.size() == tiers[1].chunks);
    const TierStats* have[3] = {&stats_.device, &stats_.host, &stats_.disk};
    for (int t = 0; t < 3; ++t)
        IS_CHECK(have[t]->bytes == tiers[t].bytes && have[t]->chunks == tiers[t].chunks)
            << chunk_tier_name(static_cast<ChunkTier>(t)) << " accounting";
    std::size_t retired = 0;
    for (const auto& e : retired_)
        if (e->tier == ChunkTier::Device) retired += e->bytes;
    IS_CHECK(retired == stats_.retired_bytes);
    IS_CHECK(stats_.device.bytes + stats_.retired_bytes <= options_.device_capacity_bytes);
    const std::uint64_t demand = stats_.hits() + stats_.misses;
    IS_CHECK(stats_.promotions <= demand &&
             stats_.host_hits + stats_.disk_hits == stats_.promotions + stats_.served_from_host)
        << "promotions " << stats_.promotions;
}

}  // namespace inferscale::memory
