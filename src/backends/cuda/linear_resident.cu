// Linear for 17..32 tokens with x resident in shared memory (see linear_small.h). At these
// sizes the op streams weights; what keeps a streaming kernel from the weight-read rate is
// work that does not divide over the SMs and x re-read beside every weight tile. Here:
//   - a cluster's CTAs split k into equal ranges, and each CTA holds its range of x for all
//     tokens in shared memory for the whole launch (copied once, with its first weights), so
//     x is not streamed again per weight tile;
//   - units of 64 weight rows (one wgmma's M) are dealt out evenly over a persistent grid of
//     clusters, so every SM streams about the same bytes whatever the shape;
//   - a producer warp streams the unit's 64 rows of the CTA's k range through a ring of TMA
//     boxes (128-byte swizzle) and asks for the first ones before the inputs are ready; one
//     warpgroup multiplies each box by x on wgmma;
//   - after a unit every CTA writes its partial tile to shared memory and arrives on a barrier
//     in each CTA of the cluster; each then sums a share of the tile over the ranks in rank
//     order, read from their shared memory (deterministic, no global scratch), while its
//     producer keeps filling the ring with the next unit. Two partial buffers alternate, so the
//     barrier of a unit also tells that every rank is done reading the unit before.
// The host picks the cluster size that leaves the least on the busiest SM (weights, plus x
// counted at half since it comes from L2).

#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backends/cuda/cluster_launch.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/linear_resident.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace inferscale::backends::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kTokens = 32;
constexpr int kRows = 64;                  // weight rows of a unit: one wgmma M
constexpr int kHalves = kRows / 64;
constexpr int kConsumers = 128;            // one warpgroup
constexpr int kProducerWarp = kConsumers / 32, kReducerWarp = kProducerWarp + 1;
constexpr int kThreads = kConsumers + 64;  // the producer warp, the reducer warp
constexpr int kRowBytes = kTmaKBlock * 2;
constexpr int kStageBytes = kRows * kRowBytes;     // one ring stage: a box of weights
constexpr int kXBlockBytes = kTokens * kRowBytes;  // x of one k block
constexpr int kElems = kRows * kTokens;
constexpr int kRegs = kElems / kConsumers / kHalves;
constexpr int kPartialBytes = kElems * 4;
constexpr int kShare = kElems / 32;  // elements a reducer thread sums, at most
constexpr int kSmemBytes = 227 * 1024;
constexpr int kMinDepth = 6, kMaxDepth = 24;

struct Params {
    CUtensorMap w[kSmallLinearMaxTargets];  // [out, in] per target, boxes of kRows x 64
    CUtensorMap x;                          // [n, in], boxes of kTokens x 64
    int n;
    int blocks;    // 64-wide k blocks of in
    int x_blocks;  // k blocks a CTA holds: its rank's share, rounded up
    int depth;     // ring stages
    int units, clusters;
    int nomath, spin;
    LinearTargets targets;  // units of kRows rows
};

// Byte offsets from the 1024-aligned base of shared memory: the ring, x, two partial tiles,
// then the barriers (full and empty per stage, ready per partial tile).
struct Layout {
    unsigned x, partials, full, empty, ready, written, done, end;
};

__host__ __device__ Layout layout(int depth, int x_blocks) {
    Layout l{};
    l.x = static_cast<unsigned>(depth * kStageBytes);
    l.partials = l.x + static_cast<unsigned>(x_blocks * kXBlockBytes);
    l.full = l.partials + 2 * kPartialBytes;
    l.empty = l.full + 8 * static_cast<unsigned>(depth);
    l.ready = l.empty + 8 * static_cast<unsigned>(depth);
    l.written = l.ready + 16;
    l.done = l.written + 16;
    l.end = l.done + 16;
    return l;
}

__global__ void __launch_bounds__(kThreads, 1)
    resident_linear_kernel(const __grid_constant__ Params p) {
    extern __shared__ __align__(1024) unsigned char smem[];
    allow_next_launch();
    cg::cluster_group cluster = cg::this_cluster();
    const int splits = static_cast<int>(cluster.num_blocks());
    const int rank = static_cast<int>(cluster.block_rank());
    const int group = static_cast<int>(blockIdx.x) / splits;
    const int u_begin = static_cast<int>(static_cast<long long>(p.units) * group / p.clusters);
    const int u_end = static_cast<int>(static_cast<long long>(p.units) * (group + 1) / p.clusters);
    const int kb0 = p.blocks * rank / splits, nkb = p.blocks * (rank + 1) / splits - kb0;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    const unsigned smem_base = smem_addr(smem);
    const unsigned base = (smem_base + 1023) & ~1023u;  // the 128-byte swizzle's 1024-byte unit
    const Layout l = layout(p.depth, p.x_blocks);
    const unsigned xs = base + l.x, full = base + l.full, empty = base + l.empty;
    const unsigned ready = base + l.ready, written = base + l.written, done = base + l.done;
    float* partials = reinterpret_cast<float*>(smem + (base - smem_base) + l.partials);
    if (tid == 0) {
        for (int s = 0; s < p.depth; ++s) {
            tma::barrier_init(full + 8 * s, 1);
            tma::barrier_init(empty + 8 * s, kConsumers / 32);
        }
        for (int b = 0; b < 2; ++b) {
            tma::barrier_init(ready + 8 * b, static_cast<unsigned>(splits));
            tma::barrier_init(done + 8 * b, static_cast<unsigned>(splits));
            tma::barrier_init(written + 8 * b, kConsumers / 32);
        }
        tma::fence_barrier_init();
    }
    __syncthreads();
    // No rank arrives on another's ready barriers before they are initialised: the consumers
    // wait for this before their first unit.
    tma::cluster_arrive();

    if (warp == kProducerWarp) {
        if (lane == 0) {
            int row0 = 0;
            int target = p.targets.find(u_begin, kRows, row0);
            // The first unit's stages also bring x's block of the same k.
            const auto fill = [&](int slot, int b, bool with_x) {
                tma::arrive_expect(full + 8 * slot, kStageBytes + (with_x ? kXBlockBytes : 0));
                tma::load_2d(base + slot * kStageBytes, &p.w[target], (kb0 + b) * kTmaKBlock,
                             row0, full + 8 * slot);
            };
            // Weights are constant: the first stages are asked for before the inputs are ready.
            const int pre = min(p.depth, nkb);
            for (int b = 0; b < pre; ++b) fill(b, b, true);
            wait_for_inputs();
            for (int b = 0; b < nkb; ++b) {
                if (b >= pre) {
                    const int slot = b % p.depth;
                    if (b >= p.depth) { if (p.spin) tma::wait_spin(empty + 8 * slot, (b / p.depth - 1) & 1); else tma::wait(empty + 8 * slot, (b / p.depth - 1) & 1); }
                    fill(slot, b, true);
                }
                tma::load_2d(xs + b * kXBlockBytes, &p.x, (kb0 + b) * kTmaKBlock, 0,
                             full + 8 * (b % p.depth));
            }
            int g = nkb;  // stages filled so far
            for (int u = u_begin + 1; u < u_end; ++u) {
                target = p.targets.find(u, kRows, row0);
                for (int b = 0; b < nkb; ++b, ++g) {
                    const int slot = g % p.depth;
                    if (g >= p.depth) { if (p.spin) tma::wait_spin(empty + 8 * slot, (g / p.depth - 1) & 1); else tma::wait(empty + 8 * slot, (g / p.depth - 1) & 1); }
                    fill(slot, b, false);
                }
            }
        }
        tma::cluster_wait();
    } else if (warp < kProducerWarp) {
        wait_for_inputs();
        tma::cluster_wait();
        // Stage g's multiplies stay in flight while stage g + 1's are issued; a stage is
        // released once the group after it is issued and it has completed.
        const auto release = [&](int stage) {
            __syncwarp();
            if (lane == 0) tma::arrive(empty + 8 * (stage % p.depth));
        };
        int g = 0;
        for (int u = u_begin, i = 0; u < u_end; ++u, ++i) {
            float acc[kHalves][kRegs] = {};
            for (int b = 0; b < nkb; ++b, ++g) {
                const int slot = g % p.depth;
                tma::wait(full + 8 * slot, (g / p.depth) & 1);
                const unsigned a = base + slot * kStageBytes, xb = xs + b * kXBlockBytes;
                wgmma::fence();
                if (!p.nomath)
#pragma unroll
                for (int ks = 0; ks < kTmaKBlock / 16; ++ks) {
#pragma unroll
                    for (int h = 0; h < kHalves; ++h) {
                        wgmma::Wgmma<kTokens>::mma(acc[h],
                                                   wgmma::descriptor(a + h * 64 * kRowBytes + 32 * ks),
                                                   wgmma::descriptor(xb + 32 * ks));
                    }
                }
                wgmma::commit();
                wgmma::wait<1>();
                if (b > 0) release(g - 1);
            }
            wgmma::wait<0>();
            release(g - 1);
            // The partial tile as [token][row], so that each rank's share is whole tokens, in
            // the buffer every rank finished reading two units ago.
            const int buf = i & 1;
            float* part = partials + buf * kElems;
            if (i >= 2) tma::wait_cluster(done + 8 * buf, ((i - 2) >> 1) & 1);
#pragma unroll
            for (int h = 0; h < kHalves; ++h) {
#pragma unroll
            for (int r = 0; r < kRegs; ++r) {
                part[wgmma::accumulator_column(lane, r) * kRows + 64 * h +
                     wgmma::accumulator_row(warp, lane, r)] = acc[h][r];
            }
            }
            __syncwarp();
            if (lane == 0) tma::arrive(written + 8 * buf);
        }
    } else if (warp == kReducerWarp) {
        // Unit i's partials, once every rank has written its own: this rank's share of the
        // tile summed over the ranks in rank order, read from their shared memory; then every
        // rank learns that this one is done reading its buffer.
        wait_for_inputs();
        tma::cluster_wait();
        for (int u = u_begin, i = 0; u < u_end; ++u, ++i) {
            const int buf = i & 1;
            tma::wait(written + 8 * buf, (i >> 1) & 1);
            if (lane == 0) {
                for (int q = 0; q < splits; ++q) {
                    tma::arrive_in_cta(ready + 8 * buf, static_cast<unsigned>(q));
                }
            }
            tma::wait_cluster(ready + 8 * buf, (i >> 1) & 1);
            const float* part = partials + buf * kElems;
            int row0 = 0;
            const int target = p.targets.find(u, kRows, row0);
            const int out = p.targets.out[target];
            const int e0 = kElems * rank / splits + lane, e1 = kElems * (rank + 1) / splits;
            float v[kShare];
#pragma unroll
            for (int j = 0; j < kShare; ++j) v[j] = 0.0f;
            for (int q = 0; q < splits; ++q) {
                const float* src = cluster.map_shared_rank(part, q);
#pragma unroll
                for (int j = 0; j < kShare; ++j) {
                    const int e = e0 + j * 32;
                    if (e < e1 && e / kRows < p.n) v[j] += src[e];
                }
            }
            __syncwarp();
            if (lane == 0) {
                for (int q = 0; q < splits; ++q) {
                    tma::arrive_in_cta(done + 8 * buf, static_cast<unsigned>(q));
                }
            }
#pragma unroll
            for (int j = 0; j < kShare; ++j) {
                const int e = e0 + j * 32, token = e / kRows, row = row0 + e % kRows;
                if (e < e1 && token < p.n && row < out) p.targets.store(target, token, row, v[j]);
            }
        }
    }
    cluster.sync();  // no CTA leaves while another still reads its shared memory
}

// Shared memory a launch holding x_blocks of x leaves to the ring, in stages.
int ring_depth(int x_blocks) {
    const int fixed = 1024 + static_cast<int>(layout(kMaxDepth, x_blocks).end) -
                      kMaxDepth * kStageBytes;
    return std::min(kMaxDepth, (kSmemBytes - fixed) / kStageBytes);
}

}  // namespace

ClusterLinearLimits init_resident_linear() {
    IS_CUDA_CHECK(cudaFuncSetAttribute(resident_linear_kernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return measure_cluster_occupancy<ClusterLinearLimits>(resident_linear_kernel, kThreads,
                                                          kSmemBytes);
}

bool launch_resident_linear(const bf16* x, int n, int in, LinearTargets targets,
                            const ClusterLinearLimits& limits, cudaStream_t stream) {
    if (n < 1 || n > kTokens) return false;
    Params p{};
    p.n = n;
    p.blocks = (in + kTmaKBlock - 1) / kTmaKBlock;
    p.units = targets.cut(kRows);
    p.targets = targets;
    // Per cluster size: the busiest CTA's weight bytes, plus its x at half weight.
    int splits = 0;
    double best = 0.0;
    for (int s = 1; s <= kMaxClusterSplits; ++s) {
        const int x_blocks = (p.blocks + s - 1) / s;
        if (limits.ctas[s] < s || p.blocks / s < 2 || ring_depth(x_blocks) < kMinDepth) continue;
        static const int forced = std::getenv("RESIDENT_SPLITS") ? std::atoi(std::getenv("RESIDENT_SPLITS")) : 0;
        if (forced != 0 && s != forced) continue;
        const int clusters = std::min(limits.ctas[s] / s, p.units);
        const int units = (p.units + clusters - 1) / clusters;
        const double cost = (static_cast<double>(units) * kStageBytes + 0.5 * kXBlockBytes) *
                            x_blocks;
        if (splits == 0 || cost < best) {
            splits = s;
            best = cost;
            p.x_blocks = x_blocks;
            p.clusters = clusters;
        }
    }
    if (splits == 0) return false;
    p.depth = ring_depth(p.x_blocks);
    if (std::getenv("RESIDENT_DEPTH")) p.depth = std::min(p.depth, std::atoi(std::getenv("RESIDENT_DEPTH")));
    p.nomath = std::getenv("RESIDENT_NOMATH") ? 1 : 0;
    p.spin = std::getenv("RESIDENT_SPIN") ? 1 : 0;
    {
        static long long seen[64];
        static int nseen = 0;
        const long long key = p.units * 100000LL + p.blocks;
        bool found = false;
        for (int i = 0; i < nseen; ++i) found |= seen[i] == key;
        if (!found && nseen < 64) {
            seen[nseen++] = key;
            std::fprintf(stderr, "resident: units %d blocks %d -> splits %d clusters %d depth %d x_blocks %d (ctas %d %d %d %d)\n",
                         p.units, p.blocks, splits, p.clusters, p.depth, p.x_blocks, limits.ctas[1], limits.ctas[2], limits.ctas[4], limits.ctas[8]);
        }
    }
    for (int i = 0; i < targets.count; ++i) {
        if (!encode_rows(&p.w[i], targets.w[i], in, targets.out[i], kRows)) return false;
    }
    if (!encode_rows(&p.x, x, in, n, kTokens)) return false;
    cudaLaunchAttribute attributes[2];
    const cudaLaunchConfig_t config =
        cluster_config(dim3(static_cast<unsigned>(p.clusters * splits)), kThreads, kSmemBytes,
                       stream, attributes, splits);
    IS_CUDA_CHECK(cudaLaunchKernelEx(&config, resident_linear_kernel, p));
    return true;
}

}  // namespace inferscale::backends::cuda
