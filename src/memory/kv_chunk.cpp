#include "memory/kv_chunk.h"

#include <cstdio>

#include "base/check.h"

namespace inferscale::memory {

const char* encoding_mode_name(EncodingMode mode) {
    return mode == EncodingMode::AfterHeader ? "after-header" : "standalone";
}

std::string ChunkIdentity::key() const {
    // Lengths first, so no field can run into the next one.
    std::string out;
    for (const std::string* f : {&model, &fact_id, &text_hash}) {
        out += std::to_string(f->size());
        out += ':';
        out += *f;
        out += '|';
    }
    out += "w" + std::to_string(window) + "|" + encoding_mode_name(mode);
    return out;
}

std::string text_hash(std::string_view text) {
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 1099511628211ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

KvChunk::KvChunk(ChunkIdentity identity, std::vector<std::int32_t> token_ids,
                 std::int64_t num_layers, std::int64_t num_kv_heads, std::int64_t head_dim,
                 tensor::DType dtype, tensor::Buffer kv)
    : identity_(std::move(identity)),
      token_ids_(std::move(token_ids)),
      num_layers_(num_layers),
      num_kv_heads_(num_kv_heads),
      head_dim_(head_dim),
      dtype_(dtype),
      kv_(std::move(kv)) {
    const auto need =
        static_cast<std::size_t>(num_layers * 2 * num_tokens() * num_kv_heads * head_dim) *
        tensor::dtype_size(dtype);
    IS_CHECK(kv_.bytes() >= need) << "chunk buffer " << kv_.bytes() << " < " << need;
}

tensor::Tensor KvChunk::k(std::int64_t layer) const {
    IS_CHECK(layer >= 0 && layer < num_layers_) << "layer " << layer;
    const std::size_t plane = static_cast<std::size_t>(num_tokens() * num_kv_heads_ * head_dim_) *
                              tensor::dtype_size(dtype_);
    return kv_.view(dtype_, {num_tokens(), num_kv_heads_, head_dim_},
                    static_cast<std::size_t>(2 * layer) * plane);
}

tensor::Tensor KvChunk::v(std::int64_t layer) const {
    IS_CHECK(layer >= 0 && layer < num_layers_) << "layer " << layer;
    const std::size_t plane = static_cast<std::size_t>(num_tokens() * num_kv_heads_ * head_dim_) *
                              tensor::dtype_size(dtype_);
    return kv_.view(dtype_, {num_tokens(), num_kv_heads_, head_dim_},
                    static_cast<std::size_t>(2 * layer + 1) * plane);
}

bool KvChunk::same_layout(const KvChunk& other) const {
    return num_layers_ == other.num_layers_ && num_kv_heads_ == other.num_kv_heads_ &&
           head_dim_ == other.head_dim_ && dtype_ == other.dtype_;
}

}  // namespace inferscale::memory
