#pragma once
// The evenly shared linear behind launch_small_linear for 17..128 tokens (linear_stream.cu).

#include <cuda_runtime_api.h>

#include "backends/cuda/linear_targets.cuh"

namespace inferscale::backends::cuda {

// Sets the kernels' shared-memory limits; returns how many of their CTAs run at once on
// `num_sms` SMs (the grid every launch takes). Once per device, outside graph capture.
int init_stream_linear(int num_sms);

// y = x W^T (+ bias) for every target; x [n, in] bf16 with n <= 128, in a multiple of 8.
// Enqueues one launch; false (nothing enqueued) when the scratch is too small or unmeasured.
bool launch_stream_linear(const bf16* x, int n, int in, const LinearTargets& targets,
                          const SmallLinearScratch& scratch, cudaStream_t stream);

// The gated MLP's first half: y of gate = silu(x W_gate^T) * (x W_up^T), rounded as the
// linears and the swiglu kernel round; up's output is not written. gate_up: gate then up,
// bf16 outputs of one size.
bool launch_gated_stream_linear(const bf16* x, int n, int in, const LinearTargets& gate_up,
                                const SmallLinearScratch& scratch, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
