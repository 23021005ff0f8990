#pragma once
// One token's o projection, residual add and RMSNorm, gated MLP and down projection as one
// persistent GEMV launch with grid barriers between the phases (linear_gemv_chain.cu).

#include <cuda_runtime_api.h>

#include "backends/cuda/linear_small.h"

namespace inferscale::backends::cuda {

struct GemvChain {
    const void* attn = nullptr;  // [attn_width] bf16
    SmallLinearTarget o;         // [hidden, attn_width], y: scratch [hidden]
    void* residual = nullptr;    // [hidden] bf16: += o's output
    const void* norm_weight = nullptr;  // [hidden] bf16
    float eps = 0.0f;
    SmallLinearTarget gate, up;  // [ffn, hidden]; gate's y: silu(gate) * up [ffn], up unwritten
    SmallLinearTarget down;      // [hidden, ffn], y: [hidden] (may be o's scratch)
    int attn_width = 0, hidden = 0, ffn = 0;
    unsigned* barrier = nullptr;  // one device counter, zero before the first launch
};

// Sets the kernel's shared-memory limit; returns how many CTAs an SM it runs (its whole grid
// must be resident at once for the barriers). Once per device, outside graph capture.
int init_gemv_chain();

// Enqueues the chain (bf16 everywhere, widths multiples of 8); false (nothing enqueued) when it
// does not take the shapes.
bool launch_gemv_chain(const GemvChain& chain, int ctas_per_sm, int num_sms, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
