#include "engine/local_model.h"

#include <algorithm>

#include "backends/cpu/cpu_backend.h"

namespace inferscale::engine {
namespace {

Result<tokenizer::Tokenizer> load_tokenizer(const model::ModelFiles& files) {
    if (!files.tokenizer_json_path.empty())
        return tokenizer::Tokenizer::from_json_file(files.tokenizer_json_path);
    if (!files.gguf_vocab.tokens.empty()) return tokenizer::Tokenizer::from_vocab(files.gguf_vocab);
    return make_error("the model files carry no tokenizer (no tokenizer.json, no GGUF vocab)");
}

}  // namespace

Result<std::unique_ptr<LocalModel>> LocalModel::load(const LocalModelOptions& options,
                                                     const model::LoadProgress& progress) {
    // The CPU backend multiplies GGUF Q8_0/Q4_0/Q4_1 blocks directly (as llama.cpp does).
    model::ModelFiles files = IS_TRY(model::load_model_files(
        options.model_path, progress, model::LoadOptions{.keep_quantized = true}));
    tokenizer::Tokenizer tok = IS_TRY(load_tokenizer(files));

    backends::cpu::CpuBackendOptions cpu_options;
    cpu_options.num_threads = options.num_threads;
    auto backend = std::make_unique<backends::cpu::CpuBackend>(cpu_options);

    const std::int64_t max_context =
        std::min<std::int64_t>(options.max_context, files.config.max_position_embeddings);
    model::LlamaModelOptions model_options;
    model_options.max_positions = max_context;
    model::LlamaModel llama =
        IS_TRY(model::LlamaModel::create(*backend, files.config, files.weights, model_options));

    const std::int64_t block_size = 16;
    const std::int64_t kv_tokens = std::max(options.kv_tokens, max_context);
    kv::KvStorage kv =
        IS_TRY(kv::KvStorage::create(*backend, llama.kv_layout(kv_tokens / block_size, block_size)));

    model::WorkspaceLimits limits;
    limits.max_tokens = options.max_batch_tokens;
    limits.max_seqs = options.max_batch_seqs;
    limits.max_pages = kv_tokens / block_size + options.max_batch_seqs;
    limits.max_logit_rows = options.max_batch_seqs;
    model::ForwardWorkspace ws = IS_TRY(llama.create_workspace(limits));

    std::unique_ptr<LocalModel> local(
        new LocalModel(std::move(backend), std::move(llama), std::move(kv), std::move(ws),
                       std::move(tok)));
    local->max_context_ = max_context;
    local->model_name_ = options.model_path;
    local->eos_ids_ = files.eos_token_ids;
    if (!files.chat_template.empty()) {
        auto tmpl = tokenizer::ChatTemplate::detect(files.chat_template);
        if (tmpl.ok()) local->chat_template_ = std::move(tmpl).value();
    }
    return local;
}

bool LocalModel::is_end_of_generation(std::int32_t id) const {
    if (tokenizer_.is_end_of_generation(id)) return true;
    return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

}  // namespace inferscale::engine
