// Linear for 17..128 tokens on wgmma with k split across a thread-block cluster (see
// linear_small.h). At these sizes the weights are still the bytes that count, but the math is
// no longer free and a CTA tile per 128 weight rows leaves most SMs idle on the narrow shapes
// (o and down: 32 tiles on 132 SMs). So:
//   - a CTA owns kRows weight rows and one k range at a time. Its 256 threads fill a
//     kStages-deep cp.async ring holding, per stage, the weight rows and the x rows of one
//     kKBlock-wide k block in the 128-byte swizzle wgmma reads (wgmma.cuh); its two
//     warpgroups each multiply 64 of the rows by all of x, which is staged once per CTA;
//   - the `splits` CTAs of a cluster take consecutive k ranges of the same rows, then each
//     stores 1/splits of the tile after summing the CTAs' partials in rank order straight from
//     their shared memory (distributed shared memory): no global scratch, no counters, and the
//     sum order is fixed, so results are deterministic;
//   - the grid is persistent: as many clusters as fit at once, each walking its share of the
//     tiles with one ring that flows from tile to tile; copies follow a Cursor, so they do no
//     index arithmetic (issuing copies is what limits this kernel: a ring stage costs each
//     thread 5-8 cp.async, and with the index math inline gate/up at 32 tokens took 86 us
//     instead of 66).
// The host picks splits so that the tiles spread evenly over the clusters that fit
// (init_cluster_linear measures how many clusters of each size do).

#include <cooperative_groups.h>

#include <algorithm>

#include "backends/cuda/attention_tc.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/linear_cluster.cuh"
#include "backends/cuda/wgmma.cuh"

namespace inferscale::backends::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kRows = 128;  // weight rows per CTA tile
constexpr int kThreads = 256;  // two warpgroups, 64 weight rows each
constexpr int kKBlock = 64;  // k elements per ring stage
constexpr int kRowBytes = kKBlock * 2;
constexpr int kChunks = kRowBytes / 16;         // 16-byte copies per row per stage
constexpr int kCopyRows = kThreads / kChunks;  // rows one pass of the CTA's copies covers

template <int kTokens, int kStages>
struct Layout {
    static constexpr int kWBytes = kRows * kRowBytes;
    static constexpr int kStageBytes = kWBytes + kTokens * kRowBytes;
    static constexpr int kRingBytes = kStages * kStageBytes;
    static constexpr int kElems = kRows * kTokens;  // f32 partials of a tile, after the ring
    static constexpr int kRegs = kElems / kThreads;  // accumulators per thread
    static constexpr int kSmemBytes = 1024 + kRingBytes + kElems * 4;  // ring 1024-aligned
    static_assert(kTokens % kCopyRows == 0);
};

// Byte offset of 16-byte chunk `chunk` of `row` in a swizzled stage matrix.
__device__ __forceinline__ unsigned swizzled(int row, int chunk) {
    return static_cast<unsigned>(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
}

struct Params {
    const bf16* x;
    int n, in;
    LinearTargets targets;  // units: tiles of kRows rows
    int tiles;
};

// Where the next ring stage comes from, advanced one stage at a time so that copies do no
// index arithmetic: the k block, the ring slot and, per tile, the tile's target and this
// thread's weight rows (rows past the target's end re-read its last row; never stored).
struct Cursor {
    static constexpr int kCopies = kRows / kCopyRows;  // weight rows per thread per stage
    int left;                                          // stages still to go
    int tile;                                          // tile index in the launch
    int kb, kb_begin, kb_end;                          // k block in this CTA's k range
    int slot = 0;                                      // ring slot
    int target = 0, row0 = 0;
    const bf16* rows[kCopies] = {};                    // at k = 0, this thread's chunk

    __device__ void locate(const LinearTargets& targets, int in, int copy_row, int copy_chunk) {
        target = targets.find(tile, kRows, row0);
        const int out = targets.out[target];
#pragma unroll
        for (int r = 0; r < kCopies; ++r) {
            const int row = min(row0 + copy_row + r * kCopyRows, out - 1);
            rows[r] = targets.w[target] + static_cast<std::int64_t>(row) * in + copy_chunk * 8;
        }
    }
    __device__ void advance(const LinearTargets& targets, int clusters, int stages, int in,
                            int copy_row, int copy_chunk) {
        --left;
        slot = slot + 1 == stages ? 0 : slot + 1;
        if (++kb == kb_end) {
            kb = kb_begin;
            tile += clusters;
            if (left > 0) locate(targets, in, copy_row, copy_chunk);
        }
    }
};

template <int kTokens, int kStages>
__global__ void __launch_bounds__(kThreads, 1) cluster_linear_kernel(Params p) {
    using L = Layout<kTokens, kStages>;
    extern __shared__ __align__(128) unsigned char smem[];
    allow_next_launch();
    cg::cluster_group cluster = cg::this_cluster();
    const int splits = static_cast<int>(cluster.num_blocks());
    const int split = static_cast<int>(cluster.block_rank());
    // Persistent: cluster c takes tiles c, c + clusters, ...; its CTAs keep one ring flowing
    // across them, so the pipeline fills once per CTA, not once per tile.
    const int cluster_id = static_cast<int>(blockIdx.x) / splits;
    const int clusters = static_cast<int>(gridDim.x) / splits;
    const int my_tiles = (p.tiles - cluster_id + clusters - 1) / clusters;
    const int blocks = (p.in + kKBlock - 1) / kKBlock;
    const int kb_begin = blocks * split / splits, kb_end = blocks * (split + 1) / splits;
    const int iters = kb_end - kb_begin;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    // Copies: thread tid moves chunk tid % kChunks of rows tid / kChunks + r * kCopyRows.
    // Rows past `out` re-read the last row and tokens past n are zero-filled; neither is stored.
    const int copy_chunk = tid % kChunks, copy_row = tid / kChunks;
    const unsigned copy_dst = swizzled(copy_row, copy_chunk);
    constexpr int kXPasses = kTokens / kCopyRows;
    const bf16* x_src[kXPasses];
    bool x_valid[kXPasses];
#pragma unroll
    for (int r = 0; r < kXPasses; ++r) {
        const int token = copy_row + r * kCopyRows;
        x_valid[r] = token < p.n;
        x_src[r] = p.x + static_cast<std::int64_t>(min(token, p.n - 1)) * p.in + copy_chunk * 8;
    }

    const unsigned smem_base = tc::smem_addr(smem);
    const unsigned ring = (smem_base + 1023) & ~1023u;
    const auto load_w = [&](const Cursor& c) {
        if (c.left <= 0) return;
        const int k = c.kb * kKBlock;
        const bool in_range = k + copy_chunk * 8 < p.in;
        const unsigned dst = ring + c.slot * L::kStageBytes + copy_dst;
#pragma unroll
        for (int r = 0; r < Cursor::kCopies; ++r) {
            tc::cp_async16(dst + r * kCopyRows * kRowBytes, c.rows[r] + k, in_range);
        }
    };
    const auto load_x = [&](const Cursor& c) {
        if (c.left <= 0) return;
        const int k = c.kb * kKBlock;
        const bool in_range = k + copy_chunk * 8 < p.in;
        const unsigned dst = ring + c.slot * L::kStageBytes + L::kWBytes + copy_dst;
#pragma unroll
        for (int r = 0; r < kXPasses; ++r) {
            tc::cp_async16(dst + r * kCopyRows * kRowBytes, x_src[r] + k, x_valid[r] && in_range);
        }
    };

    // Weights are constant: the first stages' weights are requested before the inputs are
    // ready; x follows once they are.
    const auto advance = [&](Cursor& c) {
        c.advance(p.targets, clusters, kStages, p.in, copy_row, copy_chunk);
    };
    Cursor next{my_tiles * iters, cluster_id, kb_begin, kb_begin, kb_end};
    next.locate(p.targets, p.in, copy_row, copy_chunk);
    const Cursor first = next;
    Cursor ahead = next;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        load_w(ahead);
        advance(ahead);
    }
    wait_for_inputs();
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        load_x(next);
        tc::cp_async_commit();
        advance(next);
    }

    float* partial = reinterpret_cast<float*>(smem + (ring - smem_base) + L::kRingBytes);
    float acc[L::kRegs] = {};
    Cursor now = first;
    while (now.left > 0) {
        tc::cp_async_wait<kStages - 2>();
        wgmma::fence_shared_for_async();
        __syncthreads();  // stage `now` is in, and everyone is done with the slot refilled next
        load_w(next);
        load_x(next);
        tc::cp_async_commit();
        advance(next);
        // Warpgroup warp / 4 multiplies its 64 weight rows by all kTokens x rows.
        const unsigned stage = ring + now.slot * L::kStageBytes;
        const unsigned a = stage + (warp >> 2) * 64 * kRowBytes, b = stage + L::kWBytes;
        wgmma::fence();
#pragma unroll
        for (int ks = 0; ks < kKBlock / 16; ++ks) {
            wgmma::Wgmma<kTokens>::mma(acc, wgmma::descriptor(a + 32 * ks),
                                       wgmma::descriptor(b + 32 * ks));
        }
        wgmma::commit();
        wgmma::wait<0>();
        const int target = now.target, row0 = now.row0;
        const bool tile_done = now.kb + 1 == kb_end;
        advance(now);
        if (!tile_done) continue;

        // Tile done: partials into this CTA's shared memory in accumulator order (element e:
        // lane e % 32 of warp e / 32 / kRegs, register e / 32 % kRegs), then every CTA of the
        // cluster sums its share of the elements over all ranks in rank order.
#pragma unroll
        for (int r = 0; r < L::kRegs; ++r) {
            partial[(warp * L::kRegs + r) * 32 + lane] = acc[r];
            acc[r] = 0.0f;
        }
        cluster.sync();
        const int out = p.targets.out[target];
        const int e_end = L::kElems * (split + 1) / splits;
        for (int e = L::kElems * split / splits + tid; e < e_end; e += kThreads) {
            float v = 0.0f;
            for (int q = 0; q < splits; ++q) v += cluster.map_shared_rank(partial, q)[e];
            // Register 4 j + i of lane 4 g + t in warp w holds weight row 16 w + g + 8 (i / 2),
            // token 8 j + 2 t + i % 2 (wgmma's accumulator layout).
            const int l = e & 31, r = (e >> 5) % L::kRegs, wp = (e >> 5) / L::kRegs;
            const int i = r & 3;
            const int row = row0 + 16 * wp + (l >> 2) + 8 * (i >> 1);
            const int token = 8 * (r >> 2) + 2 * (l & 3) + (i & 1);
            if (token < p.n && row < out) p.targets.store(target, token, row, v);
        }
        cluster.sync();  // the partials are read everywhere before the next tile's replace them
    }
    tc::cp_async_wait<0>();
}

template <int kTokens, int kStages>
constexpr auto kKernel = cluster_linear_kernel<kTokens, kStages>;

// Every instantiation, with its shared memory; ClusterLinearLimits is measured on the largest.
template <class F>
void for_each_kernel(F&& f) {
    f(kKernel<32, 8>, Layout<32, 8>::kSmemBytes);
    f(kKernel<64, 7>, Layout<64, 7>::kSmemBytes);
    f(kKernel<128, 5>, Layout<128, 5>::kSmemBytes);
}

cudaLaunchConfig_t cluster_config(dim3 grid, std::size_t smem, cudaStream_t stream,
                                  cudaLaunchAttribute (&attributes)[2], int splits) {
    attributes[0].id = cudaLaunchAttributeClusterDimension;
    attributes[0].val.clusterDim.x = static_cast<unsigned>(splits);
    attributes[0].val.clusterDim.y = 1;
    attributes[0].val.clusterDim.z = 1;
    attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attributes;
    config.numAttrs = 2;
    return config;
}

// The split count that spreads the tiles most evenly over the clusters that fit at once:
// each CTA streams the same bytes per tile whatever the split, so the time goes as the
// busiest cluster's tiles / splits, plus a little per extra rank for the partial sums. Each
// CTA keeps at least kStages k blocks per tile so its ring stays full.
int choose_splits(int tiles, int blocks, int stages, const ClusterLinearLimits& limits) {
    int best = 1;
    double best_cost = 0.0;
    for (int s = 1; s <= kMaxClusterSplits; ++s) {
        const int clusters = limits.ctas[s] / s;
        if (clusters < 1 || (s > 1 && blocks / s < stages)) continue;
        const int per_cluster = (tiles + clusters - 1) / clusters;
        const double cost = static_cast<double>(per_cluster) / s * (1.0 + 0.03 * (s - 1));
        if (s == 1 || cost < best_cost) {
            best = s;
            best_cost = cost;
        }
    }
    return best;
}

template <int kTokens, int kStages>
void launch(const Params& p, const ClusterLinearLimits& limits, cudaStream_t stream) {
    const int blocks = (p.in + kKBlock - 1) / kKBlock;
    const int splits = choose_splits(p.tiles, blocks, kStages, limits);
    const int clusters = std::min(p.tiles, limits.ctas[splits] / splits);
    cudaLaunchAttribute attributes[2];
    const cudaLaunchConfig_t config =
        cluster_config(dim3(static_cast<unsigned>(clusters * splits)),
                       Layout<kTokens, kStages>::kSmemBytes, stream, attributes, splits);
    IS_CUDA_CHECK(cudaLaunchKernelEx(&config, kKernel<kTokens, kStages>, p));
}

}  // namespace

ClusterLinearLimits init_cluster_linear() {
    std::size_t largest = 0;
    const void* measured = nullptr;
    for_each_kernel([&](auto kernel, int smem) {
        IS_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        if (static_cast<std::size_t>(smem) > largest) {
            largest = static_cast<std::size_t>(smem);
            measured = reinterpret_cast<const void*>(kernel);
        }
    });
    ClusterLinearLimits limits;
    for (int s = 1; s <= kMaxClusterSplits; ++s) {
        cudaLaunchAttribute attributes[2];
        const cudaLaunchConfig_t config =
            cluster_config(dim3(static_cast<unsigned>(s), 1), largest, nullptr, attributes, s);
        int clusters = 0;
        IS_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, measured, &config));
        limits.ctas[s] = clusters * s;
    }
    return limits;
}

bool launch_cluster_linear(const bf16* x, int n, int in, LinearTargets targets,
                           const ClusterLinearLimits& limits, cudaStream_t stream) {
    if (n < 1 || n > 128 || limits.ctas[1] < 1) return false;
    Params p{x, n, in, targets, 0};
    p.tiles = p.targets.cut(kRows);
    if (n <= 32) {
        launch<32, 8>(p, limits, stream);
    } else if (n <= 64) {
        launch<64, 7>(p, limits, stream);
    } else {
        launch<128, 5>(p, limits, stream);
    }
    return true;
}

}  // namespace inferscale::backends::cuda
