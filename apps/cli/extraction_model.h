#pragma once
// ExtractionModel: the second model `serve --memory-model PATH` runs fact extraction on, in its
// own LocalModel and Engine without memory, so extraction prompts neither queue behind the
// served model's requests nor take its KV cache. Its KV cache holds a few extraction prompts at
// once (kExtractionKvTokens), not what the GPU leaves; loaded before the served model, so on a
// GPU the served model's memory plan (engine/gpu_memory_plan.h) counts it as in use.

#include <cstdint>
#include <memory>
#include <string>

#include "apps/cli/cli_support.h"
#include "base/result.h"
#include "engine/engine.h"
#include "engine/local_model.h"

namespace inferscale::cli {

// One extraction prompt with its answer; prompts are a few hundred to ~2k tokens.
inline constexpr std::int64_t kExtractionContext = 4096;
// The extraction queue's workers (four) with ~2k tokens each.
inline constexpr std::int64_t kExtractionKvTokens = 4 * 2048;

class ExtractionModel {
  public:
    // Loads `path` (a GGUF file or model folder, as --model takes) on `served`'s device and
    // threads and starts its engine (warmed up as `warm_up` says). An Error naming the path
    // when it does not load or its KV cache does not fit.
    static Result<std::unique_ptr<ExtractionModel>> load(const ModelArgs& served,
                                                         const std::string& path,
                                                         double gpu_memory_utilization,
                                                         bool warm_up);

    engine::Engine& engine() { return *engine_; }
    // The file's name without its extension, for the start-up log.
    const std::string& name() const { return name_; }

  private:
    ExtractionModel() = default;
    // Destroyed last to first: the engine before its model.
    std::unique_ptr<engine::LocalModel> model_;
    std::unique_ptr<engine::Engine> engine_;
    std::string name_;
};

}  // namespace inferscale::cli
