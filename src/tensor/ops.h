#pragma once
// Argument structs for the Backend ops that take more than a couple of tensors. All tensors live
// on the backend's device; index tensors are i32. Shapes use these names:
//   n = tokens in the batch, s = sequences, p = pages referenced by the batch,
//   h = query heads, kvh = kv heads, d = head_dim, bs = block (page) size.

#include "tensor/tensor.h"

namespace inferscale::tensor {

// cos/sin of position * inv_freq for every position up to the table size, half a head wide:
// the rotate_half convention uses the same angle for dims i and i + d/2.
struct RopeTables {
    Tensor cos;  // [max_positions, d / 2] f32
    Tensor sin;  // [max_positions, d / 2] f32
};

// Paged KV for one layer. A page holds bs consecutive tokens of one sequence.
struct KvPages {
    Tensor k;  // [num_blocks, bs, kvh, d] kv dtype
    Tensor v;  // [num_blocks, bs, kvh, d] kv dtype
};

// Page tables of the batch in CSR form plus where each sequence's queries sit in the batch.
// Sequence i owns pages indices[indptr[i] .. indptr[i+1]); its KV length after this step is
// (pages - 1) * bs + last_page_len[i]; its queries are rows qo_indptr[i] .. qo_indptr[i+1] of q
// and are the last tokens of its KV (causal: query j sees KV 0 .. kv_len - q_len + j).
struct PagedAttentionArgs {
    Tensor qo_indptr;      // [s + 1] i32
    Tensor indptr;         // [s + 1] i32
    Tensor indices;        // [p] i32
    Tensor last_page_len;  // [s] i32
    // Host copies of the same small arrays: the CPU backend reads these, a GPU backend uses
    // them to size its launch without a device round trip.
    const std::int32_t* host_qo_indptr = nullptr;  // [s + 1]
    const std::int32_t* host_indptr = nullptr;     // [s + 1]
    int num_seqs = 0;
    float scale = 0.0f;  // softmax scale, usually 1 / sqrt(d)
};

}  // namespace inferscale::tensor
