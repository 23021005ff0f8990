#pragma once
// Host helpers of the TMA-fed linear kernels (linear_cluster.cu, linear_resident.cu): tensor
// maps of row-major bf16 matrices in 128-byte-swizzled boxes, and the launch configuration of a
// thread-block cluster under programmatic dependent launch.

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {

// k elements of one box row: 128 bytes, the swizzle's row.
inline constexpr int kTmaKBlock = 64;

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found{};
        IS_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                       cudaEnableDefault, &found));
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    return encode;
}

// A map of a row-major bf16 [rows, inner] matrix in boxes of box_rows x kTmaKBlock, swizzled
// 128 bytes; rows and k past the end arrive as zeros. L2 fills only the box's own 128 bytes of
// a row: promoting them to 256 bytes streamed weights 3-5% slower (bench/stream_probe.cu).
inline bool encode_rows(CUtensorMap* map, const void* base, int inner, int rows, int box_rows) {
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(inner) * 2};
    const cuuint32_t box[2] = {kTmaKBlock, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                                const_cast<void*>(base), dims, strides, box, element_strides,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A launch of `grid` CTAs of `threads` in clusters of `splits`, programmatic stream
// serialization allowed (the kernel follows dependent_launch.cuh's rules).
inline cudaLaunchConfig_t cluster_config(dim3 grid, int threads, std::size_t smem,
                                         cudaStream_t stream,
                                         cudaLaunchAttribute (&attributes)[2], int splits) {
    attributes[0].id = cudaLaunchAttributeClusterDimension;
    attributes[0].val.clusterDim.x = static_cast<unsigned>(splits);
    attributes[0].val.clusterDim.y = 1;
    attributes[0].val.clusterDim.z = 1;
    attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attributes;
    config.numAttrs = 2;
    return config;
}

// How many CTAs of `kernel` (with `smem` bytes of dynamic shared memory, `threads` a CTA) run
// at once in clusters of s CTAs, for s = 1..kMaxClusterSplits; ctas[0] unused.
template <class Limits, class Kernel>
Limits measure_cluster_occupancy(Kernel kernel, int threads, std::size_t smem) {
    Limits limits;
    for (int s = 1; s < static_cast<int>(sizeof(limits.ctas) / sizeof(limits.ctas[0])); ++s) {
        cudaLaunchAttribute attributes[2];
        cudaLaunchConfig_t config =
            cluster_config(dim3(static_cast<unsigned>(s)), threads, smem, nullptr, attributes, s);
        config.numAttrs = 1;  // the cluster shape only
        int clusters = 0;
        IS_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
        limits.ctas[s] = clusters * s;
    }
    return limits;
}

}  // namespace inferscale::backends::cuda
