#pragma once
// The GEMV behind launch_small_linear and launch_gemv_group for one token (linear_gemv.cu).

#include <cuda_runtime_api.h>

#include "backends/cuda/linear_targets.cuh"

namespace inferscale::backends::cuda {

// The GEMV's input as the norm of a residual add (tensor::NormedInput for one token): the
// linears read rms_norm(x + y, weight, eps), computed by every CTA in the norm kernel's order
// (rms_norm.cuh: the same bits as add_rms_norm), and x + y is stored into `sum` once every CTA
// has read x (the residual add in place: sum is x). Without y, rms_norm(x).
struct GemvNorm {
    const bf16* y = nullptr;       // [in], or null
    bf16* sum = nullptr;           // [in], with y
    const bf16* weight = nullptr;  // [in]
    float eps = 0.0f;
    int* arrivals = nullptr;  // with y: a counter, zero between launches (the last CTA resets it)
};

// Sets the GEMV's shared-memory limit; once per device, outside graph capture.
void init_gemv();

// y = x W^T (+ bias) for every target; x [1, in] bf16, in a multiple of 8, with `norm` its
// normalized form (see GemvNorm; null: x as it is). `gated` (two bf16 targets of one size,
// gate then up): the gate output becomes silu(gate) * up, bit for bit as the swiglu kernel
// makes it, and up is not written. Before waiting for its inputs each warp asks for l2_pieces
// more 4 KB weight pieces than its ring holds into L2. Enqueues one launch sized for num_sms;
// false (nothing enqueued) when x does not fit in shared memory beside the ring (in over ~40K),
// a norm is asked for a row over 8192 wide, or gated targets are not a pair.
bool launch_gemv(const bf16* x, int in, const GemvNorm* norm, LinearTargets targets, bool gated,
                 int num_sms, int l2_pieces, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
