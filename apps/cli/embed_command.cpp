// inferscale embed: the sentence embeddings of TEXT... as JSON, from the same encoder the
// server's /v1/embeddings runs.

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "apps/cli/cli_support.h"
#include "apps/cli/commands.h"
#include "embed/sentence_encoder.h"
#include "engine/backend_choice.h"

namespace inferscale::cli {

Command add_embed_command(CLI::App& app) {
    struct Args {
        std::vector<std::string> texts;
        std::string model = default_embedding_model_dir();
        std::string device = "cpu";
        int threads = 0;
    };
    auto args = std::make_shared<Args>();
    CLI::App* cmd = app.add_subcommand(
        "embed",
        "print the sentence embeddings of TEXT... as JSON: {\"model\", \"data\": [[...]]}");
    cmd->add_option("text", args->texts, "the texts to embed")->required();
    cmd->add_option("--embedding-model", args->model,
                    "sentence-transformers folder (default: models/all-minilm-l6-v2)")
        ->capture_default_str();
    cmd->add_option("--device", args->device,
                    engine::cuda_built() ? "cpu or cuda (GPU 0)" : "cpu (this build has no CUDA)")
        ->capture_default_str();
    cmd->add_option("--threads", args->threads, "CPU threads (0: all cores)");

    return [args]() -> int {
        if (args->model.empty())
            return fail(
                "no embedding model: scripts/fetch_embedding_model.sh fetches "
                "models/all-minilm-l6-v2, or name one with --embedding-model");
        auto device = engine::parse_device(args->device);
        if (!device.ok()) return fail(device.error().message);
        engine::BackendChoice choice;
        choice.device = *device;
        choice.num_threads = args->threads;
        auto backend = engine::open_backend(choice);
        if (!backend.ok()) return fail(backend.error().message);
        auto encoder = embed::SentenceEncoder::load(args->model, *backend->backend);
        if (!encoder.ok()) return fail(args->model + ": " + encoder.error().message);
        const auto dim = static_cast<std::size_t>((*encoder)->dim());
        std::vector<float> out(args->texts.size() * dim);
        if (Status st = (*encoder)->encode(args->texts, out); !st.ok())
            return fail(st.error().message);
        nlohmann::json data = nlohmann::json::array();
        for (std::size_t i = 0; i < args->texts.size(); ++i)
            data.push_back(std::vector<float>(out.begin() + i * dim, out.begin() + (i + 1) * dim));
        std::printf("%s\n",
                    nlohmann::json{{"model", (*encoder)->id()}, {"data", data}}.dump().c_str());
        return 0;
    };
}

}  // namespace inferscale::cli
