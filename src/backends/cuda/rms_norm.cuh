#pragma once
// The RMSNorm arithmetic of the norm kernel (norm.cu) and of the GEMV's fused input norm
// (linear_gemv.cu), shared so that both give the same bits. A block holds a row as 8-element
// groups, group g = threadIdx.x + k * blockDim.x for k < kPer, blockDim.x a multiple of 32.
// The sum of squares adds each group's 8 squares in order, sums runs of 32 consecutive groups
// with a warp butterfly, and adds the runs' sums in row order: a function of the row alone,
// whatever the block size and kPer (runs past the row's end add zeros).

#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {

__device__ __forceinline__ float group_square_sum(const float (&v)[8]) {
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) s = fmaf(v[e], v[e], s);
    return s;
}

// The row's sum of squares from each thread's group sums (0 for groups past the row's end);
// every thread gets it. scratch: kPer * blockDim.x / 32 floats, free before the call.
template <int kPer>
__device__ __forceinline__ float row_square_sum(const float (&group_sums)[kPer], float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = static_cast<int>(blockDim.x >> 5);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
        const float run = warp_sum(group_sums[k]);
        if (lane == 0) scratch[k * warps + warp] = run;
    }
    __syncthreads();
    float total = 0.0f;
    for (int r = 0; r < kPer * warps; ++r) total += scratch[r];
    return total;
}

// 1 / rms of a row of `hidden` elements with sum of squares `sum`.
__device__ __forceinline__ float rms_inverse(float sum, int hidden, float eps) {
    return 1.0f / sqrtf(sum / static_cast<float>(hidden) + eps);
}

// weight * (v * inv), the normalized elements of one group before rounding.
__device__ __forceinline__ void rms_scale(const float (&v)[8], const float (&w)[8], float inv,
                                          float (&out)[8]) {
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = w[e] * (v[e] * inv);
}

}  // namespace inferscale::backends::cuda
