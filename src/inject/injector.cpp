#include "inject/injector.h"

#include <algorithm>
#include <string>

namespace inferscale::inject {

using tensor::DType;
using tensor::Tensor;

Status Injector::reserve_device(std::size_t words) {
    const std::size_t bytes = words * sizeof(std::int32_t);
    if (device_.bytes() >= bytes) return {};
    // Grow geometrically so a slowly growing memory does not reallocate every request.
    device_.reset();
    device_ = IS_TRY(backend_->allocate(std::max<std::size_t>(bytes * 2, 4096)));
    return {};
}

Status Injector::inject(std::span<const InjectSpan> spans, std::span<const kv::BlockId> blocks,
                        kv::KvStorage& kv) {
    IS_RETURN_IF_ERROR(prepare(spans, blocks, kv));
    inject_layers(0, layers_);
    return {};
}

void Injector::inject_layers(std::int64_t first, std::int64_t count) {
    if (layers_ == 0 || count == 0) return;
    IS_CHECK(first >= 0 && count > 0 && first + count <= layers_)
        << "inject layers " << first << "+" << count << " of " << layers_;
    args_.first_layer = first;
    args_.num_layers = count;
    backend_->inject_chunks(args_, tables_);
    last_bytes_ += bytes_per_layer_ * static_cast<std::size_t>(count);
}

Status Injector::prepare(std::span<const InjectSpan> spans, std::span<const kv::BlockId> blocks,
                         kv::KvStorage& kv) {
    last_bytes_ = 0;
    layers_ = 0;
    const kv::KvLayout& layout = kv.layout();
    const std::int64_t bs = layout.block_size;
    const std::int64_t max_pos = tables_.cos.shape[0];

    chunk_list_.clear();
    std::int64_t n = 0;
    for (const InjectSpan& s : spans) {
        const memory::KvChunk* c = s.chunk;
        if (c == nullptr) return make_error("inject: a span has no chunk");
        if (c->num_layers() != layout.num_layers || c->num_kv_heads() != layout.num_kv_heads ||
            c->head_dim() != layout.head_dim || c->dtype() != kv.dtype())
            return make_error("inject: chunk '" + c->identity().fact_id +
                              "' does not match the KV cache's layout or dtype");
        if (s.first_row < 0 || s.num_rows < 0 || s.first_row + s.num_rows > c->num_tokens())
            return make_error("inject: span rows outside chunk '" + c->identity().fact_id + "'");
        if (s.first_position < 0 || s.first_position + s.num_rows > max_pos)
            return make_error("inject: positions beyond the RoPE tables");
        if (s.first_position + s.num_rows > static_cast<std::int64_t>(blocks.size()) * bs)
            return make_error("inject: the sequence's blocks are too few for the memory");
        if (std::find(chunk_list_.begin(), chunk_list_.end(), c) == chunk_list_.end())
            chunk_list_.push_back(c);
        n += s.num_rows;
    }
    if (n == 0) return {};

    // One host array, one copy: [c, 2] addrs | [c] tokens | [n] chunk | row | position | slot.
    const auto c = static_cast<std::int64_t>(chunk_list_.size());
    const std::size_t words = static_cast<std::size_t>(3 * c + 4 * n);
    host_.assign(words, 0);
    std::int32_t* addrs = host_.data();
    std::int32_t* tokens = addrs + 2 * c;
    std::int32_t* src_chunk = tokens + c;
    std::int32_t* src_row = src_chunk + n;
    std::int32_t* positions = src_row + n;
    std::int32_t* slots = positions + n;
    for (std::int64_t i = 0; i < c; ++i) {
        const auto addr = reinterpret_cast<std::uintptr_t>(chunk_list_[i]->data());
        addrs[2 * i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(addr & 0xffffffffu));
        addrs[2 * i + 1] = static_cast<std::int32_t>(static_cast<std::uint32_t>(addr >> 32));
        tokens[i] = static_cast<std::int32_t>(chunk_list_[i]->num_tokens());
    }
    std::int64_t t = 0;
    for (const InjectSpan& s : spans) {
        const auto ci = static_cast<std::int32_t>(
            std::find(chunk_list_.begin(), chunk_list_.end(), s.chunk) - chunk_list_.begin());
        for (std::int64_t j = 0; j < s.num_rows; ++j, ++t) {
            const std::int64_t p = s.first_position + j;
            src_chunk[t] = ci;
            src_row[t] = static_cast<std::int32_t>(s.first_row + j);
            positions[t] = static_cast<std::int32_t>(p);
            slots[t] =
                static_cast<std::int32_t>(blocks[static_cast<std::size_t>(p / bs)] * bs + p % bs);
        }
    }
    IS_RETURN_IF_ERROR(reserve_device(words));
    const Tensor all = device_.view(DType::I32, {static_cast<std::int64_t>(words)});
    backend_->copy_from_host(all, host_.data(), words * sizeof(std::int32_t));

    auto at = [&](std::int32_t* host_ptr) {
        return static_cast<std::int32_t*>(device_.data()) + (host_ptr - host_.data());
    };
    const tensor::Device dev = backend_->device();
    tensor::InjectArgs& args = args_;
    args = tensor::InjectArgs();
    args.chunk_addrs = Tensor(at(addrs), DType::I32, {c, 2}, dev);
    args.chunk_tokens = Tensor(at(tokens), DType::I32, {c}, dev);
    args.src_chunk = Tensor(at(src_chunk), DType::I32, {n}, dev);
    args.src_row = Tensor(at(src_row), DType::I32, {n}, dev);
    args.positions = Tensor(at(positions), DType::I32, {n}, dev);
    args.slots = Tensor(at(slots), DType::I32, {n}, dev);
    args.layer0 = kv.pages(0);
    args.num_layers = layout.num_layers;
    const std::size_t esize = tensor::dtype_size(kv.dtype());
    if (layout.num_layers > 1) {
        args.layer_stride =
            (static_cast<char*>(kv.pages(1).k.data) - static_cast<char*>(args.layer0.k.data)) /
            static_cast<std::ptrdiff_t>(esize);
        if (kv.fp8())
            args.scale_stride = static_cast<const float*>(kv.pages(1).k_scale.data) -
                                static_cast<const float*>(args.layer0.k_scale.data);
    }
    // The op addresses layer l at layer0 + l * stride; KvStorage's layout must agree.
    for (std::int64_t l = 0; l < layout.num_layers; ++l) {
        const tensor::KvPages p = kv.pages(l);
        IS_CHECK(static_cast<char*>(p.k.data) ==
                     static_cast<char*>(args.layer0.k.data) + l * args.layer_stride * esize &&
                 static_cast<char*>(p.v.data) ==
                     static_cast<char*>(args.layer0.v.data) + l * args.layer_stride * esize)
            << "KvStorage layers are not evenly strided";
    }
    layers_ = layout.num_layers;
    bytes_per_layer_ =
        static_cast<std::size_t>(2 * 2 * n * layout.num_kv_heads * layout.head_dim) * esize;
    return {};
}

}  // namespace inferscale::inject
