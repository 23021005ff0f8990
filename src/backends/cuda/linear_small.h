#pragma once
// Small-batch linear: y[n, out] = x[n, in] W^T (+ bias) for n <= kSmallLinearMaxRows, for up to
// kSmallLinearMaxTargets weights that share x, in one launch (q/k/v, gate/up). At these sizes
// the op mostly streams weights, so the kernels are shaped around that: the weights are the M
// operand of the tensor-core MMA and x the N operand, and the reduction order over k is the
// same on every run, so results are deterministic. The register-fed kernel (linear_small.cu)
// has each thread read 16 contiguous bytes of a weight row per k step straight into registers
// and sums split-K partials in split order in the last CTA of a tile (no atomics on data); the
// GEMV (linear_gemv.cu) is fed by bulk copies of whole row pieces; the cluster kernel
// (linear_cluster.cu) streams weights and x through a shared-memory ring by TMA for wgmma and
// splits k across the CTAs of a thread-block cluster, reduced through distributed shared
// memory. kLinearKernels says which runs for how many tokens. Only enqueues work: legal inside
// graph capture.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

namespace inferscale::backends::cuda {

// Which kernel runs a linear group of n tokens: the first row with n <= max_rows. Up to
// kSmallLinearMaxRows tokens the row's kernel races cuBLASLt (per target or stacked) once per
// group shape and token bucket, and the faster stays (linear.cpp); past it cuBLASLt runs alone.
// Gemv: linear_gemv.cu (Mma8 where LinearPathOptions::gemv is off or x is too long for its
// shared memory); Mma8/Mma16: the register-fed mma.sync kernel on one or two 8-token tiles
// (linear_small.cu); Cluster*: the cluster-split wgmma kernel on a 32/64/128-token tile
// (linear_cluster.cu); CublasLt: lt_matmul.cpp. Rates: H200, Llama-3.1-8B shapes
// (docs/performance-notes.md and the commits it cites).
enum class LinearKernel { Gemv, Mma8, Mma16, Cluster32, Cluster64, Cluster128, CublasLt };
struct LinearKernelRow {
    std::int64_t max_rows;
    LinearKernel kernel;
};
inline constexpr LinearKernelRow kLinearKernels[] = {
    {1, LinearKernel::Gemv},          // gate/up 4.22 TB/s, down 4.07; q/k/v 14.6 us, o 10.1
    {8, LinearKernel::Mma8},          // rate not recorded
    {16, LinearKernel::Mma16},        // rate not recorded
    {32, LinearKernel::Cluster32},    // o 11.2 us (cuBLASLt 12.4), gate/up 65 (cuBLASLt 60)
    {64, LinearKernel::Cluster64},    // rate not recorded (cuBLASLt won every shape from 64)
    {128, LinearKernel::Cluster128},  // gate/up 87 us (cuBLASLt 66)
    // ~3.4 TB/s at 128 tokens (q/k/v and o 2.5-2.9); prefill at 87-91% of the GEMM-bound rate
    {INT64_MAX, LinearKernel::CublasLt},
};
inline constexpr std::int64_t kSmallLinearMaxRows = std::end(kLinearKernels)[-2].max_rows;
inline constexpr int kSmallLinearMaxTargets = 4;

// The table's kernel for n >= 1 tokens.
constexpr LinearKernel linear_kernel(std::int64_t n) {
    for (const LinearKernelRow& row : kLinearKernels) {
        if (n <= row.max_rows) return row.kernel;
    }
    return LinearKernel::CublasLt;
}

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
// than kSmallLinearMaxTargets targets. x [n, in] bf16. The kernel is kLinearKernels' for n
// (the GEMV only with `gemv`).
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
