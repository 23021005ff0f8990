#include "apps/cli/cli_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/mapped_file.h"
#include "engine/backend_choice.h"

namespace inferscale::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kBundledModel = "SmolLM2-135M-Instruct.Q4_1.gguf";

std::filesystem::path executable_dir() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path(".") : exe.parent_path();
}

}  // namespace

std::string default_model_path() {
    if (const char* env = std::getenv("INFERSCALE_MODEL"); env != nullptr && *env != '\0')
        return env;
    // build/bin/inferscale -> <repo>/models
    for (const auto& dir :
         {executable_dir() / ".." / ".." / "models", std::filesystem::path("models")}) {
        auto candidate = dir / kBundledModel;
        if (std::filesystem::exists(candidate)) return candidate.lexically_normal().string();
    }
    return (std::filesystem::path("models") / kBundledModel).string();
}

std::string default_embedding_model_dir() {
    for (const auto& dir :
         {executable_dir() / ".." / ".." / "models", std::filesystem::path("models")}) {
        auto candidate = dir / "all-minilm-l6-v2";
        if (std::filesystem::exists(candidate / "model.safetensors"))
            return candidate.lexically_normal().string();
    }
    return "";
}

void add_embedding_flags(CLI::App& cmd, EmbeddingArgs& args, const std::string& what) {
    args.flag = cmd.add_option("--embedding-model", args.dir,
                               "sentence-transformers folder " + what +
                                   ", on --device (default: models/all-minilm-l6-v2 when "
                                   "present; none: no embeddings)");
    cmd.add_option("--retrieval", args.retrieval,
                   "default retrieval method (default: hybrid with an embedding model, else bm25)")
        ->check(CLI::IsMember({"bm25", "dense", "hybrid"}));
}

Result<std::unique_ptr<server::EmbeddingModel>> load_embedding_model(const EmbeddingArgs& args,
                                                                     const ModelArgs& model) {
    if (args.dir.empty() || args.dir == "none") {
        if (args.flag != nullptr && args.flag->count() == 0) {
            IS_LOG(Info) << "no embedding model (scripts/fetch_embedding_model.sh fetches one): "
                            "no /v1/embeddings, memory retrieval by bm25";
        }
        if (!args.retrieval.empty() && args.retrieval != "bm25")
            return make_error("--retrieval " + args.retrieval + " needs an embedding model");
        return std::unique_ptr<server::EmbeddingModel>();
    }
    engine::BackendChoice choice;
    choice.device = IS_TRY(engine::parse_device(model.device));
    choice.num_threads = model.threads;
    auto opened = server::EmbeddingModel::load(args.dir, choice);
    if (!opened.ok())
        return make_error("--embedding-model " + args.dir + ": " + opened.error().message);
    return std::move(opened).value();
}

std::optional<retrieval::RetrievalMethod> default_retrieval(const EmbeddingArgs& args) {
    if (args.retrieval.empty()) return std::nullopt;
    return *retrieval::parse_retrieval_method(args.retrieval);
}

void add_model_flags(CLI::App& cmd, ModelArgs& args) {
    args.path = default_model_path();
    cmd.add_option("--model", args.path, "GGUF file or Hugging Face model directory")
        ->capture_default_str();
    cmd.add_option("--device", args.device,
                   engine::cuda_built() ? "cpu or cuda (GPU 0)" : "cpu (this build has no CUDA)")
        ->capture_default_str();
    cmd.add_option("--random-weights", args.random_weights,
                   "a Hugging Face config.json: random weights of its shape (benchmarks); the "
                   "tokenizer still comes from --model");
    cmd.add_option("--quant", args.quant,
                   "with --random-weights: q4_k_m (llama.cpp's Q4_K/Q6_K mix) or none");
    cmd.add_option("--threads", args.threads, "CPU threads (0: all cores)");
    cmd.add_option("--max-context", args.max_context, "context length in tokens")
        ->capture_default_str()
        ->check(CLI::Range(16, 1 << 20));
    cmd.add_option("--kv-cache-dtype", args.kv_cache_dtype,
                   "auto (the backend's: f32 on the CPU, bf16 on a GPU) or fp8 (e4m3, a scale "
                   "per layer and KV head, calibrated at load; also fp8_e4m3): half the bytes "
                   "of bf16 in the KV cache and every memory chunk tier")
        ->capture_default_str();
}

void add_chat_template_flag(CLI::App& cmd, ModelArgs& args) {
    cmd.add_option("--chat-template", args.chat_template,
                   "a Jinja chat template file to use instead of the model's own")
        ->check(CLI::ExistingFile);
}

Result<std::unique_ptr<engine::LocalModel>> load_model(
    const ModelArgs& args, const std::function<void(engine::LocalModelOptions&)>& tune) {
    engine::LocalModelOptions options;
    options.model_path = args.path;
    options.device = IS_TRY(engine::parse_device(args.device));
    options.random_weights_config = args.random_weights;
    options.random_quant = IS_TRY(model::parse_weight_quant(args.quant));
    if (options.random_quant != model::WeightQuant::None && args.random_weights.empty()) {
        return make_error("--quant needs --random-weights (a GGUF file brings its own types)");
    }
    options.num_threads = args.threads;
    options.max_context = args.max_context;
    options.kv_tokens = args.max_context;
    options.chat_template_path = args.chat_template;
    if (args.kv_cache_dtype == "fp8" || args.kv_cache_dtype == "fp8_e4m3")
        options.kv_cache_dtype = tensor::DType::F8_E4M3;
    else if (args.kv_cache_dtype != "auto")
        return make_error("--kv-cache-dtype must be auto, fp8 or fp8_e4m3, got '" +
                          args.kv_cache_dtype + "'");
    if (tune) tune(options);
    return engine::LocalModel::load(options, progress_bar("loading model"));
}

void add_sampling_flags(CLI::App& cmd, sampling::SamplingParams& p, const std::string& top_k_flag) {
    cmd.add_option("--max-tokens", p.max_tokens, "most tokens to generate")->capture_default_str();
    cmd.add_option("--temperature", p.temperature, "0 for greedy")->capture_default_str();
    cmd.add_option(top_k_flag, p.top_k, "sample from the k most likely tokens (0: all)");
    cmd.add_option("--top-p", p.top_p, "nucleus sampling mass");
    cmd.add_option("--frequency-penalty", p.frequency_penalty,
                   "logit penalty per time a token was generated (-2..2)");
    cmd.add_option("--presence-penalty", p.presence_penalty,
                   "logit penalty for a token generated at all (-2..2)");
    cmd.add_option("--seed", p.seed, "random seed");
    cmd.add_option("--stop", p.stop, "stop string (repeatable)");
    cmd.add_flag("--ignore-eos", p.ignore_eos, "keep generating past end-of-sequence tokens");
}

void add_output_format_flags(CLI::App& cmd, OutputFormatArgs& args) {
    auto* schema = cmd.add_option("--json-schema", args.json_schema_path,
                                  "answer JSON that validates against this JSON schema file");
    auto* object = cmd.add_flag("--json-object", args.json_object, "answer a JSON object");
    auto* gbnf = cmd.add_option("--grammar", args.grammar_path,
                                "answer in this GBNF grammar (llama.cpp's syntax, rule root)");
    schema->excludes(object)->excludes(gbnf);
    object->excludes(gbnf);
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> output_grammar(
    const OutputFormatArgs& args, const engine::LocalModel& lm) {
    if (args.json_object) return lm.grammars().json_object();
    if (!args.json_schema_path.empty()) {
        const std::string text = IS_TRY(read_text_file(args.json_schema_path));
        nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
        if (schema.is_discarded()) return make_error(args.json_schema_path + ": not JSON");
        auto compiled = lm.grammars().json_schema(schema);
        if (!compiled.ok())
            return make_error(args.json_schema_path + ": " + compiled.error().message);
        return std::move(compiled).value();
    }
    if (!args.grammar_path.empty()) {
        auto compiled = lm.grammars().gbnf(IS_TRY(read_text_file(args.grammar_path)));
        if (!compiled.ok()) return make_error(args.grammar_path + ": " + compiled.error().message);
        return std::move(compiled).value();
    }
    return std::shared_ptr<const grammar::CompiledGrammar>();
}

std::string default_db_path() {
    auto env = [](const char* name) -> std::string {
        const char* value = std::getenv(name);
        return value != nullptr ? value : "";
    };
    if (auto dir = env("INFERSCALE_DATA"); !dir.empty())
        return (fs::path(dir) / "memory.db").string();
    if (auto dir = env("XDG_DATA_HOME"); !dir.empty())
        return (fs::path(dir) / "inferscale" / "memory.db").string();
    if (auto home = env("HOME"); !home.empty())
        return (fs::path(home) / ".local" / "share" / "inferscale" / "memory.db").string();
    return {};
}

void add_db_flag(CLI::App& cmd, DbArgs& args) {
    cmd.add_option(
        "--db", args.path,
        "memory database file (default: " +
            (default_db_path().empty() ? std::string("none, no HOME") : default_db_path()) + ")");
}

void add_chunk_flags(CLI::App& cmd, ChunkArgs& args) {
    cmd.add_option("--encoding", args.encoding,
                   "chunk encoding: after-header (chunks follow the memory header) or standalone")
        ->check(CLI::IsMember({"after-header", "standalone"}))
        ->capture_default_str();
    cmd.add_option(
        "--chunk-dir", args.chunk_dir,
        "disk tier of encoded KV chunks (default: chunks/ beside the database; none: off)");
    cmd.add_option("--device-pool-mb", args.device_pool_mb, "chunk pool: device tier size in MiB")
        ->capture_default_str();
    cmd.add_option("--host-pool-mb", args.host_pool_mb, "chunk pool: host tier size in MiB")
        ->capture_default_str();
}

engine::MemoryOptions memory_options(const ChunkArgs& args, const std::string& db_path) {
    engine::MemoryOptions options;
    options.encoding = args.encoding == "standalone" ? memory::EncodingMode::Standalone
                                                     : memory::EncodingMode::AfterHeader;
    options.device_pool_bytes = args.device_pool_mb << 20;
    options.host_pool_bytes = args.host_pool_mb << 20;
    if (args.chunk_dir != "none")
        options.disk_dir = !args.chunk_dir.empty()
                               ? args.chunk_dir
                               : (fs::path(db_path).parent_path() / "chunks").string();
    return options;
}

Result<std::unique_ptr<memory::MemoryStore>> open_store(const DbArgs& args) {
    std::string path = args.path;
    if (path.empty()) {
        path = default_db_path();
        if (path.empty())
            return make_error("no --db given and none of INFERSCALE_DATA, XDG_DATA_HOME, HOME set");
        std::error_code ec;
        fs::create_directories(fs::path(path).parent_path(), ec);
        if (ec)
            return make_error("cannot create " + fs::path(path).parent_path().string() + ": " +
                              ec.message());
    }
    return memory::MemoryStore::open(path);
}

std::function<void(std::size_t, std::size_t)> progress_bar(const std::string& label) {
    if (isatty(STDERR_FILENO) == 0) return {};
    return [label, last = -1](std::size_t done, std::size_t total) mutable {
        const int width = 30;
        const int filled = total ? static_cast<int>(width * done / total) : width;
        if (filled == last && done != total) return;
        last = filled;
        std::fprintf(stderr, "\r%s [%.*s%*s] %zu/%zu", label.c_str(), filled,
                     "##############################", width - filled, "", done, total);
        if (done == total) std::fputc('\n', stderr);
        std::fflush(stderr);
    };
}

int fail(const std::string& message) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
}

}  // namespace inferscale::cli
