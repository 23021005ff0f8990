#pragma once
// ForwardWorkspace: every buffer one LlamaModel::forward needs, allocated once for the largest
// batch (WorkspaceLimits) in one backend allocation, so steps allocate nothing. Tensors are
// capacity-sized; forward slices the leading rows it uses. Host staging vectors are reserved
// to capacity as well. Move-only; the backend must outlive it.

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "model/model_config.h"
#include "tensor/backend.h"

namespace inferscale::model {

struct WorkspaceLimits {
    std::int64_t max_tokens = 512;     // new tokens per forward, all sequences together
    std::int64_t max_seqs = 64;        // sequences per forward
    std::int64_t max_pages = 8192;     // page-table entries per forward
    std::int64_t max_logit_rows = 64;  // rows of logits per forward
};

struct ForwardWorkspace {
    static Result<ForwardWorkspace> create(tensor::Backend& backend, const ModelConfig& config,
                                           const WorkspaceLimits& limits);

    WorkspaceLimits limits;
    tensor::Buffer buffer;  // owns everything below

    // Activations (T = max_tokens, act = backend activation dtype).
    tensor::Tensor hidden;        // [T, hidden] act: the residual stream
    tensor::Tensor normed;        // [T, hidden] act: norm output, also o/down projection output
    tensor::Tensor q;             // [T, heads * head_dim] act
    tensor::Tensor k;             // [T, kv_heads * head_dim] act
    tensor::Tensor v;             // [T, kv_heads * head_dim] act
    tensor::Tensor attn;          // [T, heads * head_dim] act
    tensor::Tensor gate;          // [T, ffn] act: gate projection, then silu(gate) * up
    tensor::Tensor up;            // [T, ffn] act
    tensor::Tensor final_hidden;  // [max_logit_rows, hidden] act
    tensor::Tensor logits;        // [max_logit_rows, vocab] f32

    // Batch metadata on the device.
    tensor::Tensor token_ids;      // [T] i32
    tensor::Tensor positions;      // [T] i32
    tensor::Tensor slots;          // [T] i32: block * block_size + offset of each new token
    tensor::Tensor qo_indptr;      // [max_seqs + 1] i32
    tensor::Tensor page_indptr;    // [max_seqs + 1] i32
    tensor::Tensor page_indices;   // [max_pages] i32
    tensor::Tensor last_page_len;  // [max_seqs] i32
    tensor::Tensor logit_rows;     // [max(max_logit_rows, T)] i32: also capture rows

    // Host staging of the same metadata.
    std::vector<std::int32_t> host_slots;
    std::vector<std::int32_t> host_qo_indptr;
    std::vector<std::int32_t> host_page_indptr;
    std::vector<std::int32_t> host_page_indices;
    std::vector<std::int32_t> host_last_page_len;
    std::vector<std::int32_t> host_logit_rows;
};

}  // namespace inferscale::model
