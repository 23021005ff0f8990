#pragma once
// Device helpers shared by the kernels: scalar conversions to and from f32, warp and block
// reductions, and launch sizing. Kernels compute in f32 whatever the storage dtype.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/check.h"
#include "tensor/dtype.h"

namespace inferscale::backends::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float x) { return __float2bfloat16_rn(x); }

// FP8 E4M3 bytes (OCP, PyTorch's float8_e4m3fn): exact widening, and saturating
// round-to-nearest-even narrowing, tensor::f32_to_e4m3's rounding.
__device__ __forceinline__ float e4m3_to_f32(std::uint8_t b) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3)));
}
__device__ __forceinline__ std::uint8_t f32_to_e4m3(float x) {
    return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

// v rounded to T, as storing it and reading it back would.
template <class T>
__device__ __forceinline__ float rounded(float v) {
    return to_f32(from_f32<T>(v));
}

// RoPE's rotate_half pair (x0: dim i, x1: dim i + d/2) turned by the angle of cosine c and
// sine s. The products are rounded before the sum (no fused multiply-add, which the compiler
// would otherwise choose per call site), so every kernel that rotates (rope, rope_write_kv, the
// fused decode attention, injection) gets the same bits.
__device__ __forceinline__ void rope_rotate(float x0, float x1, float c, float s, float& r0,
                                            float& r1) {
    r0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    r1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

// silu(g) * u, SwiGLU's product. expf rather than __expf: the silu of large negative gates must
// still go to 0 cleanly.
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// gelu(g) * u with gelu's tanh approximation, GeGLU's product (the CPU backend's formula).
__device__ __forceinline__ float gelu_tanh_mul(float g, float u) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * g * (1.0f + 0.044715f * g * g))) * u;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Sum over the whole block; every thread gets the result. `scratch` holds one float per warp
// (32 is enough for any block) and may be reused after the call returns.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int num_warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < num_warps; ++w) total += scratch[w];
    return total;
}

// A grid of ceil(count / threads) blocks, capped so that the x dimension stays legal; kernels
// that use it loop with a grid stride.
inline unsigned grid_for(std::int64_t count, int threads) {
    std::int64_t blocks = (count + threads - 1) / threads;
    if (blocks < 1) blocks = 1;
    constexpr std::int64_t kMaxBlocks = 1 << 20;
    return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// The shared-state-space address of a pointer into shared memory, as the PTX copy, barrier and
// matrix instructions take it.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes that a launch reads once (weights): not kept in L1, so what is reused stays there.
__device__ __forceinline__ uint4 load_once16(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// 8 bf16 held in 16 bytes as f32 (a bf16 is the upper half of its f32).
__device__ __forceinline__ void unpack8(uint4 u, float (&f)[8]) {
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

// 8 consecutive elements as f32 through 16-byte accesses (one for bf16, two for f32); the
// pointer must be 16-byte aligned.
__device__ __forceinline__ void load8(const bf16* p, float (&f)[8]) {
    unpack8(*reinterpret_cast<const uint4*>(p), f);
}
__device__ __forceinline__ void load8(const float* p, float (&f)[8]) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    const float4 b = *reinterpret_cast<const float4*>(p + 4);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
    f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
// 8 f32 rounded to bf16 and packed into 16 bytes (unpack8's inverse).
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
    uint4 u;
    auto* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    return u;
}
__device__ __forceinline__ void store8(bf16* p, const float (&f)[8]) {
    *reinterpret_cast<uint4*>(p) = pack8(f);
}
__device__ __forceinline__ void store8(float* p, const float (&f)[8]) {
    *reinterpret_cast<float4*>(p) = make_float4(f[0], f[1], f[2], f[3]);
    *reinterpret_cast<float4*>(p + 4) = make_float4(f[4], f[5], f[6], f[7]);
}

}  // namespace inferscale::backends::cuda
