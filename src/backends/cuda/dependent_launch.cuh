#pragma once
// Programmatic dependent launch (sm_90). A decode step is ~300 short kernels, and between two of
// them the GPU idles while the second one launches and ramps up. A kernel started with
// launch_dependent may instead begin while the kernel before it on the stream is finishing:
//   - it calls allow_next_launch() first, so the kernel after it may start early in turn (it
//     does once every block of this one has made that call);
//   - until wait_for_inputs() it reads only data no kernel of the chain writes: weights and
//     tables, the step's metadata (one copy before the forward's first kernel), and the KV of
//     tokens before the step's own (earlier steps wrote it; injection writes it with a plain
//     launch that lets no kernel start before it completes);
//   - wait_for_inputs() returns once the kernels before it have completed and their writes are
//     visible; reading activations and every write come after it. Every block calls it before
//     it exits, so a kernel completes only after the ones before it.
// Launched plainly (or inside a graph without the edge) both calls return at once.

#include <cuda_runtime.h>

#include <cstddef>

#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {

__device__ __forceinline__ void allow_next_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem_bytes, stream>>>(args...) with programmatic stream serialization
// allowed; the kernel must follow the rules above.
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes,
                      cudaStream_t stream, Args... args) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    IS_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

}  // namespace inferscale::backends::cuda
