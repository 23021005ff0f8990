#include "memory/chunk_pool.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "base/log.h"
#include "memory/chunk_pool_entry.h"

namespace inferscale::memory {

using detail::is_pinned;
namespace fs = std::filesystem;

// ---- open / close -------------------------------------------------------------------------

ChunkPool::ChunkPool(tensor::Backend& backend, ChunkPoolOptions options)
    : backend_(&backend),
      options_(std::move(options)),
      device_ranges_(options_.device_capacity_bytes),
      host_ranges_(options_.host_capacity_bytes) {}

Result<std::unique_ptr<ChunkPool>> ChunkPool::open(tensor::Backend& backend,
                                                   ChunkPoolOptions options) {
    std::unique_ptr<ChunkPool> pool(new ChunkPool(backend, std::move(options)));
    const ChunkPoolOptions& o = pool->options_;
    if (o.device_capacity_bytes > 0) {
        Result<tensor::Buffer> slab = backend.allocate(o.device_capacity_bytes);
        if (!slab.ok())
            return make_error(ErrorKind::Unavailable, "chunk pool: cannot take the device tier's " +
                                                          std::to_string(o.device_capacity_bytes) +
                                                          " bytes: " + slab.error().message);
        pool->device_slab_ = std::move(*slab);
    }
    if (o.host_capacity_bytes > 0) {
        pool->host_slab_ = backend.allocate_host(o.host_capacity_bytes);
        if (pool->host_slab_ == nullptr)
            return make_error(ErrorKind::Unavailable, "chunk pool: cannot take the host tier's " +
                                                          std::to_string(o.host_capacity_bytes) +
                                                          " bytes");
    }
    if (!o.disk_dir.empty()) {
        std::lock_guard lock(pool->mutex_);
        IS_RETURN_IF_ERROR(pool->index_disk_locked());
    }
    pool->measure_upload_limit();
    return pool;
}

void ChunkPool::measure_upload_limit() {
    // Before the pool is shared: no lock.
    if (host_slab_ == nullptr || device_slab_.bytes() == 0 ||
        backend_->device() == tensor::Device::Cpu) {
        return;
    }
    const std::size_t bytes =
        std::min({options_.host_capacity_bytes, device_slab_.bytes(), std::size_t{256} << 20}) / 2 *
        2;
    const tensor::Tensor dst(device_base(), tensor::DType::BF16,
                             {static_cast<std::int64_t>(bytes / 2)}, backend_->device());
    double best = 0;
    for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        backend_->copy_from_host(dst, host_slab_, bytes);
        backend_->synchronize();
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
        best = std::max(best, static_cast<double>(bytes) / took.count());
    }
    stats_.upload_limit_bytes_per_s = best;
}

ChunkPool::~ChunkPool() {
    if (options_.flush_on_close && !options_.disk_dir.empty()) {
        if (Status st = flush(); !st.ok()) {
            IS_LOG(Warn) << "chunk pool: flush on close: " << st.error().message;
        }
    }
    std::lock_guard lock(mutex_);
    for (const auto& [key, e] : entries_) IS_CHECK(e->pins == 0) << "chunk leased past its pool";
    for (const auto& e : retired_) IS_CHECK(e->pins == 0) << "chunk leased past its pool";
    // Nothing may still read or fill the slabs when they go.
    std::uint64_t last = 0;
    for (const auto& [key, e] : entries_)
        last = std::max({last, e->device_transfer, e->host_transfer});
    for (const auto& e : retired_) last = std::max({last, e->device_transfer, e->host_transfer});
    backend_->synchronize();
    backend_->wait_for(0, last);
    if (host_slab_ != nullptr) backend_->free_host(host_slab_);
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
            e->key = h->identity.key();
            e->identity = std::move(h->identity);
            e->token_ids = std::move(h->token_ids);
            e->num_layers = h->num_layers;
            e->num_kv_heads = h->num_kv_heads;
            e->head_dim = h->head_dim;
            e->dtype = h->dtype;
            e->bytes = h->payload_bytes;
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
    if (std::optional<Range> r = take_device_locked(bytes)) {
        backend_->order_after(r->last_use.ticket);  // the encoder writes on the compute stream
        lent_device_ += RangeAllocator::aligned(bytes);
        return tensor::Buffer(&slab_owner_, device_base() + r->offset, bytes, backend_->device());
    }
    if (options_.serve_from_host) {
        if (std::optional<Range> r = take_host_locked(bytes)) {
            backend_->order_after(r->last_use.ticket);
            lent_host_ += RangeAllocator::aligned(bytes);
            return tensor::Buffer(&slab_owner_, host_base() + r->offset, bytes, backend_->device());
        }
        Error error = no_device_room(bytes);
        error.message += ", nor the host tier's";
        return error;
    }
    return no_device_room(bytes);
}

void ChunkPool::SlabRanges::free_buffer(void* data, std::size_t bytes) {
    ChunkPool& p = pool_;
    std::lock_guard lock(p.mutex_);
    // Whatever the encoder wrote there runs before the range's next writer.
    const RangeUse use{p.backend_->compute_fence(), 0};
    auto* at = static_cast<std::byte*>(data);
    if (p.in_device_slab(at)) {
        p.device_ranges_.free(static_cast<std::size_t>(at - p.device_base()), bytes, use);
        p.lent_device_ -= RangeAllocator::aligned(bytes);
    } else {
        p.host_ranges_.free(static_cast<std::size_t>(at - p.host_base()), bytes, use);
        p.lent_host_ -= RangeAllocator::aligned(bytes);
    }
}

Result<ChunkLease> ChunkPool::get(const ChunkIdentity& id) {
    std::vector<ChunkLease> leases = IS_TRY(get_many(std::span<const ChunkIdentity>(&id, 1)));
    return std::move(leases[0]);
}

Result<std::vector<ChunkLease>> ChunkPool::get_many(std::span<const ChunkIdentity> ids,
                                                    bool ordered, PromotionOrder order) {
    std::lock_guard lock(mutex_);
    collect_locked();
    // Pin every hit first, so making room for one promotion never drops another of ours.
    std::vector<Entry*> found(ids.size(), nullptr);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        auto it = entries_.find(ids[i].key());
        if (it == entries_.end()) {
            ++stats_.misses;
            continue;
        }
        found[i] = it->second.get();
        if (found[i]->device) ++stats_.device_hits;
        ++found[i]->pins;
    }
    Status failed;
    std::vector<Entry*> promotions;
    for (std::size_t i = 0; i < ids.size() && failed.ok(); ++i) {
        Entry* e = found[i];
        if (e == nullptr || e->device) continue;
        const bool from_disk = e->host == nullptr;
        if (from_disk) {
            const DiskRead read = read_from_disk_locked(e);
            if (read == DiskRead::BadFile) {  // never returned, so a miss
                std::replace(found.begin(), found.end(), e, static_cast<Entry*>(nullptr));
                ++stats_.misses;
                --e->pins;  // ours: a chunk on disk only has no leases
                evict_locked(e);
                continue;
            }
            if (read == DiskRead::NoRoom) {
                failed = make_error(ErrorKind::Unavailable,
                                    "chunk pool: no host memory to read a chunk of " +
                                        std::to_string(e->bytes) + " bytes from disk into");
                continue;
            }
        }
        if (stage_promotion_locked(e)) {
            promotions.push_back(e);
        } else if (options_.serve_from_host) {
            ++stats_.served_from_host;
        } else {
            failed = no_device_room(e->bytes);
            continue;
        }
        ++(from_disk ? stats_.disk_hits : stats_.host_hits);
    }
    // Staged chunks sit in the device tier: their bytes go up even when a later one failed.
    issue_promotions_locked(promotions, order);
    if (ordered && !promotions.empty()) backend_->order_after(promotions.back()->ticket);
    std::vector<ChunkLease> out(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        Entry* e = found[i];
        if (e == nullptr || !failed.ok()) {
            if (e != nullptr) drop_pin_locked(e);
            continue;
        }
        // The pin taken above becomes the lease's.
        if (!e->device) {
            out[i] = lease_in_host_locked(e);
            if (ordered) backend_->order_after(e->host_ticket);  // a copy down still landing
            continue;
        }
        device_lru_.splice(device_lru_.begin(), device_lru_, e->device_lru);
        if (e->host != nullptr) host_lru_.splice(host_lru_.begin(), host_lru_, e->host_lru);
        out[i] = ChunkLease(this, e, &*e->device);
    }
    if (!failed.ok()) return std::move(failed).error();
    return out;
}

Result<ChunkLease> ChunkPool::put(KvChunk chunk) {
    std::lock_guard lock(mutex_);
    collect_locked();
    auto e = std::make_unique<Entry>();
    e->identity = chunk.identity();
    e->key = e->identity.key();
    e->token_ids = chunk.token_ids();
    e->num_layers = chunk.num_layers();
    e->num_kv_heads = chunk.num_kv_heads();
    e->head_dim = chunk.head_dim();
    e->dtype = chunk.dtype();
    e->bytes = chunk_payload_bytes(e->num_layers, chunk.num_tokens(), e->num_kv_heads,
                                   e->head_dim, e->dtype);
    tensor::Buffer kv = std::move(chunk).take_kv();
    if (kv.owner() != &slab_owner_)
        return make_error(ErrorKind::InvalidArgument,
                          "chunk pool: put takes chunks in memory from allocate_device");
    IS_CHECK(kv.bytes() >= e->bytes) << kv.bytes() << " bytes for a chunk of " << e->bytes;
    auto* at = static_cast<std::byte*>(kv.data());
    const std::size_t taken = RangeAllocator::aligned(kv.bytes());
    kv.release();  // the entry's range from now on
    if (auto it = entries_.find(e->key); it != entries_.end())
        retire_locked(detach_locked(it->second.get()));
    Entry* p = e.get();
    if (in_device_slab(at)) {
        lent_device_ -= taken;
        p->device.emplace(p->view(at, backend_->device()));
        insert_locked(std::move(e));
        copy_down_locked(p);
        ++p->pins;
        return ChunkLease(this, p, &*p->device);
    }
    lent_host_ -= taken;
    p->host = at;
    p->host_fill_fence = backend_->compute_fence();  // the encoder wrote it in place
    insert_locked(std::move(e));
    ++p->pins;
    return lease_in_host_locked(p);
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
