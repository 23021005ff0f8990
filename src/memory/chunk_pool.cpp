#include "memory/chunk_pool.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "base/log.h"
#include "memory/chunk_pool_entry.h"

namespace inferscale::memory {

using detail::is_pinned;
namespace fs = std::filesystem;

// ---- open / close -------------------------------------------------------------------------

ChunkPool::ChunkPool(tensor::Backend& backend, ChunkPoolOptions options)
    : backend_(&backend), options_(std::move(options)) {}

Result<std::unique_ptr<ChunkPool>> ChunkPool::open(tensor::Backend& backend,
                                                   ChunkPoolOptions options) {
    std::unique_ptr<ChunkPool> pool(new ChunkPool(backend, std::move(options)));
    if (!pool->options_.disk_dir.empty()) {
        std::lock_guard lock(pool->mutex_);
        IS_RETURN_IF_ERROR(pool->index_disk_locked());
    }
    return pool;
}

ChunkPool::~ChunkPool() {
    if (options_.flush_on_close && !options_.disk_dir.empty()) {
        if (Status st = flush(); !st.ok()) {
            IS_LOG(Warn) << "chunk pool: flush on close: " << st.error().message;
        }
    }
    std::lock_guard lock(mutex_);
    if (!in_flight_.empty()) {
        backend_->order_after(in_flight_.back().first);
        backend_->synchronize();
        collect_locked();
    }
    for (const auto& [key, e] : entries_) IS_CHECK(e->pins == 0) << "chunk leased past its pool";
    for (const auto& e : retired_) IS_CHECK(e->pins == 0) << "chunk leased past its pool";
}

Status ChunkPool::index_disk_locked() {
    std::error_code ec;
    const fs::path root(options_.disk_dir);
    fs::create_directories(root, ec);
    if (ec) return make_error("cannot create chunk folder " + root.string() + ": " + ec.message());
    for (const auto& dir : fs::directory_iterator(root, ec)) {
        if (!dir.is_directory()) continue;
        for (const auto& file : fs::directory_iterator(dir.path(), ec)) {
            const std::string path = file.path().string();
            const std::string name = file.path().filename().string();
            if (name.find(".tmp") != std::string::npos) {  // a write cut short by a crash
                fs::remove(file.path(), ec);
                continue;
            }
            if (!name.ends_with(kChunkFileSuffix)) continue;
            Result<ChunkFileHeader> h = read_chunk_header(path);
            if (!h.ok() || chunk_file_path(options_.disk_dir, h->identity) != path) {
                IS_LOG(Warn) << "chunk pool: removing "
                             << (h.ok() ? path + ": misplaced" : h.error().message);
                ++stats_.corruptions;
                fs::remove(file.path(), ec);
                continue;
            }
            auto e = std::make_unique<Entry>();
            e->backend = backend_;
            e->key = h->identity.key();
            e->identity = std::move(h->identity);
            e->token_ids = std::move(h->token_ids);
            e->num_layers = h->num_layers;
            e->num_kv_heads = h->num_kv_heads;
            e->head_dim = h->head_dim;
            e->dtype = h->dtype;
            e->bytes = h->payload_bytes;
            e->tier = ChunkTier::Disk;
            e->path = path;
            insert_locked(std::move(e));
        }
    }
    if (ec) return make_error("cannot list chunk folder " + root.string() + ": " + ec.message());
    return {};
}

// ---- public operations --------------------------------------------------------------------

Result<tensor::Buffer> ChunkPool::allocate_device(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    collect_locked();
    return allocate_device_locked(bytes);
}

Result<ChunkLease> ChunkPool::get(const ChunkIdentity& id) {
    std::vector<ChunkLease> leases = IS_TRY(get_many(std::span<const ChunkIdentity>(&id, 1)));
    return std::move(leases[0]);
}

Result<std::vector<ChunkLease>> ChunkPool::get_many(std::span<const ChunkIdentity> ids,
                                                     bool ordered) {
    std::lock_guard lock(mutex_);
    collect_locked();
    // Pin every hit first, so making room for one promotion never demotes another of ours.
    std::vector<Entry*> found(ids.size(), nullptr);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        auto it = entries_.find(ids[i].key());
        if (it == entries_.end()) {
            ++stats_.misses;
            continue;
        }
        found[i] = it->second.get();
        if (found[i]->tier == ChunkTier::Device) ++stats_.device_hits;
        ++found[i]->pins;
    }
    // Room for every promotion at once: one batch of demotions, one wait (none with
    // serve_from_host: promotions take free room only). A host chunk already leased in place
    // stays where it is (its lease reads that memory).
    const auto stays_in_host = [](const Entry* e) { return e->host_view.has_value(); };
    std::size_t coming_up = 0;
    for (const Entry* e : found) {
        if (e != nullptr && e->tier != ChunkTier::Device && !stays_in_host(e)) coming_up += e->bytes;
    }
    // When they do not all fit, each promotion below makes its own room (the first that
    // cannot fails the call, or stays in the host tier with serve_from_host).
    if (coming_up > 0 && !options_.serve_from_host) make_device_room_locked(coming_up);
    Status failed;
    std::vector<Promotion> promotions;
    for (std::size_t i = 0; i < ids.size() && failed.ok(); ++i) {
        Entry* e = found[i];
        if (e == nullptr || e->tier == ChunkTier::Device) continue;
        const ChunkTier from = e->tier;
        if (stays_in_host(e)) {
            ++stats_.host_hits;
            ++stats_.served_from_host;
            continue;
        }
        Result<Staged> staged = stage_promotion_locked(e);
        if (!staged.ok()) {
            failed = std::move(staged).error();
        } else if (staged->kind == Staged::BadFile) {  // never returned, so a miss
            std::replace(found.begin(), found.end(), e, static_cast<Entry*>(nullptr));
            ++stats_.misses;
            remove_disk_file_locked(e->path);
            detach_locked(e);
        } else {
            ++(from == ChunkTier::Host ? stats_.host_hits : stats_.disk_hits);
            if (staged->kind == Staged::Promoted) {
                promotions.push_back({e, staged->src});
            } else {
                ++stats_.served_from_host;
            }
        }
    }
    // Staged chunks sit in the device tier: their bytes go up even when a later one failed.
    issue_promotions_locked(promotions);
    if (ordered && !promotions.empty()) backend_->order_after(promotions.back().entry->ticket);
    std::vector<ChunkLease> out(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        Entry* e = found[i];
        if (e == nullptr || !failed.ok()) {
            if (e != nullptr) drop_pin_locked(e);
            continue;
        }
        // The pin taken above becomes the lease's.
        if (e->tier == ChunkTier::Host) {
            out[i] = lease_in_host_locked(e);
            continue;
        }
        device_lru_.splice(device_lru_.begin(), device_lru_, e->lru);
        out[i] = ChunkLease(this, e, &*e->device);
    }
    if (!failed.ok()) return std::move(failed).error();
    return out;
}

Result<ChunkLease> ChunkPool::put(KvChunk chunk) {
    std::lock_guard lock(mutex_);
    collect_locked();
    auto e = std::make_unique<Entry>();
    e->backend = backend_;
    e->identity = chunk.identity();
    e->key = e->identity.key();
    e->token_ids = chunk.token_ids();
    e->num_layers = chunk.num_layers();
    e->num_kv_heads = chunk.num_kv_heads();
    e->head_dim = chunk.head_dim();
    e->dtype = chunk.dtype();
    e->bytes = chunk_payload_bytes(e->num_layers, chunk.num_tokens(), e->num_kv_heads,
                                   e->head_dim, e->dtype);
    if (auto it = entries_.find(e->key); it != entries_.end())
        retire_locked(detach_locked(it->second.get()));
    if (!make_device_room_locked(e->bytes)) {
        if (!options_.serve_from_host) return no_device_room(e->bytes);
        void* host = make_host_room_locked(e->bytes) ? backend_->allocate_host(e->bytes) : nullptr;
        if (host == nullptr) {
            Error error = no_device_room(e->bytes);
            error.message += ", nor the host tier's";
            return error;
        }
        e->device.emplace(std::move(chunk));
        backend_->copy_to_host(host, e->device_bytes(), e->bytes);
        e->device.reset();  // freeing it waits for the device: the copy has landed
        e->host = host;
        e->tier = ChunkTier::Host;
        Entry* p = e.get();
        insert_locked(std::move(e));
        ++p->pins;
        return lease_in_host_locked(p);
    }
    e->device.emplace(std::move(chunk));
    e->tier = ChunkTier::Device;
    Entry* p = e.get();
    insert_locked(std::move(e));
    ++p->pins;
    return ChunkLease(this, p, &*p->device);
}

std::size_t ChunkPool::erase(std::string_view fact_id) {
    std::lock_guard lock(mutex_);
    auto it = by_fact_.find(std::string(fact_id));
    if (it == by_fact_.end()) return 0;
    const std::vector<Entry*> doomed = it->second;
    for (Entry* e : doomed) retire_locked(detach_locked(e));
    stats_.erased += doomed.size();
    return doomed.size();
}

std::size_t ChunkPool::erase_facts(std::span<const std::string> fact_ids) {
    std::size_t n = 0;
    for (const std::string& id : fact_ids) n += erase(id);
    return n;
}

}  // namespace inferscale::memory
