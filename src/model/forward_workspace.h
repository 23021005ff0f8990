#pragma once
// ForwardWorkspace: every buffer one LlamaModel::forward needs, allocated once for the largest
// batch (WorkspaceLimits) in one backend allocation, so steps allocate nothing. Tensors are
// capacity-sized; forward slices the leading rows it uses. All batch metadata of a step is
// packed into one i32 array (MetaLayout) staged in pinned host memory and uploaded with one
// copy. Move-only; the backend must outlive it.

#include <cstdint>

#include "base/result.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "tensor/backend.h"

namespace inferscale::model {

struct WorkspaceLimits {
    std::int64_t max_tokens = 512;     // new tokens per forward, all sequences together
    std::int64_t max_seqs = 64;        // sequences per forward
    std::int64_t max_pages = 8192;     // page-table entries per forward
    std::int64_t max_logit_rows = 64;  // rows of logits per forward
};

// Where each metadata array of a step sits in the packed i32 array, in elements. Offsets
// depend only on (tokens, seqs, logit rows, capture rows), never on the page count: the page
// indices come last, so a replayed decode step finds every array where its capture did.
struct MetaLayout {
    std::int64_t token_ids = 0;      // [n]
    std::int64_t positions = 0;      // [n]
    std::int64_t slots = 0;          // [n] block * block_size + offset; -1 for padding rows
    std::int64_t qo_indptr = 0;      // [s + 1]
    std::int64_t page_indptr = 0;    // [s + 1]
    std::int64_t last_page_len = 0;  // [s]
    std::int64_t logit_rows = 0;     // [rows]
    std::int64_t capture_rows = 0;   // [m]
    std::int64_t page_indices = 0;   // [p]
    std::int64_t end(std::int64_t pages) const { return page_indices + pages; }

    static MetaLayout make(std::int64_t n, std::int64_t s, std::int64_t rows, std::int64_t m);
};

// Pinned (where the backend has it) host memory, freed through the backend. Move-only.
class HostStaging {
  public:
    HostStaging() = default;
    HostStaging(tensor::Backend* backend, void* data) : backend_(backend), data_(data) {}
    ~HostStaging() { reset(); }
    HostStaging(HostStaging&& o) noexcept { *this = static_cast<HostStaging&&>(o); }
    HostStaging& operator=(HostStaging&& o) noexcept {
        if (this != &o) {
            reset();
            backend_ = o.backend_;
            data_ = o.data_;
            o.backend_ = nullptr;
            o.data_ = nullptr;
        }
        return *this;
    }
    HostStaging(const HostStaging&) = delete;
    HostStaging& operator=(const HostStaging&) = delete;

    std::int32_t* i32() const { return static_cast<std::int32_t*>(data_); }
    void reset() {
        if (data_ != nullptr) backend_->free_host(data_);
        data_ = nullptr;
    }

  private:
    tensor::Backend* backend_ = nullptr;
    void* data_ = nullptr;
};

// What stage() decided about the step that enqueue() runs.
struct StagedStep {
    std::int64_t num_tokens = 0;    // rows of the batch, padding included
    std::int64_t num_seqs = 0;      // sequences, padding included
    std::int64_t logit_rows = 0;    // rows of ws.logits the step produces
    std::int64_t capture_rows = 0;  // KvCapture rows (0 without a capture)
    std::int64_t num_pages = 0;     // page-table entries
    std::int32_t fixed_max_kv_len = 0;  // see PagedAttentionArgs
    MetaLayout layout;
    tensor::Tensor capture_k, capture_v;  // the batch's KvCapture targets, or empty
    const LayerHook* before_layer = nullptr;  // the batch's, or null
    bool masked = false;  // ws.allowed_tokens holds the step's allowed-token masks
};

struct ForwardWorkspace {
    static Result<ForwardWorkspace> create(tensor::Backend& backend, const ModelConfig& config,
                                           const WorkspaceLimits& limits);

    WorkspaceLimits limits;
    tensor::Buffer buffer;  // owns every tensor below

    // Activations (T = max_tokens, act = backend activation dtype).
    tensor::Tensor hidden;        // [T, hidden] act: the residual stream
    tensor::Tensor normed;        // [T, hidden] act: norm output, also o/down projection output
    tensor::Tensor q;             // [T, heads * head_dim] act
    tensor::Tensor k;             // [T, kv_heads * head_dim] act
    tensor::Tensor v;             // [T, kv_heads * head_dim] act
    tensor::Tensor attn;          // [T, heads * head_dim] act
    tensor::Tensor gate;          // [T, ffn] act: gate projection, then silu(gate) * up
    tensor::Tensor up;            // [T, ffn] act
    tensor::Tensor final_hidden;  // [max_logit_rows, hidden] act: the last layer's logit rows
    tensor::Tensor logits;        // [max_logit_rows, vocab] f32
    tensor::Tensor sampled_ids;   // [max_logit_rows] i32: device argmax of the logits
    // [max_seqs, mask_words] i32: ForwardBatch::allowed_tokens of the staged step
    tensor::Tensor allowed_tokens;
    std::int64_t mask_words = 0;  // (vocab + 31) / 32

    // Batch metadata on the device: one packed array, laid out per step by MetaLayout.
    tensor::Tensor meta;  // [meta_capacity] i32
    std::int64_t meta_capacity = 0;

    // Host side: the packed metadata staged for upload, room for the sampled ids, then the
    // allowed-token masks staged for upload.
    HostStaging host;  // [meta_capacity + max_logit_rows + max_seqs * mask_words] i32
    std::int32_t* host_meta() const { return host.i32(); }
    std::int32_t* host_ids() const { return host.i32() + meta_capacity; }
    std::int32_t* host_allowed() const { return host_ids() + logit_rows_capacity; }
    std::int64_t logit_rows_capacity = 0;

    StagedStep step;  // the step last staged
};

}  // namespace inferscale::model
