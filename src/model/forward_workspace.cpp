#include "model/forward_workspace.h"

#include <algorithm>

namespace inferscale::model {
namespace {

// Each array starts on a 16-byte boundary: vector loads of a region never straddle another.
std::int64_t round4(std::int64_t x) { return (x + 3) / 4 * 4; }

}  // namespace

MetaLayout MetaLayout::make(std::int64_t n, std::int64_t s, std::int64_t rows, std::int64_t m) {
    MetaLayout l;
    std::int64_t at = 0;
    const auto take = [&at](std::int64_t count) {
        const std::int64_t off = at;
        at += round4(count);
        return off;
    };
    l.token_ids = take(n);
    l.positions = take(n);
    l.slots = take(n);
    l.qo_indptr = take(s + 1);
    l.page_indptr = take(s + 1);
    l.last_page_len = take(s);
    l.logit_rows = take(rows);
    l.capture_rows = take(m);
    l.page_indices = take(0);
    return l;
}

Result<ForwardWorkspace> ForwardWorkspace::create(tensor::Backend& backend, const ModelConfig& c,
                                                  const WorkspaceLimits& limits) {
    using tensor::DType;
    if (limits.max_tokens <= 0 || limits.max_seqs <= 0 || limits.max_pages <= 0 ||
        limits.max_logit_rows < 0) {
        return make_error("forward workspace: limits must be positive");
    }
    const DType act = backend.activation_dtype();
    const std::int64_t t = limits.max_tokens, s = limits.max_seqs;
    const std::int64_t rows = std::max<std::int64_t>(1, limits.max_logit_rows);
    const std::int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
    const std::int64_t words = (c.vocab_size + 31) / 32;
    // The largest layout: every region at its capacity (capture rows are at most T).
    const std::int64_t meta_capacity =
        MetaLayout::make(t, s, std::max(rows, t), t).end(limits.max_pages);

    // Two passes over the same list: sizes first, then views into the one allocation.
    struct Slot {
        tensor::Tensor* target;
        DType dtype;
        std::int64_t d0, d1;
    };
    ForwardWorkspace ws;
    const Slot slots[] = {
        {&ws.hidden, act, t, c.hidden_size},
        {&ws.normed, act, t, c.hidden_size},
        {&ws.q, act, t, q_dim},
        {&ws.k, act, t, kv_dim},
        {&ws.v, act, t, kv_dim},
        {&ws.attn, act, t, q_dim},
        {&ws.gate, act, t, c.intermediate_size},
        {&ws.up, act, t, c.intermediate_size},
        {&ws.final_hidden, act, rows, c.hidden_size},
        {&ws.logits, DType::F32, rows, c.vocab_size},
        {&ws.sampled_ids, DType::I32, rows, 0},
        {&ws.allowed_tokens, DType::I32, s, words},
        {&ws.meta, DType::I32, meta_capacity, 0},
    };
    tensor::Arena arena;
    std::size_t offsets[std::size(slots)];
    for (std::size_t i = 0; i < std::size(slots); ++i) {
        const Slot& sl = slots[i];
        offsets[i] =
            sl.d1 > 0 ? arena.reserve(sl.dtype, {sl.d0, sl.d1}) : arena.reserve(sl.dtype, {sl.d0});
    }
    ws.buffer = IS_TRY(backend.allocate(arena.bytes()));
    for (std::size_t i = 0; i < std::size(slots); ++i) {
        const Slot& sl = slots[i];
        *sl.target = sl.d1 > 0 ? ws.buffer.view(sl.dtype, {sl.d0, sl.d1}, offsets[i])
                               : ws.buffer.view(sl.dtype, {sl.d0}, offsets[i]);
    }
    void* host = backend.allocate_host(
        static_cast<std::size_t>(meta_capacity + rows + s * words) * sizeof(std::int32_t));
    if (host == nullptr) return make_error("forward workspace: out of (pinned) host memory");
    ws.host = HostStaging(&backend, host);
    ws.meta_capacity = meta_capacity;
    ws.logit_rows_capacity = rows;
    ws.mask_words = words;
    ws.limits = limits;
    return ws;
}

}  // namespace inferscale::model
