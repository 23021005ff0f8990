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

// What a one-token linear on the GEMV may do beside y = x W^T (+ bias). An RMSNorm between
// two GEMVs is split between them: the first adds into the residual stream and stores
// residual * norm weight (accumulate, next_norm_weight, norm_out), the second takes that as x
// and finishes the norm from the residual (norm_residual, eps).
struct GemvOptions {
    // The gated MLP (targets gate then up, bf16 outputs of one size): gate = silu(x W_gate^T) *
    // (x W_up^T), bit for bit as the linears and the swiglu kernel make it; up is not written.
    bool gated = false;
    // x is residual * norm weight ([in] bf16 each, 16-byte aligned) and every result is scaled
    // by 1 / sqrt(mean(residual^2) + eps) before its bias: rms_norm(residual) W^T up to
    // rounding (the normalized x is never rounded to bf16). Null: x as it is.
    const void* norm_residual = nullptr;
    float eps = 0.0f;
    // y += the result (one bf16 target, the residual stream): the result rounded as stored,
    // then added and rounded as the add kernel does.
    bool accumulate = false;
    // Accumulating: norm_out[row] = (new y[row]) * next_norm_weight[row] (bf16), the x of the
    // GEMV that finishes the next norm. Both or neither.
    const void* next_norm_weight = nullptr;
    void* norm_out = nullptr;
};

// One token's linear on the GEMV with `options`. False (nothing enqueued) when the GEMV does
// not take the problem (see launch_small_linear and GemvOptions).
bool launch_gemv_linear(const void* x, std::int64_t in, std::span<const SmallLinearTarget> targets,
                        bool y_f32, const GemvOptions& options, const SmallLinearScratch& scratch,
                        cudaStream_t stream);

}  // namespace inferscale::backends::cuda
