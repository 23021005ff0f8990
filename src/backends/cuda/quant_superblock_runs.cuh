#pragma once
// The K-quants' 256-element super-blocks (Q4_K, Q5_K, Q6_K) as eight lanes' shares, for the
// GEMV's fast path (quant_linear.cu): lane j of 8 takes two runs of 16 consecutive elements
// whose bits sit together in the block, so a lane reads whole 16-byte spans (one load for
// Q4_K's nibbles, where the per-piece codec of quant_blocks.cuh reads each byte twice) and
// decodes each sub-block's scale once per 16 elements instead of once per 8.
//
// SuperblockRuns<T>::start(j, r) is the first element of run r (0, 1) of lane j within the
// super-block; load(b, j) gives both runs as QuantRuns: 16 small integers per run packed one per
// byte (two's complement, |q| < 128) with element i of run r = scale[r] * q + offset[r], the
// same values, scales and offsets as BlockCodec<T>::piece gives for those elements.

#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/quant_blocks.cuh"

namespace inferscale::backends::cuda {

struct QuantRuns {
    std::uint32_t q[2][4];
    float scale[2], offset[2];
};

namespace quant_detail {

__device__ __forceinline__ float half_lo(std::uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
}
__device__ __forceinline__ float half_hi(std::uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
}

// 16 bytes from a 2-byte aligned address as four words: five aligned words shifted into place
// (the fifth may be the four bytes after the span; callers keep them inside the block).
__device__ __forceinline__ void load16_a2(const std::uint8_t* p, std::uint32_t (&w)[4]) {
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    const auto* a = reinterpret_cast<const std::uint32_t*>(addr & ~std::uintptr_t{3});
    const auto shift = static_cast<std::uint32_t>(addr & 3u) * 8u;
    std::uint32_t v[5];
#pragma unroll
    for (int i = 0; i < 5; ++i) v[i] = a[i];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = __funnelshift_r(v[i], v[i + 1], shift);
}

__device__ __forceinline__ void words(const uint4& v, std::uint32_t (&w)[4]) {
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
}

// Q4_K/Q5_K lane j: 16 bytes of nibbles at 16 j of the nibble area (64-element group g = j / 2,
// elements 16 (j % 2) on): low nibbles are sub-block 2g, high nibbles sub-block 2g + 1.
__device__ __forceinline__ QuantRuns k_nibble_runs(const std::uint8_t* b, const uint4& nibbles,
                                                   int j) {
    const uint4 header = *reinterpret_cast<const uint4*>(b);  // d, dmin, 12 scale bytes
    std::uint32_t w[4];
    words(nibbles, w);
    QuantRuns u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        u.q[0][i] = w[i] & kLowNibbles;
        u.q[1][i] = (w[i] >> 4) & kLowNibbles;
    }
    const float d = half_lo(header.x), dmin = half_hi(header.x);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        k_scale_offset(d, dmin, header.y, header.z, header.w, 2 * (j / 2) + r, u.scale[r],
                       u.offset[r]);
    }
    return u;
}

// Q4_K and Q5_K share the nibble layout: lane j's run r starts at element 64 (j / 2) + 32 r +
// 16 (j % 2) of the super-block, with a scale and an offset.
struct KNibbleRuns {
    static constexpr bool kOffset = true;
    __device__ static int start(int j, int r) { return 64 * (j / 2) + 32 * r + 16 * (j % 2); }
};

}  // namespace quant_detail

template <tensor::DType T>
struct SuperblockRuns;

template <>
struct SuperblockRuns<tensor::DType::Q4_K> : quant_detail::KNibbleRuns {
    static constexpr int kBytes = 144;
    __device__ static QuantRuns load(const std::uint8_t* b, int j) {
        return quant_detail::k_nibble_runs(b, *reinterpret_cast<const uint4*>(b + 16 + 16 * j), j);
    }
};

template <>
struct SuperblockRuns<tensor::DType::Q5_K> : quant_detail::KNibbleRuns {
    static constexpr int kBytes = 176;
    // The fifth bits: bit s of byte l of qh (16..47) for element 32 s + l.
    __device__ static QuantRuns load(const std::uint8_t* b, int j) {
        QuantRuns u =
            quant_detail::k_nibble_runs(b, *reinterpret_cast<const uint4*>(b + 48 + 16 * j), j);
        std::uint32_t h[4];
        quant_detail::words(*reinterpret_cast<const uint4*>(b + 16 + 16 * (j % 2)), h);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                u.q[r][i] |= quant_detail::byte_bits(h[i], 2 * (j / 2) + r, 4);
            }
        }
        return u;
    }
};

template <>
struct SuperblockRuns<tensor::DType::Q6_K> {
    static constexpr int kBytes = 210;
    static constexpr bool kOffset = false;
    // Lane j: half h = j / 4 of the block, 16 bytes of ql at 64 h + 16 (j % 4): their low
    // nibbles are 32-group c = (j % 4) / 2 of the half, their high nibbles group c + 2, both at
    // elements 16 (j % 2) on; the top two bits of each come from qh's bytes at the same offset.
    __device__ static int start(int j, int r) {
        return 128 * (j / 4) + 32 * ((j % 4) / 2) + 64 * r + 16 * (j % 2);
    }
    __device__ static QuantRuns load(const std::uint8_t* b, int j) {
        const int h = j / 4, m = j % 4, c = m / 2, l = 16 * (m % 2);
        std::uint32_t ql[4], qh[4];
        quant_detail::load16_a2(b + 64 * h + 16 * m, ql);
        quant_detail::load16_a2(b + 128 + 32 * h + l, qh);
        QuantRuns u;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const std::uint32_t q0 = (ql[i] & quant_detail::kLowNibbles) |
                                     (((qh[i] >> (2 * c)) & 0x03030303u) << 4);
            const std::uint32_t q1 = ((ql[i] >> 4) & quant_detail::kLowNibbles) |
                                     (((qh[i] >> (2 * c + 4)) & 0x03030303u) << 4);
            // q - 32 in each byte, as BlockCodec<Q6_K> keeps it.
            u.q[0][i] = ((q0 | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
            u.q[1][i] = ((q1 | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
        }
        const float d = quant_detail::half_at(b + 208);
        const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192 + 8 * h + l / 16);
        u.scale[0] = __fmul_rn(d, static_cast<float>(scales[2 * c]));
        u.scale[1] = __fmul_rn(d, static_cast<float>(scales[2 * c + 4]));
        u.offset[0] = u.offset[1] = 0.0f;
        return u;
    }
};

// The sum of 16 int8 lanes held in four words.
__device__ __forceinline__ int sum_bytes16(const std::uint32_t (&x)[4]) {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) s = quant_detail::sum_bytes(x[i], s);
    return s;
}

// Run r of u against 16 int8 activations x whose quants sum to xsum (read only by types with
// an offset): scale * dot + offset * xsum, which the activations' scale multiplies.
template <class Runs>
__device__ __forceinline__ float run_dot(const QuantRuns& u, int r, const std::uint32_t (&x)[4],
                                         int xsum) {
    int dot = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        dot = __dp4a(static_cast<int>(u.q[r][i]), static_cast<int>(x[i]), dot);
    }
    if constexpr (Runs::kOffset) {
        return fmaf(u.scale[r], static_cast<float>(dot), u.offset[r] * static_cast<float>(xsum));
    }
    return u.scale[r] * static_cast<float>(dot);
}

// Calls f(SuperblockRuns<T>{}) for the K-quants with a fast path; false for other types.
template <class F>
bool with_superblock_runs(tensor::DType t, F&& f) {
    using tensor::DType;
    switch (t) {
        case DType::Q4_K: f(SuperblockRuns<DType::Q4_K>{}); return true;
        case DType::Q5_K: f(SuperblockRuns<DType::Q5_K>{}); return true;
        case DType::Q6_K: f(SuperblockRuns<DType::Q6_K>{}); return true;
        default: return false;
    }
}

}  // namespace inferscale::backends::cuda
