#pragma once
// Choosing the backend a model runs on by name ("cpu", "cuda") and opening it: the one place
// above the backends that knows both, so LocalModel, the CLI and the benchmarks share it. The
// CUDA backend exists only in builds with -DINFERSCALE_CUDA=ON; elsewhere asking for it is an
// Error, never a crash.

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "tensor/backend.h"

namespace inferscale::engine {

// "cpu" or "cuda"; an Error names the accepted values.
Result<tensor::Device> parse_device(std::string_view name);
const char* device_label(tensor::Device device);  // "cpu" / "cuda"

// Whether this build has the CUDA backend.
bool cuda_built();

struct BackendChoice {
    tensor::Device device = tensor::Device::Cpu;
    int num_threads = 0;  // CPU backend threads; 0: all cores
    int cuda_device = 0;  // CUDA device index
};

struct OpenedBackend {
    std::unique_ptr<tensor::Backend> backend;
    std::string name = "cpu";  // or the GPU's name: "NVIDIA H200"
    // For logs: "cpu", or "NVIDIA H200 (device 0, 132 SMs, 139.8 GiB)".
    std::string description = "cpu";
};

// Errors: CUDA asked for in a build without it, or no usable CUDA device (no driver, no GPU,
// an index past the last one); the message says which.
Result<OpenedBackend> open_backend(const BackendChoice& choice);

}  // namespace inferscale::engine
