#pragma once
// The cluster-split linear behind launch_small_linear for 17..128 tokens (linear_cluster.cu).

#include <cuda_runtime_api.h>

#include "backends/cuda/linear_targets.cuh"

namespace inferscale::backends::cuda {

// Sets the kernel's shared-memory limits and measures how many clusters of each size fit at
// once; once per device, outside graph capture.
ClusterLinearLimits init_cluster_linear();

// y = x W^T (+ bias) for every target on `kernel`, a Cluster row of kLinearKernels that takes n
// tokens; x [n, in] bf16, in a multiple of 8. Enqueues one launch; false (nothing enqueued)
// when the limits are unmeasured.
bool launch_cluster_linear(LinearKernel kernel, const bf16* x, int n, int in, LinearTargets targets,
                           const ClusterLinearLimits& limits, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
