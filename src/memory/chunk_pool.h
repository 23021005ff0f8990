#pragma once
// ChunkPool: encoded KvChunks in three tiers, keyed by ChunkIdentity::key():
//   device  backend memory (what the injector reads), bounded by a byte capacity;
//   host    memory from Backend::allocate_host (pinned on CUDA, so copies run at full speed),
//           bounded by a byte capacity;
//   disk    one file per chunk under a folder (see chunk_file.h), unbounded; survives restarts.
// A chunk lives in exactly one tier. Requests want chunks on the device: `get` promotes a host
// or disk chunk there; when the device tier is full its least recently used unpinned chunk is
// demoted to the host tier (host full: its LRU chunk goes to disk, or is dropped when there is
// no disk tier) rather than failing. A chunk in no tier is "missing" and the caller re-encodes.
// A disk file whose header, identity or checksum does not match is never returned: it is
// removed, counted as a corruption and reported missing.
//
// Leases: `get`/`put` return a ChunkLease that pins the chunk on the device until the lease is
// destroyed, so an in-flight request's chunks are never demoted or freed under it. Erasing a
// leased chunk takes it out of the pool at once (it is never returned again) and frees its
// memory when the last lease ends.
//
// Memory: each device chunk is its own Backend::allocate buffer (a bounded set of buffers, not
// slabs): fragmentation is the backend allocator's (cudaMalloc) problem and every promotion
// pays an allocation; slabs with a sub-allocator would avoid both and are the next step.
// Host chunks likewise get one allocate_host each. Promotions copy on the backend's transfer
// stream (Backend::copy_from_host_async), beside compute: `get_many(ids, ordered = false)`
// returns at once and ChunkLease::ready() says when a chunk has arrived; with ordered (the
// default) later compute ops wait for the copies on the device, the host never waits. The
// copies of one get_many go layer group by layer group (kv_chunk.h's kLayerGroups), every
// chunk's first group before any chunk's second: ChunkLease::layers_ticket(l) is the transfer
// after which the chunk's layers up to l have landed, so a forward can inject (and attend over)
// the first layers while the rest are still crossing the bus.
//
// Threads: every method takes one internal mutex, so `erase*` may come from another thread
// (a MemoryStore listener). Backend memory is only freed by `get`, `get_many`, `put`, `flush`,
// `collect` and the destructor, i.e. on the thread that drives the backend (a backend is used
// from one thread at a time; cudaFree would also break a graph capture running there). Disk
// I/O happens under the mutex too. One pool per disk folder: the folder is indexed at open.
//
// Sources: chunk_pool.cpp (open, get, put, erase), chunk_pool_entries.cpp (leases, LRU lists,
// accounting), chunk_tier_moves.cpp (demotion, promotion, flush to disk); chunk_pool_entry.h
// is the entry type they share.

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
#include "tensor/backend.h"

namespace inferscale::memory {

struct ChunkPoolOptions {
    std::size_t device_capacity_bytes = std::size_t{1} << 30;
    std::size_t host_capacity_bytes = std::size_t{4} << 30;
    std::string disk_dir;         // empty: no disk tier (host overflow is dropped)
    bool flush_on_close = true;   // the destructor writes device and host chunks to disk
    // A chunk the device tier has no room for (it is full of leased chunks, smaller than the
    // chunk, or the device's memory is short) is leased where it lies in the host tier (a disk
    // chunk is read into it first) instead of failing the call; `put` moves such a chunk to the
    // host tier. The backend reads host memory directly (pinned, mapped into the GPU's address
    // space on CUDA): slower than the device, but nothing waits for room. Promotions then use
    // only free room in the device tier: reading a chunk in place crosses the bus once, as its
    // promotion would, while demoting another chunk to make room costs a copy back and a wait;
    // `put` still demotes least recently used chunks for new encodings.
    bool serve_from_host = false;
};

enum class ChunkTier : std::uint8_t { Device, Host, Disk };
const char* chunk_tier_name(ChunkTier tier);

struct TierStats {
    std::size_t bytes = 0;   // payload bytes of the chunks in the tier
    std::size_t chunks = 0;
};

struct ChunkPoolStats {
    TierStats device, host, disk;
    std::size_t pinned_chunks = 0;  // chunks with a live lease
    std::size_t retired_bytes = 0;  // device bytes of erased chunks not freed yet (leased, or
                                    // waiting for the backend's thread); count toward capacity
    std::uint64_t device_hits = 0, host_hits = 0, disk_hits = 0, misses = 0;
    std::uint64_t promotions = 0;   // host or disk -> device
    std::uint64_t served_from_host = 0;  // leases of chunks left in host memory (serve_from_host)
    std::uint64_t demotions = 0;    // device -> host, device or host -> disk
    std::uint64_t evictions = 0;    // dropped from the pool: no room in a lower tier
    std::uint64_t corruptions = 0;  // disk files rejected (and removed)
    std::uint64_t erased = 0;       // chunks removed by erase*
    std::uint64_t disk_errors = 0;  // failed writes (the chunk is dropped instead)

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
    // Indexes `options.disk_dir` (created when missing): every chunk file's header is read;
    // damaged ones and stray temp files are removed. An Error when the folder is unusable.
    // `backend` must outlive the pool.
    static Result<std::unique_ptr<ChunkPool>> open(tensor::Backend& backend,
                                                   ChunkPoolOptions options);
    ~ChunkPool();
    ChunkPool(const ChunkPool&) = delete;
    ChunkPool& operator=(const ChunkPool&) = delete;

    // The chunk on the device, promoted when it sits lower; an empty lease when it is in no
    // tier (or its disk file is bad). An Error when the device cannot take it: allocation
    // failed, or (kind Unavailable) it does not fit beside the pinned chunks.
    Result<ChunkLease> get(const ChunkIdentity& id);
    // One lease per identity, in order (empty where missing); promotions copied as one batch
    // on the transfer stream. `ordered`: compute ops issued afterwards wait for those copies
    // (on the device); otherwise the caller checks ChunkLease::ready() before using a chunk.
    Result<std::vector<ChunkLease>> get_many(std::span<const ChunkIdentity> ids,
                                             bool ordered = true);
    // Adds an encoded chunk (already in backend memory) to the device tier, replacing a chunk
    // of the same identity, demoting others to make room. Error as for `get`.
    Result<ChunkLease> put(KvChunk chunk);

    // A device buffer for a chunk about to be `put` (the encoder's output). When the device
    // itself is short (its memory shared with the KV cache and others), unpinned chunks are
    // demoted, LRU first, until the allocation succeeds; an Error of kind Unavailable when it
    // still fails, so the caller can wait for leases to end.
    Result<tensor::Buffer> allocate_device(std::size_t bytes);

    // Removes every chunk of a fact (any text hash, model or encoding) from every tier,
    // disk files included; returns how many.
    std::size_t erase(std::string_view fact_id);
    std::size_t erase_facts(std::span<const std::string> fact_ids);
    // Writes every unleased device and host chunk to disk (no-op without a disk tier).
    Status flush();
    // Frees memory of erased chunks (see Threads above).
    void collect();

    std::optional<ChunkTier> tier_of(const ChunkIdentity& id) const;
    std::size_t size() const;  // chunks in all tiers
    ChunkPoolStats stats() const;
    const ChunkPoolOptions& options() const { return options_; }
    // Aborts (IS_CHECK) when the accounting disagrees with the entries: per-tier bytes and
    // counts, LRU lists, the fact index, each entry's memory matching its tier. For tests.
    void check_invariants() const;

  private:
    friend class ChunkLease;
    using Entry = detail::PoolEntry;

    ChunkPool(tensor::Backend& backend, ChunkPoolOptions options);
    Status index_disk_locked();
    void unpin(Entry* e);
    void drop_pin_locked(Entry* e);
    void collect_locked();

    // Demotes unpinned device chunks (LRU first) until `bytes` more fit; false when the pinned
    // ones leave too little room.
    bool make_device_room_locked(std::size_t bytes);
    // Whether `bytes` more fit the device tier without demoting anything.
    bool device_has_room_locked(std::size_t bytes) const;
    // The Unavailable error of a chunk of `bytes` that the device tier cannot take.
    Error no_device_room(std::size_t bytes) const;
    // Demotes host chunks (LRU first) to disk until `bytes` more fit; false when they cannot.
    bool make_host_room_locked(std::size_t bytes);
    // Device chunks to the host tier (to disk when the host tier has no room): every copy
    // down is issued before one wait for them all.
    void demote_device_locked(std::span<Entry* const> victims);
    // Writes `e`'s bytes (at `host`) to its disk file and moves it there; drops it on failure
    // or without a disk tier.
    void move_to_disk_locked(Entry* e, const void* host);
    // Moves host or disk chunk `e` to the device tier with a new device buffer and returns its
    // host source (a disk chunk read into new host memory) for issue_promotions_locked to copy
    // (Promoted); BadFile (and `e` untouched) for a bad disk file. Without device room and with
    // serve_from_host, `e` stays in (or a disk chunk moves to) the host tier instead (InHost).
    struct Staged {
        enum Kind { Promoted, BadFile, InHost } kind = Promoted;
        void* src = nullptr;
    };
    Result<Staged> stage_promotion_locked(Entry* e);
    // Puts disk chunk `e`, whose bytes were read into `bytes` (host memory, taken), in the host
    // tier; false (nothing taken) when the host tier has no room.
    bool disk_to_host_locked(Entry* e, void* bytes);
    // The lease of a host-tier chunk, read in place (serve_from_host).
    ChunkLease lease_in_host_locked(Entry* e);
    struct Promotion {
        Entry* entry;
        void* src;
    };
    // Issues the copies of staged promotions, layer group by layer group across all of them;
    // each source goes to in_flight_, freed once its last copy is done.
    void issue_promotions_locked(std::span<const Promotion> promotions);
    Result<tensor::Buffer> allocate_device_locked(std::size_t bytes);

    void insert_locked(std::unique_ptr<Entry> e);
    std::unique_ptr<Entry> detach_locked(Entry* e);  // out of every index and tier
    void retire_locked(std::unique_ptr<Entry> e);    // erased: free now, or after the lease
    void remove_disk_file_locked(const std::string& path);
    void account(const Entry& e, int sign);

    tensor::Backend* backend_;
    ChunkPoolOptions options_;
    mutable std::mutex mutex_;
    std::unordered_map<std::string, std::unique_ptr<Entry>> entries_;        // by key()
    std::unordered_map<std::string, std::vector<Entry*>> by_fact_;           // by fact_id
    std::list<Entry*> device_lru_, host_lru_;                                // front: newest
    std::vector<std::unique_ptr<Entry>> retired_;  // erased, leased or not yet freed
    // Host sources of promotions in flight, by transfer ticket; freed once copied.
    std::vector<std::pair<std::uint64_t, void*>> in_flight_;
    ChunkPoolStats stats_;
};

}  // namespace inferscale::memory
