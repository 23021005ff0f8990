#pragma once
// ForwardBatch: one step of LlamaModel::forward over several sequences at once. Every
// sequence contributes a run of new tokens (a prefill chunk that may start mid-sequence, or a
// single decode token); the runs are concatenated in sequence order. The batch only borrows
// the caller's arrays for the duration of the call.

#include <cstdint>
#include <functional>
#include <span>

#include "tensor/tensor.h"

namespace inferscale::model {

struct BatchSequence {
    std::int32_t num_tokens = 0;  // new tokens of this sequence in the batch (>= 1)
    // KV length after this step, new tokens included; they take KV indices
    // [kv_len - num_tokens, kv_len) and attend causally to everything before them.
    std::int32_t kv_len = 0;
    // The sequence's block ids in KV order; the first ceil(kv_len / block_size) are used, in
    // any order and not necessarily contiguous.
    std::span<const std::int32_t> pages;
};

enum class LogitsSelection {
    LastPerSequence,  // one row per sequence: its last new token (sampling)
    AllTokens,        // one row per batch token (tests, scoring)
    None,             // no logits (e.g. a prefill chunk that does not finish the prompt)
};

// Memory injection hook: each layer's K before RoPE and V of chosen batch rows, written into
// backend memory the caller owns. K is taken between the projection and the rotation, so a
// chunk can later be rotated to any target position.
struct KvCapture {
    std::span<const std::int32_t> rows;  // [m] token rows of the batch
    tensor::Tensor k;                    // [num_layers, m, num_kv_heads, head_dim] activation dtype
    tensor::Tensor v;                    // [num_layers, m, num_kv_heads, head_dim] activation dtype
};

// Called on the host just before the forward enqueues layer `layer`'s ops, so the caller can
// enqueue what that layer needs on the backend's stream first: memory injection of chunks whose
// bytes arrive from host memory one layer group at a time (Backend::order_after the group's
// copy, then Injector::inject_layers). Eager steps only: a replayed graph calls nothing.
using LayerHook = std::function<void(std::int64_t layer)>;

struct ForwardBatch {
    std::span<const std::int32_t> token_ids;  // [num_tokens]
    std::span<const std::int32_t> positions;  // [num_tokens] RoPE positions
    std::span<const BatchSequence> sequences;
    LogitsSelection logits = LogitsSelection::LastPerSequence;
    const KvCapture* capture = nullptr;  // optional
    const LayerHook* before_layer = nullptr;  // optional
    // Constrained decoding, for LlamaModel::forward_greedy with last-token logits: per
    // sequence, (vocab + 31) / 32 words of the bitmask of tokens its device argmax may pick
    // (Backend::argmax); empty: every token.
    std::span<const std::uint32_t> allowed_tokens = {};
};

}  // namespace inferscale::model
