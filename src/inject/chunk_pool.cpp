#include "inject/chunk_pool.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <system_error>

#include "base/log.h"
#include "inject/chunk_file.h"

namespace inferscale::inject {

namespace detail {

// One chunk and where its bytes are. Exactly one of device / host / path is set, per `tier`.
// Destroying an entry frees its memory, so it runs on the backend's thread only.
struct PoolEntry {
    tensor::Backend* backend = nullptr;
    std::string key;
    ChunkIdentity identity;
    std::vector<std::int32_t> token_ids;  // [num_tokens]
    std::int64_t num_layers = 0, num_kv_heads = 0, head_dim = 0;
    tensor::DType dtype = tensor::DType::F32;
    std::size_t bytes = 0;  // payload: [num_layers][2][num_tokens][kvh][d] dtype
    ChunkTier tier = ChunkTier::Device;
    std::optional<KvChunk> device;      // tier Device: the chunk in backend memory
    void* host = nullptr;               // tier Host: `bytes` from backend->allocate_host
    std::optional<KvChunk> host_view;   // tier Host, leased: a non-owning chunk over `host`
    // `host` was leased in place: kernels issued since may still read it, so the backend is
    // synchronized before that memory is freed or copied away (pinned buffers are reused).
    bool read_in_place = false;
    std::string path;                   // tier Disk: its chunk file
    int pins = 0;                       // leases, plus get_many's hold while it promotes
    std::uint64_t ticket = 0;           // the backend transfer filling `device` (0: none)
    std::array<std::uint64_t, kLayerGroups> group_tickets{};  // per layer group (0: none)
    bool retired = false;               // erased or replaced; freed once unpinned
    std::list<PoolEntry*>::iterator lru;  // in the device or host LRU list

    ~PoolEntry() {
        settle_reads();
        if (host != nullptr) backend->free_host(host);
    }
    void settle_reads() {
        if (!read_in_place) return;
        backend->synchronize();
        read_in_place = false;
    }
    ChunkFileHeader header() const {
        ChunkFileHeader h;
        h.identity = identity;
        h.token_ids = token_ids;
        h.num_layers = num_layers;
        h.num_kv_heads = num_kv_heads;
        h.head_dim = head_dim;
        h.dtype = dtype;
        h.payload_bytes = bytes;
        return h;
    }
    tensor::Tensor device_bytes() const {
        return tensor::Tensor(const_cast<void*>(device->data()), dtype,
                              {static_cast<std::int64_t>(bytes / tensor::dtype_size(dtype))},
                              backend->device());
    }
};

}  // namespace detail

namespace {

namespace fs = std::filesystem;

bool is_pinned(const detail::PoolEntry* e) { return e->pins > 0; }

}  // namespace

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

namespace {

// Moves `e` between tiers, keeping the LRU lists and the accounting in step.
void relink(detail::PoolEntry* e, ChunkTier to, std::list<detail::PoolEntry*>& device_lru,
            std::list<detail::PoolEntry*>& host_lru) {
    if (e->tier == ChunkTier::Device) device_lru.erase(e->lru);
    if (e->tier == ChunkTier::Host) host_lru.erase(e->lru);
    e->tier = to;
    if (to == ChunkTier::Device) e->lru = device_lru.insert(device_lru.begin(), e);
    if (to == ChunkTier::Host) e->lru = host_lru.insert(host_lru.begin(), e);
}

}  // namespace

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

}  // namespace inferscale::inject
