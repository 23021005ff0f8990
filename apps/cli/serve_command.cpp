// inferscale serve: the OpenAI-compatible HTTP server with per-user memory, on the bundled
// model and the embedded SQLite store by default.

#include <csignal>
#include <filesystem>

#include "apps/cli/cli_support.h"
#include "apps/cli/commands.h"
#include "apps/cli/extraction_model.h"
#include "apps/cli/local_engine.h"
#include "apps/server/http_server.h"
#include "apps/server/memory_extraction.h"
#include "base/log.h"

namespace inferscale::cli {
namespace {

// The server that SIGINT / SIGTERM stop (one per process).
server::HttpServer* g_running = nullptr;

void on_signal(int) {
    if (g_running) g_running->stop();
}

}  // namespace

Command add_serve_command(CLI::App& app) {
    struct Args {
        ModelArgs model;
        server::ServerOptions server;
        engine::EngineOptions engine;
        std::int64_t kv_tokens = 0;  // 0: from GPU memory, or kDefaultCpuKvTokens on the CPU
        double gpu_memory_utilization = 0.9;
        std::int64_t max_batch_tokens = 512;
        std::int64_t max_batch_seqs = 64;
        std::string api_keys;
        EmbeddingArgs embedding;
        std::string memory_model;  // empty: extraction runs on the served model
        std::string memory_mode = "kv";
        std::string log_format = "text";
        EngineMemoryArgs memory;
        bool no_memory = false;
        bool no_background_encode = false;
        bool no_prefix_cache = false;
        bool no_warm_up = false;
    };
    auto a = std::make_shared<Args>();
    CLI::App* cmd =
        app.add_subcommand("serve", "serve the OpenAI-compatible API with per-user memory");
    add_model_flags(*cmd, a->model);
    add_chat_template_flag(*cmd, a->model);
    add_db_flag(*cmd, a->memory.db);
    cmd->add_option("--host", a->server.host, "address to listen on")->capture_default_str();
    cmd->add_option("--port", a->server.port, "port to listen on (0: any free port)")
        ->capture_default_str();
    cmd->add_option("--served-model-name", a->server.model_name,
                    "the model id clients name (default: the model file's name)");
    add_embedding_flags(*cmd, a->embedding, "served at /v1/embeddings and embedding each fact");
    cmd->add_option("--memory-model", a->memory_model,
                    "GGUF file or model folder that fact extraction runs on, in an engine of its "
                    "own with a KV cache for a few extraction prompts (default: the served model)");
    cmd->add_option("--api-keys", a->api_keys,
                    "JSON file of API keys and the users each may touch (default: an open server)");
    cmd->add_option("--kv-tokens", a->kv_tokens,
                    "KV cache capacity in tokens (default: on a GPU, what "
                    "--gpu-memory-utilization leaves; on the CPU, 32768)");
    cmd->add_option("--gpu-memory-utilization", a->gpu_memory_utilization,
                    "share of the GPU's memory to use: weights and workspace first, the rest split "
                    "between the KV cache and the chunk pool's device tier (half each unless "
                    "--kv-tokens or --device-pool-mb sets one)")
        ->capture_default_str();
    cmd->add_option("--max-batch-tokens", a->max_batch_tokens, "token budget of one engine step")
        ->capture_default_str();
    cmd->add_option("--max-batch-seqs", a->max_batch_seqs, "sequences in one engine step")
        ->capture_default_str();
    cmd->add_option("--max-requests", a->engine.max_requests,
                    "requests queued and running at once; more are refused with 503")
        ->capture_default_str();
    cmd->add_option("--max-body-bytes", a->server.max_body_bytes, "largest request body")
        ->capture_default_str();
    cmd->add_option("--memory", a->memory_mode, "default memory mode for requests with a user")
        ->check(CLI::IsMember({"kv", "prompt", "none"}))
        ->capture_default_str();
    cmd->add_option("--top-k", a->server.memory.top_k, "default facts retrieved per request")
        ->capture_default_str();
    cmd->add_option("--context-window", a->server.memory.context_window,
                    "default conversation turns each fact is encoded after")
        ->capture_default_str();
    add_chunk_flags(*cmd, a->memory.chunks);
    const CLI::Option* device_pool_flag = cmd->get_option("--device-pool-mb");
    cmd->add_option("--memory-prepare-ahead", a->engine.memory_prepare_ahead,
                    "queued requests whose memory chunks are fetched ahead of admission")
        ->capture_default_str();
    cmd->add_option("--log-format", a->log_format,
                    "log lines on stderr as text or as one JSON object per line (access log "
                    "included)")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
    cmd->add_flag("--log-requests", a->engine.log_requests,
                  "log where each request's time went (stderr)");
    cmd->add_flag("--no-memory", a->no_memory, "serve without a memory store");
    cmd->add_flag("--no-background-encode", a->no_background_encode,
                  "encode facts only when a request needs them, not as they are added");
    cmd->add_flag("--no-prefix-cache", a->no_prefix_cache, "turn prefix caching off");
    cmd->add_flag("--no-warm-up", a->no_warm_up,
                  "take requests at once instead of first running each step shape once (GPU: "
                  "tunes GEMMs and records decode graphs)");

    return [a, device_pool_flag]() -> int {
        set_log_format(a->log_format == "json" ? LogFormat::Json : LogFormat::Text);
        if (!(a->gpu_memory_utilization > 0.0 && a->gpu_memory_utilization <= 1.0))
            return fail("--gpu-memory-utilization must be in (0, 1], got " +
                        std::to_string(a->gpu_memory_utilization));
        // A port in use ends start-up before a model load that may take minutes.
        if (Status free = server::check_port_free(a->server.host, a->server.port); !free.ok())
            return fail(free.error().message);
        // On the engine's device, loaded first: a bad folder fails before a long model load.
        auto embeddings = load_embedding_model(a->embedding, a->model);
        if (!embeddings.ok()) return fail(embeddings.error().message);
        // Before the served model, so on a GPU its plan sees what extraction holds.
        std::unique_ptr<ExtractionModel> extraction_model;
        if (!a->memory_model.empty()) {
            if (a->no_memory) return fail("--memory-model needs the memory store (no --no-memory)");
            auto m = ExtractionModel::load(a->model, a->memory_model, a->gpu_memory_utilization,
                                           !a->no_warm_up);
            if (!m.ok()) return fail(m.error().message);
            extraction_model = std::move(m).value();
        }
        auto loaded = load_model(a->model, [&](engine::LocalModelOptions& o) {
            o.kv_tokens = a->kv_tokens;
            o.gpu_memory_utilization = a->gpu_memory_utilization;
            o.with_memory = !a->no_memory;
            if (device_pool_flag->count() > 0)
                o.device_pool_bytes = a->memory.chunks.device_pool_mb << 20;
            o.max_batch_tokens = a->max_batch_tokens;
            o.max_batch_seqs = a->max_batch_seqs;
        });
        if (!loaded.ok()) return fail(loaded.error().message);
        engine::LocalModel& lm = **loaded;

        engine::EngineOptions& eo = a->engine;
        eo.prefix_caching = !a->no_prefix_cache;
        eo.warm_up = !a->no_warm_up;
        eo.background_encode_window =
            a->no_memory || a->no_background_encode ? -1 : a->server.memory.context_window;
        auto local =
            LocalEngine::start(lm, eo, a->no_memory ? nullptr : &a->memory, embeddings->get());
        if (!local.ok()) return fail(local.error().message);
        memory::MemoryStore* store = (*local)->store();

        server::ServerContext ctx{(*local)->engine(), store, (*local)->retriever(), {},
                                  a->server,          {}};
        std::optional<server::MemoryExtraction> extraction;
        if (store != nullptr) {
            engine::Engine& runs = extraction_model ? extraction_model->engine() : ctx.engine;
            extraction.emplace(runs, *store, *(*local)->retriever(), (*local)->embedder());
            ctx.extraction = &*extraction;
            if (extraction_model) ctx.extraction_engine = &runs;
        }
        if (!a->api_keys.empty()) {
            auto keys = server::ApiKeys::load(a->api_keys);
            if (!keys.ok()) return fail(keys.error().message);
            ctx.keys = std::move(keys).value();
        }
        ctx.options.memory.mode = *engine::parse_memory_mode(a->memory_mode);
        ctx.options.memory.retrieval = default_retrieval(a->embedding);
        ctx.embeddings = embeddings->get();
        ctx.embedder = (*local)->embedder();
        if (ctx.options.model_name.empty())
            ctx.options.model_name = std::filesystem::path(lm.model_name()).stem().string();
        server::HttpServer http(ctx);
        auto port = http.bind();
        if (!port.ok()) return fail(port.error().message);
        IS_LOG(Info) << "serving " << ctx.options.model_name << " on http://" << ctx.options.host
                     << ":" << *port << " (memory: " << (store ? a->memory_mode : "off")
                     << ", embeddings: " << (*embeddings ? (*embeddings)->id() : std::string("off"))
                     << (extraction_model ? ", extraction on " + extraction_model->name() : "")
                     << ")";
        g_running = &http;
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        Status st = http.serve();
        g_running = nullptr;
        return st.ok() ? 0 : fail(st.error().message);
    };
}

}  // namespace inferscale::cli
