// Linear for 2..128 tokens on TMA and wgmma, the work shared out stream-K style (see
// linear_small.h). At these sizes the weights are the bytes that count, so what matters is that
// every SM streams the same number of them: cut into tiles of kRows weight rows, the narrow
// shapes leave SMs idle (q/k/v at 48 tiles, o and down at 32 on 132 SMs) and the wide ones end
// in a partial wave (gate/up at 224 tiles: 85% of two waves). So:
//   - the work is the list of (tile, k block) units, tile after tile, and a persistent grid of
//     as many CTAs as fit at once takes equal consecutive runs of it. A producer warp fills a
//     kStages-deep ring along the CTA's run, crossing tiles without a pause: per unit one TMA
//     box of the weight rows and one of x, kKBlock wide, in the 128-byte swizzle wgmma reads
//     (tma.cuh; a full barrier per stage counts their bytes). Two warpgroups each multiply 64 of
//     the rows by all of x on wgmma (wgmma.cuh) and free the stage on its empty barrier;
//   - where its run covers a whole tile a CTA stores the tile. A tile shared by several runs
//     gets each run's partial sums in global scratch (coalesced, in accumulator order); the last
//     run to count itself in on the tile's counter sums the partials in run order and stores
//     the tile, then puts the counter back to zero (ready for the next launch or graph replay).
//     Nothing waits on another CTA, and the sum order is fixed, so results are deterministic.
// Before this, a cluster of CTAs split each tile's k range and reduced through distributed
// shared memory; whole tiles per cluster could not even out the waves
// (docs/results/linear_stream_k_h200_2026-12-03_s12.txt).

#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdlib>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/linear_stream_k.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kRows = 128;                 // weight rows per tile
constexpr int kConsumers = 256;            // two warpgroups, 64 weight rows each
constexpr int kThreads = kConsumers + 32;  // and the producer warp
constexpr int kKBlock = 64;                // k elements per unit and ring stage: 128-byte rows
constexpr int kRowBytes = kKBlock * 2;

template <int kTokens, int kStages>
struct Layout {
    static constexpr int kWBytes = kRows * kRowBytes;
    static constexpr int kStageBytes = kWBytes + kTokens * kRowBytes;  // 1024-byte multiple
    static constexpr int kRingBytes = kStages * kStageBytes;           // 1024-aligned in smem
    static constexpr int kElems = kRows * kTokens;                     // f32 sums of a tile
    static constexpr int kRegs = kElems / kConsumers;                  // accumulators a thread
    static constexpr int kSmemBytes = 1024 + kRingBytes + 2 * kStages * 8 + 16;
};

struct Params {
    CUtensorMap w[kSmallLinearMaxTargets];  // [out, in] per target, boxes of kRows x kKBlock
    CUtensorMap x;                          // [n, in], boxes of kTokens x kKBlock
    int n;
    int blocks;       // k blocks per tile
    int ctas;         // the grid
    long long units;  // tiles * blocks
    LinearTargets targets;  // units of kRows rows: the tiles
    float* partials;  // [2 * ctas][kElems]: a run's first and last tile
    int* counters;    // [tiles]
};

// The first unit of CTA c's run (c == ctas: the end of the work).
__device__ __forceinline__ int run_begin(const Params& p, int c) {
    return static_cast<int>(p.units * c / p.ctas);
}

// The CTA whose run holds unit u.
__device__ __forceinline__ int run_of(const Params& p, int u) {
    int c = static_cast<int>((static_cast<long long>(u) * p.ctas) / p.units);
    while (c + 1 < p.ctas && run_begin(p, c + 1) <= u) ++c;
    while (run_begin(p, c) > u) --c;
    return c;
}

// Where CTA c keeps its partial sums of `tile`: one slot for the tile its run starts in, one
// for the tile it ends in.
template <int kElems>
__device__ __forceinline__ float* partial_slot(const Params& p, int c, int tile) {
    const int slot = 2 * c + (run_begin(p, c) / p.blocks == tile ? 0 : 1);
    return p.partials + static_cast<std::size_t>(slot) * kElems;
}

__device__ __forceinline__ void consumers_sync() {
    asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory");
}

// Stores the tile's sum v of accumulator r of this thread (warp, lane).
__device__ __forceinline__ void store_sum(const Params& p, int target, int row0, int warp,
                                          int lane, int r, float v) {
    // Register 4 j + i of lane 4 g + t in warp w holds weight row 16 w + g + 8 (i / 2), token
    // 8 j + 2 t + i % 2 (wgmma's accumulator layout).
    const int i = r & 3;
    const int row = row0 + 16 * warp + (lane >> 2) + 8 * (i >> 1);
    const int token = 8 * (r >> 2) + 2 * (lane & 3) + (i & 1);
    if (token < p.n && row < p.targets.out[target]) p.targets.store(target, token, row, v);
}

// The consumers' end of CTA c's units [seg_begin, seg_end) of `tile`, summed in acc.
template <int kTokens, int kStages>
__device__ void finish_tile(const Params& p, int c, int tile, int seg_begin, int seg_end,
                            const float (&acc)[Layout<kTokens, kStages>::kRegs], int* last) {
    using L = Layout<kTokens, kStages>;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int row0 = 0;
    const int target = p.targets.find(tile, kRows, row0);
    const int tile_begin = tile * p.blocks, tile_end = tile_begin + p.blocks;
    if (seg_begin == tile_begin && seg_end == tile_end) {
#pragma unroll
        for (int r = 0; r < L::kRegs; ++r) store_sum(p, target, row0, warp, lane, r, acc[r]);
        return;
    }
    float* mine = partial_slot<L::kElems>(p, c, tile);
#pragma unroll
    for (int r = 0; r < L::kRegs; ++r) __stcg(&mine[(warp * L::kRegs + r) * 32 + lane], acc[r]);
    __threadfence();
    consumers_sync();
    const int first_run = run_of(p, tile_begin), last_run = run_of(p, tile_end - 1);
    if (tid == 0) {
        const bool is_last = atomicAdd(&p.counters[tile], 1) == last_run - first_run;
        if (is_last) p.counters[tile] = 0;
        *last = is_last;
    }
    consumers_sync();
    if (!*last) return;
    __threadfence();
    // The runs' partials in run order, kGroup runs' loads in flight at once (the sums are
    // latency bound: one CTA reads every run's share of the tile).
    constexpr int kGroup = L::kRegs >= 64 ? 1 : 64 / L::kRegs;
    float sum[L::kRegs] = {};
    for (int q0 = first_run; q0 <= last_run; q0 += kGroup) {
        float part[kGroup][L::kRegs];
#pragma unroll
        for (int j = 0; j < kGroup; ++j) {
            if (q0 + j > last_run) break;
            const float* slot = partial_slot<L::kElems>(p, q0 + j, tile);
#pragma unroll
            for (int r = 0; r < L::kRegs; ++r) {
                part[j][r] = __ldcg(&slot[(warp * L::kRegs + r) * 32 + lane]);
            }
        }
#pragma unroll
        for (int j = 0; j < kGroup; ++j) {
            if (q0 + j > last_run) break;
#pragma unroll
            for (int r = 0; r < L::kRegs; ++r) sum[r] += part[j][r];
        }
    }
#pragma unroll
    for (int r = 0; r < L::kRegs; ++r) store_sum(p, target, row0, warp, lane, r, sum[r]);
}

template <int kTokens, int kStages>
__global__ void __launch_bounds__(kThreads, 1)
    stream_k_linear_kernel(const __grid_constant__ Params p) {
    using L = Layout<kTokens, kStages>;
    extern __shared__ __align__(128) unsigned char smem[];
    allow_next_launch();
    const int c = static_cast<int>(blockIdx.x);
    const int begin = run_begin(p, c), end = run_begin(p, c + 1);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    const auto smem_base = smem_addr(smem);
    const unsigned ring = (smem_base + 1023) & ~1023u;  // the 128-byte swizzle's 1024-byte unit
    const unsigned full = ring + L::kRingBytes, empty = full + kStages * 8;
    int* last = reinterpret_cast<int*>(smem + (empty - smem_base) + kStages * 8);
    if (tid == 0) {
        for (int s = 0; s < kStages; ++s) {
            tma::barrier_init(full + 8 * s, 1);
            tma::barrier_init(empty + 8 * s, kConsumers / 32);
        }
        tma::fence_barrier_init();
    }
    __syncthreads();

    const int iters = end - begin;
    if (warp == kConsumers / 32) {
        if (lane != 0) return;
        // Unit u: the weight box of its tile's rows and k block, and x's box of that block.
        const auto load_w = [&](unsigned stage, int u, unsigned bar) {
            const int tile = u / p.blocks;
            int row0 = 0;
            const int target = p.targets.find(tile, kRows, row0);
            tma::load_2d(stage, &p.w[target], (u - tile * p.blocks) * kKBlock, row0, bar);
        };
        const auto load_x = [&](unsigned stage, int u, unsigned bar) {
            tma::load_2d(stage + L::kWBytes, &p.x, (u % p.blocks) * kKBlock, 0, bar);
        };
        // Weights are constant: the first stages' weights are requested before the inputs are
        // ready; x follows once they are.
        const int first = min(kStages, iters);
        for (int s = 0; s < first; ++s) {
            tma::arrive_expect(full + 8 * s, L::kStageBytes);
            load_w(ring + s * L::kStageBytes, begin + s, full + 8 * s);
        }
        wait_for_inputs();
        for (int s = 0; s < first; ++s) load_x(ring + s * L::kStageBytes, begin + s, full + 8 * s);
        for (int g = kStages; g < iters; ++g) {
            const int slot = g % kStages;
            tma::wait(empty + 8 * slot, (g / kStages - 1) & 1);
            tma::arrive_expect(full + 8 * slot, L::kStageBytes);
            const unsigned stage = ring + slot * L::kStageBytes;
            load_w(stage, begin + g, full + 8 * slot);
            load_x(stage, begin + g, full + 8 * slot);
        }
        return;
    }

    wait_for_inputs();
    int g = 0;
    for (int u = begin; u < end;) {
        const int tile = u / p.blocks;
        const int seg_begin = u, seg_end = min(end, (tile + 1) * p.blocks);
        float acc[L::kRegs] = {};
        for (; u < seg_end; ++u, ++g) {
            const int slot = g % kStages;
            tma::wait(full + 8 * slot, (g / kStages) & 1);
            // Warpgroup warp / 4 multiplies its 64 weight rows by all kTokens x rows.
            const unsigned stage = ring + slot * L::kStageBytes;
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
            if (lane == 0) tma::arrive(empty + 8 * slot);
        }
        finish_tile<kTokens, kStages>(p, c, tile, seg_begin, seg_end, acc, last);
    }
}

// Every instantiation: the token bucket it serves, its kernel and its shared memory.
template <class F>
void for_each_kernel(F&& f) {
    static const bool small = std::getenv("INFERSCALE_SK_SMALL") != nullptr;
    if (small) {
        f(0, 8, stream_k_linear_kernel<8, 6>, Layout<8, 6>::kSmemBytes);
        f(1, 16, stream_k_linear_kernel<16, 6>, Layout<16, 6>::kSmemBytes);
        f(2, 32, stream_k_linear_kernel<32, 5>, Layout<32, 5>::kSmemBytes);
        f(3, 64, stream_k_linear_kernel<64, 4>, Layout<64, 4>::kSmemBytes);
        f(4, 128, stream_k_linear_kernel<128, 3>, Layout<128, 3>::kSmemBytes);
        return;
    }
    f(0, 8, stream_k_linear_kernel<8, 11>, Layout<8, 11>::kSmemBytes);
    f(1, 16, stream_k_linear_kernel<16, 11>, Layout<16, 11>::kSmemBytes);
    f(2, 32, stream_k_linear_kernel<32, 10>, Layout<32, 10>::kSmemBytes);
    f(3, 64, stream_k_linear_kernel<64, 8>, Layout<64, 8>::kSmemBytes);
    f(4, 128, stream_k_linear_kernel<128, 6>, Layout<128, 6>::kSmemBytes);
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
// 128 bytes; rows past the end arrive as zeros.
bool encode_rows(CUtensorMap* map, const void* base, int inner, int rows, int box_rows) {
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(inner) * 2};
    const cuuint32_t box[2] = {kKBlock, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                                const_cast<void*>(base), dims, strides, box, element_strides,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class Kernel>
bool launch(Kernel kernel, int tokens, int smem, int resident, const bf16* x, int n, int in,
            LinearTargets targets, const SmallLinearScratch& scratch, cudaStream_t stream) {
    Params p{};
    const int tiles = targets.cut(kRows);
    p.blocks = (in + kKBlock - 1) / kKBlock;
    p.units = static_cast<long long>(tiles) * p.blocks;
    // Every CTA gets at least one unit, so every tile's runs all count themselves in.
    p.ctas = static_cast<int>(std::min<long long>(resident, p.units));
    if (p.ctas < 1 || tiles > scratch.num_counters ||
        static_cast<std::size_t>(2 * p.ctas) * kRows * tokens > scratch.partial_floats) {
        return false;
    }
    for (int i = 0; i < targets.count; ++i) {
        if (!encode_rows(&p.w[i], targets.w[i], in, targets.out[i], kRows)) return false;
    }
    if (!encode_rows(&p.x, x, in, n, tokens)) return false;
    p.n = n;
    p.targets = targets;
    p.partials = scratch.partials;
    p.counters = scratch.counters;
    launch_dependent(kernel, dim3(static_cast<unsigned>(p.ctas)), dim3(kThreads),
                     static_cast<std::size_t>(smem), stream, p);
    return true;
}

}  // namespace

StreamKLimits init_stream_k_linear(int num_sms) {
    StreamKLimits limits;
    for_each_kernel([&](int bucket, int, auto kernel, int smem) {
        IS_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        int per_sm = 0;
        IS_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
        if (const char* cap = std::getenv("INFERSCALE_SK_CTAS")) per_sm = std::min(per_sm, std::atoi(cap));
        limits.ctas[bucket] = per_sm * num_sms;
    });
    return limits;
}

bool launch_stream_k_linear(const bf16* x, int n, int in, const LinearTargets& targets,
                            const SmallLinearScratch& scratch, cudaStream_t stream) {
    if (n < 1 || n > kSmallLinearMaxRows) return false;
    bool launched = false, done = false;
    for_each_kernel([&](int bucket, int tokens, auto kernel, int smem) {
        if (done || n > tokens) return;
        done = true;
        const int resident = scratch.stream_k.ctas[bucket];
        launched = resident > 0 &&
                   launch(kernel, tokens, smem, resident, x, n, in, targets, scratch, stream);
    });
    return launched;
}

}  // namespace inferscale::backends::cuda
