#pragma once
// The token-split linear behind launch_small_linear for 17..32 tokens (linear_multicast.cu).

#include <cuda_runtime_api.h>

#include "backends/cuda/linear_targets.cuh"

namespace inferscale::backends::cuda {

// Sets the kernel's shared-memory limit and measures how many of its CTA pairs fit at once;
// once per device, outside graph capture.
ClusterLinearLimits init_multicast_linear();

// y = x W^T (+ bias) for every target; x [n, in] bf16 with 17 <= n <= 32, in a multiple of 8.
// Enqueues one launch; false (nothing enqueued) where in is not a multiple of 128.
bool launch_multicast_linear(const bf16* x, int n, int in, LinearTargets targets,
                             const ClusterLinearLimits& limits, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
