// CpuBackend::inject_chunks: gathers chunk rows, rotates K to the target positions and writes
// K and V into every layer's pages. The rotation is rope()'s own (rotate_head), so an injected
// key is bit-identical to the key a prefill at that position computes from the same pre-RoPE
// row. FP8 chunks: K widened with the layer's scale, rotated and rounded back as write_kv
// rounds; V copied as bytes.

#include <cstdint>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_kernels.h"

namespace inferscale::backends::cpu {
namespace {

constexpr std::int64_t kMaxInjectHeadDim = 512;

template <typename T>
const T* chunk_base(const std::int32_t* addrs, std::int32_t chunk) {
    const auto lo = static_cast<std::uint32_t>(addrs[2 * chunk]);
    const auto hi = static_cast<std::uint32_t>(addrs[2 * chunk + 1]);
    return reinterpret_cast<const T*>((static_cast<std::uintptr_t>(hi) << 32) | lo);
}

}  // namespace

void CpuBackend::inject_chunks(const tensor::InjectArgs& args, const tensor::RopeTables& tables) {
    using tensor::DType;
    const tensor::Tensor& kp = args.layer0.k;
    const bool fp8 = kp.dtype == DType::F8_E4M3;
    IS_CHECK((kp.dtype == DType::F32 || fp8) && args.layer0.v.dtype == kp.dtype && kp.rank == 4)
        << "inject_chunks: pages must be f32 or f8_e4m3 [blocks, bs, kvh, d]";
    IS_CHECK(!fp8 || (args.layer0.k_scale.numel() == kp.shape[2] &&
                      args.layer0.v_scale.numel() == kp.shape[2]))
        << "inject_chunks: FP8 pages need their scales";
    const std::int64_t n = args.slots.rank == 1 ? args.slots.shape[0] : 0;
    const std::int64_t c = args.chunk_tokens.rank == 1 ? args.chunk_tokens.shape[0] : 0;
    IS_CHECK(args.src_chunk.numel() == n && args.src_row.numel() == n &&
             args.positions.numel() == n && args.chunk_addrs.numel() == 2 * c)
        << "inject_chunks: metadata sizes disagree";
    IS_CHECK(args.first_layer >= 0 && args.num_layers >= 0) << "inject_chunks: layer range";
    if (n == 0 || args.num_layers == 0) return;

    const std::int64_t num_slots = kp.shape[0] * kp.shape[1];
    const std::int64_t heads = kp.shape[2], d = kp.shape[3], half = d / 2;
    const std::int64_t row = heads * d;
    const std::int64_t max_pos = tables.cos.shape[0];
    const auto* addrs = args.chunk_addrs.as<const std::int32_t>();
    const auto* chunk_tokens = args.chunk_tokens.as<const std::int32_t>();
    const auto* src_chunk = args.src_chunk.as<const std::int32_t>();
    const auto* src_row = args.src_row.as<const std::int32_t>();
    const auto* positions = args.positions.as<const std::int32_t>();
    const auto* slots = args.slots.as<const std::int32_t>();
    const auto* cos_table = tables.cos.as<const float>();
    const auto* sin_table = tables.sin.as<const float>();

    // Validate once, outside the parallel region: an IS_CHECK inside it could not abort cleanly.
    for (std::int64_t i = 0; i < n; ++i) {
        IS_CHECK(src_chunk[i] >= 0 && src_chunk[i] < c) << "inject_chunks: chunk " << src_chunk[i];
        IS_CHECK(src_row[i] >= 0 && src_row[i] < chunk_tokens[src_chunk[i]])
            << "inject_chunks: row " << src_row[i];
        IS_CHECK(positions[i] >= 0 && positions[i] < max_pos)
            << "inject_chunks: position " << positions[i] << " table " << max_pos;
        IS_CHECK(slots[i] >= 0 && slots[i] < num_slots) << "inject_chunks: slot " << slots[i];
    }

    const std::int64_t first = args.first_layer, end = args.first_layer + args.num_layers;
    // Every (layer, token): `rotate_k(layer, src, dst, head, cos, sin)` writes one head of the
    // rotated key; V rows are copied as they are.
    const auto inject = [&]<typename T>(T* k0, T* v0, const auto& rotate_k) {
#pragma omp parallel for collapse(2) schedule(static)
        for (std::int64_t l = first; l < end; ++l) {
            for (std::int64_t i = 0; i < n; ++i) {
                const std::int64_t t_c = chunk_tokens[src_chunk[i]];
                // Chunk layout [layers][2][t_c][kvh][d]: K of layer l, then V of layer l.
                const T* ks = chunk_base<T>(addrs, src_chunk[i]) + (l * 2 * t_c + src_row[i]) * row;
                const T* vs = ks + t_c * row;
                T* kd = k0 + l * args.layer_stride + slots[i] * row;
                T* vd = v0 + l * args.layer_stride + slots[i] * row;
                const float* cs = cos_table + positions[i] * half;
                const float* sn = sin_table + positions[i] * half;
                for (std::int64_t h = 0; h < heads; ++h)
                    rotate_k(l, ks + h * d, kd + h * d, h, cs, sn);
                std::memcpy(vd, vs, static_cast<std::size_t>(row) * sizeof(T));
            }
        }
    };
    if (!fp8) {
        inject(kp.as<float>(), args.layer0.v.as<float>(),
               [&](std::int64_t, const float* src, float* dst, std::int64_t, const float* cs,
                   const float* sn) { rotate_head(src, dst, half, cs, sn, ggml_); });
        return;
    }
    IS_CHECK(d <= kMaxInjectHeadDim) << "inject_chunks: head_dim " << d;
    const auto* k_scale0 = args.layer0.k_scale.as<const float>();
    inject(kp.as<std::uint8_t>(), args.layer0.v.as<std::uint8_t>(),
           [&](std::int64_t l, const std::uint8_t* src, std::uint8_t* dst, std::int64_t h,
               const float* cs, const float* sn) {
               const float scale = k_scale0[l * args.scale_stride + h];
               float wide[kMaxInjectHeadDim];
               widen_e4m3(src, scale, d, wide);
               rotate_head(wide, wide, half, cs, sn, ggml_);
               narrow_e4m3(wide, scale, d, dst);
           });
}

}  // namespace inferscale::backends::cpu
