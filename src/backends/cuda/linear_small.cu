// The small-batch linear's launches (see linear_small.h): the GEMV for one token, the stream-K
// kernel for the rest.

#include "backends/cuda/linear_gemv.cuh"
#include "backends/cuda/linear_small.h"
#include "backends/cuda/linear_stream_k.cuh"

namespace inferscale::backends::cuda {
namespace {

// What every launch here needs of x and the targets.
bool takes(const void* x, std::int64_t in, std::size_t targets) {
    return in % 8 == 0 && in <= (1 << 30) && targets >= 1 && targets <= kSmallLinearMaxTargets &&
           reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
}

}  // namespace

StreamKLimits init_small_linear(int num_sms) {
    init_gemv();
    return init_stream_k_linear(num_sms);
}

bool launch_small_linear(const void* x, std::int64_t n, std::int64_t in,
                         std::span<const SmallLinearTarget> targets, bool y_f32,
                         bool gemv, const SmallLinearScratch& scratch, cudaStream_t stream) {
    if (n < 1 || n > kSmallLinearMaxRows || !takes(x, in, targets.size())) return false;
    const auto* xb = static_cast<const bf16*>(x);
    LinearTargets t;
    if (!t.set(targets, y_f32)) return false;
    if (n == 1 && gemv && launch_gemv(xb, static_cast<int>(in), t, false, scratch.num_sms, stream)) {
        return true;
    }
    return launch_stream_k_linear(xb, static_cast<int>(n), static_cast<int>(in), t, scratch,
                                  stream);
}

bool launch_gated_gemv(const void* x, std::int64_t in,
                       std::span<const SmallLinearTarget> gate_up,
                       const SmallLinearScratch& scratch, cudaStream_t stream) {
    if (gate_up.size() != 2 || !takes(x, in, gate_up.size())) return false;
    LinearTargets targets;
    if (!targets.set(gate_up, false)) return false;
    return launch_gemv(static_cast<const bf16*>(x), static_cast<int>(in), targets, true,
                       scratch.num_sms, stream);
}

}  // namespace inferscale::backends::cuda
