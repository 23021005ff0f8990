// Decode attention: one query row per sequence against its paged KV, split over the KV so
// that the GPU has enough blocks; the splits' partial softmax states (max, sum, unnormalized
// output) are merged exactly by a second kernel, or by the fast kernel's last split to finish.
//
// Decode rows at head dims 64 and 128 (every model config we ship) run the tensor-core kernels
// of attention_decode_tc.cu by default; two CUDA-core kernels take the rest (other head dims,
// small batches when DecodeAttentionOptions::tensor_core_min_pairs asks): the fast kernel and
// the split merge in attention_decode_fast.cu, and here:
// - decode_attention_kernel (generic): any head_dim up to kMaxDecodeHeadDim (the tiny test
//   models), groups up to kMaxDecodeGroup, and the all-rows fallback when the prefill kernel
//   has no instantiation for head_dim. Per KV tile of kTile tokens: warps score tokens against
//   every head of the group, one warp per head updates the online softmax, then each thread
//   accumulates fixed (head, dim) output pairs from the V tile in shared memory. It is also
//   the kernel of FP8 pages' decode rows where the tensor-core kernel has no instantiation or
//   a window applies: E4M3 widens exactly to bf16, the K scale folds into the query and the V
//   scale into the output.

#include <cmath>

#include "backends/cuda/attention_common.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;  // KV tokens per step: the softmax step maps one token per lane

__device__ __forceinline__ float kv_value(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float kv_value(std::uint8_t x) { return e4m3_to_f32(x); }

// KV: bf16 or std::uint8_t (E4M3, kv.fp8).
template <int kMaxD, class KV>
__global__ void __launch_bounds__(kThreads)
    decode_attention_kernel(const bf16* __restrict__ q, PagedKvView kv, AttentionBatch batch,
                            DecodeLaunch launch, bf16* __restrict__ out) {
    allow_next_launch();
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
    const SeqInfo s = load_seq(batch, seq, kv);  // metadata: before the inputs are ready
    wait_for_inputs();
    if (launch.per_sequence) {
        if (s.q_len != 1) return;  // prefill rows belong to the prefill kernel
        row = s.q_start;
    }
    const int visible = s.kv_len - s.q_len + (row - s.q_start) + 1;
    const int group = batch.num_heads / kv.kv_heads;
    const int head0 = kv_head * group;
    const int begin = split * launch.split_tokens;
    if (begin >= visible) return;  // past the sequence's end: the merge skips this split
    const bool single = launch.num_splits == 1 || visible <= launch.split_tokens;
    const int end = single ? visible : min(visible, begin + launch.split_tokens);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const HeadScales hs = head_scales(kv, kv_head);
    const float scale_log2 = batch.scale * kLog2e * hs.k;
    const float v_scale = hs.v;
    for (int idx = tid; idx < group * d; idx += kThreads) {
        const int g = idx / d, c = idx % d;
        const std::int64_t src =
            (static_cast<std::int64_t>(row) * batch.num_heads + head0 + g) * d + c;
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

    const KV* k_pages = static_cast<const KV*>(kv.k);
    const KV* v_pages = static_cast<const KV*>(kv.v);
    const PagedRows kv_rows(s, kv, kv_head);
    // Tokens before the window are skipped; a split wholly before it leaves an empty state.
    for (int t0 = max(begin, window_start(batch, visible - 1)); t0 < end; t0 += kTile) {
        const int count = min(kTile, end - t0);
        for (int idx = tid; idx < kTile * d; idx += kThreads) {
            const int j = idx / d, c = idx % d;
            // Exact for E4M3, whose values bf16 holds.
            v_s[idx] =
                __float2bfloat16_rn(j < count ? kv_value(v_pages[kv_rows(t0 + j) + c]) : 0.0f);
        }
        for (int j = warp; j < count; j += kWarps) {
            const KV* k_row = k_pages + kv_rows(t0 + j);
            float k_reg[kDimsPerLane];
#pragma unroll
            for (int i = 0; i < kDimsPerLane; ++i) {
                const int c = lane + 32 * i;
                k_reg[i] = c < d ? kv_value(k_row[c]) : 0.0f;
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

    if (single) {
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
            const int idx = tid + k * kThreads;
            if (idx < group * d) {
                const int g = idx / d, c = idx % d;
                const std::int64_t dst =
                    (static_cast<std::int64_t>(row) * batch.num_heads + head0 + g) * d + c;
                out[dst] = __float2bfloat16_rn(acc[k] * v_scale / sum_s[g]);
            }
        }
        return;
    }
    // Partial state of this split.
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
        const int idx = tid + k * kThreads;
        if (idx < group * d) {
            const int g = idx / d, c = idx % d;
            const std::int64_t slot =
                (static_cast<std::int64_t>(blockIdx.x) * batch.num_heads + head0 + g) *
                    launch.num_splits + split;
            launch.partial_o[slot * d + c] = acc[k] * v_scale;
            if (c == 0) {
                launch.partial_ml[slot * 2] = max_s[g];
                launch.partial_ml[slot * 2 + 1] = sum_s[g];
            }
        }
    }
}

template <int kMaxD>
void launch_typed(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                  const DecodeLaunch& launch, void* out, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(launch.grid_rows),
                    static_cast<unsigned>(pages.kv_heads),
                    static_cast<unsigned>(launch.num_splits));
    const auto* qs = static_cast<const bf16*>(q);
    auto* os = static_cast<bf16*>(out);
    if (pages.fp8) {
        launch_dependent(decode_attention_kernel<kMaxD, std::uint8_t>, grid, kThreads, 0, stream,
                         qs, pages, batch, launch, os);
    } else {
        launch_dependent(decode_attention_kernel<kMaxD, bf16>, grid, kThreads, 0, stream, qs, pages,
                         batch, launch, os);
    }
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
    IS_CHECK(pages.kv_heads <= 65535 && launch.num_splits <= kMaxDecodeSplits)
        << "decode grid: " << pages.kv_heads << " kv heads, " << launch.num_splits << " splits";
    const int group = batch.num_heads / pages.kv_heads;
    const int d = pages.head_dim;
    const bool tensor_cores =
        launch.per_sequence && launch.max_ctas > 0 && decode_tc_supports(d, group);
    const bool fast =
        !pages.fp8 && !tensor_cores && launch.per_sequence && decode_fast_supports(d, group);
    IS_CHECK(fast || (launch.split_arrivals == nullptr && launch.rope.positions == nullptr))
        << "only the fast decode kernel merges its own splits or rotates";
    if (tensor_cores) {
        launch_decode_tc_attention(q, pages, batch, launch, out, stream);
        return;
    }
    if (fast) {
        launch_decode_fast_attention(q, pages, batch, launch, out, stream);
        return;
    }
    if (pages.head_dim <= 64) {
        launch_typed<64>(q, pages, batch, launch, out, stream);
    } else if (pages.head_dim <= 128) {
        launch_typed<128>(q, pages, batch, launch, out, stream);
    } else {
        launch_typed<256>(q, pages, batch, launch, out, stream);
    }
}

}  // namespace inferscale::backends::cuda
