#include "engine/local_model.h"

#include <algorithm>
#include <optional>

#include "base/log.h"
#include "base/mapped_file.h"
#include "engine/backend_choice.h"
#include "engine/kv_scales.h"
#include "model/hf_config.h"

namespace inferscale::engine {
namespace {

Result<tokenizer::Tokenizer> load_tokenizer(const model::ModelFiles& files) {
    if (!files.tokenizer_json_path.empty())
        return tokenizer::Tokenizer::from_json_file(files.tokenizer_json_path);
    if (!files.gguf_vocab.tokens.empty()) return tokenizer::Tokenizer::from_vocab(files.gguf_vocab);
    return make_error("the model files carry no tokenizer (no tokenizer.json, no GGUF vocab)");
}

// The template of --chat-template, else the model's own; parsed now, so that one this
// interpreter cannot run fails the load rather than a request.
Result<std::optional<jinja::ChatTemplate>> load_chat_template(const LocalModelOptions& options,
                                                              const model::ModelFiles& files,
                                                              const tokenizer::Tokenizer& tok) {
    std::string source = files.chat_template;
    std::string origin = "the model's chat template";
    if (!options.chat_template_path.empty()) {
        source = IS_TRY(read_text_file(options.chat_template_path));
        origin = options.chat_template_path;
    }
    if (source.empty()) return std::optional<jinja::ChatTemplate>();
    const auto token = [&tok](std::int32_t id) {
        return id >= 0 ? std::string(tok.token_text(id)) : std::string();
    };
    auto parsed = jinja::ChatTemplate::parse(source, {token(tok.bos_id()), token(tok.eos_id())});
    if (!parsed.ok()) return make_error(origin + ": " + parsed.error().message);
    return std::optional<jinja::ChatTemplate>(std::move(parsed).value());
}

std::string weights_identity(const LocalModelOptions& options) {
    std::string name = options.model_path;
    if (!options.random_weights_config.empty())
        name += "+random(" + options.random_weights_config + ",seed=" +
                std::to_string(options.random_seed) +
                (options.random_quant == model::WeightQuant::Q4_K_M ? ",q4_k_m" : "") + ")";
    if (options.device != tensor::Device::Cpu)
        name += std::string("@") + device_label(options.device);
    return name;
}

}  // namespace

Result<std::unique_ptr<LocalModel>> LocalModel::load(const LocalModelOptions& options,
                                                     const model::LoadProgress& progress) {
    // Open the device first: asking for a GPU that is not there should not cost a model load.
    OpenedBackend opened = IS_TRY(open_backend(BackendChoice{.device = options.device,
                                                             .num_threads = options.num_threads,
                                                             .cuda_device = options.cuda_device}));
    std::unique_ptr<tensor::Backend> backend = std::move(opened.backend);
    std::optional<model::HfConfig> random_shape;
    if (!options.random_weights_config.empty())
        random_shape = IS_TRY(model::load_hf_config(options.random_weights_config));
    // Block-quantized GGUF matrices stay in block form on both backends: each multiplies the
    // blocks directly (the CPU as llama.cpp does).
    model::ModelFiles files = IS_TRY(model::load_model_files(
        options.model_path, progress, model::LoadOptions{.keep_quantized = true}));
    tokenizer::Tokenizer tok = IS_TRY(load_tokenizer(files));

    const model::ModelConfig& config = random_shape ? random_shape->config : files.config;
    std::int64_t max_context =
        std::min<std::int64_t>(options.max_context, config.max_position_embeddings);
    if (config.sliding_window > 0 && !config.windowed_attention() &&
        config.sliding_window < max_context) {
        IS_LOG(Info) << "the context is capped at the model's sliding window of "
                     << config.sliding_window << " tokens (no windowed attention here)";
        max_context = config.sliding_window;
    }
    model::LlamaModelOptions model_options;
    model_options.max_positions = max_context;
    model_options.random_quant = options.random_quant;
    model::LlamaModel llama = IS_TRY(
        random_shape ? model::LlamaModel::create_random(*backend, config, options.random_seed,
                                                        model_options)
                     : model::LlamaModel::create(*backend, config, files.weights, model_options));

    const std::int64_t block_size = 16;
    model::WorkspaceLimits limits;
    limits.max_tokens = options.max_batch_tokens;
    limits.max_seqs = options.max_batch_seqs;
    limits.max_logit_rows = options.max_batch_seqs;
    // The KV cache is sized last, from what the weights and the workspace leave on a GPU. The
    // workspace's page tables are sized for the most tokens that could fit (4 bytes a page).
    const tensor::DType kv_dtype = options.kv_cache_dtype.value_or(backend->kv_dtype());
    const std::size_t kv_token_bytes = llama.kv_layout(1, 1).bytes_per_layer(kv_dtype) * 2 *
                                       static_cast<std::size_t>(config.num_layers);
    const std::optional<tensor::Backend::MemoryInfo> before = backend->memory_info();
    std::int64_t kv_tokens = options.kv_tokens > 0 ? options.kv_tokens : kDefaultCpuKvTokens;
    if (before) {
        kv_tokens = std::max<std::int64_t>(
            kv_tokens, static_cast<std::int64_t>(before->free_bytes / kv_token_bytes));
    }
    kv_tokens = std::max(kv_tokens, max_context);
    limits.max_pages = kv_tokens / block_size + options.max_batch_seqs;
    model::ForwardWorkspace ws = IS_TRY(llama.create_workspace(limits));

    std::optional<GpuMemoryPlan> plan;
    if (const auto now = backend->memory_info()) {
        GpuMemoryRequest request;
        request.total_bytes = now->total_bytes;
        request.free_bytes = now->free_bytes;
        request.utilization = options.gpu_memory_utilization;
        request.kv_bytes_per_token = kv_token_bytes;
        request.block_size = block_size;
        request.min_kv_tokens = max_context;
        if (options.kv_tokens > 0) request.kv_tokens = options.kv_tokens;
        request.device_pool_bytes = options.device_pool_bytes;
        request.with_memory = options.with_memory;
        plan = IS_TRY(plan_gpu_memory(request));
        IS_LOG(Info) << describe(*plan);
        kv_tokens = plan->kv_tokens;  // at least max_context: plan_gpu_memory checks it
    }
    kv::KvStorage kv = IS_TRY(kv::KvStorage::create(
        *backend, llama.kv_layout(kv_tokens / block_size, block_size), kv_dtype));

    std::unique_ptr<LocalModel> local(
        new LocalModel(std::move(backend), std::move(llama), std::move(kv), std::move(ws),
                       std::move(tok)));
    local->max_context_ = max_context;
    local->memory_plan_ = plan;
    local->model_name_ = weights_identity(options);
    local->kv_identity_ = local->model_name_;
    if (local->kv_.fp8()) {
        IS_RETURN_IF_ERROR(calibrate_kv_scales(*local));
        local->kv_identity_ += "+kv(f8_e4m3," + kv_scales_digest(local->kv_.scales()) + ")";
        IS_LOG(Info) << "KV cache in FP8 (e4m3), scales calibrated per layer and KV head";
    }
    local->device_description_ = std::move(opened.description);
    local->eos_ids_ = files.eos_token_ids;
    local->chat_template_ = IS_TRY(load_chat_template(options, files, local->tokenizer()));
    return local;
}

bool LocalModel::is_end_of_generation(std::int32_t id) const {
    if (tokenizer_.is_end_of_generation(id)) return true;
    return std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
}

grammar::GrammarCache& LocalModel::grammars() const {
    std::call_once(grammars_once_, [this] {
        const std::int64_t vocab = config().vocab_size;
        const std::int64_t known = std::min(vocab, tokenizer_.vocab_size());
        std::vector<std::string> bytes(static_cast<std::size_t>(vocab));
        std::vector<bool> special(static_cast<std::size_t>(vocab), false);
        std::vector<std::int32_t> ends;
        for (std::int32_t id = 0; id < vocab; ++id) {
            if (id < known) {
                special[id] = tokenizer_.is_special(id);
                if (!special[id]) bytes[id] = tokenizer_.token_bytes(id);
            }
            if (is_end_of_generation(id)) ends.push_back(id);
        }
        grammars_ = std::make_unique<grammar::GrammarCache>(std::make_shared<grammar::Vocabulary>(
            std::move(bytes), std::move(special), std::move(ends)));
    });
    return *grammars_;
}

Result<std::vector<std::int32_t>> LocalModel::encode_chat(
    const std::vector<jinja::ChatMessage>& messages, bool add_generation_prompt,
    const jinja::Value& tools) const {
    if (!chat_template_)
        return make_error(ErrorKind::InvalidArgument, "the model has no chat template");
    const std::string prompt =
        IS_TRY(chat_template_->render(messages, add_generation_prompt, tools));
    return tokenizer_.encode(prompt, /*add_special=*/false, /*parse_special=*/true);
}

}  // namespace inferscale::engine
