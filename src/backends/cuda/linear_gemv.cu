// The one-token linear as a GEMV fed by bulk copies. Each warp owns weight rows (round robin over
// a persistent grid) and a private ring of 4 KB slots in shared memory; its lane 0 asks the TMA
// unit for the next 2048-element piece of a row with one cp.async.bulk per slot, so a warp keeps
// ring-depth pieces in flight without holding them in registers (two CTAs an SM keep ~190 KB
// of weights in flight). The weights do not depend on earlier kernels: each warp fills its ring
// before waiting for its inputs, so under programmatic dependent launch the next linear's
// weights stream while the kernels before it (norms, attention) finish. x is copied once per
// CTA into shared memory. Lane l sums elements 256 j + 8 l .. + 7 of a row in order and the warp
// adds its lanes with a fixed butterfly: no partials, no atomics, results independent of timing.
// Gated (the MLP's gate and up projections), a warp's unit is a gate row and the up row of the
// same index, and it stores silu(gate) * up from the two outputs rounded as stored: the swiglu
// kernel's bits, without its launch and without writing up.
// With a fused input norm (GemvNorm) every CTA forms the normalized x itself from the residual
// stream, the add's other operand and the norm weight (loaded before the wait, like the ring)
// instead of copying x: that replaces the add_rms_norm launch before the GEMV, a round trip
// through memory and a launch's latency, with one block reduction a CTA. The sum x + y goes
// back to the residual stream at its end from the last CTA to count itself in after reading x,
// so no CTA can read the stream after it changed.

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/linear_gemv.cuh"
#include "backends/cuda/rms_norm.cuh"
#include "backends/cuda/tma.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 2048;  // k elements of one ring slot
constexpr int kChunkBytes = kChunk * 2;
constexpr int kLaneStep = 32 * 8;  // k elements of one warp-wide 16-byte read
constexpr int kCtasPerSm = 2;
constexpr int kMinDepth = 2, kMaxDepth = 8;
// Shared memory of a CTA (x, the warps' rings and their barriers): two fit an SM. Measured on
// the H200 against 1, 3 and 4 CTAs an SM and a shallower ring (depth 4): those lose 2-11% of
// the graph decode step (docs/results/linear_gemv_bulk_h200_2026-12-03_s10.txt).
constexpr int kSmemBytes = 110 * 1024;
// Widest row the fused input norm takes: 8 groups of 8 elements a thread.
constexpr int kMaxNormPer = 8;

struct GemvParams {
    const bf16* x;
    int in;
    int chunks;   // ring slots per weight row
    int depth;    // ring slots per warp
    int x_bytes;  // x's share of shared memory, a multiple of 128
    int units;    // rows; gated: gate rows, each with its up row
    int l2_pieces;  // pieces a warp asks into L2 beyond its ring before the wait
    GemvNorm norm;
    LinearTargets targets;
};

__host__ __device__ constexpr int barriers_offset(int x_bytes, int depth) {
    return x_bytes + kWarps * depth * kChunkBytes;
}

// The fused input norm (GemvNorm) as one thread holds it: the groups g = threadIdx.x +
// k * kThreads of the row (as rms_norm.cuh holds a row), kept in registers from the
// normalization to the CTA's end, where the residual stream may be stored.
template <int kPer>
struct InputNorm {
    uint4 weight[kPer];
    uint4 sum[kPer];  // x + y, rounded as stored
    int arrival = 0;  // thread 0: how many CTAs had counted in before this one

    // Before the wait: the norm weight, which no kernel writes.
    __device__ __forceinline__ void load_weight(const GemvParams& p) {
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int g = static_cast<int>(threadIdx.x) + k * kThreads;
            if (g * 8 < p.in) weight[k] = *reinterpret_cast<const uint4*>(p.norm.weight + g * 8);
        }
    }

    // After the wait, every thread of the CTA: xs = rms_norm(x + y). Then thread 0 counts the
    // CTA in (the reduction's barrier is behind every read of x); the count is only looked at
    // in store_sum, so nothing waits for the atomic here.
    __device__ __forceinline__ void normalize(const GemvParams& p, bf16* xs) {
        __shared__ float scratch[kPer * kWarps];
        float sums[kPer];
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int g = static_cast<int>(threadIdx.x) + k * kThreads;
            sums[k] = 0.0f;
            if (g * 8 >= p.in) continue;
            float v[8];
            load8(p.x + g * 8, v);
            if (p.norm.y != nullptr) {
                float r[8];
                load8(p.norm.y + g * 8, r);
#pragma unroll
                for (int e = 0; e < 8; ++e) v[e] = rounded<bf16>(v[e] + r[e]);
            }
            sum[k] = pack8(v);
            sums[k] = group_square_sum(v);
        }
        const float inv = rms_inverse(row_square_sum<kPer>(sums, scratch), p.in, p.norm.eps);
        if (p.norm.y != nullptr && threadIdx.x == 0) arrival = atomicAdd(p.norm.arrivals, 1);
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int g = static_cast<int>(threadIdx.x) + k * kThreads;
            if (g * 8 >= p.in) continue;
            float v[8], w[8], o[8];
            unpack8(sum[k], v);
            unpack8(weight[k], w);
            rms_scale(v, w, inv, o);
            store8(xs + g * 8, o);
        }
        __syncthreads();  // xs is complete
    }

    // At the CTA's end, every thread: the last CTA to count in stores x + y, when no CTA
    // reads x any more, and puts the counter back to zero.
    __device__ __forceinline__ void store_sum(const GemvParams& p) {
        if (p.norm.y == nullptr) return;
        __shared__ bool last;
        if (threadIdx.x == 0) {
            last = arrival == static_cast<int>(gridDim.x) - 1;
            if (last) *p.norm.arrivals = 0;
        }
        __syncthreads();
        if (!last) return;
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int g = static_cast<int>(threadIdx.x) + k * kThreads;
            if (g * 8 < p.in) *reinterpret_cast<uint4*>(p.norm.sum + g * 8) = sum[k];
        }
    }
};

// kNormPer: 0, or the fused input norm with that many groups of 8 elements a thread.
template <bool kGated, int kNormPer>
__global__ void __launch_bounds__(kThreads) gemv_kernel(GemvParams p) {
    constexpr int kParts = kGated ? 2 : 1;  // weight rows per unit
    extern __shared__ __align__(128) unsigned char smem[];
    allow_next_launch();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const auto base = smem_addr(smem);
    const unsigned bars = base + barriers_offset(p.x_bytes, p.depth);  // x's, then per warp
    const unsigned x_bar = bars;
    const unsigned warp_bars = bars + 8 * (1 + warp * p.depth);
    const unsigned ring = base + p.x_bytes + warp * p.depth * kChunkBytes;
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

    // Lane 0's copy cursors: item `issued` is piece `piece` of part `part` of the warp's `unit`.
    struct Cursor {
        int issued, unit, part, piece;
    };
    const auto source = [&](const Cursor& c, const bf16*& src, unsigned& bytes) {
        int row = 0;
        const int target = locate(c.unit, c.part, row);
        const int k0 = c.piece * kChunk;
        src = p.targets.w[target] + static_cast<std::int64_t>(row) * p.in + k0;
        bytes = static_cast<unsigned>(min(kChunk, p.in - k0) * 2);
    };
    const auto advance = [&](Cursor& c) {
        ++c.issued;
        if (++c.piece == p.chunks) {
            c.piece = 0;
            if (++c.part == kParts) c.part = 0, c.unit += stride;
        }
    };
    Cursor next{0, first, 0, 0};
    int slot = 0;
    const auto issue = [&] {
        if (next.issued == items) return;
        const bf16* src;
        unsigned bytes;
        source(next, src, bytes);
        tma::arrive_expect(warp_bars + 8 * slot, bytes);
        tma::load_1d(ring + slot * kChunkBytes, src, bytes, warp_bars + 8 * slot);
        advance(next);
        if (++slot == p.depth) slot = 0;
    };
    if (lane == 0) {
        // Weights only, before the inputs are ready: the ring, then pieces past it into L2.
        for (int d = 0; d < p.depth; ++d) issue();
        Cursor ahead = next;
        for (int i = 0; i < p.l2_pieces && ahead.issued < items; ++i) {
            const bf16* src;
            unsigned bytes;
            source(ahead, src, bytes);
            tma::prefetch_l2(src, bytes);
            advance(ahead);
        }
    }
    auto* xs = reinterpret_cast<bf16*>(smem);
    InputNorm<(kNormPer > 0 ? kNormPer : 1)> norm;  // used with kNormPer > 0 only
    if constexpr (kNormPer > 0) {
        norm.load_weight(p);
        wait_for_inputs();
        norm.normalize(p, xs);
    } else {
        wait_for_inputs();
        if (threadIdx.x == 0) {
            tma::arrive_expect(x_bar, static_cast<unsigned>(p.in * 2));
            tma::load_1d(base, p.x, static_cast<unsigned>(p.in * 2), x_bar);
        }
        if (items == 0) return;
        tma::wait(x_bar, 0);
    }

    const unsigned char* my_ring = smem + p.x_bytes + warp * p.depth * kChunkBytes;
    float acc = 0.0f, gate = 0.0f;
    int row_unit = first, at = 0, phase = 0, chunk = 0, row_part = 0;
    for (int i = 0; i < items; ++i) {
        tma::wait(warp_bars + 8 * at, static_cast<unsigned>(phase));
        const int k0 = chunk * kChunk;
        const int len = min(kChunk, p.in - k0);
        const auto* w = reinterpret_cast<const bf16*>(my_ring + at * kChunkBytes);
#pragma unroll
        for (int j = 0; j < kChunk / kLaneStep; ++j) {
            const int e = j * kLaneStep + lane * 8;
            if (e >= len) break;
            float wf[8], xf[8];
            unpack8(*reinterpret_cast<const uint4*>(w + e), wf);
            unpack8(*reinterpret_cast<const uint4*>(xs + k0 + e), xf);
#pragma unroll
            for (int q = 0; q < 8; ++q) acc = fmaf(wf[q], xf[q], acc);
        }
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
    if constexpr (kNormPer > 0) norm.store_sum(p);
}

int x_share(int in) { return (in * 2 + 127) / 128 * 128; }

using GemvKernel = void (*)(GemvParams);

// The kernel for a gated or plain launch with kNormPer (0, 4 or kMaxNormPer) groups a thread.
template <bool kGated>
GemvKernel gemv_for(int norm_per) {
    return norm_per == 0 ? gemv_kernel<kGated, 0>
           : norm_per <= 4 ? gemv_kernel<kGated, 4>
                           : gemv_kernel<kGated, kMaxNormPer>;
}

}  // namespace

void init_gemv() {
    for (const int per : {0, 4, kMaxNormPer}) {
        for (const GemvKernel kernel : {gemv_for<false>(per), gemv_for<true>(per)}) {
            IS_CUDA_CHECK(cudaFuncSetAttribute(
                kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
        }
    }
}

bool launch_gemv(const bf16* x, int in, const GemvNorm* norm, LinearTargets targets, bool gated,
                 int num_sms, int l2_pieces, cudaStream_t stream) {
    const int ring_bytes = kSmemBytes - x_share(in) - 8 * (1 + kWarps * kMaxDepth);
    const int depth = std::min(kMaxDepth, ring_bytes / (kWarps * kChunkBytes));
    if (depth < kMinDepth) return false;
    if (gated && (targets.count != 2 || targets.out[0] != targets.out[1] || targets.y_f32)) {
        return false;
    }
    const int groups_per_thread = (in / 8 + kThreads - 1) / kThreads;
    if (norm != nullptr && groups_per_thread > kMaxNormPer) return false;
    GemvParams p{x, in, (in + kChunk - 1) / kChunk, depth, x_share(in), 0, l2_pieces, {}, targets};
    if (norm != nullptr) p.norm = *norm;
    p.units = gated ? p.targets.out[0] : p.targets.cut(1);
    const int ctas = std::min(kCtasPerSm * num_sms, (p.units + kWarps - 1) / kWarps);
    const int smem = barriers_offset(p.x_bytes, depth) + 8 * (1 + kWarps * depth);
    const int norm_per = norm != nullptr ? groups_per_thread : 0;
    launch_dependent(gated ? gemv_for<true>(norm_per) : gemv_for<false>(norm_per),
                     dim3(static_cast<unsigned>(ctas)), kThreads, static_cast<std::size_t>(smem),
                     stream, p);
    return true;
}

}  // namespace inferscale::backends::cuda
