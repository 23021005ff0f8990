#pragma once
// Pieces every CLI command shares: finding the bundled model, loading with a progress bar,
// and the sampling flags.

#include <CLI/CLI.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "apps/server/embedding_model.h"
#include "base/result.h"
#include "engine/local_model.h"
#include "engine/memory_runtime.h"
#include "memory/memory_store.h"
#include "retrieval/fact_retriever.h"
#include "sampling/sampling_params.h"

namespace inferscale::cli {

// The bundled SmolLM2 GGUF: $INFERSCALE_MODEL, else models/ beside the build tree of this
// binary, else ./models/.
std::string default_model_path();

// The sentence-embedding model folder (scripts/fetch_embedding_model.sh): models/
// all-minilm-l6-v2 beside the build tree of this binary, else under ./models/; "" when neither
// exists.
std::string default_embedding_model_dir();

// The sentence encoder of commands that embed text or retrieve memory: --embedding-model DIR
// (default: default_embedding_model_dir(); "none": no embeddings) and --retrieval.
struct EmbeddingArgs {
    std::string dir = default_embedding_model_dir();
    std::string retrieval;  // empty: hybrid with an embedding model, else bm25
    const CLI::Option* flag = nullptr;
};
// `what` says what the model serves, for the help text.
void add_embedding_flags(CLI::App& cmd, EmbeddingArgs& args, const std::string& what);

struct ModelArgs {
    std::string path;
    std::string device = "cpu";  // "cpu" or "cuda"
    std::string random_weights;  // a config.json: random weights of that shape
    std::string quant;           // their block types (model/weight_quant.h)
    int threads = 0;
    std::int64_t max_context = 4096;
    std::string chat_template;  // a Jinja file replacing the model's chat template
    std::string kv_cache_dtype = "auto";  // or fp8 (fp8_e4m3)
};
// --model, --device, --random-weights, --quant, --threads, --max-context, --kv-cache-dtype.
void add_model_flags(CLI::App& cmd, ModelArgs& args);
// The embedding model the flags name, on the model's device; null for none (logged when the
// default folder is missing). Errors: a folder that does not load, a --retrieval that needs
// embeddings without them.
Result<std::unique_ptr<server::EmbeddingModel>> load_embedding_model(const EmbeddingArgs& args,
                                                                     const ModelArgs& model);
// --retrieval as the request default; unset when the flag is not given.
std::optional<retrieval::RetrievalMethod> default_retrieval(const EmbeddingArgs& args);
// --chat-template, for the commands that render conversations (chat, serve).
void add_chat_template_flag(CLI::App& cmd, ModelArgs& args);

// Loads the model, drawing a progress bar on stderr when it is a terminal. An Error when the
// device cannot be used (a build without CUDA, no GPU) or the files cannot be loaded.
// `tune` may adjust the options (capacities) before loading.
Result<std::unique_ptr<engine::LocalModel>> load_model(
    const ModelArgs& args, const std::function<void(engine::LocalModelOptions&)>& tune = {});

// `top_k_flag` names the sampling top-k option: chat keeps --top-k for memory retrieval.
void add_sampling_flags(CLI::App& cmd, sampling::SamplingParams& params,
                        const std::string& top_k_flag = "--top-k");

// Structured output: the grammar generate and chat decode under (the server's response_format
// and grammar): a JSON schema file, any JSON object, or a GBNF file; at most one.
struct OutputFormatArgs {
    std::string json_schema_path;
    bool json_object = false;
    std::string grammar_path;
};
void add_output_format_flags(CLI::App& cmd, OutputFormatArgs& args);
// The compiled grammar, null for none; an Error naming the file or what it does not support.
Result<std::shared_ptr<const grammar::CompiledGrammar>> output_grammar(
    const OutputFormatArgs& args, const engine::LocalModel& lm);

// $INFERSCALE_DATA/memory.db, else $XDG_DATA_HOME/inferscale/memory.db, else
// ~/.local/share/inferscale/memory.db (the XDG base-directory default). Empty when no HOME.
std::string default_db_path();

struct DbArgs {
    std::string path;  // empty: default_db_path()
};
void add_db_flag(CLI::App& cmd, DbArgs& args);
// Opens the store; for the default location, creates its folder first.
Result<std::unique_ptr<memory::MemoryStore>> open_store(const DbArgs& args);

// The memory chunk flags of chat, serve and memory encode.
struct ChunkArgs {
    std::string encoding = "after-header";  // or "standalone"
    std::string chunk_dir;                  // empty: chunks/ beside the database; "none": off
    std::size_t device_pool_mb = 1024;
    std::size_t host_pool_mb = 4096;
};
// --encoding, --chunk-dir, --device-pool-mb, --host-pool-mb.
void add_chunk_flags(CLI::App& cmd, ChunkArgs& args);
// The memory runtime's options for a store at `db_path`.
engine::MemoryOptions memory_options(const ChunkArgs& args, const std::string& db_path);

// A progress bar "label [####    ] done/total" on stderr, redrawn only when it moves; an empty
// function when stderr is not a terminal.
std::function<void(std::size_t done, std::size_t total)> progress_bar(const std::string& label);

// Prints "error: <message>" on stderr and returns the CLI's failure exit code.
int fail(const std::string& message);

}  // namespace inferscale::cli
