// The one-token linear over K-quant weights (Q4_K, Q5_K, Q6_K): the ring GEMV of gemv_ring.cuh
// with chunks of 16 super-blocks (4096 elements). Each CTA quantizes x into int8 in shared
// memory as quantize_rows does (so no separate launch), and lane j of each 8 takes its two
// 16-element runs of a super-block (quant_superblock_runs.cuh), 4 super-blocks a warp step.

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/gemv_ring.cuh"
#include "backends/cuda/quant_activations.cuh"
#include "backends/cuda/quant_superblock_runs.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kChunkBlocks = 16;

// Shared memory for x: bf16 x, then its int8 quants, then their f32 scales.
template <class Runs>
struct QuantRows {
    // Twice the bf16 rows' warps: decoding a block costs more instructions per byte, which
    // more warps hide.
    static constexpr int kWarps = 8;
    static constexpr int kChunk = kChunkBlocks * 256;
    static constexpr int kSlotBytes = kChunkBlocks * Runs::kBytes;

    static std::int64_t row_bytes(int in) { return std::int64_t{in} / 256 * Runs::kBytes; }
    // Rows and chunks start 16-byte aligned, as the bulk copies need.
    static bool fits(int in) {
        return in % 256 == 0 && row_bytes(in) % 16 == 0 &&
               in / 256 % kChunkBlocks * Runs::kBytes % 16 == 0;
    }
    __host__ __device__ static int x_bytes(int in) { return (in * 3 + in / 8 + 127) / 128 * 128; }
    __device__ static std::int64_t chunk_offset(int k0) {
        return std::int64_t{k0} / 256 * Runs::kBytes;
    }
    __device__ static unsigned chunk_bytes(int in, int k0) {
        return static_cast<unsigned>(min(kChunkBlocks, (in - k0) / 256) * Runs::kBytes);
    }
    __device__ static void prepare_x(unsigned char* smem, int in) {
        const auto* x = reinterpret_cast<const bf16*>(smem);
        auto* q = reinterpret_cast<std::int8_t*>(smem + 2 * in);
        auto* scale = reinterpret_cast<float*>(smem + 3 * in);
        for (int g = static_cast<int>(threadIdx.x); g < in / 32;
             g += static_cast<int>(blockDim.x)) {
            scale[g] = quantize_group32(x + 32 * g, q + 32 * g);
        }
        __syncthreads();
    }
    __device__ static void accumulate(const unsigned char* slot, const unsigned char* smem, int in,
                                      int k0, int lane, float& acc) {
        const auto* q = smem + 2 * in;
        const auto* scale = reinterpret_cast<const float*>(smem + 3 * in);
        const int blocks = min(kChunkBlocks, (in - k0) / 256), j = lane % 8;
#pragma unroll
        for (int step = 0; step < kChunkBlocks / 4; ++step) {
            const int s = 4 * step + lane / 8;
            if (s >= blocks) break;
            const QuantRuns u = Runs::load(slot + s * Runs::kBytes, j);
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int e0 = k0 + 256 * s + Runs::start(j, r);
                std::uint32_t x[4];
                quant_detail::words(*reinterpret_cast<const uint4*>(q + e0), x);
                const int xsum = Runs::kOffset ? sum_bytes16(x) : 0;
                acc = fmaf(scale[e0 / 32], run_dot<Runs>(u, r, x, xsum), acc);
            }
        }
    }
};

}  // namespace

void init_quant_gemv_ring() {
    gemv_ring::init<QuantRows<SuperblockRuns<DType::Q4_K>>>();
    gemv_ring::init<QuantRows<SuperblockRuns<DType::Q5_K>>>();
    gemv_ring::init<QuantRows<SuperblockRuns<DType::Q6_K>>>();
}

bool launch_quant_gemv_ring(const void* x, std::int64_t in,
                            std::span<const QuantLinearTarget> targets, bool gated, bool y_f32,
                            int num_sms, cudaStream_t stream) {
    if (targets.empty() || targets.size() > kSmallLinearMaxTargets || in > (1 << 20) ||
        reinterpret_cast<std::uintptr_t>(x) % 16 != 0) {
        return false;
    }
    SmallLinearTarget small[kSmallLinearMaxTargets];
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const QuantLinearTarget& t = targets[i];
        if (t.dtype != targets[0].dtype) return false;
        small[i] = {t.w, t.bias, t.bias_f32, t.y, t.out};
    }
    LinearTargets set;
    if (!set.set({small, targets.size()}, y_f32)) return false;
    bool launched = false;
    with_superblock_runs(targets[0].dtype, [&](auto runs) {
        using Rows = QuantRows<decltype(runs)>;
        const int n = static_cast<int>(in);
        launched = Rows::fits(n) && gemv_ring::launch<Rows>(static_cast<const bf16*>(x), n, set,
                                                            gated, num_sms, stream);
    });
    return launched;
}

}  // namespace inferscale::backends::cuda
