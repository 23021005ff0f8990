#pragma once
// Small-batch linear: y[n, out] = x[n, in] W^T (+ bias) for n <= kSmallLinearMaxRows, for up to
// kSmallLinearMaxTargets weights that share x, in one launch (q/k/v, gate/up). At these sizes
// the op mostly streams weights, so the kernels are shaped around that: the weights are the M
// operand of the tensor-core MMA and x the N operand, and the reduction order over k is the
// same on every run, so results are deterministic. Up to 16 tokens (linear_small.cu) each thread
// reads 16 contiguous bytes of a weight row per k step straight into registers and split-K
// partials are summed in split order by the last CTA of a tile (no atomics on data); one token
// may instead take a GEMV (linear_gemv.cu) fed by bulk copies of whole row pieces. From 17 tokens
// (linear_cluster.cu) TMA streams weights and x through a shared-memory ring for wgmma and k
// splits across the CTAs of a thread-block cluster, reduced through distributed shared
// memory. Only enqueues work: legal inside graph capture.

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

// How many CTAs of the cluster kernel run at once, per cluster size (ctas[s] for s CTAs per
// cluster; index 0 unused), measured by init_small_linear. All zero: the kernel is not used.
inline constexpr int kMaxClusterSplits = 8;
struct ClusterLinearLimits {
    int ctas[kMaxClusterSplits + 1] = {};
};

// Sets the kernels' shared-memory limits and measures the cluster kernel's
// ClusterLinearLimits; once per device, outside graph capture.
ClusterLinearLimits init_small_linear();

// What the backend owns for these launches. Split-K scratch of the register-fed kernel:
// partials [tiles * splits * tile elements] f32 and one arrival counter per tile, zero at
// creation; the last CTA of a tile puts its counter back to zero, so the scratch is ready for
// the next launch (or graph replay) without a memset. `cluster`: the cluster kernel's limits.
struct SmallLinearScratch {
    float* partials = nullptr;
    std::size_t partial_floats = 0;
    int* counters = nullptr;
    int num_counters = 0;
    int num_sms = 0;
    ClusterLinearLimits cluster;
};

// False (nothing enqueued) when the kernels do not take the problem: n outside
// 1..kSmallLinearMaxRows, in not a multiple of 8, x or a weight not 16-byte aligned, or more
// than kSmallLinearMaxTargets targets. x [n, in] bf16. One token with `gemv` runs on the GEMV
// (linear_gemv.cu: a warp per weight row) where x fits its shared memory, up to 16 tokens on
// the register-fed mma kernel, more on the cluster kernel.
bool launch_small_linear(const void* x, std::int64_t n, std::int64_t in,
                         std::span<const SmallLinearTarget> targets, bool y_f32, bool gemv,
                         const SmallLinearScratch& scratch, cudaStream_t stream);

// One token of the gated MLP: gate = silu(x W_gate^T) * (x W_up^T) on the GEMV in one launch,
// bit for bit as the linears and the swiglu kernel make it; up's output is not written. The
// targets are gate then up, bf16 outputs of one size. False (nothing enqueued) when the GEMV
// does not take the problem.
bool launch_gated_gemv(const void* x, std::int64_t in,
                       std::span<const SmallLinearTarget> gate_up,
                       const SmallLinearScratch& scratch, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
