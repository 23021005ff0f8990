// Linear for 17..128 tokens (kLinearKernels' Cluster rows) on TMA and wgmma with k split across a
// thread-block cluster (see linear_small.h). At these sizes the weights are still the bytes that
// count, but the math is no longer free and a CTA tile per 128 weight rows leaves most SMs idle on
// the narrow shapes (o and down: 32 tiles on 132 SMs). So:
//   - a CTA owns kRows weight rows and one k range. A producer warp fills a kStages-deep ring:
//     per stage one TMA box of the weight rows and one of x, kKBlock wide, in the 128-byte
//     swizzle wgmma reads (tma.cuh; a full barrier per stage counts their bytes). Two
//     warpgroups each multiply 64 of the rows by all of x on wgmma (wgmma.cuh) and free the
//     stage on its empty barrier;
//   - the `splits` CTAs of a cluster take consecutive k ranges of the same rows, then each
//     stores 1/splits of the tile after summing the CTAs' partials in rank order straight from
//     their shared memory (distributed shared memory): no global scratch, no counters, and the
//     sum order is fixed, so results are deterministic.
// Filling a stage with per-thread cp.async instead cost 5-8 copies per thread and bound the
// kernel on issuing them. The host picks
// splits so that tiles x splits fill whole waves of the clusters that fit at once
// (init_cluster_linear measures how many of each size do) and encodes the tensor maps of the
// weights and of x per launch.

#include <cooperative_groups.h>
#include <cudaTypedefs.h>

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/linear_cluster.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace inferscale::backends::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kRows = 128;                 // weight rows per CTA tile
constexpr int kConsumers = 256;            // two warpgroups, 64 weight rows each
constexpr int kThreads = kConsumers + 32;  // and the producer warp
constexpr int kKBlock = 64;                // k elements per ring stage: 128-byte rows
constexpr int kRowBytes = kKBlock * 2;

template <int kTokens, int kStages>
struct Layout {
    static constexpr int kWBytes = kRows * kRowBytes;
    static constexpr int kStageBytes = kWBytes + kTokens * kRowBytes;
    static constexpr int kRingBytes = kStages * kStageBytes;        // 1024-aligned in smem
    static constexpr int kElems = kRows * kTokens;                  // f32 partials of the tile
    static constexpr int kRegs = kElems / kConsumers;               // accumulators per thread
    static constexpr int kBarrierOffset = kRingBytes + kElems * 4;  // full[], empty[]
    static constexpr int kSmemBytes = 1024 + kBarrierOffset + 2 * kStages * 8;
};

struct Params {
    CUtensorMap w[kSmallLinearMaxTargets];  // [out, in] per target, boxes of kRows x kKBlock
    CUtensorMap x;                          // [n, in], boxes of kTokens x kKBlock
    int n, in;
    LinearTargets targets;  // units: tiles of kRows rows
};

template <int kTokens, int kStages>
__global__ void __launch_bounds__(kThreads, 1)
    cluster_linear_kernel(const __grid_constant__ Params p) {
    using L = Layout<kTokens, kStages>;
    extern __shared__ __align__(128) unsigned char smem[];
    allow_next_launch();
    cg::cluster_group cluster = cg::this_cluster();
    const int splits = static_cast<int>(cluster.num_blocks());
    const int split = static_cast<int>(cluster.block_rank());
    int row0 = 0;
    const int target = p.targets.find(static_cast<int>(blockIdx.x) / splits, kRows, row0);
    const int blocks = (p.in + kKBlock - 1) / kKBlock;
    const int kb_begin = blocks * split / splits;
    const int iters = blocks * (split + 1) / splits - kb_begin;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    const auto smem_base = smem_addr(smem);
    const unsigned ring = (smem_base + 1023) & ~1023u;  // the 128-byte swizzle's 1024-byte unit
    float* partial = reinterpret_cast<float*>(smem + (ring - smem_base) + L::kRingBytes);
    const unsigned full = ring + L::kBarrierOffset, empty = full + kStages * 8;
    if (tid == 0) {
        for (int s = 0; s < kStages; ++s) {
            tma::barrier_init(full + 8 * s, 1);
            tma::barrier_init(empty + 8 * s, kConsumers / 32);
        }
        tma::fence_barrier_init();
    }
    __syncthreads();

    if (warp == kConsumers / 32) {
        if (lane == 0) {
            // Weights are constant: the first stages' weights are requested before the inputs
            // are ready; x follows once they are.
            const CUtensorMap* w = &p.w[target];
            const int first = min(kStages, iters);
            for (int s = 0; s < first; ++s) {
                tma::arrive_expect(full + 8 * s, L::kStageBytes);
                tma::load_2d(ring + s * L::kStageBytes, w, (kb_begin + s) * kKBlock, row0,
                             full + 8 * s);
            }
            wait_for_inputs();
            for (int s = 0; s < first; ++s) {
                tma::load_2d(ring + s * L::kStageBytes + L::kWBytes, &p.x,
                             (kb_begin + s) * kKBlock, 0, full + 8 * s);
            }
            for (int g = kStages; g < iters; ++g) {
                const int slot = g % kStages;
                tma::wait(empty + 8 * slot, (g / kStages - 1) & 1);
                tma::arrive_expect(full + 8 * slot, L::kStageBytes);
                const unsigned stage = ring + slot * L::kStageBytes;
                const int k = (kb_begin + g) * kKBlock;
                tma::load_2d(stage, w, k, row0, full + 8 * slot);
                tma::load_2d(stage + L::kWBytes, &p.x, k, 0, full + 8 * slot);
            }
        }
    } else {
        wait_for_inputs();
        float acc[L::kRegs] = {};
        for (int g = 0; g < iters; ++g) {
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
        // Partials into this CTA's shared memory in accumulator order (element e: lane e % 32
        // of warp e / 32 / kRegs, register e / 32 % kRegs).
#pragma unroll
        for (int r = 0; r < L::kRegs; ++r) partial[(warp * L::kRegs + r) * 32 + lane] = acc[r];
    }

    // Every CTA of the cluster sums its share of the elements over all ranks in rank order.
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
    cluster.sync();  // no CTA leaves while another still reads its shared memory
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

// The split count whose waves of clusters waste the least of the device: a wave streams the
// same bytes per SM whatever the split, so the cost is waves / splits, plus a little per extra
// rank for the partial sums. Each CTA keeps at least kStages k blocks so its ring fills.
int choose_splits(int tiles, int blocks, int stages, const ClusterLinearLimits& limits) {
    int best = 1;
    double best_cost = 0.0;
    for (int s = 1; s <= kMaxClusterSplits; ++s) {
        if (limits.ctas[s] < s || (s > 1 && blocks / s < stages)) continue;
        const int waves = (tiles * s + limits.ctas[s] - 1) / limits.ctas[s];
        const double cost = static_cast<double>(waves) / s * (1.0 + 0.03 * (s - 1));
        if (s == 1 || cost < best_cost) {
            best = s;
            best_cost = cost;
        }
    }
    return best;
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

template <int kTokens, int kStages>
bool launch(const bf16* x, int n, int in, const LinearTargets& targets, int tiles,
            const ClusterLinearLimits& limits, cudaStream_t stream) {
    Params p{};
    for (int i = 0; i < targets.count; ++i) {
        if (!encode_rows(&p.w[i], targets.w[i], in, targets.out[i], kRows)) return false;
    }
    if (!encode_rows(&p.x, x, in, n, kTokens)) return false;
    p.n = n;
    p.in = in;
    p.targets = targets;
    const int splits = choose_splits(tiles, (in + kKBlock - 1) / kKBlock, kStages, limits);
    cudaLaunchAttribute attributes[2];
    const cudaLaunchConfig_t config =
        cluster_config(dim3(static_cast<unsigned>(tiles * splits)),
                       Layout<kTokens, kStages>::kSmemBytes, stream, attributes, splits);
    IS_CUDA_CHECK(cudaLaunchKernelEx(&config, kKernel<kTokens, kStages>, p));
    return true;
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
        cudaLaunchConfig_t config =
            cluster_config(dim3(static_cast<unsigned>(s)), largest, nullptr, attributes, s);
        config.numAttrs = 1;  // the cluster shape only
        int clusters = 0;
        IS_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, measured, &config));
        limits.ctas[s] = clusters * s;
    }
    return limits;
}

bool launch_cluster_linear(LinearKernel kernel, const bf16* x, int n, int in, LinearTargets targets,
                           const ClusterLinearLimits& limits, cudaStream_t stream) {
    if (n < 1 || n > 128 || limits.ctas[1] < 1) return false;
    const int tiles = targets.cut(kRows);
    switch (kernel) {
        case LinearKernel::Cluster32:
            return launch<32, 8>(x, n, in, targets, tiles, limits, stream);
        case LinearKernel::Cluster64:
            return launch<64, 7>(x, n, in, targets, tiles, limits, stream);
        case LinearKernel::Cluster128:
            return launch<128, 5>(x, n, in, targets, tiles, limits, stream);
        default: return false;
    }
}

}  // namespace inferscale::backends::cuda
