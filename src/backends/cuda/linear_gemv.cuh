#pragma once
// The GEMV behind launch_small_linear for one token (linear_gemv.cu).

#include <cuda_runtime_api.h>

#include "backends/cuda/linear_targets.cuh"

namespace inferscale::backends::cuda {

// y = x W^T (+ bias) for every target; x [1, in] bf16, in a multiple of 8. Enqueues one launch.
void launch_gemv(const bf16* x, int in, LinearTargets targets, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
