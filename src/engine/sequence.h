#pragma once
// Sequence: the scheduler's view of one request: its tokens (prompt, then generated), how many
// of them have KV in its blocks, and what its KV depends on beyond the tokens (for the prefix
// cache). Injected memory is a prefix of the prompt whose KV is written, not computed: the
// scheduler counts it as computed once the engine has injected it.

#include <cstdint>
#include <string>
#include <vector>

#include "kv/block_pool.h"

namespace inferscale::engine {

enum class SequenceStatus {
    Waiting,           // queued, no blocks
    WaitingForMemory,  // queued, its memory chunks are being fetched or encoded
    Running,           // has blocks; prefilling or decoding
    Finished,
};

struct Sequence {
    std::uint64_t id = 0;
    std::vector<std::int32_t> tokens;  // prompt ‖ generated
    std::int64_t prompt_len = 0;
    std::int64_t max_len = 0;  // prompt_len + the most tokens it may generate

    // Memory injection: the first `injected_tokens` prompt tokens (whole blocks) get their KV
    // from chunks. `memory_ready` says the engine holds those chunks and can inject them now;
    // a sequence that needs injection and is not ready waits in WaitingForMemory.
    std::int64_t injected_tokens = 0;
    bool memory_ready = false;
    // Extra prefix-cache key of each full block (see PrefixCache): salt ‖ the identities of the
    // chunks injected into block i (i < memory_block_keys.size()).
    std::string cache_salt;
    std::vector<std::string> memory_block_keys;
    // Every prompt token is computed (its logits are wanted): admission takes no prefix-cache
    // hits. Its blocks are still offered to the cache.
    bool compute_whole_prompt = false;
    // Background work (fact extraction): scheduled only with what foreground sequences leave
    // of a step, admitted only when no foreground sequence waits, preempted first.
    bool background = false;

    // Scheduler state.
    SequenceStatus status = SequenceStatus::Waiting;
    std::vector<kv::BlockId> blocks;
    std::int64_t num_computed = 0;  // leading tokens whose KV is in `blocks`
    std::int64_t num_cached = 0;    // of those, taken from the prefix cache at admission
    std::int64_t num_cache_inserted = 0;  // leading full blocks offered to the prefix cache
    std::int32_t preemptions = 0;

    std::int64_t num_generated() const {
        return static_cast<std::int64_t>(tokens.size()) - prompt_len;
    }
    std::string block_extra(std::size_t block) const {
        return block < memory_block_keys.size() ? cache_salt + memory_block_keys[block]
                                                : cache_salt;
    }
};

}  // namespace inferscale::engine
