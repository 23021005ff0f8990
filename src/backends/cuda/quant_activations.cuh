#pragma once
// Activations as the quantized GEMVs take them (llama.cpp's Q8_1 rounding without its sums):
// 32 values to int8 quants round(x * 127 / amax), half to even, and the scale amax / 127.

#include <cstdint>

#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {

// x[0..31] (16-byte aligned, global or shared) into q[0..31] (16-byte aligned); returns the
// scale.
__device__ __forceinline__ float quantize_group32(const bf16* x, std::int8_t* q) {
    float v[32];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float part[8];
        load8(x + 8 * i, part);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[8 * i + j] = part[j];
    }
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(v[j]));
    const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
    std::uint32_t words[8];
#pragma unroll
    for (int w = 0; w < 8; ++w) {
        std::uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int quant = __float2int_rn(v[4 * w + j] * inverse);
            word |= (static_cast<std::uint32_t>(quant) & 0xffu) << (8 * j);
        }
        words[w] = word;
    }
    auto* out = reinterpret_cast<uint4*>(q);
    out[0] = make_uint4(words[0], words[1], words[2], words[3]);
    out[1] = make_uint4(words[4], words[5], words[6], words[7]);
    return amax / 127.0f;
}

}  // namespace inferscale::backends::cuda
