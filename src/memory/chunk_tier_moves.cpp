// ChunkPool's tier movers: demotion to host and disk, promotion to the device, the disk flush
// (chunk_pool.h).
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "base/log.h"
#include "memory/chunk_pool_entry.h"

namespace inferscale::memory {

using detail::is_pinned;
using detail::relink;
namespace fs = std::filesystem;

// ---- tier moves ---------------------------------------------------------------------------

void ChunkPool::move_to_disk_locked(Entry* e, const void* host) {
    e->settle_reads();  // before the host bytes are read here or freed
    if (!options_.disk_dir.empty()) {
        const std::string path = chunk_file_path(options_.disk_dir, e->identity);
        if (Status st = write_chunk_file(path, e->header(), host); st.ok()) {
            account(*e, -1);
            relink(e, ChunkTier::Disk, device_lru_, host_lru_);
            account(*e, +1);
            e->device.reset();
            if (e->host != nullptr) backend_->free_host(e->host);
            e->host = nullptr;
            e->path = path;
            ++stats_.demotions;
            return;
        } else {  // a disk error costs a re-encode later, not the request
            IS_LOG(Warn) << "chunk pool: " << st.error().message;
            ++stats_.disk_errors;
        }
    }
    ++stats_.evictions;
    detach_locked(e);  // frees its memory here
}

bool ChunkPool::make_host_room_locked(std::size_t bytes) {
    if (bytes > options_.host_capacity_bytes) return false;
    std::size_t used = stats_.host.bytes;
    std::vector<Entry*> victims;
    bool read_in_place = false;
    const std::size_t cap = options_.host_capacity_bytes;
    for (auto it = host_lru_.rbegin(); it != host_lru_.rend() && used + bytes > cap; ++it) {
        if (is_pinned(*it)) continue;
        victims.push_back(*it);
        used -= (*it)->bytes;
        read_in_place = read_in_place || (*it)->read_in_place;
    }
    if (used + bytes > cap) return false;
    // One wait for the kernels that may still read any of them, not one per chunk.
    if (read_in_place) backend_->synchronize();
    for (Entry* e : victims) {
        e->read_in_place = false;
        move_to_disk_locked(e, e->host);
    }
    return true;
}

void ChunkPool::demote_device_locked(std::span<Entry* const> victims) {
    struct Down {
        Entry* e;
        void* host;                      // its new host-tier buffer, or null: to disk
        std::vector<std::byte> staging;  // the bytes on their way to disk
    };
    std::vector<Down> downs;
    downs.reserve(victims.size());
    std::size_t to_host = 0;  // bytes of this batch bound for the host tier, not yet counted
    for (Entry* e : victims) {
        void* host = make_host_room_locked(to_host + e->bytes) ? backend_->allocate_host(e->bytes)
                                                               : nullptr;
        Down& d = downs.emplace_back(Down{e, host, {}});
        if (host != nullptr) {
            to_host += e->bytes;
        } else {
            d.staging.resize(e->bytes);
        }
        backend_->order_after(e->ticket);  // a promotion may still be filling it
        backend_->copy_to_host(host != nullptr ? host : d.staging.data(), e->device_bytes(),
                               e->bytes);
    }
    backend_->synchronize();
    for (Down& d : downs) {
        Entry* e = d.e;
        if (d.host == nullptr) {
            move_to_disk_locked(e, d.staging.data());
            continue;
        }
        account(*e, -1);
        relink(e, ChunkTier::Host, device_lru_, host_lru_);
        account(*e, +1);
        e->device.reset();
        e->host = d.host;
        ++stats_.demotions;
    }
}

Error ChunkPool::no_device_room(std::size_t bytes) const {
    return make_error(ErrorKind::Unavailable,
                      "chunk pool: a chunk of " + std::to_string(bytes) +
                          " bytes does not fit the device tier (" +
                          std::to_string(options_.device_capacity_bytes) +
                          " bytes) beside the chunks in use");
}

bool ChunkPool::device_has_room_locked(std::size_t bytes) const {
    return stats_.device.bytes + stats_.retired_bytes + bytes <= options_.device_capacity_bytes;
}

bool ChunkPool::make_device_room_locked(std::size_t bytes) {
    const std::size_t cap = options_.device_capacity_bytes;
    std::size_t used = stats_.device.bytes + stats_.retired_bytes;
    if (bytes > cap) return false;
    if (used + bytes <= cap) return true;
    std::vector<Entry*> victims;
    for (auto it = device_lru_.rbegin(); it != device_lru_.rend() && used + bytes > cap; ++it) {
        if (is_pinned(*it)) continue;
        victims.push_back(*it);
        used -= (*it)->bytes;
    }
    if (used + bytes > cap) return false;  // the pinned chunks leave too little room
    demote_device_locked(victims);
    return true;
}

Result<tensor::Buffer> ChunkPool::allocate_device_locked(std::size_t bytes) {
    for (;;) {
        Result<tensor::Buffer> buf = backend_->allocate(bytes);
        if (buf.ok()) return buf;
        // The device itself is short (other users of its memory): give up our LRU chunks.
        auto victim = std::find_if(device_lru_.rbegin(), device_lru_.rend(),
                                   [](const Entry* e) { return !is_pinned(e); });
        if (victim == device_lru_.rend()) {
            return make_error(ErrorKind::Unavailable,
                              "chunk pool: no device memory for a chunk of " +
                                  std::to_string(bytes) + " bytes beside the chunks in use (" +
                                  buf.error().message + ")");
        }
        Entry* const one = *victim;
        demote_device_locked(std::span<Entry* const>(&one, 1));
    }
}

Result<ChunkPool::Staged> ChunkPool::stage_promotion_locked(Entry* e) {
    // A host chunk leased in place before and finding no device room stays where it is, with
    // no wait for the kernels that read it.
    if (options_.serve_from_host && e->tier == ChunkTier::Host &&
        !device_has_room_locked(e->bytes)) {
        return Staged{Staged::InHost};
    }
    e->settle_reads();  // its host buffer is freed once the promotion's copy is done
    void* src = e->host;
    if (e->tier == ChunkTier::Disk) {
        // Read and check before making room, so a bad file costs no demotions.
        src = backend_->allocate_host(e->bytes);
        if (src == nullptr) return make_error("chunk pool: out of host memory for a disk read");
        Result<ChunkFileHeader> h = read_chunk_file(e->path, e->identity, src, e->bytes);
        if (!h.ok()) {
            backend_->free_host(src);
            IS_LOG(Warn) << "chunk pool: dropping " << h.error().message;
            ++stats_.corruptions;
            return Staged{Staged::BadFile};
        }
    }
    const auto give_back = [&] {
        if (src != e->host) backend_->free_host(src);
    };
    // Without device room: served from the host tier, or an Error the caller may wait out.
    const auto no_room = [&](Error error) -> Result<Staged> {
        if (options_.serve_from_host && error.kind == ErrorKind::Unavailable &&
            (e->tier == ChunkTier::Host || disk_to_host_locked(e, src))) {
            return Staged{Staged::InHost};
        }
        give_back();
        return error;
    };
    const bool room = options_.serve_from_host ? device_has_room_locked(e->bytes)
                                               : make_device_room_locked(e->bytes);
    if (!room) {
        return no_room(no_device_room(e->bytes));
    }
    Result<tensor::Buffer> buf = allocate_device_locked(e->bytes);
    if (!buf.ok()) return no_room(std::move(buf).error());
    KvChunk chunk(e->identity, e->token_ids, e->num_layers, e->num_kv_heads, e->head_dim,
                  e->dtype, std::move(*buf));
    e->device.emplace(std::move(chunk));
    e->host = nullptr;
    if (e->tier == ChunkTier::Disk) remove_disk_file_locked(e->path);
    e->path.clear();
    account(*e, -1);
    relink(e, ChunkTier::Device, device_lru_, host_lru_);
    account(*e, +1);
    ++stats_.promotions;
    return Staged{Staged::Promoted, src};
}

bool ChunkPool::disk_to_host_locked(Entry* e, void* bytes) {
    if (!make_host_room_locked(e->bytes)) return false;
    remove_disk_file_locked(e->path);
    e->path.clear();
    account(*e, -1);
    relink(e, ChunkTier::Host, device_lru_, host_lru_);
    account(*e, +1);
    e->host = bytes;
    return true;
}

ChunkLease ChunkPool::lease_in_host_locked(Entry* e) {
    if (!e->host_view) {
        // Nothing is in flight for host memory: a lease of it is ready at once.
        e->ticket = 0;
        e->group_tickets.fill(0);
        e->host_view.emplace(e->identity, e->token_ids, e->num_layers, e->num_kv_heads,
                             e->head_dim, e->dtype,
                             tensor::Buffer(nullptr, e->host, e->bytes, backend_->device()));
    }
    host_lru_.splice(host_lru_.begin(), host_lru_, e->lru);
    e->read_in_place = true;
    return ChunkLease(this, e, &*e->host_view);
}

void ChunkPool::issue_promotions_locked(std::span<const Promotion> promotions) {
    for (std::int64_t g = 0; g < kLayerGroups; ++g) {
        for (const Promotion& p : promotions) {
            Entry* e = p.entry;
            const LayerGroupBytes range = layer_group_bytes(g, e->num_layers, e->bytes);
            if (range.size == 0) continue;
            tensor::Tensor dst = e->device_bytes();
            dst.data = static_cast<std::byte*>(dst.data) + range.offset;
            dst.shape[0] = static_cast<std::int64_t>(range.size / tensor::dtype_size(e->dtype));
            e->ticket = backend_->copy_from_host_async(
                dst, static_cast<const std::byte*>(p.src) + range.offset, range.size);
            // Layers of an empty group's neighbours share their tickets (layer_group_of).
            e->group_tickets[static_cast<std::size_t>(g)] = e->ticket;
        }
    }
    // Freed by collect_locked once copied (transfers finish in ticket order).
    for (const Promotion& p : promotions) in_flight_.emplace_back(p.entry->ticket, p.src);
}

Status ChunkPool::flush() {
    std::lock_guard lock(mutex_);
    collect_locked();
    if (options_.disk_dir.empty()) return {};
    const std::uint64_t errors_before = stats_.disk_errors;
    std::vector<Entry*> todo;
    for (const auto& [key, e] : entries_)
        if (e->tier != ChunkTier::Disk && !is_pinned(e.get())) todo.push_back(e.get());
    std::vector<std::byte> staging;
    for (Entry* e : todo) {
        if (e->tier == ChunkTier::Host) {
            move_to_disk_locked(e, e->host);
            continue;
        }
        staging.resize(e->bytes);
        backend_->order_after(e->ticket);
        backend_->copy_to_host(staging.data(), e->device_bytes(), e->bytes);
        backend_->synchronize();
        move_to_disk_locked(e, staging.data());
    }
    if (stats_.disk_errors != errors_before)
        return make_error("chunk pool: " + std::to_string(stats_.disk_errors - errors_before) +
                          " chunks could not be written to " + options_.disk_dir);
    return {};
}

}  // namespace inferscale::memory
