#pragma once
// Sampling kernels on device logits, so greedy decoding can skip the logits copy to the host.
// Plain enqueue-only functions on the caller's stream (capturable in CUDA graphs).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace inferscale::backends::cuda {

// ids[r] = the index of the largest logits[r, :] (the first one on ties, like std::max_element;
// NaNs never win; a row of NaNs gives 0).  logits [rows, vocab] f32, ids [rows] i32, both device
// memory. `allowed` (or null): a bitmask [rows, (vocab + 31) / 32]; only tokens whose bit is set
// are candidates, and a row that allows none gives -1.
void argmax_rows(const float* logits, const std::uint32_t* allowed, std::int64_t rows,
                 std::int64_t vocab, std::int32_t* ids, cudaStream_t stream);

}  // namespace inferscale::backends::cuda
