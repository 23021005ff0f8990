// ChunkPool's tier movers: room in the device and host slabs, promotion to the device, copies
// down, disk reads and writes, the flush (chunk_pool.h).
#include <algorithm>
#include <filesystem>
#include <system_error>

#include "base/log.h"
#include "memory/chunk_pool_entry.h"

namespace inferscale::memory {

using detail::is_pinned;
namespace fs = std::filesystem;

// ---- room in each tier -------------------------------------------------------------------

std::optional<Range> ChunkPool::take_device_locked(std::size_t bytes) {
    fence_reads_locked();
    if (RangeAllocator::aligned(bytes) > device_ranges_.capacity()) return std::nullopt;
    for (;;) {
        if (std::optional<Range> r = device_ranges_.allocate(bytes)) return r;
        auto victim = std::find_if(device_lru_.rbegin(), device_lru_.rend(),
                                   [](const Entry* e) { return !is_pinned(e); });
        if (victim == device_lru_.rend()) return std::nullopt;
        drop_device_locked(*victim);
    }
}

std::optional<Range> ChunkPool::take_host_locked(std::size_t bytes) {
    fence_reads_locked();
    if (RangeAllocator::aligned(bytes) > host_ranges_.capacity()) return std::nullopt;
    for (;;) {
        if (std::optional<Range> r = host_ranges_.allocate(bytes)) return r;
        // A chunk on the device keeps its host copy, so dropping its device copy stays free.
        auto victim = std::find_if(host_lru_.rbegin(), host_lru_.rend(),
                                   [](const Entry* e) { return !is_pinned(e) && !e->device; });
        if (victim == host_lru_.rend()) return std::nullopt;
        drop_host_locked(*victim);
    }
}

void ChunkPool::drop_device_locked(Entry* e) {
    if (e->host == nullptr && e->path.empty()) {
        // Nothing below it (the host tier had no room when it was encoded): copy it down now,
        // or write it to disk, or lose it.
        copy_down_locked(e);
        if (e->host == nullptr && !write_device_to_disk_locked(e)) {
            evict_locked(e);
            return;
        }
    }
    account(*e, -1);
    free_device_range_locked(*e);
    device_lru_.erase(e->device_lru);
    e->device.reset();
    e->ticket = 0;
    e->group_tickets.fill(0);
    account(*e, +1);
    ++stats_.demotions;
}

void ChunkPool::drop_host_locked(Entry* e) {
    if (e->path.empty() && !write_to_disk_locked(e, e->host)) {
        evict_locked(e);
        return;
    }
    account(*e, -1);
    free_host_range_locked(*e);
    host_lru_.erase(e->host_lru);
    e->host = nullptr;
    e->host_ticket = 0;
    e->host_fill_fence = 0;
    account(*e, +1);
    ++stats_.demotions;
}

Error ChunkPool::no_device_room(std::size_t bytes) const {
    return make_error(ErrorKind::Unavailable,
                      "chunk pool: a chunk of " + std::to_string(bytes) +
                          " bytes does not fit the device tier (" +
                          std::to_string(options_.device_capacity_bytes) +
                          " bytes) beside the chunks in use");
}

// ---- copies between tiers -----------------------------------------------------------------

void ChunkPool::copy_down_locked(Entry* e) {
    std::optional<Range> r = take_host_locked(e->bytes);
    if (!r) return;
    backend_->transfer_after(r->last_use.fence);  // kernels still reading its old chunk
    account(*e, -1);
    e->host = host_base() + r->offset;
    e->host_lru = host_lru_.insert(host_lru_.begin(), e);
    account(*e, +1);
    // After the compute ops issued so far (the encoder's writes), on the transfer stream.
    e->host_ticket =
        backend_->copy_to_host_async(e->host, e->device_bytes(backend_->device()), e->bytes);
    e->host_transfer = e->host_ticket;
    e->device_transfer = std::max(e->device_transfer, e->host_ticket);
    stats_.bytes_down += e->bytes;
}

bool ChunkPool::write_to_disk_locked(Entry* e, const void* src) {
    if (options_.disk_dir.empty()) return false;
    if (src == e->host) backend_->wait_for(e->host_fill_fence, e->host_ticket);  // still filling
    const std::string path = chunk_file_path(options_.disk_dir, e->identity);
    if (Status st = write_chunk_file(path, e->header(), src); !st.ok()) {
        IS_LOG(Warn) << "chunk pool: " << st.error().message;  // costs a re-encode, no more
        ++stats_.disk_errors;
        return false;
    }
    account(*e, -1);
    e->path = path;
    account(*e, +1);
    stats_.bytes_written += e->bytes;
    return true;
}

bool ChunkPool::write_device_to_disk_locked(Entry* e) {
    if (options_.disk_dir.empty()) return false;
    std::vector<std::byte> staging(e->bytes);
    backend_->order_after(e->device_transfer);
    backend_->copy_to_host(staging.data(), e->device_bytes(backend_->device()), e->bytes);
    backend_->synchronize();
    return write_to_disk_locked(e, staging.data());
}

ChunkPool::DiskRead ChunkPool::read_from_disk_locked(Entry* e) {
    std::optional<Range> r = take_host_locked(e->bytes);
    if (!r) return DiskRead::NoRoom;
    backend_->wait_for(r->last_use.fence, r->last_use.ticket);  // the CPU writes it
    std::byte* dst = host_base() + r->offset;
    Result<ChunkFileHeader> h = read_chunk_file(e->path, e->identity, dst, e->bytes);
    if (!h.ok()) {
        host_ranges_.free(r->offset, e->bytes, {});
        IS_LOG(Warn) << "chunk pool: dropping " << h.error().message;
        ++stats_.corruptions;
        return DiskRead::BadFile;
    }
    account(*e, -1);
    e->host = dst;
    e->host_lru = host_lru_.insert(host_lru_.begin(), e);
    account(*e, +1);
    stats_.bytes_read += e->bytes;
    return DiskRead::Ok;
}

bool ChunkPool::stage_promotion_locked(Entry* e) {
    std::optional<Range> r =
        options_.serve_from_host ? device_ranges_.allocate(e->bytes) : take_device_locked(e->bytes);
    if (!r) return false;
    backend_->transfer_after(r->last_use.fence);   // kernels still reading its old chunk
    backend_->transfer_after(e->host_fill_fence);  // an encoding written in host memory
    account(*e, -1);
    e->device.emplace(e->view(device_base() + r->offset, backend_->device()));
    e->device_lru = device_lru_.insert(device_lru_.begin(), e);
    account(*e, +1);
    ++stats_.promotions;
    stats_.bytes_up += e->bytes;
    return true;
}

void ChunkPool::issue_promotions_locked(std::span<Entry* const> promotions, PromotionOrder order) {
    const bool by_group = order == PromotionOrder::ByLayerGroup;
    std::uint64_t ticket = 0;
    for (std::int64_t g = 0; g < (by_group ? kLayerGroups : 1); ++g) {
        // Only the group's last copy takes a ticket: it covers the ones before it.
        Entry* last = nullptr;
        for (Entry* e : promotions)
            if (!by_group || layer_group_bytes(g, e->num_layers, e->bytes).size > 0) last = e;
        for (Entry* e : promotions) {
            const LayerGroupBytes range = by_group ? layer_group_bytes(g, e->num_layers, e->bytes)
                                                   : LayerGroupBytes{0, e->bytes};
            if (range.size == 0) continue;
            tensor::Tensor dst = e->device_bytes(backend_->device());
            dst.data = static_cast<std::byte*>(dst.data) + range.offset;
            dst.shape[0] = static_cast<std::int64_t>(range.size / tensor::dtype_size(e->dtype));
            const auto* src = static_cast<const std::byte*>(e->host) + range.offset;
            if (e == last) {
                ticket = backend_->copy_from_host_async(dst, src, range.size);
            } else {
                backend_->copy_from_host_untracked(dst, src, range.size);
            }
        }
        // An empty group shares the ticket of the groups before it (layer_group_of).
        for (Entry* e : promotions) {
            if (by_group) {
                e->group_tickets[static_cast<std::size_t>(g)] = ticket;
            } else {
                e->group_tickets.fill(ticket);
            }
        }
    }
    for (Entry* e : promotions) {
        e->ticket = ticket;
        e->device_transfer = std::max(e->device_transfer, ticket);
        e->host_transfer = std::max(e->host_transfer, ticket);
    }
}

ChunkLease ChunkPool::lease_in_host_locked(Entry* e) {
    if (!e->host_view) {
        // A copy down may still be filling the host memory: readers wait for it.
        e->ticket = e->host_ticket;
        e->group_tickets.fill(e->host_ticket);
        e->host_view.emplace(e->view(e->host, backend_->device()));
    }
    host_lru_.splice(host_lru_.begin(), host_lru_, e->host_lru);
    return ChunkLease(this, e, &*e->host_view);
}

Status ChunkPool::flush() {
    std::lock_guard lock(mutex_);
    collect_locked();
    if (options_.disk_dir.empty()) return {};
    const std::uint64_t errors_before = stats_.disk_errors;
    std::vector<Entry*> todo;
    for (const auto& [key, e] : entries_)
        if (e->path.empty() && !is_pinned(e.get())) todo.push_back(e.get());
    for (Entry* e : todo) {
        if (e->host != nullptr) {
            write_to_disk_locked(e, e->host);
        } else {
            write_device_to_disk_locked(e);
        }
    }
    if (stats_.disk_errors != errors_before)
        return make_error("chunk pool: " + std::to_string(stats_.disk_errors - errors_before) +
                          " chunks could not be written to " + options_.disk_dir);
    return {};
}

}  // namespace inferscale::memory
