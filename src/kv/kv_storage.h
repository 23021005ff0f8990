#pragma once
// KvStorage: the paged K and V memory of every layer, allocated through a Backend.
// Per layer: K and V pages [num_blocks, block_size, num_kv_heads, head_dim] in the backend's
// kv dtype, or in FP8 (F8_E4M3) with a K and a V scale per (layer, KV head) beside them. Which
// blocks belong to which sequence is BlockPool's and the caller's business; this only owns the
// memory. Move-only; the backend must outlive it.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

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
    // An Error when the layout is invalid or the backend is out of memory. Pages start zeroed;
    // FP8 scales start at 1. `dtype`: the backend's kv dtype when unset, else it or F8_E4M3.
    static Result<KvStorage> create(tensor::Backend& backend, const KvLayout& layout,
                                    std::optional<tensor::DType> dtype = std::nullopt);

    const KvLayout& layout() const { return layout_; }
    tensor::DType dtype() const { return dtype_; }
    bool fp8() const { return dtype_ == tensor::DType::F8_E4M3; }
    // Views of layer `layer`'s pages: k, v [num_blocks, block_size, num_kv_heads, head_dim],
    // and with FP8 the layer's scales.
    tensor::KvPages pages(std::int64_t layer) const;

    // FP8: every layer's K scales then V scales, [num_layers][2][num_kv_heads] (what scales()
    // returns). Values already in the pages are not rescaled: set them before any write.
    void set_scales(std::span<const float> scales);
    const std::vector<float>& scales() const { return scales_; }

  private:
    KvStorage(tensor::Backend& backend, const KvLayout& layout, tensor::DType dtype,
              tensor::Buffer buffer, tensor::Buffer scale_buffer)
        : backend_(&backend),
          layout_(layout),
          dtype_(dtype),
          buffer_(std::move(buffer)),
          scale_buffer_(std::move(scale_buffer)) {}

    tensor::Backend* backend_;
    KvLayout layout_;
    tensor::DType dtype_ = tensor::DType::F32;
    tensor::Buffer buffer_;        // all layers: [num_layers][2][num_blocks, bs, kvh, d]
    tensor::Buffer scale_buffer_;  // FP8: [num_layers][2][kvh] f32
    std::vector<float> scales_;    // the same on the host
};

}  // namespace inferscale::kv
