// Decode attention on tensor cores, built to stream K/V at full bandwidth (head_dim 64/128,
// GQA groups up to 16, one query row per sequence). The tile machinery is attention_tc.cuh:
// every warp streams 16-token K/V tiles of one kv head through its own 3-stage cp.async ring,
// and one K/V read serves the whole GQA group through mma.m16n8k16.
//
// Work items are (KV split, sequence, kv head), ordered split-major; a persistent grid of as
// many CTAs as fit on the GPU walks them, so items past a sequence's end (a replayed graph
// sized for a longer bound) cost a metadata read instead of a CTA launch. Two schedules:
// - decode_tc_warp_kernel (default): each warp owns whole items, taken from a global counter
//   (zeroed before the launch) shortly before need. A warp's ring runs on from one item's last
//   tile into the next item's first, so a warp never drains its copies between items, never
//   waits for the other warps, and writes its result from registers: the output when the
//   sequence's KV fits in one split, else (unnormalized output, max, sum) for the merge kernel.
//   Its page ids come from a tc::PageWindow read a window ahead, so issuing a tile's copies
//   never waits on a page-table load.
// - decode_tc_kernel: the 4 warps of a CTA share an item (tiles dealt in turn) and merge their
//   states through shared memory at its end; items are dealt round-robin.
//
// Expected cost (Llama-3.1-8B layer, H200, b=256 at 1K context): K+V = 1.07 GB per layer,
// ~240 us at 4.5 TB/s. Per 16-token warp tile: 32 mma, 16 ldmatrix, 16 cp.async per lane and
// ~120 other instructions, ~10x less issue time than the tile's DRAM time, so the kernel is
// bound by bytes in flight: 2 CTAs x 4 warps x 2-3 tiles x 8 KB = 128-192 KB per SM, about
// three times what Little's law asks at ~2 us loaded latency.
//
// FP8 (E4M3) pages: the ring's copies carry the raw bytes (half a bf16 tile's) and each landed
// stage is widened in place to bf16 tiles before the products (tc::widen_fp8_stage); the kv
// head's K scale folds into the score scale and its V scale into the output.

#include <algorithm>
#include <cmath>

#include "backends/cuda/attention_tc.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
using tc::kStages;
using tc::kTileTokens;

template <int kD>
struct TcShape {
    static constexpr int kWarpBytes = tc::Shape<kD>::kRingBytes;
    static constexpr int kSmemBytes = kWarps * kWarpBytes;
    static constexpr int kOLd = kD + 8;  // f32 row stride of a warp's merged output rows
    static_assert(16 * kOLd * 4 <= kWarpBytes, "a warp's output rows fit in its stage ring");
};

// Where an item's result goes: the output row when the sequence's KV fits in one split (the
// merge skips it), else the split's partial slot.
__device__ __forceinline__ bool single_split(const DecodeLaunch& launch, int kv_len) {
    return launch.num_splits == 1 || kv_len <= launch.split_tokens;
}
__device__ __forceinline__ int split_end(const DecodeLaunch& launch, int kv_len, int split) {
    return single_split(launch, kv_len) ? kv_len
                                        : min(kv_len, (split + 1) * launch.split_tokens);
}

// kBig: the group has more than 8 heads, so the accumulator rows 8-15 are live.
template <int kD, bool kBig>
__global__ void __launch_bounds__(kThreads, 2)
    decode_tc_warp_kernel(const bf16* __restrict__ q, PagedKvView kv, AttentionBatch batch,
                          DecodeLaunch launch, bf16* __restrict__ out) {
    allow_next_launch();
    wait_for_inputs();
    using S = tc::Shape<kD>;
    extern __shared__ __align__(128) unsigned char smem[];
    // Items this warp has issued copies for but not finished: seq, kv head, split, q row,
    // kv_len (at most kStages: every item has a tile and the ring is kStages - 1 ahead).
    __shared__ int queue_s[kWarps][kStages][5];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const tc::Lane<kD> ln(lane);
    const tc::StageOffsets<kD> so(ln);
    const unsigned ring = smem_addr(smem + warp * S::kRingBytes);
    const int group = batch.num_heads / kv.kv_heads;
    const float scale_log2 = batch.scale * kLog2e;
    const int items = launch.num_splits * launch.grid_rows * kv.kv_heads;
    int* const counter = launch.item_counter;

    // Issue side: the item whose tiles are being copied, and lane 0's claim on the next. A warp
    // claims its next item while the current one still has kClaimAheadTiles tiles to issue:
    // late enough that a warp never holds an item another warp could start (with about as
    // many items as warps, claiming a whole item ahead left half the warps without one),
    // early enough that the atomic's latency hides behind those tiles.
    constexpr int kClaimAheadTiles = 2;
    int grab = 0;
    bool claimed = false;
    const auto claim = [&]() {
        if (lane == 0) grab = atomicAdd(counter, 1);
        claimed = true;
    };
    SeqInfo is;
    int i_head = 0, i_t0 = 0, i_end = 0, i_slot = 0, issued = 0;
    const auto claim_if_near_end = [&]() {
        if (!claimed && i_end - i_t0 <= kClaimAheadTiles * kTileTokens) claim();
    };
    bool i_done = false;
    const int bs = kv.block_size;
    const bool tiles_in_pages = bs % kTileTokens == 0;
    tc::PageWindow window;
    const auto next_issue_item = [&]() {
        for (;;) {
            if (!claimed) claim();
            const int index = __shfl_sync(0xffffffffu, grab, 0);
            claimed = false;
            if (index >= items) {
                i_done = true;
                // Every warp ends with one claim past the items; the last to get there has
                // no claims after it and zeroes the counters for the next launch.
                const int warps = static_cast<int>(gridDim.x) * kWarps;
                if (lane == 0 && atomicAdd(counter + 1, 1) == warps - 1) {
                    counter[0] = 0;
                    counter[1] = 0;
                }
                return;
            }
            const int kv_head = index % kv.kv_heads;
            const int rest = index / kv.kv_heads;
            const int seq = rest % launch.grid_rows, split = rest / launch.grid_rows;
            const SeqInfo s = load_seq(batch, seq, kv);
            const int begin = split * launch.split_tokens;
            if (s.q_len != 1 || begin >= s.kv_len) continue;  // prefill row, or past the end
            is = s;
            i_head = kv_head;
            i_t0 = begin;
            i_end = split_end(launch, s.kv_len, split);
            if (tiles_in_pages) window.start(s, bs, begin / bs, lane);
            if (lane == 0) {
                int* e = queue_s[warp][i_slot];
                e[0] = seq;
                e[1] = kv_head;
                e[2] = split;
                e[3] = s.q_start;
                e[4] = s.kv_len;
            }
            if (++i_slot == kStages) i_slot = 0;
            claim_if_near_end();  // a short item
            return;
        }
    };
    const auto issue_next = [&](int stage) {
        if (!i_done) {
            const unsigned addr = ring + stage * S::kStageBytes;
            if (tiles_in_pages) {
                tc::issue_page_tile<kD>(addr, kv, i_head, window.at(i_t0 / bs, lane), i_t0 % bs,
                                        i_end - i_t0, ln, so);
            } else {
                tc::issue_tile<kD>(addr, is, kv, i_head, i_t0, i_end, ln, so);
            }
            ++issued;
            i_t0 += kTileTokens;
            if (i_t0 >= i_end) {
                next_issue_item();
            } else {
                claim_if_near_end();
            }
        }
        tc::cp_async_commit();
    };

    // Compute side: the item whose tiles are being folded in.
    tc::State<kD> st;
    unsigned qa[S::kKSteps][4];
    int c_seq = 0, c_head = 0, c_split = 0, c_row = 0, c_kv_len = 0, c_t0 = 0, c_end = 0;
    int c_slot = 0;
    float c_scale_log2 = scale_log2, c_v_scale = 1.0f;  // the kv head's scales folded in
    const auto start_compute_item = [&]() {
        __syncwarp();  // lane 0's queue entry is visible to the warp
        const int* e = queue_s[warp][c_slot];
        c_seq = e[0];
        c_head = e[1];
        c_split = e[2];
        c_row = e[3];
        c_kv_len = e[4];
        if (++c_slot == kStages) c_slot = 0;
        c_t0 = c_split * launch.split_tokens;
        c_end = split_end(launch, c_kv_len, c_split);
        tc::load_q<kD, kBig>(q, c_row, batch.num_heads, c_head * group, group, ln, qa);
        const HeadScales hs = head_scales(kv, c_head);
        c_scale_log2 = scale_log2 * hs.k;
        c_v_scale = hs.v;
        st.reset();
    };
    const auto finish_item = [&]() {
        st.reduce_sums();
        const int head0 = c_head * group;
        const bool single = single_split(launch, c_kv_len);
#pragma unroll
        for (int r = 0; r < (kBig ? 2 : 1); ++r) {
            const int h = ln.g + 8 * r;
            if (h >= group) continue;
            if (single) {
                const float inv = c_v_scale / st.l[r];  // the split holds token 0: l > 0
                bf16* dst = out + (static_cast<std::int64_t>(c_row) * batch.num_heads + head0 + h) *
                                      kD + 2 * ln.t;
#pragma unroll
                for (int n = 0; n < S::kNTiles; ++n) {
                    *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) = __floats2bfloat162_rn(
                        st.o[n][2 * r] * inv, st.o[n][2 * r + 1] * inv);
                }
            } else {
                const std::int64_t slot =
                    (static_cast<std::int64_t>(c_seq) * batch.num_heads + head0 + h) *
                        launch.num_splits + c_split;
                float* dst = launch.partial_o + slot * kD + 2 * ln.t;
#pragma unroll
                for (int n = 0; n < S::kNTiles; ++n) {
                    *reinterpret_cast<float2*>(dst + n * 8) =
                        make_float2(st.o[n][2 * r] * c_v_scale, st.o[n][2 * r + 1] * c_v_scale);
                }
                if (ln.t == 0) {
                    launch.partial_ml[slot * 2] = st.scaled_max(r, c_scale_log2);
                    launch.partial_ml[slot * 2 + 1] = st.l[r];
                }
            }
        }
    };

    next_issue_item();
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) issue_next(i);
    if (issued > 0) start_compute_item();
    int stage = 0, computed = 0;
    while (computed < issued) {
        issue_next(stage == 0 ? kStages - 1 : stage - 1);  // the stage freed last iteration
        tc::cp_async_wait<kStages - 1>();  // this tile has landed (for this lane)
        __syncwarp();                      // ... and for every lane of the warp
        if (kv.fp8) tc::widen_fp8_stage<kD>(ring + stage * S::kStageBytes, lane);
        tc::attend_tile<kD, kBig>(ring + stage * S::kStageBytes, so, qa, c_end - c_t0, c_scale_log2,
                                  ln, st);
        __syncwarp();  // every lane is done with this stage before it is refilled
        if (++stage == kStages) stage = 0;
        ++computed;
        c_t0 += kTileTokens;
        if (c_t0 >= c_end) {
            finish_item();
            if (computed < issued) start_compute_item();
        }
    }
    tc::cp_async_wait<0>();
}

template <int kD, bool kBig>
__global__ void __launch_bounds__(kThreads, 2)
    decode_tc_kernel(const bf16* __restrict__ q, PagedKvView kv, AttentionBatch batch,
                     DecodeLaunch launch, bf16* __restrict__ out) {
    allow_next_launch();
    // The first item's metadata and its KV tiles before the newest token are step inputs no
    // kernel of this step writes (dependent_launch.cuh): they are read, and those tiles'
    // copies requested, before the kernels ahead have finished; the rest waits for them.
    bool inputs_ready = false;
    const auto wait_once = [&] {
        if (!inputs_ready) wait_for_inputs();
        inputs_ready = true;
    };
    using S = tc::Shape<kD>;
    using Shape = TcShape<kD>;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ float m_s[kWarps][16], l_s[kWarps][16];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const tc::Lane<kD> ln(lane);
    const tc::StageOffsets<kD> so(ln);
    unsigned char* ring = smem + warp * Shape::kWarpBytes;
    const unsigned ring_addr = smem_addr(ring);
    const int group = batch.num_heads / kv.kv_heads;
    const float scale_log2 = batch.scale * kLog2e;
    const std::int64_t items =
        static_cast<std::int64_t>(launch.num_splits) * launch.grid_rows * kv.kv_heads;

    for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int kv_head = static_cast<int>(item % kv.kv_heads);
        const std::int64_t rest = item / kv.kv_heads;
        const int seq = static_cast<int>(rest % launch.grid_rows);
        const int split = static_cast<int>(rest / launch.grid_rows);
        const SeqInfo s = load_seq(batch, seq, kv);
        if (s.q_len != 1) continue;  // prefill rows belong to the prefill kernel
        const int begin = split * launch.split_tokens;
        if (begin >= s.kv_len) continue;  // past this sequence's end: the merge skips it
        const bool single = single_split(launch, s.kv_len);
        const int end = split_end(launch, s.kv_len, split);
        const int head0 = kv_head * group;
        const HeadScales hs = head_scales(kv, kv_head);
        const float item_scale_log2 = scale_log2 * hs.k;
        const float v_scale = hs.v;

        // This warp's tiles: w, w + 4, ... of the item.
        const int num_tiles = (end - begin + kTileTokens - 1) / kTileTokens;
        const int my_tiles = num_tiles > warp ? (num_tiles - warp + kWarps - 1) / kWarps : 0;
        const auto tile_t0 = [&](int i) { return begin + (warp + i * kWarps) * kTileTokens; };
#pragma unroll
        for (int i = 0; i < kStages - 1; ++i) {
            if (i < my_tiles) {
                if (tile_t0(i) + kTileTokens >= s.kv_len) wait_once();  // holds the newest
                tc::issue_tile<kD>(ring_addr + i * S::kStageBytes, s, kv, kv_head, tile_t0(i),
                                   end, ln, so);
            }
            tc::cp_async_commit();
        }
        wait_once();
        unsigned qa[S::kKSteps][4];
        tc::load_q<kD, kBig>(q, s.q_start, batch.num_heads, head0, group, ln, qa);
        tc::State<kD> st;
        st.reset();
        int stage = 0;
        for (int i = 0; i < my_tiles; ++i) {
            const int ahead = i + kStages - 1;
            if (ahead < my_tiles) {
                const int ahead_stage = stage == 0 ? kStages - 1 : stage - 1;
                tc::issue_tile<kD>(ring_addr + ahead_stage * S::kStageBytes, s, kv, kv_head,
                                   tile_t0(ahead), end, ln, so);
            }
            tc::cp_async_commit();
            tc::cp_async_wait<kStages - 1>();  // tile i has landed (for this lane)
            __syncwarp();                      // ... and for every lane of the warp
            if (kv.fp8) tc::widen_fp8_stage<kD>(ring_addr + stage * S::kStageBytes, lane);
            tc::attend_tile<kD, kBig>(ring_addr + stage * S::kStageBytes, so, qa, end - tile_t0(i),
                                      item_scale_log2, ln, st);
            __syncwarp();  // every lane is done with this stage before it is refilled
            if (++stage == kStages) stage = 0;
        }
        tc::cp_async_wait<0>();
        __syncwarp();

        // This warp's state into its (now idle) ring, then the warps merged.
        st.reduce_sums();
        float* o_s = reinterpret_cast<float*>(ring);  // [16][kOLd] f32
#pragma unroll
        for (int n = 0; n < S::kNTiles; ++n) {
            *reinterpret_cast<float2*>(o_s + ln.g * Shape::kOLd + n * 8 + 2 * ln.t) =
                make_float2(st.o[n][0], st.o[n][1]);
            if (kBig) {
                *reinterpret_cast<float2*>(o_s + (ln.g + 8) * Shape::kOLd + n * 8 + 2 * ln.t) =
                    make_float2(st.o[n][2], st.o[n][3]);
            }
        }
        if (ln.t == 0) {
            m_s[warp][ln.g] = st.scaled_max(0, item_scale_log2);
            l_s[warp][ln.g] = st.l[0];
            m_s[warp][ln.g + 8] = st.scaled_max(1, item_scale_log2);
            l_s[warp][ln.g + 8] = st.l[1];
        }
        __syncthreads();

        // Merge the warps (a warp without tiles has max -inf and sum 0, so weight 0).
        constexpr int kQuads = kD / 4;
        for (int idx = tid; idx < group * kQuads; idx += kThreads) {
            const int h = idx / kQuads, c = (idx % kQuads) * 4;
            float mx = -INFINITY;
#pragma unroll
            for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, m_s[w][h]);
            const float b = mx == -INFINITY ? 0.0f : mx;
            float sum = 0.0f;
            float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int w = 0; w < kWarps; ++w) {
                const float cw = exp2f(m_s[w][h] - b);
                sum += l_s[w][h] * cw;
                const float4 v = *reinterpret_cast<const float4*>(
                    reinterpret_cast<const float*>(smem + w * Shape::kWarpBytes) +
                    h * Shape::kOLd + c);
                acc.x += v.x * cw;
                acc.y += v.y * cw;
                acc.z += v.z * cw;
                acc.w += v.w * cw;
            }
            if (single) {
                const float inv = v_scale / sum;  // token 0 is in this split: sum > 0
                const __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
                const __nv_bfloat162 hi = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
                uint2 packed;
                packed.x = *reinterpret_cast<const unsigned*>(&lo);
                packed.y = *reinterpret_cast<const unsigned*>(&hi);
                *reinterpret_cast<uint2*>(
                    out + (static_cast<std::int64_t>(s.q_start) * batch.num_heads + head0 + h) *
                              kD + c) = packed;
            } else {
                const std::int64_t slot =
                    (static_cast<std::int64_t>(seq) * batch.num_heads + head0 + h) *
                        launch.num_splits + split;
                *reinterpret_cast<float4*>(launch.partial_o + slot * kD + c) =
                    make_float4(acc.x * v_scale, acc.y * v_scale, acc.z * v_scale, acc.w * v_scale);
                if (c == 0) {
                    launch.partial_ml[slot * 2] = mx;
                    launch.partial_ml[slot * 2 + 1] = sum;
                }
            }
        }
        __syncthreads();  // the rings and m_s/l_s are reused by the next item
    }
    wait_once();  // no CTA completes before the kernels ahead of it (dependent_launch.cuh)
}

// Raises the kernel's shared-memory limit and returns how many of its CTAs fit on an SM.
template <class Kernel>
int fit_on_sm(Kernel kernel, int smem_bytes) {
    IS_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
    int ctas = 0;
    IS_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, kThreads, smem_bytes));
    IS_CHECK(ctas >= 1) << "decode tc kernel does not fit on an SM";
    return ctas;
}

// Both schedules of one shape; the smaller fit (they differ only in a few hundred bytes).
template <int kD, bool kBig>
void set_smem_limit(int& ctas_per_sm) {
    ctas_per_sm = std::min(fit_on_sm(decode_tc_kernel<kD, kBig>, TcShape<kD>::kSmemBytes),
                           fit_on_sm(decode_tc_warp_kernel<kD, kBig>, TcShape<kD>::kSmemBytes));
}

int variant(int head_dim, int group) { return (head_dim == 128 ? 2 : 0) + (group > 8 ? 1 : 0); }

template <int kD, bool kBig>
void launch_typed(const void* q, const PagedKvView& pages, const AttentionBatch& batch,
                  const DecodeLaunch& launch, void* out, cudaStream_t stream) {
    const std::int64_t items =
        static_cast<std::int64_t>(launch.num_splits) * launch.grid_rows * pages.kv_heads;
    const auto* qp = static_cast<const bf16*>(q);
    auto* op = static_cast<bf16*>(out);
    if (launch.warp_items) {
        IS_CHECK(launch.item_counter != nullptr && items < 0x7fffffff) << "decode tc warp items";
        const std::int64_t grid =
            std::min<std::int64_t>((items + kWarps - 1) / kWarps, launch.max_ctas);
        launch_dependent(decode_tc_warp_kernel<kD, kBig>, dim3(static_cast<unsigned>(grid)),
                         dim3(kThreads), TcShape<kD>::kSmemBytes, stream, qp, pages, batch,
                         launch, op);
    } else {
        const std::int64_t grid = std::min<std::int64_t>(items, launch.max_ctas);
        launch_dependent(decode_tc_kernel<kD, kBig>, dim3(static_cast<unsigned>(grid)),
                         dim3(kThreads), TcShape<kD>::kSmemBytes, stream, qp, pages, batch,
                         launch, op);
    }
    IS_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool decode_tc_supports(int head_dim, int group) {
    return (head_dim == 64 || head_dim == 128) && group >= 1 && group <= 16;
}

int decode_tc_warps_per_cta() { return kWarps; }

DecodeTcLimits init_decode_tc_attention() {
    DecodeTcLimits limits;
    set_smem_limit<64, false>(limits.ctas_per_sm[variant(64, 1)]);
    set_smem_limit<64, true>(limits.ctas_per_sm[variant(64, 16)]);
    set_smem_limit<128, false>(limits.ctas_per_sm[variant(128, 1)]);
    set_smem_limit<128, true>(limits.ctas_per_sm[variant(128, 16)]);
    return limits;
}

int decode_tc_ctas_per_sm(const DecodeTcLimits& limits, int head_dim, int group) {
    return limits.ctas_per_sm[variant(head_dim, group)];
}

void launch_decode_tc_attention(const void* q, const PagedKvView& pages,
                                const AttentionBatch& batch, const DecodeLaunch& launch,
                                void* out, cudaStream_t stream) {
    const int group = batch.num_heads / pages.kv_heads;
    IS_CHECK(launch.per_sequence && decode_tc_supports(pages.head_dim, group))
        << "decode tc: head_dim " << pages.head_dim << ", group " << group;
    IS_CHECK(launch.max_ctas > 0 && launch.grid_rows > 0) << "decode tc grid";
    IS_CHECK(launch.num_splits == 1 ||
             (launch.partial_o != nullptr && launch.partial_ml != nullptr &&
              launch.split_tokens > 0 && launch.split_tokens % kTileTokens == 0 &&
              reinterpret_cast<std::uintptr_t>(launch.partial_o) % 16 == 0))
        << "decode tc split workspace";
    const bool big = group > 8;
    if (pages.head_dim == 64) {
        big ? launch_typed<64, true>(q, pages, batch, launch, out, stream)
            : launch_typed<64, false>(q, pages, batch, launch, out, stream);
    } else {
        big ? launch_typed<128, true>(q, pages, batch, launch, out, stream)
            : launch_typed<128, false>(q, pages, batch, launch, out, stream);
    }
}

}  // namespace inferscale::backends::cuda
