#pragma once
// Merging a decode row's split-KV partial softmax states (max, sum, unnormalized output) into
// its output, shared by the merge kernel and by the decode kernels whose last split to finish
// merges (DecodeLaunch::split_arrivals). Splits are folded in split order, so every merger gives
// the same bits. Partials are read through L2 (__ldcg): a merging split reads what other
// blocks of the same launch wrote.

#include <cmath>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_utils.cuh"

namespace inferscale::backends::cuda {

// Dims c .. c + 3 of head `head` of sequence `seq` (decode row `row`): its `live` split
// partials merged into out.
__device__ __forceinline__ void merge_head_dims(const DecodeLaunch& launch, int num_heads, int d,
                                                int seq, int head, int c, int row, int live,
                                                bf16* __restrict__ out) {
    const std::int64_t first =
        (static_cast<std::int64_t>(seq) * num_heads + head) * launch.num_splits;
    const float* ml = launch.partial_ml + first * 2;
    const float* po = launch.partial_o + first * d;
    float global_max = -INFINITY;
    for (int i = 0; i < live; ++i) global_max = fmaxf(global_max, __ldcg(ml + 2 * i));
    float total = 0.0f;
    for (int i = 0; i < live; ++i) {
        total += __ldcg(ml + 2 * i + 1) * exp2f(__ldcg(ml + 2 * i) - global_max);
    }
    const float inv = 1.0f / total;  // split 0 holds KV token 0, so total > 0
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int i = 0; i < live; ++i) {
        const float w = exp2f(__ldcg(ml + 2 * i) - global_max);
        const float4 v =
            __ldcg(reinterpret_cast<const float4*>(po + static_cast<std::int64_t>(i) * d + c));
        acc.x += v.x * w;
        acc.y += v.y * w;
        acc.z += v.z * w;
        acc.w += v.w * w;
    }
    bf16* dst = out + (static_cast<std::int64_t>(row) * num_heads + head) * d + c;
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    *reinterpret_cast<__nv_bfloat162*>(dst + 2) = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
}

// One head merged by one warp, lanes over 4-dim groups.
__device__ __forceinline__ void merge_head_splits(const DecodeLaunch& launch, int num_heads,
                                                  int d, int seq, int head, int row, int live,
                                                  int lane, bf16* __restrict__ out) {
    for (int c = lane * 4; c < d; c += 32 * 4) {
        merge_head_dims(launch, num_heads, d, seq, head, c, row, live, out);
    }
}

// The `group` heads from head0 merged by one warp, lanes over every head's 4-dim groups at once
// (their loads in flight together rather than head after head).
__device__ __forceinline__ void merge_group_splits(const DecodeLaunch& launch, int num_heads,
                                                   int d, int seq, int head0, int group, int row,
                                                   int live, int lane, bf16* __restrict__ out) {
    const int quads = d / 4;
#pragma unroll 4
    for (int s = lane; s < group * quads; s += 32) {
        merge_head_dims(launch, num_heads, d, seq, head0 + s / quads, s % quads * 4, row, live,
                        out);
    }
}

// Splits of a sequence's KV that hold some of it (the others exit at once).
__device__ __forceinline__ int live_splits(const DecodeLaunch& launch, int kv_len) {
    return min(launch.num_splits, (kv_len + launch.split_tokens - 1) / launch.split_tokens);
}

// Counts a finished split of (sequence, kv head) in (DecodeLaunch::split_arrivals); call once
// its partials are visible device-wide. True for the last split in, which also zeroes the count
// for the next launch and then merges.
__device__ __forceinline__ bool count_split_in(const DecodeLaunch& launch, int kv_heads, int seq,
                                               int kv_head, int kv_len) {
    int* count = launch.split_arrivals + static_cast<std::int64_t>(seq) * kv_heads + kv_head;
    const bool last = atomicAdd(count, 1) == live_splits(launch, kv_len) - 1;
    if (last) *count = 0;
    return last;
}

}  // namespace inferscale::backends::cuda
