// The one-token linear as a GEMV: one warp owns one weight row over the whole of k. Each load
// instruction of a warp reads 512 contiguous bytes of its row (16 bytes a lane) and a batch of
// kU of them reads kU * 512 contiguous bytes, while the next batch is in flight: long runs,
// where the mma kernel's quads read 64 bytes of each of 8 rows per instruction. The H200 streams
// gate/up at 4.0 TB/s this way against 3.9 on the mma kernel, and the o projection at 3.4
// against 3.1 (docs/results/linear_gemv_h200_2026-12-03_s8.txt). Each warp sums its lanes with
// a fixed butterfly and no two warps share a row: no partials, no atomics, and the result does
// not depend on timing.

#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/linear_gemv.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kStep = 32 * 8;  // k elements of one warp load: 8 a lane
constexpr int kU = 4;          // loads per batch

struct GemvParams {
    const bf16* x;
    int in;
    LinearTargets targets;  // units: one row, one per warp
};

__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(GemvParams p) {
    allow_next_launch();
    const int lane = threadIdx.x & 31;
    const int unit = blockIdx.x * kWarps + (threadIdx.x >> 5);
    if (unit >= p.targets.unit_end[p.targets.count - 1]) return;
    int row = 0;
    const int target = p.targets.find(unit, 1, row);
    const bf16* wrow = p.targets.w[target] + static_cast<std::int64_t>(row) * p.in + lane * 8;
    const int steps = (p.in + kStep - 1) / kStep;
    const auto load = [&](int s, uint4(&a)[kU]) {
#pragma unroll
        for (int u = 0; u < kU; ++u) {
            const bool ok = (s + u) * kStep + lane * 8 < p.in;
            a[u] = ok ? load_once16(wrow + (s + u) * kStep) : make_uint4(0, 0, 0, 0);
        }
    };

    float acc = 0.0f;
    uint4 a[kU];
    load(0, a);  // weights are constant: requested before the input is ready
    wait_for_inputs();
    const bf16* xlane = p.x + lane * 8;
    for (int s = 0; s < steps; s += kU) {
        uint4 next[kU];
        load(s + kU, next);
#pragma unroll
        for (int u = 0; u < kU; ++u) {
            const int k = (s + u) * kStep;
            if (k + lane * 8 >= p.in) continue;  // zeros past the end: no math
            float w[8], xv[8];
            unpack8(a[u], w);
            unpack8(__ldg(reinterpret_cast<const uint4*>(xlane + k)), xv);
#pragma unroll
            for (int e = 0; e < 8; ++e) acc = fmaf(w[e], xv[e], acc);
        }
#pragma unroll
        for (int u = 0; u < kU; ++u) a[u] = next[u];
    }
    acc = warp_sum(acc);
    if (lane == 0) p.targets.store(target, 0, row, acc);
}

}  // namespace

void launch_gemv(const bf16* x, int in, LinearTargets targets, cudaStream_t stream) {
    GemvParams p{x, in, targets};
    const int units = p.targets.cut(1);
    launch_dependent(gemv_kernel, dim3(static_cast<unsigned>((units + kWarps - 1) / kWarps)),
                     kWarps * 32, 0, stream, p);
}

}  // namespace inferscale::backends::cuda
