#pragma once
// Device-independent argument checks of the paged KV ops (dtypes, ranks, shapes, metadata
// counts) and of linear epilogues, shared by every backend; each backend adds its own placement
// check. A failure is a caller bug and aborts with file:line.

#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace inferscale::tensor {

// write_kv: k and v [n, kvh, d] in `activation`, slots [n] i32, pages [.., .., kvh, d] in `kv`.
void check_write_kv_args(const Tensor& k, const Tensor& v, const Tensor& slots,
                         const KvPages& pages, DType activation, DType kv);

// paged_attention: q and out [n, h, d] in `activation`, pages [.., .., kvh, d] in `kv`, the
// page tables i32 with at least num_seqs (+ 1) entries.
void check_paged_attention_args(const Tensor& q, const KvPages& pages,
                                const PagedAttentionArgs& args, const Tensor& out,
                                DType activation, DType kv);

// A linear's epilogue against its targets (see LinearEpilogue): SwiGLU two targets of one
// shape; RopeAttention three targets whose outputs its rope's q, k and v view, and an attention.
// The targets themselves are the backend's to check.
void check_linear_epilogue(const LinearArgs& args);

// dot_top_k: matrix [n, dim] f32 or f16, query [dim] f32, rows [k] i32 and scores [k] f32 with
// 1 <= k <= Backend::kDotTopKMax (passed as `max_k`).
void check_dot_top_k_args(const Tensor& matrix, const Tensor& query, const Tensor& rows,
                          const Tensor& scores, std::int64_t max_k);

}  // namespace inferscale::tensor
