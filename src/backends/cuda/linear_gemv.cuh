#pragma once
// The GEMV behind launch_small_linear for one token (linear_gemv.cu).

#include <cuda_runtime_api.h>

#include "backends/cuda/linear_targets.cuh"

namespace inferscale::backends::cuda {

// Sets the GEMV's shared-memory limit; once per device, outside graph capture.
void init_gemv();

// y = x W^T (+ bias) for every target, with `options` (linear_small.h); x [1, in] bf16, in a
// multiple of 8. Enqueues one launch sized for num_sms; false (nothing enqueued) when x (and
// the norm's weight) do not fit in shared memory beside the ring (in over ~40K or ~20K), gated
// targets are not a pair, or an accumulating launch is gated or has f32 outputs.
bool launch_gemv(const bf16* x, int in, LinearTargets targets, const GemvOptions& options,
                 int num_sms, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
