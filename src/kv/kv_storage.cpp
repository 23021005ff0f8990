#include "kv/kv_storage.h"

namespace inferscale::kv {

Result<KvStorage> KvStorage::create(tensor::Backend& backend, const KvLayout& layout) {
    if (layout.num_layers <= 0 || layout.num_blocks <= 0 || layout.block_size <= 0 ||
        layout.num_kv_heads <= 0 || layout.head_dim <= 0) {
        return make_error("kv storage: every layout dimension must be positive");
    }
    const tensor::DType dtype = backend.kv_dtype();
    const std::size_t bytes = 2 * layout.num_layers * layout.bytes_per_layer(dtype);
    tensor::Buffer buffer = IS_TRY(backend.allocate(bytes));
    // Zeroed so that a bug reading an unwritten slot gives finite garbage, not NaNs.
    backend.fill_zero(buffer.view(tensor::DType::F32, {static_cast<std::int64_t>(bytes / 4)}));
    return KvStorage(layout, dtype, std::move(buffer));
}

tensor::KvPages KvStorage::pages(std::int64_t layer) const {
    IS_CHECK(layer >= 0 && layer < layout_.num_layers) << "layer " << layer;
    const std::size_t per = layout_.bytes_per_layer(dtype_);
    const auto dims = {layout_.num_blocks, layout_.block_size, layout_.num_kv_heads,
                       layout_.head_dim};
    return tensor::KvPages{buffer_.view(dtype_, dims, (2 * layer) * per),
                           buffer_.view(dtype_, dims, (2 * layer + 1) * per)};
}

}  // namespace inferscale::kv
