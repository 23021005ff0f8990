#pragma once
// KvStorage: the paged K and V memory of every layer, allocated through a Backend.
// Per layer: K and V pages [num_blocks, block_size, num_kv_heads, head_dim] in the backend's
// kv dtype. Which blocks belong to which sequence is BlockPool's and the caller's business;
// this only owns the memory. Move-only; the backend must outlive it.

#include <cstdint>

#include "base/result.h"
#include "tensor/backend.h"

namespace inferscale::kv {

struct KvLayout {
    std::int64_t num_layers = 0;
    std::int64_t num_blocks = 0;
    std::int64_t block_size = 16;
    std::int64_t num_kv_heads = 0;
    std::int64_t head_dim = 0;

    // Bytes of one layer's K (or V) pages in `dtype`.
    std::size_t bytes_per_layer(tensor::DType dtype) const {
        return static_cast<std::size_t>(num_blocks * block_size * num_kv_heads * head_dim) *
               tensor::dtype_size(dtype);
    }
};

class KvStorage {
  public:
    // An Error when the layout is invalid or the backend is out of memory. Pages start zeroed.
    static Result<KvStorage> create(tensor::Backend& backend, const KvLayout& layout);

    const KvLayout& layout() const { return layout_; }
    tensor::DType dtype() const { return dtype_; }
    // Views of layer `layer`'s pages: k, v [num_blocks, block_size, num_kv_heads, head_dim].
    tensor::KvPages pages(std::int64_t layer) const;

  private:
    KvStorage(const KvLayout& layout, tensor::DType dtype, tensor::Buffer buffer)
        : layout_(layout), dtype_(dtype), buffer_(std::move(buffer)) {}

    KvLayout layout_;
    tensor::DType dtype_ = tensor::DType::F32;
    tensor::Buffer buffer_;  // all layers: [num_layers][2][num_blocks, bs, kvh, d]
};

}  // namespace inferscale::kv
