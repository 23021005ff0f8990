#pragma once
// The split-KV decode merge shared by the kernels that merge their own splits (the fast
// CUDA-core kernel and the tensor-core kernel's CTA items) and by the merge kernel: the last
// split of a (sequence, kv head) to finish counts itself in and folds every split's partial
// state into the output.

#include <cmath>

#include "backends/cuda/attention_common.cuh"

namespace inferscale::backends::cuda {

// Head `head` of sequence `seq` (decode row `row`): its `live` split partials merged into out
// by one warp, lanes over 4-dim groups. The partials are read through L2: a kernel's last
// split merges what other blocks of the same launch wrote. This is the tail of every
// split decode, so it is built for latency: lane i reads split i's (max, sum) (live <= 32),
// which makes the statistics one round trip, and a lane's output rows of kMergeBatch splits
// are in flight together. Splits are still folded in split order, one multiply-add each.
constexpr int kMergeBatch = 16;

__device__ __forceinline__ void merge_head_splits(const DecodeLaunch& launch, int num_heads,
                                                  int d, int seq, int head, int row, int live,
                                                  int lane, bf16* __restrict__ out) {
    constexpr unsigned kAll = 0xffffffffu;
    const std::int64_t first =
        (static_cast<std::int64_t>(seq) * num_heads + head) * launch.num_splits;
    const float* po = launch.partial_o + first * d;
    float m = -INFINITY, l = 0.0f;
    if (lane < live) {
        const float2 ml = __ldcg(reinterpret_cast<const float2*>(launch.partial_ml) + first + lane);
        m = ml.x;
        l = ml.y;
    }
    float global_max = -INFINITY;
    for (int i = 0; i < live; ++i) global_max = fmaxf(global_max, __shfl_sync(kAll, m, i));
    float total = 0.0f;
    for (int i = 0; i < live; ++i) {
        total += __shfl_sync(kAll, l, i) * exp2f(__shfl_sync(kAll, m, i) - global_max);
    }
    const float inv = 1.0f / total;  // split 0 holds KV token 0, so total > 0
    const float weight = exp2f(m - global_max);  // lane i: split i's
    bf16* dst = out + (static_cast<std::int64_t>(row) * num_heads + head) * d;
    for (int c0 = 0; c0 < d; c0 += 32 * 4) {
        const int c = c0 + lane * 4;
        const bool mine = c < d;  // every lane takes part in the shuffles
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int i0 = 0; i0 < live; i0 += kMergeBatch) {
            float4 v[kMergeBatch];
#pragma unroll
            for (int j = 0; j < kMergeBatch; ++j) {
                if (mine && i0 + j < live) {
                    v[j] = __ldcg(reinterpret_cast<const float4*>(
                        po + static_cast<std::int64_t>(i0 + j) * d + c));
                }
            }
#pragma unroll
            for (int j = 0; j < kMergeBatch; ++j) {
                if (i0 + j >= live) break;
                const float w = __shfl_sync(kAll, weight, i0 + j);
                acc.x += v[j].x * w;
                acc.y += v[j].y * w;
                acc.z += v[j].z * w;
                acc.w += v[j].w * w;
            }
        }
        if (!mine) continue;
        *reinterpret_cast<__nv_bfloat162*>(dst + c) =
            __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
        *reinterpret_cast<__nv_bfloat162*>(dst + c + 2) =
            __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
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
