#pragma once
// The stream-K linear behind launch_small_linear for 2..128 tokens (linear_stream_k.cu).

#include <cuda_runtime_api.h>

#include "backends/cuda/linear_targets.cuh"

namespace inferscale::backends::cuda {

// Sets the kernels' shared-memory limits and measures how many CTAs of each run at once;
// once per device, outside graph capture.
StreamKLimits init_stream_k_linear(int num_sms);

// y = x W^T (+ bias) for every target; x [n, in] bf16 with n <= kSmallLinearMaxRows, in a
// multiple of 8. Enqueues one launch; false (nothing enqueued) when the limits are unmeasured
// or the scratch is too small for the split tiles' partial sums.
bool launch_stream_k_linear(const bf16* x, int n, int in, const LinearTargets& targets,
                            const SmallLinearScratch& scratch, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
