// One token's attention output and MLP as one persistent GEMV kernel (experiment): o, then the
// residual add and RMSNorm, then gate/up with the SwiGLU, then down, with a grid barrier
// between the phases. Each warp walks one sequence of ring items through all three phases, so
// its lane 0 asks for the next phase's weights as soon as ring slots free up at the end of the
// phase before, and DRAM keeps streaming across what were kernel boundaries. Every CTA forms
// the normalized x itself after the first barrier (the norm kernel's arithmetic, a CTA-wide
// sum); the new residual goes back to memory after the second barrier, a slice per CTA, when
// no CTA reads the old one any more.

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/linear_gemv_chain.h"
#include "backends/cuda/linear_targets.cuh"
#include "backends/cuda/tma.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 2048;
constexpr int kChunkBytes = kChunk * 2;
constexpr int kLaneStep = 32 * 8;
constexpr int kCtasPerSm = 2;
constexpr int kMaxDepth = 8;
constexpr int kSmemBytes = 110 * 1024;
constexpr int kPhases = 3;  // o, gate/up (gated), down

struct Phase {
    LinearTargets targets;
    int in, chunks, units, parts;
};

struct ChainParams {
    Phase phase[kPhases];
    const bf16* attn;  // o's x
    bf16* o_out;       // o's output (scratch), later down's output
    bf16* hidden;      // the residual stream
    const bf16* norm_weight;
    float eps;
    const bf16* gate;  // gate/up's output, down's x
    unsigned* barrier;
    int x_bytes;  // the x region: the widest x, and o's output and the residual beside x
    int depth;
};

__device__ __forceinline__ void grid_barrier(unsigned* counter, unsigned target) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(counter, 1u);
        while (atomicAdd(counter, 0u) < target) __nanosleep(32);
        __threadfence();
        // What other CTAs stored is read next by this thread's bulk copies (the async proxy).
        asm volatile("fence.proxy.async.global;\n" ::: "memory");
    }
    __syncthreads();
}

__global__ void __launch_bounds__(kThreads) gemv_chain_kernel(const __grid_constant__ ChainParams p) {
    extern __shared__ __align__(128) unsigned char smem[];
    allow_next_launch();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const auto base = smem_addr(smem);
    const unsigned bars = base + p.x_bytes + kWarps * p.depth * kChunkBytes;
    const unsigned x_bar = bars;  // three uses: o's x, the norm's inputs, down's x
    const unsigned warp_bars = bars + 8 * (3 + warp * p.depth);
    const unsigned ring = base + p.x_bytes + warp * p.depth * kChunkBytes;
    if (threadIdx.x == 0) {
        for (int b = 0; b < 3 + kWarps * p.depth; ++b) tma::barrier_init(bars + 8 * b, 1);
        tma::fence_barrier_init();
    }
    __syncthreads();

    const int stride = static_cast<int>(gridDim.x) * kWarps;
    const int first = static_cast<int>(blockIdx.x) * kWarps + warp;
    int items[kPhases];
    for (int q = 0; q < kPhases; ++q) {
        const Phase& ph = p.phase[q];
        items[q] = first < ph.units ? (ph.units - first + stride - 1) / stride * ph.parts * ph.chunks
                                    : 0;
    }
    const auto locate = [&](int q, int unit, int part, int& row) {
        if (q == 1) {
            row = unit;
            return part;
        }
        return p.phase[q].targets.find(unit, 1, row);
    };

    // Lane 0's copy cursor over the phases' items in order.
    int iq = 0, issued = 0, unit = first, part = 0, piece = 0, slot = 0;
    const auto issue = [&] {
        while (iq < kPhases && issued == items[iq]) {
            ++iq, issued = 0, unit = first, part = 0, piece = 0;
        }
        if (iq == kPhases) return;
        const Phase& ph = p.phase[iq];
        int row = 0;
        const int target = locate(iq, unit, part, row);
        const int k0 = piece * kChunk;
        const bf16* src = ph.targets.w[target] + static_cast<std::int64_t>(row) * ph.in + k0;
        const auto bytes = static_cast<unsigned>(min(kChunk, ph.in - k0) * 2);
        tma::arrive_expect(warp_bars + 8 * slot, bytes);
        tma::load_1d(ring + slot * kChunkBytes, src, bytes, warp_bars + 8 * slot);
        ++issued;
        if (++piece == ph.chunks) {
            piece = 0;
            if (++part == ph.parts) part = 0, unit += stride;
        }
        if (++slot == p.depth) slot = 0;
    };
    if (lane == 0) {
        for (int d = 0; d < p.depth; ++d) issue();
    }
    wait_for_inputs();
    if (threadIdx.x == 0) {
        const auto bytes = static_cast<unsigned>(p.phase[0].in * 2);
        tma::arrive_expect(x_bar, bytes);
        tma::load_1d(base, p.attn, bytes, x_bar);
    }
    tma::wait(x_bar, 0);

    const auto* xs = reinterpret_cast<const bf16*>(smem);
    int at = 0, parity = 0;
    // Consumes phase q's items; store(q, row, sum, gate) at each unit's end (lane 0).
    const auto consume = [&](int q, auto store) {
        const Phase& ph = p.phase[q];
        float acc = 0.0f, gate = 0.0f;
        int row_unit = first, chunk = 0, row_part = 0;
        for (int i = 0; i < items[q]; ++i) {
            tma::wait(warp_bars + 8 * at, static_cast<unsigned>(parity));
            const int k0 = chunk * kChunk;
            const int len = min(kChunk, ph.in - k0);
            const unsigned char* my_ring = smem + p.x_bytes + warp * p.depth * kChunkBytes;
            const auto* w = reinterpret_cast<const bf16*>(my_ring + at * kChunkBytes);
#pragma unroll
            for (int j = 0; j < kChunk / kLaneStep; ++j) {
                const int e = j * kLaneStep + lane * 8;
                if (e >= len) break;
                float wf[8], xf[8];
                unpack8(*reinterpret_cast<const uint4*>(w + e), wf);
                unpack8(*reinterpret_cast<const uint4*>(xs + k0 + e), xf);
#pragma unroll
                for (int r = 0; r < 8; ++r) acc = fmaf(wf[r], xf[r], acc);
            }
            __syncwarp();
            if (lane == 0) issue();
            if (++at == p.depth) at = 0, parity ^= 1;
            if (++chunk < ph.chunks) continue;
            chunk = 0;
            const float sum = warp_sum(acc);
            acc = 0.0f;
            if (ph.parts == 2 && row_part == 0) {
                gate = sum;
                row_part = 1;
                continue;
            }
            if (lane == 0) store(row_unit, sum, gate);
            row_part = 0;
            row_unit += stride;
        }
    };

    // o into its scratch output, as the linear stores it.
    consume(0, [&](int unit, float sum, float) {
        int row = 0;
        const int target = locate(0, unit, 0, row);
        p.phase[0].targets.store(target, 0, row, sum);
    });
    grid_barrier(p.barrier, gridDim.x);

    // residual + o, then RMSNorm: x for gate/up at the front of the x region, from copies of o's
    // output and the residual behind it.
    const int hidden = p.phase[1].in;
    const auto hidden_bytes = static_cast<unsigned>(hidden * 2);
    const int h_off = (hidden * 2 + 127) / 128 * 128;
    if (threadIdx.x == 0) {
        tma::arrive_expect(x_bar + 8, 2 * hidden_bytes);
        tma::load_1d(base + h_off, p.o_out, hidden_bytes, x_bar + 8);
        tma::load_1d(base + 2 * h_off, p.hidden, hidden_bytes, x_bar + 8);
    }
    tma::wait(x_bar + 8, 0);
    const auto* o_s = reinterpret_cast<const bf16*>(smem + h_off);
    const auto* h_s = reinterpret_cast<const bf16*>(smem + 2 * h_off);
    __shared__ float scratch[32];
    float squares = 0.0f;
    for (int g = threadIdx.x; g < hidden / 8; g += kThreads) {
        float a[8], b[8];
        unpack8(*reinterpret_cast<const uint4*>(h_s + g * 8), a);
        unpack8(*reinterpret_cast<const uint4*>(o_s + g * 8), b);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const float v = rounded<bf16>(a[e] + b[e]);
            squares += v * v;
        }
    }
    const float inv = 1.0f / sqrtf(block_sum(squares, scratch) / static_cast<float>(hidden) + p.eps);
    auto* x1 = reinterpret_cast<bf16*>(smem);
    for (int g = threadIdx.x; g < hidden / 8; g += kThreads) {
        float a[8], b[8], w[8], o[8];
        unpack8(*reinterpret_cast<const uint4*>(h_s + g * 8), a);
        unpack8(*reinterpret_cast<const uint4*>(o_s + g * 8), b);
        load8(p.norm_weight + g * 8, w);
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = w[e] * (rounded<bf16>(a[e] + b[e]) * inv);
        store8(x1 + g * 8, o);
    }
    // This CTA's slice of the new residual, stored after the second barrier.
    const int slice = (hidden + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
    const int mine = static_cast<int>(blockIdx.x) * slice + static_cast<int>(threadIdx.x);
    float h_new = 0.0f;
    const bool writes = threadIdx.x < slice && mine < hidden;
    if (writes) h_new = rounded<bf16>(to_f32(h_s[mine]) + to_f32(o_s[mine]));
    __syncthreads();  // x1 is complete

    consume(1, [&](int unit, float sum, float gate) {
        const LinearTargets& t = p.phase[1].targets;
        const float g = rounded<bf16>(t.with_bias(0, unit, gate));
        const float u = rounded<bf16>(t.with_bias(1, unit, sum));
        static_cast<bf16*>(t.y[0])[unit] = from_f32<bf16>(silu_mul(g, u));
    });
    grid_barrier(p.barrier, 2 * gridDim.x);

    if (writes) p.hidden[mine] = from_f32<bf16>(h_new);
    if (threadIdx.x == 0) {
        const auto bytes = static_cast<unsigned>(p.phase[2].in * 2);
        tma::arrive_expect(x_bar + 16, bytes);
        tma::load_1d(base, p.gate, bytes, x_bar + 16);
    }
    tma::wait(x_bar + 16, 0);
    consume(2, [&](int unit, float sum, float) {
        int row = 0;
        const int target = locate(2, unit, 0, row);
        p.phase[2].targets.store(target, 0, row, sum);
    });

    // The last CTA out puts the counter back to zero for the next launch.
    __syncthreads();
    if (threadIdx.x == 0 && atomicAdd(p.barrier, 1u) == 3 * gridDim.x - 1) atomicExch(p.barrier, 0u);
}

int share(int in) { return (in * 2 + 127) / 128 * 128; }

}  // namespace

int init_gemv_chain() {
    IS_CUDA_CHECK(cudaFuncSetAttribute(gemv_chain_kernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    int per_sm = 0;
    IS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_chain_kernel,
                                                                kThreads, kSmemBytes));
    return std::min(per_sm, kCtasPerSm);
}

bool launch_gemv_chain(const GemvChain& c, int ctas_per_sm, int num_sms, cudaStream_t stream) {
    if (ctas_per_sm < 1) return false;
    ChainParams p{};
    const SmallLinearTarget gate_up[2] = {c.gate, c.up};
    if (!p.phase[0].targets.set({&c.o, 1}, false) || !p.phase[1].targets.set(gate_up, false) ||
        !p.phase[2].targets.set({&c.down, 1}, false)) {
        return false;
    }
    const int ins[kPhases] = {c.attn_width, c.hidden, c.ffn};
    for (int q = 0; q < kPhases; ++q) {
        Phase& ph = p.phase[q];
        ph.in = ins[q];
        ph.chunks = (ins[q] + kChunk - 1) / kChunk;
        ph.parts = q == 1 ? 2 : 1;
        ph.units = q == 1 ? ph.targets.out[0] : ph.targets.cut(1);
    }
    if (c.hidden % 8 != 0 || c.attn_width % 8 != 0 || c.ffn % 8 != 0) return false;
    p.attn = static_cast<const bf16*>(c.attn);
    p.o_out = static_cast<bf16*>(c.o.y);
    p.hidden = static_cast<bf16*>(c.residual);
    p.norm_weight = static_cast<const bf16*>(c.norm_weight);
    p.eps = c.eps;
    p.gate = static_cast<const bf16*>(c.gate.y);
    p.barrier = c.barrier;
    p.x_bytes = std::max({share(c.attn_width), 3 * share(c.hidden), share(c.ffn)});
    const int ring_bytes = kSmemBytes - p.x_bytes - 8 * (3 + kWarps * kMaxDepth);
    p.depth = std::min(kMaxDepth, ring_bytes / (kWarps * kChunkBytes));
    if (p.depth < 2) return false;
    const int smem = p.x_bytes + kWarps * p.depth * kChunkBytes + 8 * (3 + kWarps * p.depth);
    launch_dependent(gemv_chain_kernel, dim3(static_cast<unsigned>(ctas_per_sm * num_sms)),
                     kThreads, static_cast<std::size_t>(smem), stream, p);
    return true;
}

}  // namespace inferscale::backends::cuda
