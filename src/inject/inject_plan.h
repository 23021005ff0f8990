#pragma once
// InjectPlan: how a list of chunks becomes the start of a sequence's KV. The chunks' tokens,
// concatenated in order, are the memory stream M, at positions 0..|M|-1. Only whole blocks are
// injected: loaded = floor(|M| / B) * B tokens; the tail (fewer than B tokens, the footer's
// padding by construction) is prefilled with the query, so no block is half injected and half
// computed. No protected token (a fact token) may fall into the tail: that is an Error, as in
// the reference ("reverse-ranked-memory-block-safe-v1").

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "memory/kv_chunk.h"

namespace inferscale::inject {

// Rows [first_row, first_row + num_rows) of `chunk` go to KV positions
// first_position, first_position + 1, ... of the sequence (KV index = position).
struct InjectSpan {
    const memory::KvChunk* chunk = nullptr;  // borrowed
    std::int64_t first_row = 0;
    std::int64_t num_rows = 0;
    std::int64_t first_position = 0;
};

struct InjectPlan {
    std::vector<std::int32_t> token_ids;  // [memory_tokens] M, the prompt's first tokens
    std::vector<InjectSpan> spans;        // cover positions [0, loaded_tokens) in order
    std::int64_t memory_tokens = 0;       // |M|
    std::int64_t protected_tokens = 0;    // M's first tokens that must be injected (facts end)
    std::int64_t loaded_tokens = 0;       // floor(|M| / B) * B
    std::int64_t block_size = 0;

    std::int64_t num_blocks() const { return loaded_tokens / block_size; }
    std::int64_t tail_tokens() const { return memory_tokens - loaded_tokens; }
};

// `stream`: chunks in prompt order (borrowed; they must outlive the plan). An Error when the
// stream is empty, the chunks' layouts differ, M is shorter than a block, or a protected token
// falls into the recomputed tail.
Result<InjectPlan> make_inject_plan(std::span<const memory::KvChunk* const> stream,
                                    std::int64_t protected_tokens, std::int64_t block_size);

// The memory scaffold's plan: header ‖ facts (best-ranked last) ‖ footer; the facts (or the
// empty-memory chunk in their place) are protected.
Result<InjectPlan> make_memory_plan(const memory::KvChunk& header,
                                    std::span<const memory::KvChunk* const> facts,
                                    const memory::KvChunk& footer, std::int64_t block_size);

}  // namespace inferscale::inject
