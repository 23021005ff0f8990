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

// One chunk and where its bytes are: any of device, host and disk (the tiers are inclusive;
// at least one holds it). Its memory is slab ranges the pool releases (release_memory_locked).
struct PoolEntry {
    std::string key;
    ChunkIdentity identity;
    std::vector<std::int32_t> token_ids;  // [num_tokens]
    std::int64_t num_layers = 0, num_kv_heads = 0, head_dim = 0;
    tensor::DType dtype = tensor::DType::F32;
    std::size_t bytes = 0;  // payload: [num_layers][2][num_tokens][kvh][d] dtype
    std::optional<KvChunk> device;      // a view of its range in the device slab
    void* host = nullptr;               // its range in the host slab
    std::optional<KvChunk> host_view;   // leased in place: a view of `host`
    std::string path;                   // its disk file, once written
    int pins = 0;                       // leases, plus get_many's hold while it promotes
    std::uint64_t ticket = 0;           // the transfer filling `device` (0: none)
    std::array<std::uint64_t, kLayerGroups> group_tickets{};  // per layer group (0: none)
    std::uint64_t host_ticket = 0;      // the copy down filling `host` (0: none)
    std::uint64_t host_fill_fence = 0;  // compute ops that wrote `host` (allocate_device's)
    // The last users of its memory: compute ops that read it (a fence taken once its last
    // lease ended) and the last transfer on each range.
    std::uint64_t read_fence = 0;
    std::uint64_t device_transfer = 0, host_transfer = 0;
    bool retired = false;  // erased or replaced; released once unpinned
    std::list<PoolEntry*>::iterator device_lru, host_lru;  // valid while `device` / `host`

    ChunkTier tier() const {
        return device ? ChunkTier::Device : host != nullptr ? ChunkTier::Host : ChunkTier::Disk;
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
    // A non-owning chunk over `data` (device or host memory of this entry).
    KvChunk view(void* data, tensor::Device where) const {
        return KvChunk(identity, token_ids, num_layers, num_kv_heads, head_dim, dtype,
                       tensor::Buffer(nullptr, data, bytes, where));
    }
    // The device copy as one flat tensor, for copies.
    tensor::Tensor device_bytes(tensor::Device where) const {
        return tensor::Tensor(const_cast<void*>(device->data()), dtype,
                              {static_cast<std::int64_t>(bytes / tensor::dtype_size(dtype))},
                              where);
    }
};

inline bool is_pinned(const PoolEntry* e) { return e->pins > 0; }

}  // namespace inferscale::memory::detail
