#pragma once
// Small-batch linear: y[n, out] = x[n, in] W^T (+ bias) for n <= kSmallLinearMaxRows, for up to
// kSmallLinearMaxTargets weights that share x, in one launch (q/k/v, gate/up). At these sizes
// the op mostly streams weights, so the kernels are shaped around that: the weights are the M
// operand of the tensor-core MMA and x the N operand, and the reduction order over k is the
// same on every run, so results are deterministic. Up to 16 tokens (linear_small.cu) each thread
// reads 16 contiguous bytes of a weight row per k step straight into registers and split-K
// partials are summed in split order by the last CTA of a tile (no atomics on data); one token
// may instead take a GEMV (linear_gemv.cu) fed by bulk copies of whole row pieces. From 17 tokens
// (linear_stream.cu) TMA streams weights and x through a shared-memory ring for wgmma on a
// persistent grid that shares the (tile, k block) items evenly among the SMs; the pieces of a
// tile that two CTAs share are summed through the scratch below. Only enqueues work: legal
// inside graph capture.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

namespace inferscale::backends::cuda {

inline constexpr std::int64_t kSmallLinearMaxRows = 128;
inline constexpr int kSmallLinearMaxTargets = 4;

struct SmallLinearTarget {
    const void* w = nullptr;     // [out, in] bf16, 16-byte aligned
    const void* bias = nullptr;  // [out] bf16 or f32 (bias_f32), or null
    bool bias_f32 = false;
    void* y = nullptr;  // [n, out] bf16 or f32 (the launch's y_f32)
    std::int64_t out = 0;
};

// Sets the kernels' shared-memory limits; returns how many CTAs of the 17..128-token kernel
// run at once on `num_sms` SMs (SmallLinearScratch::stream_ctas). Once per device, outside
// graph capture.
int init_small_linear(int num_sms);

// What the backend owns for these launches. Split-K scratch: partials f32 (the register-fed
// kernel's [tiles * splits * tile elements], the 17..128-token kernel's two tiles per CTA) and
// one arrival counter per tile, zero at creation; the last CTA of a tile puts its counter back
// to zero, so the scratch is ready for the next launch (or graph replay) without a memset.
// `stream_ctas`: the 17..128-token kernel's grid (0: not used).
struct SmallLinearScratch {
    float* partials = nullptr;
    std::size_t partial_floats = 0;
    int* counters = nullptr;
    int num_counters = 0;
    int num_sms = 0;
    int stream_ctas = 0;
};

// False (nothing enqueued) when the kernels do not take the problem: n outside
// 1..kSmallLinearMaxRows, in not a multiple of 8, x or a weight not 16-byte aligned, or more
// than kSmallLinearMaxTargets targets. x [n, in] bf16. One token with `gemv` runs on the GEMV
// (linear_gemv.cu: a warp per weight row) where x fits its shared memory, up to 16 tokens on
// the register-fed mma kernel, more on the evenly shared TMA kernel.
bool launch_small_linear(const void* x, std::int64_t n, std::int64_t in,
                         std::span<const SmallLinearTarget> targets, bool y_f32, bool gemv,
                         const SmallLinearScratch& scratch, cudaStream_t stream);

// The gated MLP's first half in one launch: gate = silu(x W_gate^T) * (x W_up^T), the gate and
// up sums rounded as the linears store them and the swiglu kernel's arithmetic on them; up's
// output is not written. One token (with `gemv`) on the GEMV, which gives the separate
// launches' bits; 17..128 tokens on the evenly shared kernel. The targets are gate then up,
// bf16 outputs of one size. False (nothing enqueued) when no kernel takes the problem.
bool launch_gated_linear(const void* x, std::int64_t n, std::int64_t in,
                         std::span<const SmallLinearTarget> gate_up, bool gemv,
                         const SmallLinearScratch& scratch, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
