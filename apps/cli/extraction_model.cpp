#include "apps/cli/extraction_model.h"

#include <filesystem>

namespace inferscale::cli {

Result<std::unique_ptr<ExtractionModel>> ExtractionModel::load(const ModelArgs& served,
                                                               const std::string& path,
                                                               double gpu_memory_utilization,
                                                               bool warm_up) {
    ModelArgs args;
    args.path = path;
    args.device = served.device;
    args.threads = served.threads;
    args.max_context = kExtractionContext;
    auto loaded = load_model(args, [&](engine::LocalModelOptions& o) {
        o.kv_tokens = kExtractionKvTokens;
        o.gpu_memory_utilization = gpu_memory_utilization;
        o.with_memory = false;
    });
    if (!loaded.ok()) return make_error("--memory-model " + path + ": " + loaded.error().message);
    std::unique_ptr<ExtractionModel> out(new ExtractionModel());
    out->model_ = std::move(loaded).value();
    engine::EngineOptions options;
    options.warm_up = warm_up;
    auto started = engine::Engine::start(*out->model_, nullptr, nullptr, options);
    if (!started.ok()) return make_error("--memory-model " + path + ": " + started.error().message);
    out->engine_ = std::move(started).value();
    out->name_ = std::filesystem::path(out->model_->model_name()).stem().string();
    return out;
}

}  // namespace inferscale::cli
