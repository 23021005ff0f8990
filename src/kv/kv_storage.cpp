#include "kv/kv_storage.h"

#include "base/check.h"

namespace inferscale::kv {

Result<KvStorage> KvStorage::create(tensor::Backend& backend, const KvLayout& layout,
                                    std::optional<tensor::DType> dtype) {
    if (layout.num_layers <= 0 || layout.num_blocks <= 0 || layout.block_size <= 0 ||
        layout.num_kv_heads <= 0 || layout.head_dim <= 0) {
        return make_error("kv storage: every layout dimension must be positive");
    }
    const tensor::DType type = dtype.value_or(backend.kv_dtype());
    if (type != backend.kv_dtype() && type != tensor::DType::F8_E4M3)
        return make_error("kv storage: pages in " + std::string(tensor::dtype_name(type)) +
                          " are not supported");
    const std::size_t bytes = 2 * layout.num_layers * layout.bytes_per_layer(type);
    tensor::Buffer buffer = IS_TRY(backend.allocate(bytes));
    // Zeroed so that a bug reading an unwritten slot gives finite garbage, not NaNs.
    backend.fill_zero(buffer.view(tensor::DType::F32, {static_cast<std::int64_t>(bytes / 4)}));
    tensor::Buffer scale_buffer;
    const auto num_scales = static_cast<std::size_t>(2 * layout.num_layers * layout.num_kv_heads);
    if (type == tensor::DType::F8_E4M3)
        scale_buffer = IS_TRY(backend.allocate(num_scales * sizeof(float)));
    KvStorage storage(backend, layout, type, std::move(buffer), std::move(scale_buffer));
    if (storage.fp8()) storage.set_scales(std::vector<float>(num_scales, 1.0f));
    return storage;
}

tensor::KvPages KvStorage::pages(std::int64_t layer) const {
    IS_CHECK(layer >= 0 && layer < layout_.num_layers) << "layer " << layer;
    const std::size_t per = layout_.bytes_per_layer(dtype_);
    const auto dims = {layout_.num_blocks, layout_.block_size, layout_.num_kv_heads,
                       layout_.head_dim};
    tensor::KvPages pages{buffer_.view(dtype_, dims, (2 * layer) * per),
                          buffer_.view(dtype_, dims, (2 * layer + 1) * per)};
    if (fp8()) {
        const std::size_t scale_bytes = static_cast<std::size_t>(layout_.num_kv_heads) * 4;
        pages.k_scale = scale_buffer_.view(tensor::DType::F32, {layout_.num_kv_heads},
                                           (2 * layer) * scale_bytes);
        pages.v_scale = scale_buffer_.view(tensor::DType::F32, {layout_.num_kv_heads},
                                           (2 * layer + 1) * scale_bytes);
    }
    return pages;
}

void KvStorage::set_scales(std::span<const float> scales) {
    IS_CHECK(fp8()) << "kv storage: scales belong to FP8 pages";
    IS_CHECK_EQ(scales.size(),
                static_cast<std::size_t>(2 * layout_.num_layers * layout_.num_kv_heads));
    scales_.assign(scales.begin(), scales.end());
    backend_->copy_from_host(
        scale_buffer_.view(tensor::DType::F32, {static_cast<std::int64_t>(scales.size())}),
        scales.data(), scales.size() * sizeof(float));
}

}  // namespace inferscale::kv
