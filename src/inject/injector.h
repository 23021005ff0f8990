#pragma once
// Injector: writes chunk KV into a sequence's paged blocks with the backend's fused
// inject_chunks op (gather + RoPE to the target positions + scatter). It stages the small
// per-token metadata (source chunk and row, position, slot) in one host array and copies it to
// the device in one transfer; the staging buffers only grow, so a steady stream of requests
// allocates nothing. `inject` writes every layer at once; `prepare` + `inject_layers` write
// them a layer range at a time, for chunks whose bytes are still arriving layer group by layer
// group (host-tier promotion overlapped with the forward, ForwardBatch::before_layer).

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

    // Checks and stages the spans as `inject` does, writing nothing yet; the chunks' bytes
    // need not have arrived. Valid until the next prepare or inject.
    Status prepare(std::span<const InjectSpan> spans, std::span<const kv::BlockId> blocks,
                   kv::KvStorage& kv);
    // Enqueues the prepared injection for layers [first, first + count) (within the model's).
    void inject_layers(std::int64_t first, std::int64_t count);
    std::int64_t prepared_layers() const { return layers_; }

    // Bytes of chunk KV moved since the last prepare (or by the last inject()): K and V, read
    // once and written once.
    std::size_t last_bytes_moved() const { return last_bytes_; }

  private:
    Status reserve_device(std::size_t words);

    tensor::Backend* backend_;
    tensor::RopeTables tables_;
    std::vector<const memory::KvChunk*> chunk_list_;
    std::vector<std::int32_t> host_;  // staging: addrs, tokens, src_chunk, src_row, pos, slots
    tensor::Buffer device_;           // the same words on the device
    tensor::InjectArgs args_;         // the prepared injection, all layers
    std::int64_t layers_ = 0;         // layers of the prepared KV (0: nothing to write)
    std::size_t bytes_per_layer_ = 0;
    std::size_t last_bytes_ = 0;
};

}  // namespace inferscale::inject
