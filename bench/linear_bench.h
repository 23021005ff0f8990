#pragma once
// The linears of one decoder layer at small token counts, timed on each LinearPath (cuBLASLt
// per target, cuBLASLt over the stacked targets, the small-batch kernel;
// CudaBackend::set_linear_path_options forces the path): what the backend's own per-shape
// timing chooses between. Each case is a Backend::linear group of the model's shapes (q/k/v,
// o, gate/up, down) on random data, a group's weights stacked in one buffer as the model stores
// q/k/v; bytes are weights + x + y.

#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_backend.h"
#include "bench/bench_support.h"
#include "model/model_config.h"

namespace inferscale::bench {

// Prints one table row per (group, n) and appends them to out["linears"]; restores the
// backend's options afterwards. Errors: out of device memory.
Status run_linear_sweep(backends::cuda::CudaBackend& backend, StepTimer& timer,
                        const model::ModelConfig& config, const Progress& progress,
                        nlohmann::json& out);

}  // namespace inferscale::bench
