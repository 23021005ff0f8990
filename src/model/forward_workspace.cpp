#include "model/forward_workspace.h"

#include <algorithm>

namespace inferscale::model {

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
        {&ws.token_ids, DType::I32, t, 0},
        {&ws.positions, DType::I32, t, 0},
        {&ws.slots, DType::I32, t, 0},
        {&ws.qo_indptr, DType::I32, s + 1, 0},
        {&ws.page_indptr, DType::I32, s + 1, 0},
        {&ws.page_indices, DType::I32, limits.max_pages, 0},
        {&ws.last_page_len, DType::I32, s, 0},
        {&ws.logit_rows, DType::I32, std::max(rows, t), 0},
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
    ws.limits = limits;
    ws.host_slots.reserve(t);
    ws.host_qo_indptr.reserve(s + 1);
    ws.host_page_indptr.reserve(s + 1);
    ws.host_page_indices.reserve(limits.max_pages);
    ws.host_last_page_len.reserve(s);
    ws.host_logit_rows.reserve(std::max(rows, t));
    return ws;
}

}  // namespace inferscale::model
