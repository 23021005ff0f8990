// Decode attention: one block per (query row, kv head, KV split) on CUDA cores. Decode is
// bound by reading the KV pages once, so the block serves the whole GQA group of its kv head
// from each K/V load, and long contexts are cut into splits that run in parallel; a second
// kernel merges the splits' partial softmax states (max, sum, unnormalized output) exactly.
//
// Per KV tile of kTile tokens: warps score tokens against every query head of the group
// (lanes stride over head_dim, a shuffle reduction per head), one warp per head updates the
// online softmax, then each thread accumulates fixed (head, dim) output pairs from the V tile
// in shared memory. head_dim is a runtime value up to kMaxD, so odd sizes (the tiny test
// models) work too; this kernel is also the all-rows fallback when the prefill kernel has no
// instantiation for a head_dim.

#include <cmath>

#include "backends/cuda/attention_common.cuh"
#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;  // KV tokens per step: the softmax step maps one token per lane

template <int kMaxD>
__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(const bf16* __restrict__ q, PagedKvView kv, AttentionBatch batch,
                            DecodeLaunch launch, bf16* __restrict__ out) {
    constexpr int kPairs = kMaxDecodeGroup * kMaxD / kThreads;  // output pairs per thread
    constexpr int kDimsPerLane = kMaxD / 32;
    __shared__ float q_s[kMaxDecodeGroup * kMaxD];  // [group, d] f32, pre-scaled
    __shared__ bf16 v_s[kTile * kMaxD];             // [kTile, d]
    __shared__ float p_s[kMaxDecodeGroup * kTile];  // [group, kTile] scores, then weights
    __shared__ float max_s[kMaxDecodeGroup], sum_s[kMaxDecodeGroup], corr_s[kMaxDecodeGroup];

    const int d = kv.head_dim;
    const int kv_head = blockIdx.y, split = blockIdx.z;
    int seq, row;
    if (launch.per_sequence) {
        seq = blockIdx.x;
        row = 0;
    } else {
        row = blockIdx.x;
        seq = find_seq(batch.qo_indptr, batch.num_seqs, row);
    }
    const SeqInfo s = load_seq(batch, seq, kv);
    if (launch.per_sequence) {
        if (s.q_len != 1) return;  // prefill rows belong to the prefill kernel
        row = s.q_start;
    }
    const int visible = s.kv_len - s.q_len + (row - s.q_start) + 1;
    const int group = batch.num_heads / kv.kv_heads;
    const int head0 = kv_head * group;
    const int begin = split * launch.split_tokens;
    const int end = launch.num_splits == 1 ? visible : min(visible, begin + launch.split_tokens);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const float scale_log2 = batch.scale * kLog2e;
    for (int idx = tid; idx < group * d; idx += kThreads) {
        const int g = idx / d, c = idx % d;
        const std::int64_t src = (static_cast<std::int64_t>(row) * batch.num_heads + head0 + g) * d + c;
        q_s[idx] = __bfloat162float(q[src]) * scale_log2;
    }
    if (tid < group) {
        max_s[tid] = -INFINITY;
        sum_s[tid] = 0.0f;
    }
    float acc[kPairs];
#pragma unroll
    for (int k = 0; k < kPairs; ++k) acc[k] = 0.0f;
    __syncthreads();

    const bf16* k_pages = static_cast<const bf16*>(kv.k);
    const bf16* v_pages = static_cast<const bf16*>(kv.v);
    for (int t0 = begin; t0 < end; t0 += kTile) {
        const int count = min(kTile, end - t0);
        for (int idx = tid; idx < kTile * d; idx += kThreads) {
            const int j = idx / d, c = idx % d;
            v_s[idx] = j < count ? v_pages[kv_offset(s, t0 + j, kv, kv_head) + c]
                                 : __float2bfloat16_rn(0.0f);
        }
        for (int j = warp; j < count; j += kWarps) {
            const bf16* k_row = k_pages + kv_offset(s, t0 + j, kv, kv_head);
            float k_reg[kDimsPerLane];
#pragma unroll
            for (int i = 0; i < kDimsPerLane; ++i) {
                const int c = lane + 32 * i;
                k_reg[i] = c < d ? __bfloat162float(k_row[c]) : 0.0f;
            }
            for (int g = 0; g < group; ++g) {
                float part = 0.0f;
#pragma unroll
                for (int i = 0; i < kDimsPerLane; ++i) {
                    const int c = lane + 32 * i;
                    if (c < d) part += q_s[g * d + c] * k_reg[i];
                }
                part = warp_sum(part);
                if (lane == 0) p_s[g * kTile + j] = part;
            }
        }
        __syncthreads();

        for (int g = warp; g < group; g += kWarps) {
            const float x = lane < count ? p_s[g * kTile + lane] : -INFINITY;
            const float old_max = max_s[g];
            const float new_max = fmaxf(old_max, warp_max(x));  // finite: count >= 1
            const float p = lane < count ? exp2f(x - new_max) : 0.0f;
            const float sum = warp_sum(p);  // also orders every lane's read of max_s[g]
            p_s[g * kTile + lane] = p;
            if (lane == 0) {
                const float correction = exp2f(old_max - new_max);
                corr_s[g] = correction;
                sum_s[g] = sum_s[g] * correction + sum;
                max_s[g] = new_max;
            }
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
            const int idx = tid + k * kThreads;
            if (idx < group * d) {
                const int g = idx / d, c = idx % d;
                const float* w = p_s + g * kTile;
                float a = acc[k] * corr_s[g];
                for (int j = 0; j < count; ++j) a += w[j] * __bfloat162float(v_s[j * d + c]);
                acc[k] = a;
            }
        }
        __syncthreads();  // v_s and p_s are rewritten by the next tile
    }

    if (launch.num_splits == 1) {
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
            const int idx = tid + k * kThreads;
            if (idx < group * d) {
                const int g = idx / d, c = idx % d;
                const std::int64_t dst = (static_cast<std::int64_t>(row) * batch.num_heads + head0 + g) * d + c;
                out[dst] = __float2bfloat16_rn(acc[k] / sum_s[g]);
            }
        }
        return;
    }
    // Partial state of this split; an empty split (past the end of a shorter sequence) leaves
    // max -inf and sum 0, which the merge weighs as zero.
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
        const int idx = tid + k * kThreads;
        if (idx < group * d) {
            const int g = idx / d, c = idx % d;
            const std::int64_t slot =
                (static_cast<std::int64_t>(blockIdx.x) * batch.num_heads + head0 + g) *
                    launch.num_splits + split;
            launch.partial_o[slot * d + c] = acc[k];
            if (c == 0) {
                launch.partial_ml[slot * 2] = max_s[g];
                launch.partial_ml[slot * 2 + 1] = sum_s[g];
            }
        }
    }
}

__global__ void merge_splits_kernel(AttentionBatch batch, DecodeLaunch launch, int d,
                                    bf16* __restrict__ out) {
    const int seq = blockIdx.x, head = blockIdx.y;
    const int q_start = batch.qo_indptr[seq];
    if (batch.qo_indptr[seq + 1] - q_start != 1) return;
    const std::int64_t first =
        (static_cast<std::int64_t>(seq) * batch.num_heads + head) * launch.num_splits;
    const float* ml = launch.partial_ml + first * 2;
    float global_max = -INFINITY;
    for (int i = 0; i < launch.num_splits; ++i) global_max = fmaxf(global_max, ml[2 * i]);
    float total = 0.0f;
    for (int i = 0; i < launch.num_splits; ++i) {
        total += ml[2 * i + 1] * exp2f(ml[2 * i] - global_max);  // empty split: 0 * 0
    }
    const float inv = 1.0f / total;
    bf16* dst = out + (static_cast<std::int64_t>(q_start) * batch.num_heads + head) * d;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float o = 0.0f;
        for (int i = 0; i < launch.num_splits; ++i) {
            const float w = exp2f(ml[2 * i] - global_max);
            o += launch.partial_o[(first + i) * d + c] * w;
        }
        dst[c] = __float2bfloat16_rn(o * inv);
    }
}

template <int kMaxD>
void launch_typed(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                  const DecodeLaunch& launch, void* out, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(launch.grid_rows),
                    static_cast<unsigned>(pages.kv_heads),
                    static_cast<unsigned>(launch.num_splits));
    decode_attention_kernel<kMaxD><<<grid, kThreads, 0, stream>>>(
        static_cast<const bf16*>(q), pages, batch, launch, static_cast<bf16*>(out));
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace

int decode_tile_tokens() { return kTile; }

void launch_decode_attention(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                             const DecodeLaunch& launch, void* out, cudaStream_t stream) {
    if (launch.grid_rows <= 0) return;
    IS_CHECK(pages.head_dim <= kMaxDecodeHeadDim) << "decode head_dim " << pages.head_dim;
    IS_CHECK(batch.num_heads / pages.kv_heads <= kMaxDecodeGroup)
        << "decode gqa group " << batch.num_heads / pages.kv_heads;
    IS_CHECK(launch.per_sequence || launch.num_splits == 1) << "only decode rows split";
    IS_CHECK(launch.num_splits == 1 || (launch.partial_o != nullptr && launch.split_tokens > 0 &&
                                        launch.split_tokens % kTile == 0))
        << "split workspace";
    IS_CHECK(pages.kv_heads <= 65535 && launch.num_splits <= 65535) << "decode grid";
    if (pages.head_dim <= 64) {
        launch_typed<64>(q, pages, batch, launch, out, stream);
    } else if (pages.head_dim <= 128) {
        launch_typed<128>(q, pages, batch, launch, out, stream);
    } else {
        launch_typed<256>(q, pages, batch, launch, out, stream);
    }
}

void launch_merge_splits(const AttentionBatch& batch, const DecodeLaunch& launch, int head_dim,
                         void* out, cudaStream_t stream) {
    if (launch.num_splits <= 1 || launch.grid_rows <= 0) return;
    const dim3 grid(static_cast<unsigned>(launch.grid_rows),
                    static_cast<unsigned>(batch.num_heads));
    merge_splits_kernel<<<grid, 128, 0, stream>>>(batch, launch, head_dim,
                                                  static_cast<bf16*>(out));
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace inferscale::backends::cuda
