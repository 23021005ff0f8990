#pragma once
// The device's own ceilings, measured the way the model uses the device: a device-to-device
// copy (HBM bandwidth, bytes read + written), a device-to-pinned-host copy (what the logits
// readback costs) and one big square GEMM through Backend::linear (cuBLASLt on CUDA), alone and
// back to back.

#include <cstdint>
#include <memory>
#include <string>

#include "bench/bench_support.h"
#include "tensor/backend.h"

namespace inferscale::bench {

struct DeviceRates {
    double copy_bytes_per_s = 0.0;     // read + written
    double d2h_bytes_per_s = 0.0;      // into pinned host memory; 0 when not measured
    double gemm_flops_per_s = 0.0;     // bf16 (activation dtype) x W^T, single GEMMs
    double gemm_sustained_flops_per_s = 0.0;  // the same back to back for two seconds (power cap)
    Samples copy, d2h, gemm, gemm_sustained;
    // What compute-bound steps are held against: the back-to-back rate where it was measured.
    double gemm_bound_flops_per_s() const {
        return gemm_sustained_flops_per_s > 0 ? gemm_sustained_flops_per_s : gemm_flops_per_s;
    }
    std::size_t copy_bytes = 0;        // one direction
    std::size_t d2h_bytes = 0;
    std::int64_t gemm_size = 0;        // M = N = K
};

// The backend a bench runs on: CUDA device `device` (its stream and name, logged through
// `progress`), or the CPU backend for a dry run of the bench's logic.
struct BenchBackend {
    std::unique_ptr<tensor::Backend> backend;
    bool cuda = false;
    cudaStream_t stream = nullptr;  // the CUDA backend's stream; null on the CPU
    std::string device_name = "cpu";
};
// `name`: "cuda" or "cpu". Errors: no usable CUDA device.
Result<BenchBackend> open_bench_backend(const std::string& name, int device,
                                        const Progress& progress);

// `cuda`: whether the backend is the CUDA one (the copies then go through the runtime on
// `stream`; otherwise memcpy, for dry runs). Errors: out of memory.
Result<DeviceRates> measure_copy(tensor::Backend& backend, StepTimer& timer, bool cuda,
                                 cudaStream_t stream, std::size_t copy_bytes,
                                 std::size_t d2h_bytes);
Status measure_gemm(tensor::Backend& backend, StepTimer& timer, std::int64_t size,
                    DeviceRates& rates);

}  // namespace inferscale::bench
