// Small-batch linear on mma.sync (see linear_small.h). One CTA owns a tile of kM * 16 weight
// rows of one target and a k range; its kWarps warps split that range, and the grid's y
// dimension splits k further when the targets have too few tiles to fill the device.
//
// The dot product does not care in which order k is visited, as long as weights and x use the
// same order. So instead of building the m16n8k16 fragments from their nominal k positions,
// lane 4g + t loads 16 contiguous bytes (8 bf16 at k = 32c + 8t) of weight rows g and g + 8 and
// of token g's x row, and feeds registers .x/.y to one mma and .z/.w to the next: every
// fragment register then pairs a weight and an x element of the same k. Loads are wide and
// each quad reads 64 contiguous bytes of a row, so the weight stream runs at DRAM rate while
// the tensor cores do the (at most 16-token) arithmetic.

#include "backends/cuda/attention_tc.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/device_utils.cuh"
#include "backends/cuda/linear_cluster.cuh"
#include "backends/cuda/linear_gemv.cuh"
#include "backends/cuda/linear_small.h"

namespace inferscale::backends::cuda {
namespace {

constexpr int kChunk = 32;  // k elements per warp step: 4 lanes x 8

struct Params {
    const bf16* x;
    int n, in;
    int splits;
    LinearTargets targets;  // units: CTA tiles of kM * 16 rows
    float* partials;
    int* counters;
};

// kM 16-row tiles per CTA, kN 8-token tiles, kU k chunks in flight per warp, kWarps warps.
template <int kM, int kN, int kU, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) small_linear_kernel(Params p) {
    constexpr int kRows = kM * 16, kTokens = kN * 8, kElems = kRows * kTokens;
    constexpr int kSums = (kElems + kWarps * 32 - 1) / (kWarps * 32);  // elements per thread
    __shared__ float red[kWarps][kElems];
    __shared__ bool last;
    allow_next_launch();

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int tile = blockIdx.x;
    int row0 = 0;
    const int target = p.targets.find(tile, kRows, row0);
    const int out = p.targets.out[target];
    const bf16* w = p.targets.w[target];

    // Rows past `out` re-read the last row; their sums are never stored.
    const bf16* wrow[kM][2];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = min(row0 + m * 16 + h * 8 + g, out - 1);
            wrow[m][h] = w + static_cast<std::int64_t>(r) * p.in + 8 * t;
        }
    }
    const bf16* xrow[kN];
    bool xvalid[kN];
#pragma unroll
    for (int j = 0; j < kN; ++j) {
        const int token = j * 8 + g;
        xvalid[j] = token < p.n;
        xrow[j] = p.x + static_cast<std::int64_t>(min(token, p.n - 1)) * p.in + 8 * t;
    }

    const int chunks = (p.in + kChunk - 1) / kChunk;
    const int slices = p.splits * kWarps, slice = blockIdx.y * kWarps + warp;
    const int c_begin = static_cast<int>(static_cast<std::int64_t>(chunks) * slice / slices);
    const int c_end = static_cast<int>(static_cast<std::int64_t>(chunks) * (slice + 1) / slices);

    // Weights for step c + kU are requested before step c is multiplied, so every warp keeps
    // two steps of loads in flight.
    const auto load_weights = [&](int c, uint4(&a)[kU][kM][2]) {
#pragma unroll
        for (int u = 0; u < kU; ++u) {
            const int k = (c + u) * kChunk;
            const bool ok = c + u < c_end && k + 8 * t < p.in;
#pragma unroll
            for (int m = 0; m < kM; ++m) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    a[u][m][h] = ok ? load_once16(wrow[m][h] + k) : make_uint4(0, 0, 0, 0);
                }
            }
        }
    };
    float acc[kM][kN][4] = {};
    uint4 a[kU][kM][2];
    load_weights(c_begin, a);  // weights are constant: requested before the inputs are ready
    wait_for_inputs();
    for (int c = c_begin; c < c_end; c += kU) {
        uint4 next[kU][kM][2];
        load_weights(c + kU, next);
#pragma unroll
        for (int u = 0; u < kU; ++u) {
            const int k = (c + u) * kChunk;
            const bool ok = c + u < c_end && k + 8 * t < p.in;
            uint4 b[kN];
#pragma unroll
            for (int j = 0; j < kN; ++j) {
                b[j] = ok && xvalid[j] ? __ldg(reinterpret_cast<const uint4*>(xrow[j] + k))
                                       : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int m = 0; m < kM; ++m) {
                const unsigned lo[4] = {a[u][m][0].x, a[u][m][1].x, a[u][m][0].y, a[u][m][1].y};
                const unsigned hi[4] = {a[u][m][0].z, a[u][m][1].z, a[u][m][0].w, a[u][m][1].w};
#pragma unroll
                for (int j = 0; j < kN; ++j) {
                    tc::mma_bf16(acc[m][j], lo, b[j].x, b[j].y);
                    tc::mma_bf16(acc[m][j], hi, b[j].z, b[j].w);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < kU; ++u) {
#pragma unroll
            for (int m = 0; m < kM; ++m) {
                a[u][m][0] = next[u][m][0];
                a[u][m][1] = next[u][m][1];
            }
        }
    }

    // Accumulator (m, j, i) is weight row m*16 + g + 8*(i/2), token j*8 + 2t + i%2; the CTA's
    // warps are summed in warp order, so the result does not depend on timing.
#pragma unroll
    for (int m = 0; m < kM; ++m) {
#pragma unroll
        for (int j = 0; j < kN; ++j) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int row = m * 16 + g + 8 * (i / 2), token = j * 8 + 2 * t + i % 2;
                red[warp][token * kRows + row] = acc[m][j][i];
            }
        }
    }
    __syncthreads();
    float sums[kSums];
#pragma unroll
    for (int s = 0; s < kSums; ++s) {
        const int e = s * kWarps * 32 + threadIdx.x;
        float v = 0.0f;
        if (e < kElems) {
#pragma unroll
            for (int q = 0; q < kWarps; ++q) v += red[q][e];
        }
        sums[s] = v;
    }

    if (p.splits > 1) {
        // Every split publishes its partial; the last to arrive adds them in split order.
        float* base = p.partials + static_cast<std::int64_t>(tile) * p.splits * kElems;
#pragma unroll
        for (int s = 0; s < kSums; ++s) {
            const int e = s * kWarps * 32 + threadIdx.x;
            if (e < kElems) base[blockIdx.y * kElems + e] = sums[s];
        }
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) {
            last = atomicAdd(&p.counters[tile], 1) == p.splits - 1;
            if (last) p.counters[tile] = 0;  // ready for the next launch
        }
        __syncthreads();
        if (!last) return;
        __threadfence();
#pragma unroll
        for (int s = 0; s < kSums; ++s) {
            const int e = s * kWarps * 32 + threadIdx.x;
            float v = 0.0f;
            if (e < kElems) {
                for (int q = 0; q < p.splits; ++q) v += __ldcg(base + q * kElems + e);
            }
            sums[s] = v;
        }
    }

#pragma unroll
    for (int s = 0; s < kSums; ++s) {
        const int e = s * kWarps * 32 + threadIdx.x;
        const int token = e / kRows, row = row0 + e % kRows;
        if (e < kElems && token < p.n && row < out) p.targets.store(target, token, row, sums[s]);
    }
}

template <int kM, int kN, int kU, int kWarps>
bool launch(Params& p, const SmallLinearScratch& scratch, cudaStream_t stream) {
    constexpr int kRows = kM * 16, kElems = kRows * kN * 8;
    const int tiles = p.targets.cut(kRows);
    // Split k while the tiles leave SMs idle, keeping at least kU chunks per warp; the
    // scratch bounds how far.
    const int chunks = (p.in + kChunk - 1) / kChunk;
    int splits = 1;
    while (tiles * splits < scratch.num_sms && splits < 16 &&
           chunks / (2 * splits * kWarps) >= kU && tiles <= scratch.num_counters &&
           static_cast<std::size_t>(tiles) * 2 * splits * kElems <= scratch.partial_floats) {
        splits *= 2;
    }
    p.splits = splits;
    p.partials = scratch.partials;
    p.counters = scratch.counters;
    launch_dependent(small_linear_kernel<kM, kN, kU, kWarps>,
                     dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)),
                     kWarps * 32, 0, stream, p);
    return true;
}

// What every launch here needs of x and the targets.
bool takes(const void* x, std::int64_t in, std::size_t targets) {
    return in % 8 == 0 && in <= (1 << 30) && targets >= 1 && targets <= kSmallLinearMaxTargets &&
           reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
}

}  // namespace

ClusterLinearLimits init_small_linear() {
    init_gemv();
    return init_cluster_linear();
}

bool launch_small_linear(const void* x, std::int64_t n, std::int64_t in,
                         std::span<const SmallLinearTarget> targets, bool y_f32,
                         bool gemv, const SmallLinearScratch& scratch, cudaStream_t stream) {
    if (n < 1 || n > kSmallLinearMaxRows || !takes(x, in, targets.size())) return false;
    Params p{};
    p.x = static_cast<const bf16*>(x);
    p.n = static_cast<int>(n);
    p.in = static_cast<int>(in);
    if (!p.targets.set(targets, y_f32)) return false;
    const LinearKernel kernel = linear_kernel(n);
    switch (kernel) {
        case LinearKernel::Gemv:
            if (gemv && launch_gemv(p.x, p.in, p.targets, false, scratch.num_sms, stream)) {
                return true;
            }
            [[fallthrough]];
        case LinearKernel::Mma8: return launch<1, 1, 4, 4>(p, scratch, stream);
        case LinearKernel::Mma16: return launch<1, 2, 4, 4>(p, scratch, stream);
        case LinearKernel::Cluster32:
        case LinearKernel::Cluster64:
        case LinearKernel::Cluster128:
            return launch_cluster_linear(kernel, p.x, p.n, p.in, p.targets, scratch.cluster,
                                         stream);
        case LinearKernel::CublasLt: break;
    }
    return false;
}

bool launch_gated_gemv(const void* x, std::int64_t in,
                       std::span<const SmallLinearTarget> gate_up,
                       const SmallLinearScratch& scratch, cudaStream_t stream) {
    if (!takes(x, in, gate_up.size())) return false;
    LinearTargets targets;
    if (!targets.set(gate_up, false)) return false;
    return launch_gemv(static_cast<const bf16*>(x), static_cast<int>(in), targets, true,
                       scratch.num_sms, stream);
}

}  // namespace inferscale::backends::cuda
