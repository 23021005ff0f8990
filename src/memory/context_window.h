#pragma once
// Context-window selection for encoding a fact (docs/reference-system.md §3.3): a fact's KV is
// computed after the w conversation turns that precede its source turn; that context's KV is
// then thrown away. Pure functions, no tokenizer: the caller tokenizes.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "memory/memory_types.h"

namespace inferscale::memory {

// "{speaker}: {text}" plus an image tag when the turn shares an image:
//   "[Sharing image - query: Q. The image shows: C]", "[Sharing image - query for: Q]" or
//   "[Sharing image that shows: C]", after one space (alone when the text is empty).
// The session timestamp is not included. Both prompt injection and KV context use this string.
std::string format_turn_for_memory(const Turn& turn);

// The (at most) w turns immediately before `source` in chronological order (session_index,
// then turn_index), crossing session boundaries, oldest first, without the source turn; fewer
// at the start of the conversation. `turns` may come in any order. Error when `source` is not
// among them.
Result<std::vector<Turn>> select_context_turns(const std::vector<Turn>& turns,
                                               const TurnRef& source, std::size_t w);

// Which context tokens to keep so that context + target fit in max_tokens. The oldest context
// tokens go first, possibly mid-turn; the target is never cut.
struct ContextTruncation {
    std::size_t dropped_tokens = 0;     // from the front of the concatenated context
    std::size_t kept_tokens = 0;        // context tokens left
    std::size_t first_turn = 0;         // first turn not wholly dropped (== count when all are)
    std::size_t first_turn_offset = 0;  // tokens dropped from the start of that turn
};

// `context_turn_tokens[i]` is the token count of context turn i (oldest first). Error when the
// target is empty or alone exceeds max_tokens.
Result<ContextTruncation> plan_context_truncation(std::span<const std::size_t> context_turn_tokens,
                                                  std::size_t target_tokens,
                                                  std::size_t max_tokens);

}  // namespace inferscale::memory
