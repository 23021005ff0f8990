// Linear for 17..128 tokens on TMA and wgmma, its work dealt out evenly over a persistent grid
// (see linear_small.h). At these sizes the weights are still the bytes that count, and a grid of
// one CTA per 128-row tile streams them in uneven waves: q/k/v's 48 tiles, o's and down's 32
// leave most of 132 SMs idle, gate/up's 224 take two waves of which the second is 70% full. So
// the work is a list of items, one per (tile, 64-wide k block), tile after tile, and CTA c of G
// takes items [c W / G, (c + 1) W / G): every SM streams the same share of the weights, and
// its ring runs on across tile boundaries.
//   - A producer warp fills a kStages-deep ring: per stage one TMA box of 128 weight rows (or
//     gated, 64 rows of gate and the same 64 rows of up) and one of x, 64 k wide, in the
//     128-byte swizzle wgmma reads (tma.cuh). Two warpgroups each multiply 64 of the rows by
//     all of x (wgmma.cuh) and free the stage on its empty barrier.
//   - A tile wholly inside a CTA's share is stored from the accumulators (gated: silu(gate) *
//     up from the two sums rounded as stored, the swiglu kernel's arithmetic). A tile that CTAs
//     c0 < ... < c1 share ends c0's share and begins the others': they write their pieces to
//     scratch and count them on the tile's counter, and c0, which usually comes last, adds
//     them to its accumulators in CTA (k) order and stores the tile (finish_tile). No CTA waits
//     for another, and results do not depend on timing.
// Filling a stage with per-thread cp.async instead cost 5-8 copies per thread and bound the
// kernel on issuing them (docs/results/linear_cluster_h200_2026-12-03_s9.txt).

#include <cudaTypedefs.h>

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/item_share.h"
#include "backends/cuda/linear_stream.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kRows = 128;                 // weight rows per tile (gated: 64 of gate, 64 of up)
constexpr int kConsumers = 256;            // two warpgroups, 64 weight rows each
constexpr int kThreads = kConsumers + 32;  // and the producer warp
constexpr int kKBlock = 64;                // k elements per ring stage: 128-byte rows
constexpr int kRowBytes = kKBlock * 2;
constexpr int kSmemLimit = 227 * 1024;  // an H100/H200 SM's most for one CTA

template <int kTokens, bool kGated>
struct Layout {
    static constexpr int kWBytes = kRows * kRowBytes;
    static constexpr int kStageBytes = kWBytes + kTokens * kRowBytes;
    static constexpr int kElems = kRows * kTokens;     // f32 accumulators of a tile
    static constexpr int kRegs = kElems / kConsumers;  // per thread
    // Gated, a whole tile's up half passes from warpgroup 1 to warpgroup 0 here.
    static constexpr int kUpBytes = kGated ? kElems / 2 * 4 : 0;
    // As deep as shared memory allows: 11, 9 and 7 stages for 32, 64 and 128 tokens (gated
    // 10, 8, 6).
    static constexpr int kStages = (kSmemLimit - 1024 - 256 - kUpBytes) / kStageBytes;
    static constexpr int kRingBytes = kStages * kStageBytes;  // 1024-aligned in smem
    static constexpr int kUpOffset = kRingBytes;
    static constexpr int kBarrierOffset = kUpOffset + kUpBytes;  // full[], empty[], a flag
    static constexpr int kSmemBytes = 1024 + kBarrierOffset + 2 * kStages * 8 + 16;
};

struct Params {
    CUtensorMap w[kSmallLinearMaxTargets];  // [out, in] per target; boxes of the tile's rows
    CUtensorMap x;                          // [n, in], boxes of kTokens x kKBlock
    int n, in;
    int blocks;  // k blocks per tile
    ItemShare share;
    LinearTargets targets;  // units: tiles of kRows rows (gated: of kRows / 2 gate rows)
    float* partials;        // two slots of a tile's elements per CTA
    int* counters;          // per tile, zero between launches
};

__device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory");
}

// Scratch slot `index` (CTA c's piece of the tile its share begins in: c; of the tile its share
// ends in, when it begins that tile: ctas + c), in accumulator order: element (w kRegs + r) 32 + l
// is register r of lane l in consumer warp w.
template <int kTokens>
__device__ __forceinline__ float* slot(const Params& p, int index) {
    return p.partials + static_cast<std::int64_t>(index) * Layout<kTokens, false>::kElems;
}

__device__ __forceinline__ int load_acquire(const int* at) {
    int v = 0;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(at) : "memory");
    return v;
}

// Adds one to *at (release: what this thread has seen written is visible first; acquire: what
// the earlier adders wrote is visible after); returns the old value.
__device__ __forceinline__ int arrive_acq_rel(int* at) {
    int old = 0;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;\n"
                 : "=r"(old)
                 : "l"(at)
                 : "memory");
    return old;
}

// Element e of a tile's accumulators (lane e % 32 of consumer warp e / 32 / kRegs, register
// e / 32 % kRegs) as the tile row and token it holds: register 4 j + i of lane 4 g + t in warp
// w holds row 16 w + g + 8 (i / 2), token 8 j + 2 t + i % 2 (wgmma's accumulator layout).
template <int kRegs>
__device__ __forceinline__ void element_place(int e, int& row, int& token) {
    const int l = e & 31, r = (e >> 5) % kRegs, wp = (e >> 5) / kRegs, i = r & 3;
    row = 16 * wp + (l >> 2) + 8 * (i >> 1);
    token = 8 * (r >> 2) + 2 * (l & 3) + (i & 1);
}

// Stores element (row0 + row, token) of a tile of `target` from its sums: v (gated: gate's,
// and up's).
template <bool kGated>
__device__ __forceinline__ void store_element(const Params& p, int target, int row0, int row,
                                              int token, float v, float up) {
    row += row0;
    const int out = p.targets.out[target];
    if (token >= p.n || row >= out) return;
    if (kGated) {
        const float g = rounded<bf16>(p.targets.with_bias(0, row, v));
        const float u = rounded<bf16>(p.targets.with_bias(1, row, up));
        static_cast<bf16*>(p.targets.y[0])[static_cast<std::int64_t>(token) * out + row] =
            from_f32<bf16>(silu_mul(g, u));
    } else {
        p.targets.store(target, token, row, v);
    }
}

// Stores `tile` from the consumers' sums in acc (gated: warpgroup 1 hands its up half to
// warpgroup 0 through `up_stage`).
template <int kTokens, bool kGated>
__device__ __forceinline__ void store_tile(const Params& p, int tile,
                                           const float (&acc)[Layout<kTokens, kGated>::kRegs],
                                           float* up_stage) {
    using L = Layout<kTokens, kGated>;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int row0 = kGated ? tile * (kRows / 2) : 0;
    const int target = kGated ? 0 : p.targets.find(tile, kRows, row0);
    if (kGated && warp >= 4) {
#pragma unroll
        for (int r = 0; r < L::kRegs; ++r) {
            up_stage[((warp - 4) * L::kRegs + r) * 32 + lane] = acc[r];
        }
    }
    if (kGated) consumers_sync();
    if (!kGated || warp < 4) {
#pragma unroll
        for (int r = 0; r < L::kRegs; ++r) {
            const int e = (warp * L::kRegs + r) * 32 + lane;
            int row = 0, token = 0;
            element_place<L::kRegs>(e, row, token);
            store_element<kGated>(p, target, row0, row, token, acc[r],
                                  kGated ? up_stage[e] : 0.0f);
        }
    }
    if (kGated) consumers_sync();  // up_stage is read before the next tile writes it
}

// acc (in accumulator order, this thread's elements from `mine` on, 32 apart) += slot `index`
// (kAssign: = it, bit for bit), kBatch loads in flight at once.
template <int kRegs, int kTokens, bool kAssign = false>
__device__ __forceinline__ void add_slot(const Params& p, int index, int mine,
                                         float (&acc)[kRegs]) {
    constexpr int kBatch = kRegs < 16 ? kRegs : 16;
    const float* piece = slot<kTokens>(p, index) + mine;
#pragma unroll
    for (int r0 = 0; r0 < kRegs; r0 += kBatch) {
        float v[kBatch];
#pragma unroll
        for (int r = 0; r < kBatch; ++r) v[r] = __ldcg(piece + 32 * (r0 + r));
#pragma unroll
        for (int r = 0; r < kBatch; ++r) acc[r0 + r] = kAssign ? v[r] : acc[r0 + r] + v[r];
    }
}

// The end of this CTA's part of `tile`. A tile wholly in its share is stored. A tile that CTAs
// c0 < ... < c1 share is the last of c0's share and the first of every other's, and its sum is
// piece c0 + piece c0 + 1 + ... + piece c1 in that order (k order) whoever adds it up. Every CTA
// but c0 writes its piece to its slot and counts it on the tile's counter; c0, which in the usual
// course reaches the tile's end after all of them, finds the count complete and adds their pieces
// to its accumulators. Otherwise c0 writes its piece and counts it too, and the last CTA to count
// adds up the slots. Whoever adds up stores the tile and puts the counter back to zero for the
// next launch. No CTA waits for another.
template <int kTokens, bool kGated>
__device__ __forceinline__ void finish_tile(const Params& p, int tile,
                                            float (&acc)[Layout<kTokens, kGated>::kRegs],
                                            float* up_stage, volatile int* flag) {
    using L = Layout<kTokens, kGated>;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int cta = static_cast<int>(blockIdx.x), ctas = p.share.ctas;
    const int c0 = p.share.owner(tile * p.blocks), c1 = p.share.owner((tile + 1) * p.blocks - 1);
    if (c0 != c1) {
        int* counter = &p.counters[tile];
        const int others = c1 - c0;                      // arrivals besides c0's
        const int mine = (warp * L::kRegs) * 32 + lane;  // this thread's element of register 0
        // Writes this CTA's piece to slot `index` and counts it; true when it was the last.
        const auto write_and_count = [&](int index) {
            float* piece = slot<kTokens>(p, index) + mine;
#pragma unroll
            for (int r = 0; r < L::kRegs; ++r) piece[32 * r] = acc[r];
            consumers_sync();  // every piece write before thread 0's release
            if (tid == 0) *flag = arrive_acq_rel(counter) == others;
            consumers_sync();
            return *flag != 0;
        };
        if (cta == c0) {
            if (tid == 0) *flag = load_acquire(counter) == others;
            consumers_sync();
            const bool counted = *flag != 0;
            consumers_sync();  // the flag is read before it is written again
            if (!counted && !write_and_count(ctas + c0)) return;
        } else {
            if (!write_and_count(cta)) return;
            add_slot<L::kRegs, kTokens, true>(p, ctas + c0, mine, acc);
        }
        for (int c = c0 + 1; c <= c1; ++c) add_slot<L::kRegs, kTokens>(p, c, mine, acc);
        if (tid == 0) *counter = 0;  // every arrival is in: no one else touches it
    }
    store_tile<kTokens, kGated>(p, tile, acc, up_stage);
}

template <int kTokens, bool kGated>
__global__ void __launch_bounds__(kThreads, 1)
    stream_linear_kernel(const __grid_constant__ Params p) {
    using L = Layout<kTokens, kGated>;
    constexpr int kStages = L::kStages;
    extern __shared__ __align__(128) unsigned char smem[];
    allow_next_launch();
    const int cta = static_cast<int>(blockIdx.x);
    const int begin = p.share.begin(cta), end = p.share.begin(cta + 1);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    const auto smem_base = smem_addr(smem);
    const unsigned ring = (smem_base + 1023) & ~1023u;  // the 128-byte swizzle's 1024-byte unit
    const unsigned full = ring + L::kBarrierOffset, empty = full + kStages * 8;
    auto* flag = reinterpret_cast<volatile int*>(smem + (empty - smem_base) + kStages * 8);
    auto* up_stage = reinterpret_cast<float*>(smem + (ring - smem_base) + L::kUpOffset);
    if (tid == 0) {
        for (int s = 0; s < kStages; ++s) {
            tma::barrier_init(full + 8 * s, 1);
            tma::barrier_init(empty + 8 * s, kConsumers / 32);
        }
        tma::fence_barrier_init();
    }
    __syncthreads();

    if (warp == kConsumers / 32) {
        if (lane != 0) return;
        // Stage `s` of item `item`: the tile's weight rows, then (with_x) x's k block.
        const auto load = [&](int s, int item, bool weights, bool with_x) {
            const int tile = item / p.blocks, k = item % p.blocks * kKBlock;
            const unsigned stage = ring + s * L::kStageBytes, bar = full + 8 * s;
            if (weights) {
                if (kGated) {
                    tma::load_2d(stage, &p.w[0], k, tile * (kRows / 2), bar);
                    tma::load_2d(stage + L::kWBytes / 2, &p.w[1], k, tile * (kRows / 2), bar);
                } else {
                    int row0 = 0;
                    const int target = p.targets.find(tile, kRows, row0);
                    tma::load_2d(stage, &p.w[target], k, row0, bar);
                }
            }
            if (with_x) tma::load_2d(stage + L::kWBytes, &p.x, k, 0, bar);
        };
        // Weights are constant: the first stages' weights are requested before the inputs are
        // ready; x follows once they are.
        const int first = min(kStages, end - begin);
        for (int s = 0; s < first; ++s) {
            tma::arrive_expect(full + 8 * s, L::kStageBytes);
            load(s, begin + s, true, false);
        }
        wait_for_inputs();
        for (int s = 0; s < first; ++s) load(s, begin + s, false, true);
        for (int g = kStages; g < end - begin; ++g) {
            const int s = g % kStages;
            tma::wait(empty + 8 * s, (g / kStages - 1) & 1);
            tma::arrive_expect(full + 8 * s, L::kStageBytes);
            load(s, begin + g, true, true);
        }
        return;
    }

    wait_for_inputs();
    // One pass of the outer loop per tile of the share: its k blocks, then its finish.
    for (int item = begin, g = 0; item < end;) {
        const int tile = item / p.blocks;
        const int tile_end = min(end, (tile + 1) * p.blocks);
        float acc[L::kRegs];
#pragma unroll
        for (int r = 0; r < L::kRegs; ++r) acc[r] = 0.0f;
        for (; item < tile_end; ++item, ++g) {
            const int s = g % kStages;
            tma::wait(full + 8 * s, (g / kStages) & 1);
            // Warpgroup warp / 4 multiplies its 64 weight rows by all kTokens x rows.
            const unsigned stage = ring + s * L::kStageBytes;
            const unsigned a = stage + (warp >> 2) * 64 * kRowBytes, b = stage + L::kWBytes;
            wgmma::fence();
#pragma unroll
            for (int ks = 0; ks < kKBlock / 16; ++ks) {
                wgmma::Wgmma<kTokens>::mma(acc, wgmma::descriptor(a + 32 * ks),
                                           wgmma::descriptor(b + 32 * ks));
            }
            wgmma::commit();
            wgmma::wait<0>();
            __syncwarp();
            if (lane == 0) tma::arrive(empty + 8 * s);
        }
        finish_tile<kTokens, kGated>(p, tile, acc, up_stage, flag);
    }
}

template <int kTokens, bool kGated>
constexpr auto kKernel = stream_linear_kernel<kTokens, kGated>;

template <class F>
void for_each_kernel(F&& f) {
    f(kKernel<32, false>, Layout<32, false>::kSmemBytes);
    f(kKernel<64, false>, Layout<64, false>::kSmemBytes);
    f(kKernel<128, false>, Layout<128, false>::kSmemBytes);
    f(kKernel<32, true>, Layout<32, true>::kSmemBytes);
    f(kKernel<64, true>, Layout<64, true>::kSmemBytes);
    f(kKernel<128, true>, Layout<128, true>::kSmemBytes);
}

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found{};
        IS_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                       cudaEnableDefault, &found));
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    return encode;
}

// A map of a row-major bf16 [rows, inner] matrix in boxes of box_rows x kKBlock, swizzled
// 128 bytes; rows past the end arrive as zeros. L2 fills only the box's own 128 bytes of a row:
// promoting them to 256 bytes streamed weights 3-5% slower (bench/stream_probe.cu).
bool encode_rows(CUtensorMap* map, const void* base, int inner, int rows, int box_rows) {
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(inner) * 2};
    const cuuint32_t box[2] = {kKBlock, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                                const_cast<void*>(base), dims, strides, box, element_strides,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int kTokens, bool kGated>
bool launch(const bf16* x, int n, int in, LinearTargets targets,
            const SmallLinearScratch& scratch, cudaStream_t stream) {
    using L = Layout<kTokens, kGated>;
    Params p{};
    const int box_rows = kGated ? kRows / 2 : kRows;
    for (int i = 0; i < targets.count; ++i) {
        if (!encode_rows(&p.w[i], targets.w[i], in, targets.out[i], box_rows)) return false;
    }
    if (!encode_rows(&p.x, x, in, n, kTokens)) return false;
    const int tiles = kGated ? (targets.out[0] + box_rows - 1) / box_rows : targets.cut(kRows);
    p.n = n;
    p.in = in;
    p.blocks = (in + kKBlock - 1) / kKBlock;
    const std::int64_t items = static_cast<std::int64_t>(tiles) * p.blocks;
    const int ctas = static_cast<int>(std::min<std::int64_t>(scratch.stream_ctas, items));
    if (items > (1 << 30) || tiles > scratch.num_counters ||
        static_cast<std::size_t>(2 * ctas) * L::kElems > scratch.partial_floats) {
        return false;
    }
    p.share = {static_cast<int>(items), ctas};
    p.targets = targets;
    p.partials = scratch.partials;
    p.counters = scratch.counters;
    launch_dependent(kKernel<kTokens, kGated>, dim3(static_cast<unsigned>(ctas)), kThreads,
                     L::kSmemBytes, stream, p);
    return true;
}

template <bool kGated>
bool launch_for(const bf16* x, int n, int in, const LinearTargets& targets,
                const SmallLinearScratch& scratch, cudaStream_t stream) {
    if (n < 1 || n > 128 || scratch.stream_ctas < 1) return false;
    if (n <= 32) return launch<32, kGated>(x, n, in, targets, scratch, stream);
    if (n <= 64) return launch<64, kGated>(x, n, in, targets, scratch, stream);
    return launch<128, kGated>(x, n, in, targets, scratch, stream);
}

}  // namespace

int init_stream_linear(int num_sms) {
    int per_sm = 0;
    for_each_kernel([&](auto kernel, int smem) {
        IS_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        int blocks = 0;
        IS_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, smem));
        per_sm = per_sm == 0 ? blocks : std::min(per_sm, blocks);
    });
    return per_sm * num_sms;
}

bool launch_stream_linear(const bf16* x, int n, int in, const LinearTargets& targets,
                          const SmallLinearScratch& scratch, cudaStream_t stream) {
    return launch_for<false>(x, n, in, targets, scratch, stream);
}

bool launch_gated_stream_linear(const bf16* x, int n, int in, const LinearTargets& gate_up,
                                const SmallLinearScratch& scratch, cudaStream_t stream) {
    if (gate_up.count != 2 || gate_up.out[0] != gate_up.out[1] || gate_up.y_f32) return false;
    return launch_for<true>(x, n, in, gate_up, scratch, stream);
}

}  // namespace inferscale::backends::cuda
