// Memory injection: one kernel moves every layer's K and V rows of all injected chunks into the
// paged KV, rotating K to its target position on the way (gather + RoPE + scatter fused, so the
// chunk KV is read once and the pages written once: bytes moved = 2 * (read + write) of
// n * layers * kvh * d bf16, plus tiny per-token metadata and the cos/sin rows).
// Thread (layer, token, kv head, group of kVec rotation pairs): it loads kVec elements of the
// first half of the head and the matching kVec of the second half, for K and V. With kVec = 8
// every access is 16 bytes and a warp covers whole contiguous rows, so the kernel streams at
// memory bandwidth; head_dim not a multiple of 16 falls back to kVec = 1.
// The rotation is rope.cu's expression in f32 with round-to-nearest back to bf16, so an
// injected key equals the key a prefill computes from the same pre-RoPE row and position.
// FP8 (E4M3) chunks and pages: K widened with the layer's head scale, rotated, and rounded back
// over the same scale as a KV write rounds; V copied as bytes (8-byte accesses at kVec = 8).

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 256;

struct InjectKernelArgs {
    const std::int32_t* chunk_addrs;   // [c, 2]
    const std::int32_t* chunk_tokens;  // [c]
    const std::int32_t* src_chunk;     // [n]
    const std::int32_t* src_row;       // [n]
    const std::int32_t* positions;     // [n]
    const std::int32_t* slots;         // [n]
    const float* cos;                  // [max_positions, half]
    const float* sin;                  // [max_positions, half]
    void* k_pages;                     // layer 0 [slots, kvh, d], bf16 or E4M3
    void* v_pages;
    const float* k_scale;       // FP8: layer 0's [kvh] K scales
    std::int64_t scale_stride;  // FP8: from layer l's scales to layer l + 1's
    std::int64_t layer_stride;  // elements
    std::int64_t first_layer;   // blockIdx.y counts from here
    std::int64_t num_slots;
    std::int64_t max_positions;
    int num_chunks;
    int n;
    int heads;
    int half;
};

template <int kVec, class P>
struct Pack;

template <int kVec>
struct Pack<kVec, bf16> {
    // kVec bf16 values loaded or stored with one access (16 bytes for kVec = 8); scale unused.
    static __device__ __forceinline__ void load(const bf16* p, float* out, float) {
        if constexpr (kVec == 8) {
            const uint4 raw = *reinterpret_cast<const uint4*>(p);
            const auto* h2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 f = __bfloat1622float2(h2[i]);
                out[2 * i] = f.x;
                out[2 * i + 1] = f.y;
            }
        } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) out[i] = to_f32(p[i]);
        }
    }
    static __device__ __forceinline__ void store(bf16* p, const float* in, float) {
        if constexpr (kVec == 8) {
            uint4 raw;
            auto* h2 = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
            for (int i = 0; i < 4; ++i) h2[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
            *reinterpret_cast<uint4*>(p) = raw;
        } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) p[i] = from_f32<bf16>(in[i]);
        }
    }
    // V needs no math: copy the raw bits.
    static __device__ __forceinline__ void copy(bf16* dst, const bf16* src) {
        if constexpr (kVec == 8) {
            *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
        } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) dst[i] = src[i];
        }
    }
};

template <int kVec>
struct Pack<kVec, std::uint8_t> {
    // kVec E4M3 values times the head's scale (8 bytes one access for kVec = 8).
    static __device__ __forceinline__ void load(const std::uint8_t* p, float* out, float scale) {
        std::uint8_t raw[kVec];
        if constexpr (kVec == 8) {
            *reinterpret_cast<uint2*>(raw) = *reinterpret_cast<const uint2*>(p);
        } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) raw[i] = p[i];
        }
#pragma unroll
        for (int i = 0; i < kVec; ++i) out[i] = e4m3_to_f32(raw[i]) * scale;
    }
    static __device__ __forceinline__ void store(std::uint8_t* p, const float* in, float scale) {
        std::uint8_t raw[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) raw[i] = f32_to_e4m3(in[i] / scale);
        if constexpr (kVec == 8) {
            *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(raw);
        } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) p[i] = raw[i];
        }
    }
    static __device__ __forceinline__ void copy(std::uint8_t* dst, const std::uint8_t* src) {
        if constexpr (kVec == 8) {
            *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
        } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) dst[i] = src[i];
        }
    }
};

// P: bf16, or std::uint8_t for E4M3 chunks and pages.
template <int kVec, class P>
__global__ void inject_kernel(InjectKernelArgs a) {
    const int groups = a.half / kVec;
    const std::int64_t per_layer = static_cast<std::int64_t>(a.n) * a.heads * groups;
    const std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
    if (idx >= per_layer) return;
    const std::int64_t layer = a.first_layer + blockIdx.y;
    const int g = static_cast<int>(idx % groups);
    const int h = static_cast<int>((idx / groups) % a.heads);
    const int t = static_cast<int>(idx / (static_cast<std::int64_t>(groups) * a.heads));

    const std::int32_t chunk = a.src_chunk[t];
    if (chunk < 0 || chunk >= a.num_chunks) __trap();  // metadata bugs upstream
    const std::int64_t t_c = a.chunk_tokens[chunk];
    const std::int32_t r = a.src_row[t];
    const std::int32_t pos = a.positions[t];
    const std::int32_t slot = a.slots[t];
    if (r < 0 || r >= t_c || pos < 0 || pos >= a.max_positions || slot < 0 || slot >= a.num_slots)
        __trap();
    const auto lo = static_cast<std::uint32_t>(a.chunk_addrs[2 * chunk]);
    const auto hi = static_cast<std::uint32_t>(a.chunk_addrs[2 * chunk + 1]);
    const auto* base = reinterpret_cast<const P*>((static_cast<std::uint64_t>(hi) << 32) | lo);
    if constexpr (kVec == 8) {
        if (reinterpret_cast<std::uintptr_t>(base) % (kVec * sizeof(P)) != 0) __trap();
    }

    const std::int64_t d = 2 * a.half;
    const std::int64_t row = a.heads * d;
    const std::int64_t col = h * d + static_cast<std::int64_t>(g) * kVec;
    // Chunk [layers][2][t_c][kvh][d]: K rows of the layer, then its V rows.
    const P* ks = base + (layer * 2 * t_c + r) * row + col;
    const P* vs = ks + t_c * row;
    P* kd = static_cast<P*>(a.k_pages) + layer * a.layer_stride + slot * row + col;
    P* vd = static_cast<P*>(a.v_pages) + layer * a.layer_stride + slot * row + col;
    const float scale = a.k_scale != nullptr ? a.k_scale[layer * a.scale_stride + h] : 1.0f;

    float x1[kVec], x2[kVec], c[kVec], s[kVec];
    Pack<kVec, P>::load(ks, x1, scale);
    Pack<kVec, P>::load(ks + a.half, x2, scale);
    const float* ct = a.cos + static_cast<std::int64_t>(pos) * a.half + g * kVec;
    const float* st = a.sin + static_cast<std::int64_t>(pos) * a.half + g * kVec;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
        c[i] = ct[i];
        s[i] = st[i];
    }
    float y1[kVec], y2[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) rope_rotate(x1[i], x2[i], c[i], s[i], y1[i], y2[i]);
    Pack<kVec, P>::store(kd, y1, scale);
    Pack<kVec, P>::store(kd + a.half, y2, scale);
    Pack<kVec, P>::copy(vd, vs);
    Pack<kVec, P>::copy(vd + a.half, vs + a.half);
}

}  // namespace

void CudaBackend::inject_chunks(const tensor::InjectArgs& args, const tensor::RopeTables& tables) {
    using tensor::DType;
    const bool fp8 = args.layer0.k.dtype == DType::F8_E4M3;
    const DType kv = fp8 ? DType::F8_E4M3 : DType::BF16;
    check_device(args.layer0.k, kv, 4, "inject pages k");
    check_device(args.layer0.v, kv, 4, "inject pages v");
    if (fp8) check_device(args.layer0.k_scale, DType::F32, 1, "inject k scales");
    check_device(args.chunk_addrs, DType::I32, 2, "inject chunk_addrs");
    check_device(args.chunk_tokens, DType::I32, 1, "inject chunk_tokens");
    check_device(args.src_chunk, DType::I32, 1, "inject src_chunk");
    check_device(args.src_row, DType::I32, 1, "inject src_row");
    check_device(args.positions, DType::I32, 1, "inject positions");
    check_device(args.slots, DType::I32, 1, "inject slots");
    check_device(tables.cos, DType::F32, 2, "inject cos");
    check_device(tables.sin, DType::F32, 2, "inject sin");
    const tensor::Tensor& kp = args.layer0.k;
    const std::int64_t n = args.slots.shape[0];
    const std::int64_t c = args.chunk_tokens.shape[0];
    IS_CHECK(args.src_chunk.shape[0] == n && args.src_row.shape[0] == n &&
             args.positions.shape[0] == n && args.chunk_addrs.shape[0] == c &&
             args.chunk_addrs.shape[1] == 2)
        << "inject_chunks: metadata sizes disagree";
    IS_CHECK(tables.cos.shape[1] * 2 == kp.shape[3] && tables.cos.shape == tables.sin.shape)
        << "inject_chunks: rope tables do not match head_dim";
    IS_CHECK(n <= 0x7fffffff && c <= 0x7fffffff && args.num_layers <= 65535)
        << "inject_chunks: too large";
    IS_CHECK(args.first_layer >= 0 && args.num_layers >= 0) << "inject_chunks: layer range";
    if (n == 0 || args.num_layers == 0) return;

    InjectKernelArgs a{};
    a.chunk_addrs = args.chunk_addrs.as<const std::int32_t>();
    a.chunk_tokens = args.chunk_tokens.as<const std::int32_t>();
    a.src_chunk = args.src_chunk.as<const std::int32_t>();
    a.src_row = args.src_row.as<const std::int32_t>();
    a.positions = args.positions.as<const std::int32_t>();
    a.slots = args.slots.as<const std::int32_t>();
    a.cos = tables.cos.as<const float>();
    a.sin = tables.sin.as<const float>();
    a.k_pages = kp.data;
    a.v_pages = args.layer0.v.data;
    a.k_scale = fp8 ? args.layer0.k_scale.as<const float>() : nullptr;
    a.scale_stride = args.scale_stride;
    a.layer_stride = args.layer_stride;
    a.first_layer = args.first_layer;
    a.num_slots = kp.shape[0] * kp.shape[1];
    a.max_positions = tables.cos.shape[0];
    a.num_chunks = static_cast<int>(c);
    a.n = static_cast<int>(n);
    a.heads = static_cast<int>(kp.shape[2]);
    a.half = static_cast<int>(kp.shape[3] / 2);

    const bool vec =
        a.half % 8 == 0 && aligned16(a.k_pages) && aligned16(a.v_pages) &&
        (args.layer_stride * static_cast<std::int64_t>(tensor::dtype_size(kv))) % 16 == 0;
    const int vec_width = vec ? 8 : 1;
    const std::int64_t per_layer = n * a.heads * (a.half / vec_width);
    const std::int64_t blocks = (per_layer + kThreads - 1) / kThreads;
    IS_CHECK(blocks <= 0x7fffffff) << "inject_chunks: grid " << blocks;
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(args.num_layers));
    activate();
    const auto launch = [&]<class P>() {
        if (vec) {
            inject_kernel<8, P><<<grid, kThreads, 0, stream_>>>(a);
        } else {
            inject_kernel<1, P><<<grid, kThreads, 0, stream_>>>(a);
        }
    };
    if (fp8) {
        launch.template operator()<std::uint8_t>();
    } else {
        launch.template operator()<bf16>();
    }
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace inferscale::backends::cuda
