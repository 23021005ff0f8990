#pragma once
// KvChunk: one memory fact's KV, captured once and injected into many requests. K is kept
// before RoPE so it can be rotated to whatever position the fact lands at; V as computed.
// Only the fact's own tokens are kept, whatever context they were encoded after. The identity
// names everything the KV depends on, so it is part of any cache key: two users (or two
// encodings of the same text) never share a chunk by accident.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace inferscale::memory {

// What preceded the fact's tokens when it was encoded (their KV is thrown away).
enum class EncodingMode : std::uint8_t {
    Standalone,   // the w context turns only (w = 0: the fact alone from position 0, no BOS)
    AfterHeader,  // the memory header (system prompt with its BOS), then the w turns
};

const char* encoding_mode_name(EncodingMode mode);

struct ChunkIdentity {
    std::string fact_id;
    std::string text_hash;    // of the fact text, hex
    std::string model;        // model name or path
    std::int32_t window = 0;  // w: context turns encoded before the fact
    EncodingMode mode = EncodingMode::Standalone;

    // A stable string over every field, for cache maps and file names.
    std::string key() const;
    bool operator==(const ChunkIdentity&) const = default;
};

// A chunk moves from host memory to the device in layer groups, so injection can begin on the
// first layers while later ones are still in flight: group g holds layers
// [layer_group_begin(g, L), layer_group_begin(g + 1, L)) of an L-layer chunk (empty groups
// when L < kLayerGroups).
inline constexpr std::int64_t kLayerGroups = 8;
constexpr std::int64_t layer_group_begin(std::int64_t group, std::int64_t num_layers) {
    return group * num_layers / kLayerGroups;
}
// Where layer group g lies in a chunk payload of `bytes` (layer-major, so one contiguous
// range): its byte offset and size.
struct LayerGroupBytes {
    std::size_t offset = 0, size = 0;
};
constexpr LayerGroupBytes layer_group_bytes(std::int64_t group, std::int64_t num_layers,
                                            std::size_t bytes) {
    const std::size_t layer = bytes / static_cast<std::size_t>(num_layers);
    const auto first = static_cast<std::size_t>(layer_group_begin(group, num_layers));
    const auto end = static_cast<std::size_t>(layer_group_begin(group + 1, num_layers));
    return {first * layer, (end - first) * layer};
}
// The group holding `layer`.
constexpr std::int64_t layer_group_of(std::int64_t layer, std::int64_t num_layers) {
    std::int64_t g = kLayerGroups - 1;
    while (layer_group_begin(g, num_layers) > layer) --g;
    return g;
}

// The layer groups a forward reaches, in order, for a hook called before each layer: reach(l,
// f) calls f(group, first layer, layer count) once for every group that begins at or before
// layer l and was not reached before (empty groups too, with count 0).
class LayerGroupWalk {
  public:
    explicit LayerGroupWalk(std::int64_t num_layers) : layers_(num_layers) {}
    template <class F>
    void reach(std::int64_t layer, F&& on_group) {
        while (next_ < kLayerGroups && layer_group_begin(next_, layers_) <= layer) {
            const std::int64_t g = next_++;
            const std::int64_t first = layer_group_begin(g, layers_);
            on_group(g, first, layer_group_begin(g + 1, layers_) - first);
        }
    }

  private:
    std::int64_t layers_;
    std::int64_t next_ = 0;
};

// A 64-bit FNV-1a hash of `text` as 16 hex digits: cheap and stable, used when the caller has
// no stronger hash of its own.
std::string text_hash(std::string_view text);

class KvChunk {
  public:
    KvChunk() = default;
    // Takes `kv`, which must hold [num_layers][2][token_ids.size()][kvh][d] in `dtype`.
    KvChunk(ChunkIdentity identity, std::vector<std::int32_t> token_ids, std::int64_t num_layers,
            std::int64_t num_kv_heads, std::int64_t head_dim, tensor::DType dtype,
            tensor::Buffer kv);
    KvChunk(KvChunk&&) noexcept = default;
    KvChunk& operator=(KvChunk&&) noexcept = default;

    const ChunkIdentity& identity() const { return identity_; }
    const std::vector<std::int32_t>& token_ids() const { return token_ids_; }
    std::int64_t num_tokens() const { return static_cast<std::int64_t>(token_ids_.size()); }
    std::int64_t num_layers() const { return num_layers_; }
    std::int64_t num_kv_heads() const { return num_kv_heads_; }
    std::int64_t head_dim() const { return head_dim_; }
    tensor::DType dtype() const { return dtype_; }
    std::size_t bytes() const { return kv_.bytes(); }
    const void* data() const { return kv_.data(); }

    // Layer `layer`'s K before RoPE and its V.  [num_tokens, kvh, d] dtype, on the backend.
    tensor::Tensor k(std::int64_t layer) const;
    tensor::Tensor v(std::int64_t layer) const;

    // Same shape and dtype of KV per token (chunks of one model).
    bool same_layout(const KvChunk& other) const;
    // The memory holding the KV, taken out of the chunk (which is left without it).
    tensor::Buffer take_kv() && { return std::move(kv_); }

  private:
    ChunkIdentity identity_;
    std::vector<std::int32_t> token_ids_;  // [t]
    std::int64_t num_layers_ = 0;
    std::int64_t num_kv_heads_ = 0;
    std::int64_t head_dim_ = 0;
    tensor::DType dtype_ = tensor::DType::F32;
    tensor::Buffer kv_;  // [num_layers][2][t][kvh][d] dtype; index 0 of dim 1 is K, 1 is V
};

}  // namespace inferscale::memory
