#pragma once
// The GEMV behind launch_small_linear for one token (linear_gemv.cu).

#include <cuda_runtime_api.h>

#include "backends/cuda/linear_targets.cuh"

namespace inferscale::backends::cuda {

// Sets the GEMV's shared-memory limit; once per device, outside graph capture.
void init_gemv();

// y = x W^T (+ bias) for every target; x [1, in] bf16, in a multiple of 8. `gated` (two bf16
// targets of one size, gate then up): the gate output becomes silu(gate) * up, bit for bit as
// the swiglu kernel makes it, and up is not written. Enqueues one launch sized for num_sms;
// false (nothing enqueued) when x does not fit in shared memory beside the ring (in over ~40K)
// or gated targets are not a pair.
bool launch_gemv(const bf16* x, int in, LinearTargets targets, bool gated, int num_sms,
                 cudaStream_t stream);

}  // namespace inferscale::backends::cuda
