// Linear for 17..32 tokens as a token split over CTA pairs (see linear_small.h). The op streams
// weights; splitting k across CTAs leaves partial tiles to exchange, and every exchange tried
// (distributed shared memory per unit, global scratch summed by the last rank) stalled the
// stream (docs/results/linear_resident_x_h200_2026-12-04_s20.txt). So k is not split:
//   - the two CTAs of a cluster take tokens 0..15 and 16..31;
//   - units of 64 weight rows (one wgmma's M) over all k are dealt out evenly over a persistent
//     grid of pairs; a ring stage holds two weight boxes (64 rows x 64 k, 128-byte swizzle) of
//     adjacent k and the CTA's x for the same k (its 16 tokens); each stage's weights are asked
//     for by one CTA of the pair in turn and multicast into both, so every weight byte is read
//     once, and each CTA asks for its own x (from L2) beside them;
//   - a ring slot is refilled once the consumers of both CTAs have released it (their arrivals
//     count on the empty barrier of each CTA); the first stages' weights are asked for before
//     the inputs are ready;
//   - two warpgroups take alternate stages, each with an accumulator per 16-wide k step, so a
//     stage's products do not wait on each other; at a unit's end the second warpgroup's sums
//     reach the first through shared memory, which adds them in a fixed order and stores.

#include <cooperative_groups.h>

#include <algorithm>

#include "backends/cuda/cluster_launch.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/linear_multicast.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace inferscale::backends::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kPair = 2;                   // CTAs of a cluster
constexpr int kTokens = 16;                // tokens of a CTA
constexpr int kRows = 64;                  // weight rows of a unit: one wgmma's M
constexpr int kGroups = 2;                            // consumer warpgroups, alternate stages
constexpr int kConsumers = kGroups * 128;
constexpr int kThreads = kConsumers + 32;  // and the producer warp
constexpr int kRowBytes = kTmaKBlock * 2;
constexpr int kBoxes = 2;                           // weight boxes (adjacent k blocks) a stage
constexpr int kBoxBytes = kRows * kRowBytes;
constexpr int kXBlockBytes = kTokens * kRowBytes;  // x of one k block
constexpr int kWeightBytes = kBoxes * kBoxBytes;   // a stage: its weights, then its x
constexpr int kStageBytes = kWeightBytes + kBoxes * kXBlockBytes;
constexpr int kSteps = kTmaKBlock / 16;            // wgmma k steps a stage, an accumulator each
constexpr int kRegs = wgmma::Wgmma<kTokens>::kRegs;
constexpr int kSmemBytes = 227 * 1024;
constexpr int kSumBytes = kRows * kTokens * 4;  // the second warpgroup's sums of a unit
constexpr int kMaxDepth = 24;

struct Params {
    CUtensorMap w[kSmallLinearMaxTargets];  // [out, in] per target, boxes of kRows x 64
    CUtensorMap x;                          // [n, in], boxes of kTokens x 64
    int n;
    int blocks;  // 64-wide k blocks of in
    int depth;   // ring stages
    int units, pairs;
    LinearTargets targets;  // units of kRows rows
};

// Byte offsets from the 1024-aligned base of shared memory: the ring, two sum buffers, then the
// barriers.
struct Layout {
    unsigned sums, full, empty, end;
};

__host__ __device__ constexpr Layout layout(int depth) {
    Layout l{};
    l.sums = static_cast<unsigned>(depth * kStageBytes);
    l.full = l.sums + 2 * kSumBytes;
    l.empty = l.full + 8 * static_cast<unsigned>(depth);
    l.end = l.empty + 8 * static_cast<unsigned>(depth);
    return l;
}

__global__ void __launch_bounds__(kThreads, 1)
    multicast_linear_kernel(const __grid_constant__ Params p) {
    extern __shared__ __align__(1024) unsigned char smem[];
    allow_next_launch();
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned rank = cluster.block_rank(), peer = rank ^ 1u;
    const int pair = static_cast<int>(blockIdx.x) / kPair;
    const int u_begin = static_cast<int>(static_cast<long long>(p.units) * pair / p.pairs);
    const int u_end = static_cast<int>(static_cast<long long>(p.units) * (pair + 1) / p.pairs);
    const int per_unit = p.blocks / kBoxes;
    const int stages = (u_end - u_begin) * per_unit;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    const unsigned smem_base = smem_addr(smem);
    const unsigned base = (smem_base + 1023) & ~1023u;  // the 128-byte swizzle's 1024-byte unit
    const Layout l = layout(p.depth);
    const unsigned full = base + l.full, empty = base + l.empty;
    if (tid == 0) {
        for (int s = 0; s < p.depth; ++s) {
            tma::barrier_init(full + 8 * s, 1);
            tma::barrier_init(empty + 8 * s, kPair * 4);  // the stage's warpgroup in both CTAs
        }
        tma::fence_barrier_init();
    }
    // Both CTAs' barriers are ready before either multicasts into the other.
    cluster.sync();

    if (warp == kConsumers / 32) {
        if (lane == 0) {
            int unit = -1, target = 0, row0 = 0;
            // Stage g: this CTA's barrier expects the weight boxes and its x; the weights are
            // asked for by the CTA whose turn it is, for both.
            const auto fill = [&](int g) {
                const int slot = g % p.depth, b = g % per_unit;
                tma::arrive_expect(full + 8 * slot, kStageBytes);
                if (g % kPair != static_cast<int>(rank)) return;
                if (u_begin + g / per_unit != unit) {
                    unit = u_begin + g / per_unit;
                    target = p.targets.find(unit, kRows, row0);
                }
                for (int j = 0; j < kBoxes; ++j) {
                    tma::load_2d_multicast(base + slot * kStageBytes + j * kBoxBytes,
                                           &p.w[target], (kBoxes * b + j) * kTmaKBlock, row0,
                                           full + 8 * slot, (1u << kPair) - 1);
                }
            };
            const auto load_x = [&](int g) {
                const int slot = g % p.depth, b = g % per_unit;
                for (int j = 0; j < kBoxes; ++j) {
                    tma::load_2d(base + slot * kStageBytes + kWeightBytes + j * kXBlockBytes,
                                 &p.x, (kBoxes * b + j) * kTmaKBlock,
                                 static_cast<int>(rank) * kTokens, full + 8 * slot);
                }
            };
            // Weights are constant: the first stages' are asked for before the inputs are ready.
            const int pre = min(p.depth, stages);
            for (int g = 0; g < pre; ++g) fill(g);
            wait_for_inputs();
            for (int g = 0; g < pre; ++g) load_x(g);
            for (int g = pre; g < stages; ++g) {
                tma::wait(empty + 8 * (g % p.depth), (g / p.depth - 1) & 1);
                fill(g);
                load_x(g);
            }
        }
    } else {
        wait_for_inputs();
        // A stage is released in both CTAs once the group after it is issued and it is done.
        const auto release = [&](int g) {
            __syncwarp();
            if (lane == 0) {
                const unsigned bar = empty + 8 * (g % p.depth);
                tma::arrive(bar);
                tma::arrive_in_cta(bar, peer);
            }
        };
        // Warpgroup wg takes the stages g with g % kGroups == wg; at a unit's end the second
        // leaves its sums in shared memory (two buffers by unit parity) and the first adds them
        // to its own and stores.
        const int wg = warp / 4, wg_warp = warp % 4;
        float* sums = reinterpret_cast<float*>(smem + (base - smem_base) + l.sums);
        int g = wg, prev = -1;
        for (int u = u_begin, i = 0; u < u_end; ++u, ++i) {
            float acc[kSteps][kRegs] = {};
            for (; g < (u - u_begin + 1) * per_unit; g += kGroups) {
                const int slot = g % p.depth;
                tma::wait(full + 8 * slot, (g / p.depth) & 1);
                wgmma::fence();
#pragma unroll
                for (int j = 0; j < kBoxes; ++j) {
                    const unsigned a = base + slot * kStageBytes + j * kBoxBytes;
                    const unsigned xb = base + slot * kStageBytes + kWeightBytes + j * kXBlockBytes;
#pragma unroll
                    for (int ks = 0; ks < kSteps; ++ks) {
                        wgmma::Wgmma<kTokens>::mma(acc[ks], wgmma::descriptor(a + 32 * ks),
                                                   wgmma::descriptor(xb + 32 * ks));
                    }
                }
                wgmma::commit();
                wgmma::wait<1>();
                if (prev >= 0) release(prev);
                prev = g;
            }
            wgmma::wait<0>();
            if (prev >= 0) release(prev);
            prev = -1;
            float* unit_sums = sums + (i & 1) * (kSumBytes / 4);
            float v[kRegs];
#pragma unroll
            for (int r = 0; r < kRegs; ++r) {
                v[r] = acc[0][r];
#pragma unroll
                for (int ks = 1; ks < kSteps; ++ks) v[r] += acc[ks][r];
                if (wg == 1) unit_sums[(wg_warp * kRegs + r) * 32 + lane] = v[r];
            }
            asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory");
            if (wg == 1) continue;
            int row0 = 0;
            const int target = p.targets.find(u, kRows, row0);
            const int out = p.targets.out[target];
#pragma unroll
            for (int r = 0; r < kRegs; ++r) {
                const float sum = v[r] + unit_sums[(wg_warp * kRegs + r) * 32 + lane];
                const int row = row0 + wgmma::accumulator_row(wg_warp, lane, r);
                const int token =
                    static_cast<int>(rank) * kTokens + wgmma::accumulator_column(lane, r);
                if (token < p.n && row < out) p.targets.store(target, token, row, sum);
            }
        }
    }
    // No CTA leaves while its peer may still arrive on its barriers.
    cluster.sync();
}

// Ring stages that fit beside the sums and the barriers.
constexpr int ring_depth() {
    const int fixed = 1024 + static_cast<int>(layout(kMaxDepth).end) - kMaxDepth * kStageBytes;
    return std::min(kMaxDepth, (kSmemBytes - fixed) / kStageBytes);
}

}  // namespace

ClusterLinearLimits init_multicast_linear() {
    IS_CUDA_CHECK(cudaFuncSetAttribute(multicast_linear_kernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return measure_cluster_occupancy<ClusterLinearLimits>(multicast_linear_kernel, kThreads,
                                                          kSmemBytes);
}

bool launch_multicast_linear(const bf16* x, int n, int in, LinearTargets targets,
                             const ClusterLinearLimits& limits, cudaStream_t stream) {
    if (n <= kTokens || n > kPair * kTokens || limits.ctas[kPair] < kPair) return false;
    Params p{};
    p.n = n;
    p.blocks = (in + kTmaKBlock - 1) / kTmaKBlock;
    if (p.blocks % kBoxes != 0) return false;
    p.depth = ring_depth();
    p.units = targets.cut(kRows);
    p.pairs = std::min(limits.ctas[kPair] / kPair, p.units);
    p.targets = targets;
    for (int i = 0; i < targets.count; ++i) {
        if (!encode_rows(&p.w[i], targets.w[i], in, targets.out[i], kRows)) return false;
    }
    if (!encode_rows(&p.x, x, in, n, kTokens)) return false;
    cudaLaunchAttribute attributes[2];
    const cudaLaunchConfig_t config =
        cluster_config(dim3(static_cast<unsigned>(p.pairs * kPair)), kThreads, kSmemBytes,
                       stream, attributes, kPair);
    IS_CUDA_CHECK(cudaLaunchKernelEx(&config, multicast_linear_kernel, p));
    return true;
}

}  // namespace inferscale::backends::cuda
