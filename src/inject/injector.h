#pragma once
// Injector: writes chunk KV into a sequence's paged blocks with the backend's fused
// inject_chunks op (gather + RoPE to the target positions + scatter, all layers at once).
// It stages the small per-token metadata (source chunk and row, position, slot) in one host
// array and copies it to the device in one transfer; the staging buffers only grow, so a
// steady stream of requests allocates nothing.

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "inject/inject_plan.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "tensor/backend.h"

namespace inferscale::inject {

class Injector {
  public:
    // `tables` are the model's device RoPE tables (LlamaModel::rope_tables()); both arguments
    // are borrowed and must outlive the injector.
    Injector(tensor::Backend& backend, const tensor::RopeTables& tables)
        : backend_(&backend), tables_(tables) {}

    // Writes each span's rows at KV indices first_position.. of the sequence whose blocks are
    // `blocks` (KV index i lives in blocks[i / B] at offset i % B). An Error (nothing written)
    // when a chunk's layout or dtype does not match `kv`, a position is beyond the RoPE tables,
    // `blocks` are too few, or staging memory runs out.
    Status inject(std::span<const InjectSpan> spans, std::span<const kv::BlockId> blocks,
                  kv::KvStorage& kv);
    Status inject(const InjectPlan& plan, std::span<const kv::BlockId> blocks, kv::KvStorage& kv) {
        return inject(plan.spans, blocks, kv);
    }

    // Bytes of chunk KV that the last inject() moved: K and V, read once and written once.
    std::size_t last_bytes_moved() const { return last_bytes_; }

  private:
    Status reserve_device(std::size_t words);

    tensor::Backend* backend_;
    tensor::RopeTables tables_;
    std::vector<const KvChunk*> chunk_list_;
    std::vector<std::int32_t> host_;  // staging: addrs, tokens, src_chunk, src_row, pos, slots
    tensor::Buffer device_;           // the same words on the device
    std::size_t last_bytes_ = 0;
};

}  // namespace inferscale::inject
