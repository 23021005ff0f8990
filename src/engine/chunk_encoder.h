#pragma once
// ChunkEncoder: turns memory facts into KvChunks with batched forward passes of the model.
// Each fact is its own sequence `context ‖ fact` at positions 0..len-1 (the context's KV is
// computed for attention and thrown away); the model's KvCapture hook takes every layer's K
// before RoPE and V of the fact rows only. Many facts share one forward step (as many as the
// workspace takes); a fact longer than a step is prefilled in chunks. The sequences run in
// scratch blocks from the BlockPool, which are returned before encode() returns.
// Uses the model's public interface only where unavoidable (forward); borrows everything.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/result.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "memory/kv_chunk.h"
#include "model/forward_workspace.h"
#include "model/llama_model.h"
#include "tensor/backend.h"

namespace inferscale::engine {

struct ChunkRequest {
    memory::ChunkIdentity identity;
    // Encoded before the fact, KV discarded: the memory header and/or the w preceding turns,
    // already selected by the caller. When context + fact exceed the model's positions the
    // oldest context tokens are dropped; the fact is never cut.
    std::vector<std::int32_t> context_tokens;
    std::vector<std::int32_t> fact_tokens;  // [t] the tokens the chunk keeps, t >= 1
};

class ChunkEncoder {
  public:
    // Allocates the capture buffers for one workspace step. `model`, `kv`, `blocks` and `ws`
    // must outlive the encoder; an Error when the backend is out of memory or its activation
    // dtype differs from its KV dtype (a chunk is stored in the KV dtype).
    static Result<ChunkEncoder> create(tensor::Backend& backend, model::LlamaModel& model,
                                       kv::KvStorage& kv, kv::BlockPool& blocks,
                                       model::ForwardWorkspace& ws);

    // Where a chunk's buffer comes from: the backend directly, or a ChunkPool that makes room
    // for it (ChunkPool::allocate_device).
    using Allocate = std::function<Result<tensor::Buffer>(std::size_t bytes)>;
    // One chunk per request, in request order, each in its own buffer from `allocate` (empty:
    // the backend's). An Error for an empty or too long fact, too few free KV blocks, or
    // `allocate`'s; scratch blocks are released on every path.
    Result<std::vector<memory::KvChunk>> encode(std::span<const ChunkRequest> requests,
                                                const Allocate& allocate = {});

  private:
    // A run of one sequence's tokens inside a forward step.
    struct Piece {
        std::int64_t seq = 0;    // index into the sequences of encode()
        std::int64_t start = 0;  // first token of the run
        std::int64_t count = 0;
    };
    struct Sequence {
        std::vector<std::int32_t> tokens;  // context ‖ fact
        std::int64_t context_len = 0;
        std::vector<kv::BlockId> blocks;
    };

    ChunkEncoder() = default;
    Status run_step(std::span<const Piece> pieces, std::span<Sequence> seqs,
                    std::span<memory::KvChunk> chunks);

    tensor::Backend* backend_ = nullptr;
    model::LlamaModel* model_ = nullptr;
    kv::KvStorage* kv_ = nullptr;
    kv::BlockPool* blocks_ = nullptr;
    model::ForwardWorkspace* ws_ = nullptr;
    std::int64_t max_tokens_ = 0;  // tokens per forward step
    std::int64_t max_seqs_ = 0;
    tensor::Buffer capture_buffer_;  // K then V: [num_layers, max_tokens, kvh, d] each
    tensor::Buffer row_index_;       // [max_tokens] i32 = 0, 1, 2, ... (KV write slots)
    // Per-step host scratch, kept to avoid reallocating.
    std::vector<std::int32_t> ids_, positions_, capture_rows_;
    std::vector<model::BatchSequence> batch_seqs_;
};

}  // namespace inferscale::engine
