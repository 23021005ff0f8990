#pragma once
// ChunkPool: encoded KvChunks in three tiers, keyed by ChunkIdentity::key():
//   device  a slab of backend memory (what the injector reads), taken once at open;
//   host    a slab from Backend::allocate_host (pinned on CUDA, so copies run at full speed and
//           kernels can read it in place), taken once at open;
//   disk    one file per chunk under a folder (see chunk_file.h), unbounded; survives restarts.
// Both slabs are cut by a RangeAllocator, so the request path never allocates or frees backend
// memory. The tiers are inclusive: a device chunk keeps its host copy (a new encoding is copied
// down on the transfer stream as it is put), and a chunk once written to disk keeps its file,
// so dropping a chunk from the device costs nothing: no copy back, no wait. Requests want
// chunks on the device: `get` promotes a host or disk chunk there (a disk chunk is read into
// the host tier first); when the device slab has no room, its least recently used unleased
// chunks are dropped (a rare chunk with no copy below is copied down first), except under
// serve_from_host (see ChunkPoolOptions). The host tier
// drops its least recently used chunks that are not on the device, writing each to disk first
// when it has no file (and evicting it from the pool without a disk tier). A chunk in no tier
// is "missing" and the caller re-encodes. A disk file whose header, identity or checksum does
// not match is never returned: it is removed, counted as a corruption and reported missing.
//
// Reuse of slab memory is ordered, never waited for: a range remembers the compute ops that
// read it (a Backend::compute_fence taken after its last lease ended) and the last transfer
// that touched it, and a copy into it is issued after them (Backend::transfer_after,
// order_after); only a host range rewritten by the CPU (a disk read) waits, and only when its
// last readers are still running.
//
// Leases: `get`/`put` return a ChunkLease that pins the chunk until the lease is destroyed, so
// an in-flight request's chunks are never dropped under it. Erasing a leased chunk takes it out
// of the pool at once (it is never returned again) and frees its memory when the last lease
// ends.
//
// Promotions copy on the backend's transfer stream (Backend::copy_from_host_async), beside
// compute: `get_many(ids, ordered = false)` returns at once and ChunkLease::ready() says when a
// chunk has arrived; with ordered (the default) later compute ops wait for the copies on the
// device, the host never waits. The copies of one get_many go layer group by layer group
// (kv_chunk.h's kLayerGroups) when asked, every chunk's first group before any chunk's second:
// ChunkLease::layers_ticket(l) is the transfer after which the chunk's layers up to l have
// landed, so a forward can inject (and attend over) the first layers while the rest are still
// crossing the bus.
//
// Threads: every method takes one internal mutex, so `erase*` may come from another thread
// (a MemoryStore listener). Memory of erased chunks is released by `get`, `get_many`, `put`,
// `allocate_device`, `flush`, `collect` and the destructor, on the thread that drives the
// backend (a backend is used from one thread at a time), and leases end on that thread too.
// Disk I/O happens under the mutex. One pool per disk folder: the folder is indexed at open.
//
// Sources: chunk_pool.cpp (open, get, put, erase), chunk_pool_entries.cpp (leases, LRU lists,
// accounting), chunk_tier_moves.cpp (room in each tier, promotion, copies down, disk);
// chunk_pool_entry.h is the entry type they share.

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "memory/kv_chunk.h"
#include "memory/range_allocator.h"
#include "tensor/backend.h"

namespace inferscale::memory {

struct ChunkPoolOptions {
    std::size_t device_capacity_bytes = std::size_t{1} << 30;
    std::size_t host_capacity_bytes = std::size_t{4} << 30;
    std::string disk_dir;         // empty: no disk tier (host overflow is dropped)
    bool flush_on_close = true;   // the destructor writes device and host chunks to disk
    // A chunk the device tier has no free room for is leased where it lies in the host tier
    // (a disk chunk is read into it first) instead of being promoted; a new encoding finding no
    // device room (the tier full of leased chunks, or smaller than the chunk) is written to
    // host memory. The backend reads host memory directly (pinned, mapped into the GPU's
    // address space on CUDA): one crossing of the bus, as a promotion would be. Promotions
    // then take free room only: dropping a resident chunk for one costs that chunk's next
    // promotion, and under many users' cyclic requests LRU replacement would keep doing that
    // (measured: docs/results/serve_bench_tiers_h100_2026-12-07.txt). New encodings still
    // drop the least recently used chunks.
    bool serve_from_host = false;
};

enum class ChunkTier : std::uint8_t { Device, Host, Disk };

// How get_many issues a batch's promotions: whole chunks (the fewest copies), or layer group by
// layer group across the batch, so a forward can start on the first layers (layers_ticket).
enum class PromotionOrder : std::uint8_t { WholeChunks, ByLayerGroup };
const char* chunk_tier_name(ChunkTier tier);

struct TierStats {
    std::size_t bytes = 0;  // payload bytes of the chunks held in the tier (tiers overlap)
    std::size_t chunks = 0;
};

struct ChunkPoolStats {
    TierStats device, host, disk;
    std::size_t pinned_chunks = 0;  // chunks with a live lease
    std::size_t retired_bytes = 0;  // device bytes of erased chunks not released yet (leased,
                                    // or waiting for the backend's thread)
    // Where each chunk asked for was found: on the device, in host memory, on disk only.
    std::uint64_t device_hits = 0, host_hits = 0, disk_hits = 0, misses = 0;
    std::uint64_t promotions = 0;   // host or disk -> device
    std::uint64_t served_from_host = 0;  // leases of chunks left in host memory (serve_from_host)
    std::uint64_t demotions = 0;         // copies dropped from the device or the host tier
    std::uint64_t evictions = 0;         // dropped from the pool: no copy in a lower tier
    std::uint64_t corruptions = 0;  // disk files rejected (and removed)
    std::uint64_t erased = 0;       // chunks removed by erase*
    std::uint64_t disk_errors = 0;  // failed writes (the chunk is dropped instead)
    // Bytes moved: host -> device (promotions), device -> host (new encodings copied down, and
    // the rare chunk copied down before it was dropped), disk -> host, host -> disk.
    std::uint64_t bytes_up = 0, bytes_down = 0, bytes_read = 0, bytes_written = 0;
    // Pinned host -> device copy rate of the backend, measured when the pool opened (the best
    // of three copies of up to 256 MiB from the host slab into the device slab): the limit a
    // promotion's bandwidth is held against. 0 where not measured (no transfer stream).
    double upload_limit_bytes_per_s = 0;

    std::uint64_t hits() const { return device_hits + host_hits + disk_hits; }
};

class ChunkPool;

namespace detail {
struct PoolEntry;
}

// Pins one chunk (on the device, or in the host tier with serve_from_host); move-only. Must not
// outlive its pool.
class ChunkLease {
  public:
    ChunkLease() = default;
    ~ChunkLease() { reset(); }
    ChunkLease(ChunkLease&& other) noexcept { *this = std::move(other); }
    ChunkLease& operator=(ChunkLease&& other) noexcept;
    ChunkLease(const ChunkLease&) = delete;
    ChunkLease& operator=(const ChunkLease&) = delete;

    explicit operator bool() const { return chunk_ != nullptr; }
    // The chunk's bytes can be read (its promotion's copy is done); true for an empty lease
    // and for one served from host memory. Never waits.
    bool ready() const;
    // The transfer after which layers 0..layer of the chunk are on the device, for
    // Backend::order_after; 0 when nothing is in flight for them.
    std::uint64_t layers_ticket(std::int64_t layer) const;
    // On the device, or in host memory the backend reads directly (serve_from_host); valid
    // while the lease lives. Null for an empty lease (a miss).
    const KvChunk* get() const { return chunk_; }
    const KvChunk& operator*() const { return *chunk_; }
    const KvChunk* operator->() const { return chunk_; }
    void reset();

  private:
    friend class ChunkPool;
    ChunkLease(ChunkPool* pool, detail::PoolEntry* entry, const KvChunk* chunk)
        : pool_(pool), entry_(entry), chunk_(chunk) {}
    ChunkPool* pool_ = nullptr;
    detail::PoolEntry* entry_ = nullptr;
    const KvChunk* chunk_ = nullptr;
};

class ChunkPool {
  public:
    // Takes the two slabs (an Error when the backend cannot give them) and indexes
    // `options.disk_dir` (created when missing): every chunk file's header is read; damaged
    // ones and stray temp files are removed. An Error when the folder is unusable. `backend`
    // must outlive the pool.
    static Result<std::unique_ptr<ChunkPool>> open(tensor::Backend& backend,
                                                   ChunkPoolOptions options);
    ~ChunkPool();
    ChunkPool(const ChunkPool&) = delete;
    ChunkPool& operator=(const ChunkPool&) = delete;

    // The chunk on the device, promoted when it sits lower; an empty lease when it is in no
    // tier (or its disk file is bad). An Error (kind Unavailable) when the device cannot take
    // it beside the leased chunks, and serve_from_host is off or the host tier has no room.
    Result<ChunkLease> get(const ChunkIdentity& id);
    // One lease per identity, in order (empty where missing); promotions copied as one batch
    // on the transfer stream, in `order`. `ordered`: compute ops issued afterwards wait for
    // those copies (on the device); otherwise the caller checks ChunkLease::ready() before
    // using a chunk.
    Result<std::vector<ChunkLease>> get_many(std::span<const ChunkIdentity> ids,
                                             bool ordered = true,
                                             PromotionOrder order = PromotionOrder::WholeChunks);
    // Adds an encoded chunk, whose memory came from allocate_device, to the device tier (and
    // its copy to the host tier), replacing a chunk of the same identity. InvalidArgument for
    // memory from elsewhere.
    Result<ChunkLease> put(KvChunk chunk);

    // Slab memory for a chunk about to be `put` (the encoder's output): device memory, made by
    // dropping unleased chunks, least recently used first; with serve_from_host, host memory
    // (which the backend writes in place) when the leased chunks leave no device room. An
    // Error of kind Unavailable when neither has room, so the caller can wait for leases to
    // end. The buffer gives its memory back when destroyed without being put.
    Result<tensor::Buffer> allocate_device(std::size_t bytes);

    // Removes every chunk of a fact (any text hash, model or encoding) from every tier,
    // disk files included; returns how many.
    std::size_t erase(std::string_view fact_id);
    std::size_t erase_facts(std::span<const std::string> fact_ids);
    // Writes every unleased chunk that has no disk file yet (no-op without a disk tier).
    Status flush();
    // Releases memory of erased chunks (see Threads above).
    void collect();

    // The highest tier holding the chunk.
    std::optional<ChunkTier> tier_of(const ChunkIdentity& id) const;
    std::size_t size() const;  // chunks in all tiers
    ChunkPoolStats stats() const;
    const ChunkPoolOptions& options() const { return options_; }
    // Aborts (IS_CHECK) when the accounting disagrees with the entries: per-tier bytes and
    // counts, LRU lists, the fact index, the slabs' used bytes. For tests.
    void check_invariants() const;

  private:
    friend class ChunkLease;
    using Entry = detail::PoolEntry;

    // The slabs' side of allocate_device's buffers: the range goes back when such a buffer is
    // destroyed without being put.
    class SlabRanges : public tensor::BufferOwner {
      public:
        explicit SlabRanges(ChunkPool& pool) : pool_(pool) {}
        void free_buffer(void* data, std::size_t bytes) override;

      private:
        ChunkPool& pool_;
    };

    ChunkPool(tensor::Backend& backend, ChunkPoolOptions options);
    Status index_disk_locked();
    void unpin(Entry* e);
    void drop_pin_locked(Entry* e);
    void collect_locked();
    // Stamps the chunks whose last lease ended since the last call with one compute fence.
    void fence_reads_locked();

    // Slab memory of `bytes`, dropping unleased chunks (LRU first) from the tier until it
    // fits; nullopt when the leased ones (or, on the host, the chunks on the device) leave too
    // little room. Device ranges come back ordered after their last users (see above); a host
    // range is returned once its last users are done (it is written by the CPU or by a copy
    // down, whichever comes).
    std::optional<Range> take_device_locked(std::size_t bytes);
    std::optional<Range> take_host_locked(std::size_t bytes);
    // Drops `e`'s device or host copy (the entry keeps its other tiers). A device copy with
    // nothing below is copied down first (or written to disk, or the chunk is evicted).
    void drop_device_locked(Entry* e);
    void drop_host_locked(Entry* e);
    // Writes `e`'s bytes (in host memory at `src`) to its disk file; false (counted) on
    // failure or without a disk tier.
    bool write_to_disk_locked(Entry* e, const void* src);
    // Writes a device-only chunk to disk through a staging copy (waits for it).
    bool write_device_to_disk_locked(Entry* e);
    // Removes `e` from the pool now (it is unleased) and releases its memory.
    void evict_locked(Entry* e);
    // Reads `e`'s disk file into new host memory; BadFile (the entry untouched) for a bad
    // file, NoRoom when the host tier cannot take it.
    enum class DiskRead { Ok, BadFile, NoRoom };
    DiskRead read_from_disk_locked(Entry* e);
    // Gives host chunk `e` device memory (its copy up is issued by issue_promotions_locked);
    // false without room.
    bool stage_promotion_locked(Entry* e);
    // Issues the copies of staged promotions in `order`, one ticket per layer group (or one for
    // the batch).
    void issue_promotions_locked(std::span<Entry* const> promotions, PromotionOrder order);
    // Starts copying a device chunk's bytes down to new host memory, when there is room.
    void copy_down_locked(Entry* e);
    // The lease of a host-tier chunk, read in place (serve_from_host).
    ChunkLease lease_in_host_locked(Entry* e);
    Error no_device_room(std::size_t bytes) const;

    void insert_locked(std::unique_ptr<Entry> e);
    std::unique_ptr<Entry> detach_locked(Entry* e);  // out of every index and tier list
    void retire_locked(std::unique_ptr<Entry> e);    // erased: free now, or after the lease
    void release_memory_locked(Entry& e);            // its slab ranges, back to the allocators
    // Gives `e`'s device or host range back to its allocator, marked with its last users (the
    // entry still points at it).
    void free_device_range_locked(const Entry& e);
    void free_host_range_locked(const Entry& e);
    bool in_device_slab(const void* p) const {
        const auto* at = static_cast<const std::byte*>(p);
        return at >= device_base() && at < device_base() + options_.device_capacity_bytes;
    }
    void remove_disk_file_locked(const std::string& path);
    void account(const Entry& e, int sign);
    std::byte* device_base() const { return static_cast<std::byte*>(device_slab_.data()); }
    std::byte* host_base() const { return static_cast<std::byte*>(host_slab_); }

    tensor::Backend* backend_;
    ChunkPoolOptions options_;
    mutable std::mutex mutex_;
    // Sets stats_.upload_limit_bytes_per_s (open).
    void measure_upload_limit();
    tensor::Buffer device_slab_;
    void* host_slab_ = nullptr;
    RangeAllocator device_ranges_, host_ranges_;
    SlabRanges slab_owner_{*this};
    std::size_t lent_device_ = 0, lent_host_ = 0;  // allocate_device's buffers not yet put
    std::unordered_map<std::string, std::unique_ptr<Entry>> entries_;        // by key()
    std::unordered_map<std::string, std::vector<Entry*>> by_fact_;           // by fact_id
    std::list<Entry*> device_lru_, host_lru_;                                // front: newest
    std::vector<std::unique_ptr<Entry>> retired_;  // erased, leased or not yet released
    std::vector<Entry*> unfenced_;                 // leases ended since the last compute fence
    ChunkPoolStats stats_;
};

}  // namespace inferscale::memory
