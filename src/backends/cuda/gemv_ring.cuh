#pragma once
// The one-token linear as a GEMV fed by bulk copies, for any weight rows a `Rows` policy reads
// (bf16 in linear_gemv.cu, the K-quants' super-blocks in quant_gemv_ring.cu). Each warp owns
// weight rows (round robin over a persistent grid) and a private ring of slots in shared
// memory; its lane 0 asks the TMA unit for the next chunk of a row with one cp.async.bulk per
// slot, so a warp keeps ring-depth chunks in flight without holding them in registers (two CTAs
// an SM keep ~100-190 KB of weights in flight). The weights do not depend on earlier kernels:
// each warp fills its ring before waiting for its inputs, so under programmatic dependent
// launch the next linear's weights stream while the kernels before it (norms, attention)
// finish. x is copied once per CTA into shared memory (and prepared there as the rows need it).
// Each lane sums its share of a row in a fixed order and the warp adds its lanes with a fixed
// butterfly: no partials, no atomics, results independent of timing. Gated (the MLP's gate and
// up projections), a warp's unit is a gate row and the up row of the same index, and it stores
// silu(gate) * up from the two outputs rounded as stored: the swiglu kernel's bits, without its
// launch and without writing up.
//
// A Rows policy gives, for rows of `in` elements:
//   kWarps                     warps of a CTA
//   kChunk, kSlotBytes         elements and bytes of one ring slot (bytes a multiple of 16)
//   row_bytes(in)              bytes of a weight row
//   chunk_offset(k0), chunk_bytes(in, k0)
//                              where the chunk from element k0 starts in its row, its bytes (a
//                              multiple of 16)
//   x_bytes(in)                shared memory for x (a multiple of 128); x arrives at its start
//                              as bf16
//   prepare_x(smem, in)        run by every thread of the CTA once x has arrived
//   accumulate(slot, smem, in, k0, lane, acc)
//                              adds the lane's share of the chunk's dot product with x to acc

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/linear_targets.cuh"
#include "backends/cuda/tma.cuh"

namespace inferscale::backends::cuda::gemv_ring {

constexpr int kCtasPerSm = 2;
constexpr int kMinDepth = 2, kMaxDepth = 8;
// Shared memory of a CTA (x, the warps' rings and their barriers): two fit an SM. Measured on
// the H200 against 1, 3 and 4 CTAs an SM and a shallower ring (depth 4) for bf16 rows: those
// lose 2-11% of the graph decode step.
constexpr int kSmemBytes = 110 * 1024;

struct Params {
    const bf16* x;
    int in;
    int chunks;   // ring slots per weight row
    int depth;    // ring slots per warp
    int x_bytes;  // x's share of shared memory, a multiple of 128
    int units;    // rows; gated: gate rows, each with its up row
    std::int64_t row_bytes;
    LinearTargets targets;
};

template <class Rows>
__host__ __device__ constexpr int barriers_offset(int x_bytes, int depth) {
    return x_bytes + Rows::kWarps * depth * Rows::kSlotBytes;
}

template <class Rows, bool kGated>
__global__ void __launch_bounds__(Rows::kWarps * 32) ring_gemv_kernel(Params p) {
    constexpr int kWarps = Rows::kWarps;
    constexpr int kParts = kGated ? 2 : 1;  // weight rows per unit
    extern __shared__ __align__(128) unsigned char smem[];
    allow_next_launch();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const auto base = smem_addr(smem);
    const unsigned bars = base + barriers_offset<Rows>(p.x_bytes, p.depth);  // x's, then warps'
    const unsigned x_bar = bars;
    const unsigned warp_bars = bars + 8 * (1 + warp * p.depth);
    const unsigned ring = base + p.x_bytes + warp * p.depth * Rows::kSlotBytes;
    if (threadIdx.x == 0) {
        for (int b = 0; b < 1 + kWarps * p.depth; ++b) tma::barrier_init(bars + 8 * b, 1);
        tma::fence_barrier_init();
    }
    __syncthreads();

    const int stride = static_cast<int>(gridDim.x) * kWarps;
    const int first = static_cast<int>(blockIdx.x) * kWarps + warp;  // < units for warp 0
    const int items =
        first < p.units ? (p.units - first + stride - 1) / stride * kParts * p.chunks : 0;
    // The target and weight row of part `part` of `unit`.
    const auto locate = [&](int unit, int part, int& row) {
        if (kGated) {
            row = unit;
            return part;
        }
        return p.targets.find(unit, 1, row);
    };

    // Lane 0's copy cursor: item `issued` is chunk `piece` of part `part` of the warp's `unit`.
    int issued = 0, unit = first, part = 0, piece = 0, slot = 0;
    const auto issue = [&] {
        if (issued == items) return;
        int row = 0;
        const int target = locate(unit, part, row);
        const int k0 = piece * Rows::kChunk;
        const auto* src = reinterpret_cast<const unsigned char*>(p.targets.w[target]) +
                          row * p.row_bytes + Rows::chunk_offset(k0);
        const unsigned bytes = Rows::chunk_bytes(p.in, k0);
        tma::arrive_expect(warp_bars + 8 * slot, bytes);
        tma::load_1d(ring + slot * Rows::kSlotBytes, src, bytes, warp_bars + 8 * slot);
        ++issued;
        if (++piece == p.chunks) {
            piece = 0;
            if (++part == kParts) part = 0, unit += stride;
        }
        if (++slot == p.depth) slot = 0;
    };
    if (lane == 0) {
        for (int d = 0; d < p.depth; ++d) issue();  // weights only: before the inputs are ready
    }
    wait_for_inputs();
    if (threadIdx.x == 0) {
        tma::arrive_expect(x_bar, static_cast<unsigned>(p.in * 2));
        tma::load_1d(base, p.x, static_cast<unsigned>(p.in * 2), x_bar);
    }
    tma::wait(x_bar, 0);
    Rows::prepare_x(smem, p.in);
    if (items == 0) return;

    const unsigned char* my_ring = smem + p.x_bytes + warp * p.depth * Rows::kSlotBytes;
    float acc = 0.0f, gate = 0.0f;
    int row_unit = first, at = 0, phase = 0, chunk = 0, row_part = 0;
    for (int i = 0; i < items; ++i) {
        tma::wait(warp_bars + 8 * at, static_cast<unsigned>(phase));
        Rows::accumulate(my_ring + at * Rows::kSlotBytes, smem, p.in, chunk * Rows::kChunk, lane,
                         acc);
        __syncwarp();  // the slot is read: lane 0 may refill it
        if (lane == 0) issue();
        if (++at == p.depth) at = 0, phase ^= 1;
        if (++chunk < p.chunks) continue;
        chunk = 0;
        const float sum = warp_sum(acc);
        acc = 0.0f;
        if (kGated && row_part == 0) {
            gate = sum;
            row_part = 1;
            continue;
        }
        if (lane == 0) {
            int row = 0;
            const int target = locate(row_unit, 0, row);
            if (kGated) {
                const float g = rounded<bf16>(p.targets.with_bias(0, row, gate));
                const float u = rounded<bf16>(p.targets.with_bias(1, row, sum));
                static_cast<bf16*>(p.targets.y[0])[row] = from_f32<bf16>(silu_mul(g, u));
            } else {
                p.targets.store(target, 0, row, sum);
            }
        }
        row_part = 0;
        row_unit += stride;
    }
}

// Sets the kernels' shared-memory limit; once per device, outside graph capture.
template <class Rows>
void init() {
    for (const auto kernel : {ring_gemv_kernel<Rows, false>, ring_gemv_kernel<Rows, true>}) {
        IS_CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    }
}

// One launch sized for num_sms; false (nothing enqueued) when x does not fit in shared memory
// beside a ring of kMinDepth slots a warp, or gated targets are not a pair of one size.
template <class Rows>
bool launch(const bf16* x, int in, const LinearTargets& targets, bool gated, int num_sms,
            cudaStream_t stream) {
    const int x_bytes = Rows::x_bytes(in);
    constexpr int kWarps = Rows::kWarps;
    const int ring_bytes = kSmemBytes - x_bytes - 8 * (1 + kWarps * kMaxDepth);
    const int depth = std::min(kMaxDepth, ring_bytes / (kWarps * Rows::kSlotBytes));
    if (depth < kMinDepth) return false;
    if (gated && (targets.count != 2 || targets.out[0] != targets.out[1] || targets.y_f32)) {
        return false;
    }
    Params p{
        x,      in, (in + Rows::kChunk - 1) / Rows::kChunk, depth, x_bytes, 0, Rows::row_bytes(in),
        targets};
    p.units = gated ? p.targets.out[0] : p.targets.cut(1);
    const int ctas = std::min(kCtasPerSm * num_sms, (p.units + kWarps - 1) / kWarps);
    const int smem = barriers_offset<Rows>(x_bytes, depth) + 8 * (1 + kWarps * depth);
    launch_dependent(gated ? ring_gemv_kernel<Rows, true> : ring_gemv_kernel<Rows, false>,
                     dim3(static_cast<unsigned>(ctas)), kWarps * 32, static_cast<std::size_t>(smem),
                     stream, p);
    return true;
}

}  // namespace inferscale::backends::cuda::gemv_ring
