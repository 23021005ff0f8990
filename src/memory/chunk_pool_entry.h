#pragma once
// The private half of ChunkPool: one pool entry (a chunk and where its bytes are) and the
// helpers the pool's source files share. Included only by src/memory/chunk_pool*.cpp.

#include <array>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "memory/chunk_file.h"
#include "memory/chunk_pool.h"

namespace inferscale::memory::detail {

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

inline bool is_pinned(const PoolEntry* e) { return e->pins > 0; }

// Moves `e` between tiers, keeping the LRU lists in step (not the accounting).
inline void relink(PoolEntry* e, ChunkTier to, std::list<PoolEntry*>& device_lru,
                   std::list<PoolEntry*>& host_lru) {
    if (e->tier == ChunkTier::Device) device_lru.erase(e->lru);
    if (e->tier == ChunkTier::Host) host_lru.erase(e->lru);
    e->tier = to;
    if (to == ChunkTier::Device) e->lru = device_lru.insert(device_lru.begin(), e);
    if (to == ChunkTier::Host) e->lru = host_lru.insert(host_lru.begin(), e);
}

}  // namespace inferscale::memory::detail
