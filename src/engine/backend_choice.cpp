#include "engine/backend_choice.h"

#include <cstdio>

#include "backends/cpu/cpu_backend.h"
#if INFERSCALE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_backend.h"
#endif

namespace inferscale::engine {

Result<tensor::Device> parse_device(std::string_view name) {
    if (name == "cpu") return tensor::Device::Cpu;
    if (name == "cuda") return tensor::Device::Cuda;
    return make_error("unknown device '" + std::string(name) + "' (cpu or cuda)");
}

const char* device_label(tensor::Device device) {
    return device == tensor::Device::Cuda ? "cuda" : "cpu";
}

bool cuda_built() { return INFERSCALE_WITH_CUDA != 0; }

Result<OpenedBackend> open_backend(const BackendChoice& choice) {
    OpenedBackend opened;
    if (choice.device == tensor::Device::Cpu) {
        backends::cpu::CpuBackendOptions options;
        options.num_threads = choice.num_threads;
        opened.backend = std::make_unique<backends::cpu::CpuBackend>(options);
        return opened;
    }
#if INFERSCALE_WITH_CUDA
    auto created = backends::cuda::CudaBackend::create(choice.cuda_device);
    if (!created.ok()) return make_error("device cuda: " + created.error().message);
    opened.backend = std::move(created).value();
    // create() has just succeeded on this index, so the properties are readable.
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, choice.cuda_device) == cudaSuccess) {
        opened.name = prop.name;
        char text[256];
        std::snprintf(text, sizeof text, "%s (device %d, %d SMs, %.1f GiB)", prop.name,
                      choice.cuda_device, prop.multiProcessorCount,
                      static_cast<double>(prop.totalGlobalMem) / (1 << 30));
        opened.description = text;
    } else {
        cudaGetLastError();
        opened.name = "cuda device " + std::to_string(choice.cuda_device);
        opened.description = opened.name;
    }
    return opened;
#else
    return make_error(
        "device cuda: this build has no CUDA backend (configure with -DINFERSCALE_CUDA=ON)");
#endif
}

}  // namespace inferscale::engine
