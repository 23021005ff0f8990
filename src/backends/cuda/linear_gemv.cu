// The one-token linear over bf16 weights: the ring GEMV of gemv_ring.cuh with 2048-element
// chunks of 4 KB. Lane l sums elements 256 j + 8 l .. + 7 of a row in order.

#include "backends/cuda/gemv_ring.cuh"
#include "backends/cuda/linear_gemv.cuh"

namespace inferscale::backends::cuda {
namespace {

constexpr int kLaneStep = 32 * 8;  // k elements of one warp-wide 16-byte read

struct Bf16Rows {
    static constexpr int kWarps = 4;
    static constexpr int kChunk = 2048;
    static constexpr int kSlotBytes = kChunk * 2;

    static std::int64_t row_bytes(int in) { return std::int64_t{in} * 2; }
    __host__ __device__ static int x_bytes(int in) { return (in * 2 + 127) / 128 * 128; }
    __device__ static std::int64_t chunk_offset(int k0) { return std::int64_t{k0} * 2; }
    __device__ static unsigned chunk_bytes(int in, int k0) {
        return static_cast<unsigned>(min(kChunk, in - k0) * 2);
    }
    __device__ static void prepare_x(unsigned char*, int) {}
    __device__ static void accumulate(const unsigned char* slot, const unsigned char* smem, int in,
                                      int k0, int lane, float& acc) {
        const int len = min(kChunk, in - k0);
        const auto* w = reinterpret_cast<const bf16*>(slot);
        const auto* xs = reinterpret_cast<const bf16*>(smem);
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
    }
};

}  // namespace

void init_gemv() { gemv_ring::init<Bf16Rows>(); }

bool launch_gemv(const bf16* x, int in, LinearTargets targets, bool gated, int num_sms,
                 cudaStream_t stream) {
    return gemv_ring::launch<Bf16Rows>(x, in, targets, gated, num_sms, stream);
}

}  // namespace inferscale::backends::cuda
