#pragma once
// Pieces every CLI command shares: finding the bundled model, loading with a progress bar,
// and the sampling flags.

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "base/result.h"
#include "engine/local_model.h"
#include "sampling/sampling_params.h"

namespace inferscale::cli {

// The bundled SmolLM2 GGUF: $INFERSCALE_MODEL, else models/ beside the build tree of this
// binary, else ./models/.
std::string default_model_path();

struct ModelArgs {
    std::string path;
    int threads = 0;
    std::int64_t max_context = 4096;
};
void add_model_flags(CLI::App& cmd, ModelArgs& args);

// Loads the model, drawing a progress bar on stderr when it is a terminal.
Result<std::unique_ptr<engine::LocalModel>> load_model(const ModelArgs& args);

void add_sampling_flags(CLI::App& cmd, sampling::SamplingParams& params);

// Prints "error: <message>" on stderr and returns the CLI's failure exit code.
int fail(const std::string& message);

}  // namespace inferscale::cli
