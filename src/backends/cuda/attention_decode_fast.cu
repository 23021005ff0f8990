// The fast decode attention kernel and the split merge (attention_decode.cu has the other
// CUDA-core decode kernel and picks the kernel for a launch).
// - decode_fast_kernel (head_dim 64/128/256, GQA group <= 8, per-sequence decode rows): built
//   for bandwidth. A block of 4 warps serves (sequence, kv head, split) for the whole GQA group
//   from one K/V read. Lanes split head_dim into 16-byte chunks (d/8 lanes per token row), so
//   each warp load instruction covers 32/(d/8) tokens and every lane has kSteps K and kSteps V
//   16-byte loads in flight before the first use (8 tokens per warp per iteration for groups
//   <= 4). q (pre-scaled by scale * log2 e) and the output accumulators live in registers in
//   f32; the online softmax rescales once per iteration. Token slots are merged by shuffles
//   and warps through shared memory once at the end. No shared memory in the main loop, no
//   block barrier until the end. Graph-safe: the grid is (num_seqs, kv_heads, num_splits)
//   from the host plan (or fixed_max_kv_len), splits past a sequence's end exit at once.
//   With DecodeLaunch::split_arrivals the splits of a (sequence, kv head) count themselves in
//   after writing their partials and the last one merges them (no merge launch); with
//   DecodeLaunch::rope each block rotates its q rows and the block holding the newest token
//   writes that token's K and V to the pages and hands them to its lanes through shared
//   memory (no rope_write_kv launch). The metadata, the rotary angles and the first
//   iteration's K/V rows (all but the newest token) are read before waiting for the kernel
//   before: they are in memory before the launch.
//
// Expected cost (Llama-3.1-8B layer: 32 q heads, 8 kv heads, d 128, bf16 pages, H200 with
// 132 SMs, 4.8 TB/s peak, ~4 TB/s reachable for a streaming read):
// - batch 1, 1K context: K+V = 1024 * 8 * 128 * 2 B * 2 = 4 MB, under 1 us of bandwidth. The
//   plan (paged_attention.cpp) cuts 16 splits of 64 tokens: 128 blocks, each warp 2 iterations
//   of 8 tokens, i.e. two dependent DRAM round trips (~1 us each with the page-id lookup) plus
//   setup, plus the merge kernel. Predicted ~6-10 us per call; measured 9.3 us per call in a
//   CUDA graph of 32 calls (was 220 us).
// - batch 64, 1K context: 268 MB of K+V, floor 64 us at 4.2 TB/s. 512 (seq, kv head) blocks of
//   128 threads at 128 registers, 4 resident per SM: 16 warps * 32 lanes * 8 loads * 16 B =
//   64 KB in flight per SM. Predicted 70-80 us; measured 100 us per call = 2.68 TB/s (was
//   1.05 ms). The gap is latency: each warp waits for its page ids, then its 8 tokens, then
//   computes; 16 tokens per warp iteration (more registers, 3 blocks per SM) measured slower.
//   A next step is software pipelining (issue iteration i+1's loads before computing i).
//   Issue work per token at group 4 is ~55 warp instructions (dots, V FMAs, shuffles,
//   converts, softmax), ~14 SM cycles at 4 issues per cycle, against ~28 cycles of DRAM time
//   per token per SM (512 B at ~18 B/cycle): memory-bound up to group 4, near balance at 8.

#include <cmath>

#include "backends/cuda/attention_common.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kFastWarps = 4;
constexpr int kFastThreads = kFastWarps * 32;

template <int kD, int kG>
struct FastShape {
    static constexpr int kLanes = kD / 8;          // lanes per token row (one uint4 each)
    static constexpr int kSlots = 32 / kLanes;     // token rows per warp load instruction
    static constexpr int kWarpTokens = kG <= 4 ? 8 : 4;  // tokens per warp per iteration
    static constexpr int kSteps = kWarpTokens >= kSlots ? kWarpTokens / kSlots : 1;
    static constexpr int kTokens = kSteps * kSlots;  // tokens per warp per iteration
};

// The cosines and sines this lane's 8 dims (16-byte chunk `part` of kLanes) turn by at `pos`.
template <int kLanes>
__device__ __forceinline__ void rope_angles8(int part, std::int32_t pos,
                                             const DecodeLaunch::Rope& r, float (&c)[8],
                                             float (&sn)[8]) {
    constexpr int kHalfLanes = kLanes / 2;
    constexpr int kHalf = kLanes * 4;  // head_dim / 2
    const std::int64_t col = static_cast<std::int64_t>(pos) * kHalf + (part % kHalfLanes) * 8;
    load8(r.cos + col, c);
    load8(r.sin + col, sn);
}

// This lane's 8 dims of a head row turned by those angles as rope_write_kv turns them, and
// rounded to bf16 as it stores them: dim i pairs with dim i + head_dim / 2, which lane
// part ^ kLanes / 2 of the same token slot holds. Every lane of the warp must take part
// (shuffles).
template <int kLanes>
__device__ __forceinline__ void rope_lane8(float (&x)[8], int part, const float (&c)[8],
                                           const float (&sn)[8]) {
    constexpr int kHalfLanes = kLanes / 2;
    const bool first = part < kHalfLanes;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const float other = __shfl_xor_sync(0xffffffffu, x[e], kHalfLanes);
        float r0, r1;
        rope_rotate(first ? x[e] : other, first ? other : x[e], c[e], sn[e], r0, r1);
        x[e] = rounded<bf16>(first ? r0 : r1);
    }
}

// Head `head` of sequence `seq` (decode row `row`): its `live` split partials merged into out
// by one warp, lanes over 4-dim groups. The partials are read through L2: the fast kernel's
// last split merges what other blocks of the same launch wrote. This is the tail of every
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

template <int kD, int kG>
__global__ void __launch_bounds__(kFastThreads)
    decode_fast_kernel(const bf16* __restrict__ q, PagedKvView kv, AttentionBatch batch,
                       DecodeLaunch launch, bf16* __restrict__ out) {
    allow_next_launch();
    using Shape = FastShape<kD, kG>;
    constexpr int kLanes = Shape::kLanes, kSteps = Shape::kSteps, kSlots = Shape::kSlots;
    __shared__ float o_s[kFastWarps][kG][kD];
    __shared__ float m_s[kFastWarps][kG], l_s[kFastWarps][kG];

    // The batch metadata and every KV token but each sequence's newest (which the launch before,
    // rope_write_kv, or this block writes) are in memory before this launch: they are read
    // before waiting for the inputs.
    const int seq = blockIdx.x, kv_head = blockIdx.y, split = blockIdx.z;
    const SeqInfo s = load_seq(batch, seq, kv);
    const int begin = split * launch.split_tokens;
    if (s.q_len != 1 || begin >= s.kv_len) {
        // Prefill rows belong to the prefill kernel; past the sequence's end the merge skips
        // this split.
        wait_for_inputs();
        return;
    }
    const int row = s.q_start;
    const int group = batch.num_heads / kv.kv_heads;
    const int head0 = kv_head * group;
    const bool single = launch.num_splits == 1 || s.kv_len <= launch.split_tokens;
    const int end = single ? s.kv_len : min(s.kv_len, begin + launch.split_tokens);
    const int newest = s.kv_len - 1;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int slot = lane / kLanes, part = lane % kLanes;  // token slot, 8-dim chunk
    const float scale_log2 = batch.scale * kLog2e;

    const int first = window_start(batch, newest);
    // The warp's K/V rows of one iteration: this lane's 16-byte chunks of tokens
    // t0 + u * kSlots + slot (off -1: past the split or before the window, zeros).
    const uint4* k_pages = static_cast<const uint4*>(kv.k);
    const uint4* v_pages = static_cast<const uint4*>(kv.v);
    const PagedRows kv_rows(s, kv, kv_head, 8);
    uint4 k_raw[kSteps], v_raw[kSteps];
    std::int64_t off[kSteps];
    const auto locate_rows = [&](int t0) {
#pragma unroll
        for (int u = 0; u < kSteps; ++u) {
            const int j = t0 + u * kSlots + slot;
            off[u] = j < end && j >= first ? kv_rows(j) + part : -1;
            k_raw[u] = v_raw[u] = make_uint4(0u, 0u, 0u, 0u);
        }
    };
    // Loads the rows located, the newest token's only (`newest_only`) or all but it.
    const auto load_rows = [&](int t0, bool newest_only) {
#pragma unroll
        for (int u = 0; u < kSteps; ++u) {
            if (off[u] >= 0 && (t0 + u * kSlots + slot == newest) == newest_only) {
                k_raw[u] = __ldg(k_pages + off[u]);
                v_raw[u] = __ldg(v_pages + off[u]);
            }
        }
    };
    const int first_t0 = begin + warp * Shape::kTokens;
    if (first_t0 < end) {
        locate_rows(first_t0);
        load_rows(first_t0, false);
    }

    const DecodeLaunch::Rope& rope = launch.rope;
    const bool rotate = rope.positions != nullptr;
    float cos8[8], sin8[8];
    if (rotate) {
        const std::int32_t pos = rope.positions[row];
        if (pos < 0 || pos >= rope.max_positions) __trap();  // beyond the tables: a bug
        rope_angles8<kLanes>(part, pos, rope, cos8, sin8);
    }
    wait_for_inputs();
    float qf[kG][8];
#pragma unroll
    for (int g = 0; g < kG; ++g) {
        uint4 raw = make_uint4(0u, 0u, 0u, 0u);
        if (g < group) {
            raw = __ldg(reinterpret_cast<const uint4*>(
                q + (static_cast<std::int64_t>(row) * batch.num_heads + head0 + g) * kD) + part);
        }
        unpack8(raw, qf[g]);
        if (rotate) rope_lane8<kLanes>(qf[g], part, cos8, sin8);
#pragma unroll
        for (int i = 0; i < 8; ++i) qf[g][i] *= scale_log2;
    }
    // This block holds the sequence's newest KV token: it writes it to the pages and hands it
    // to the lanes that attend to it through shared memory.
    __shared__ uint4 newest_k[kLanes], newest_v[kLanes];
    const std::int32_t kv_slot = rotate && end == s.kv_len ? rope.slots[row] : -1;
    const bool newest_here = kv_slot != -1;
    if (newest_here) {
        if (kv_slot < 0 || kv_slot >= kv.num_blocks * kv.block_size) __trap();  // a bug
        if (warp == 0) {
            const std::int64_t src =
                (static_cast<std::int64_t>(row) * kv.kv_heads + kv_head) * kD + part * 8;
            float kf[8];
            unpack8(__ldg(reinterpret_cast<const uint4*>(static_cast<const bf16*>(rope.k) + src)),
                    kf);
            rope_lane8<kLanes>(kf, part, cos8, sin8);
            const uint4 vn =
                __ldg(reinterpret_cast<const uint4*>(static_cast<const bf16*>(rope.v) + src));
            if (slot == 0) {
                const std::int64_t dst =
                    (static_cast<std::int64_t>(kv_slot) * kv.kv_heads + kv_head) * kD + part * 8;
                newest_k[part] = pack8(kf);
                newest_v[part] = vn;
                *reinterpret_cast<uint4*>(static_cast<bf16*>(kv.k) + dst) = newest_k[part];
                *reinterpret_cast<uint4*>(static_cast<bf16*>(kv.v) + dst) = vn;
            }
        }
        __syncthreads();
    }
    float m[kG], l[kG], o[kG][8];
#pragma unroll
    for (int g = 0; g < kG; ++g) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) o[g][i] = 0.0f;
    }

    for (int t0 = first_t0; t0 < end; t0 += kFastWarps * Shape::kTokens) {
        if (t0 != first_t0) {
            locate_rows(t0);
            load_rows(t0, false);
        }
        if (newest_here) {
#pragma unroll
            for (int u = 0; u < kSteps; ++u) {
                if (off[u] >= 0 && t0 + u * kSlots + slot == newest) {
                    k_raw[u] = newest_k[part];
                    v_raw[u] = newest_v[part];
                }
            }
        } else {
            load_rows(t0, true);
        }

        // Scores of this lane's tokens against every head, reduced over the token's lanes.
        float sc[kSteps][kG];
#pragma unroll
        for (int u = 0; u < kSteps; ++u) {
            float kf[8];
            unpack8(k_raw[u], kf);
#pragma unroll
            for (int g = 0; g < kG; ++g) {
                float acc = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; ++i) acc = fmaf(qf[g][i], kf[i], acc);
                sc[u][g] = acc;
            }
        }
#pragma unroll
        for (int offset = kLanes / 2; offset > 0; offset >>= 1) {
#pragma unroll
            for (int u = 0; u < kSteps; ++u) {
#pragma unroll
                for (int g = 0; g < kG; ++g) {
                    sc[u][g] += __shfl_xor_sync(0xffffffffu, sc[u][g], offset);
                }
            }
        }

        // Online softmax step over kSteps tokens: one rescale per iteration, not per token.
#pragma unroll
        for (int g = 0; g < kG; ++g) {
            float mx = m[g];
#pragma unroll
            for (int u = 0; u < kSteps; ++u) {
                if (off[u] >= 0) mx = fmaxf(mx, sc[u][g]);
            }
            const float base = mx == -INFINITY ? 0.0f : mx;  // all masked so far: weights 0
            const float corr = exp2f(m[g] - base);
            m[g] = mx;
            float sum = l[g] * corr;
#pragma unroll
            for (int i = 0; i < 8; ++i) o[g][i] *= corr;
#pragma unroll
            for (int u = 0; u < kSteps; ++u) {
                const float p = off[u] >= 0 ? exp2f(sc[u][g] - base) : 0.0f;
                sc[u][g] = p;
                sum += p;
            }
            l[g] = sum;
        }
#pragma unroll
        for (int u = 0; u < kSteps; ++u) {
            float vf[8];
            unpack8(v_raw[u], vf);
#pragma unroll
            for (int g = 0; g < kG; ++g) {
#pragma unroll
                for (int i = 0; i < 8; ++i) o[g][i] = fmaf(sc[u][g], vf[i], o[g][i]);
            }
        }
    }

    // Merge the token slots of the warp (lanes part, part + kLanes, ...).
#pragma unroll
    for (int offset = kLanes; offset < 32; offset <<= 1) {
#pragma unroll
        for (int g = 0; g < kG; ++g) {
            const float m_o = __shfl_xor_sync(0xffffffffu, m[g], offset);
            const float l_o = __shfl_xor_sync(0xffffffffu, l[g], offset);
            const float mx = fmaxf(m[g], m_o);
            const float base = mx == -INFINITY ? 0.0f : mx;
            const float c_self = exp2f(m[g] - base), c_other = exp2f(m_o - base);
            l[g] = l[g] * c_self + l_o * c_other;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float o_o = __shfl_xor_sync(0xffffffffu, o[g][i], offset);
                o[g][i] = o[g][i] * c_self + o_o * c_other;
            }
            m[g] = mx;
        }
    }
    if (slot == 0) {
#pragma unroll
        for (int g = 0; g < kG; ++g) {
#pragma unroll
            for (int i = 0; i < 8; ++i) o_s[warp][g][part * 8 + i] = o[g][i];
            if (part == 0) {
                m_s[warp][g] = m[g];
                l_s[warp][g] = l[g];
            }
        }
    }
    __syncthreads();

    // Merge the warps; write the output or this split's partial state.
    for (int idx = tid; idx < kG * kD; idx += kFastThreads) {
        const int g = idx / kD, c = idx % kD;
        if (g >= group) continue;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < kFastWarps; ++w) mx = fmaxf(mx, m_s[w][g]);
        const float base = mx == -INFINITY ? 0.0f : mx;
        float sum = 0.0f, acc = 0.0f;
#pragma unroll
        for (int w = 0; w < kFastWarps; ++w) {
            const float c_w = exp2f(m_s[w][g] - base);
            sum += l_s[w][g] * c_w;
            acc += o_s[w][g][c] * c_w;
        }
        if (single) {
            out[(static_cast<std::int64_t>(row) * batch.num_heads + head0 + g) * kD + c] =
                __float2bfloat16_rn(acc / sum);
        } else {
            const std::int64_t slot_idx =
                (static_cast<std::int64_t>(seq) * batch.num_heads + head0 + g) * launch.num_splits +
                split;
            launch.partial_o[slot_idx * kD + c] = acc;
            if (c == 0) {
                launch.partial_ml[slot_idx * 2] = mx;
                launch.partial_ml[slot_idx * 2 + 1] = sum;
            }
        }
    }
    if (single || launch.split_arrivals == nullptr) return;

    // The last split of (sequence, kv head) to finish merges them all.
    __shared__ bool last_in;
    __threadfence();  // this block's partials are visible device-wide before it counts itself
    __syncthreads();
    if (tid == 0) last_in = count_split_in(launch, kv.kv_heads, seq, kv_head, s.kv_len);
    __syncthreads();
    if (!last_in) return;
    __threadfence();
    const int live = live_splits(launch, s.kv_len);
    for (int g = warp; g < group; g += kFastWarps) {
        merge_head_splits(launch, batch.num_heads, kD, seq, head0 + g, row, live, lane, out);
    }
}

// One warp per (sequence, head), lanes over 4-dim groups. Only the splits that hold some of
// the sequence's KV were written; a sequence with one such split has its output already.
constexpr int kMergeWarps = 4;

__global__ void __launch_bounds__(kMergeWarps * 32)
    merge_splits_kernel(PagedKvView kv, AttentionBatch batch, DecodeLaunch launch,
                        bf16* __restrict__ out) {
    allow_next_launch();
    const int seq = blockIdx.x;
    const int head = blockIdx.y * kMergeWarps + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    const SeqInfo s = load_seq(batch, seq, kv);  // metadata: before the partials are ready
    wait_for_inputs();
    if (head >= batch.num_heads || s.q_len != 1) return;
    const int live = live_splits(launch, s.kv_len);
    if (live <= 1) return;
    merge_head_splits(launch, batch.num_heads, kv.head_dim, seq, head, s.q_start, live, lane, out);
}

template <int kD, int kG>
void launch_fast(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                 const DecodeLaunch& launch, void* out, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(launch.grid_rows),
                    static_cast<unsigned>(pages.kv_heads),
                    static_cast<unsigned>(launch.num_splits));
    launch_dependent(decode_fast_kernel<kD, kG>, grid, kFastThreads, 0, stream,
                     static_cast<const bf16*>(q), pages, batch, launch, static_cast<bf16*>(out));
}

// The group rounds up to an instantiated size; the extra heads are computed on zeros and
// never stored.
template <int kD>
void launch_fast_for_group(int group, const void* q, const PagedKvView& pages,
                           const AttentionBatch& batch, const DecodeLaunch& launch, void* out,
                           cudaStream_t stream) {
    if (group <= 1) {
        launch_fast<kD, 1>(q, pages, batch, launch, out, stream);
    } else if (group <= 2) {
        launch_fast<kD, 2>(q, pages, batch, launch, out, stream);
    } else if (group <= 4) {
        launch_fast<kD, 4>(q, pages, batch, launch, out, stream);
    } else {
        launch_fast<kD, 8>(q, pages, batch, launch, out, stream);
    }
}

}  // namespace

bool decode_fast_supports(int head_dim, int group) {
    return group <= 8 && (head_dim == 64 || head_dim == 128 || head_dim == 256);
}

void launch_decode_fast_attention(const void* q, const PagedKvView& pages,
                                  const AttentionBatch& batch, const DecodeLaunch& launch,
                                  void* out, cudaStream_t stream) {
    const int group = batch.num_heads / pages.kv_heads;
    if (pages.head_dim == 64) {
        launch_fast_for_group<64>(group, q, pages, batch, launch, out, stream);
    } else if (pages.head_dim == 128) {
        launch_fast_for_group<128>(group, q, pages, batch, launch, out, stream);
    } else {
        launch_fast_for_group<256>(group, q, pages, batch, launch, out, stream);
    }
}

void launch_merge_splits(const PagedKvView& pages, const AttentionBatch& batch,
                         const DecodeLaunch& launch, void* out, cudaStream_t stream) {
    if (launch.num_splits <= 1 || launch.grid_rows <= 0 || launch.split_arrivals != nullptr) return;
    IS_CHECK(pages.head_dim % 4 == 0 && launch.split_tokens > 0) << "decode merge";
    const dim3 grid(static_cast<unsigned>(launch.grid_rows),
                    static_cast<unsigned>((batch.num_heads + kMergeWarps - 1) / kMergeWarps));
    launch_dependent(merge_splits_kernel, grid, kMergeWarps * 32, 0, stream, pages, batch, launch,
                     static_cast<bf16*>(out));
}

}  // namespace inferscale::backends::cuda
