#include "model/model_files.h"

#include <algorithm>
#include <string_view>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "model/gguf_loader.h"
#include "model/hf_config.h"
#include "model/safetensors_loader.h"

namespace inferscale::model {
namespace {

bool is_dir(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void add_unique(std::vector<std::int64_t>& ids, std::int64_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

// generation_config.json often lists more stop ids than config.json (Llama 3 instruct). It is
// optional, so an unreadable one is ignored rather than failing the load.
void add_generation_eos(const std::string& dir, std::vector<std::int64_t>& ids) {
    auto text = read_text_file(dir + "/generation_config.json");
    if (!text.ok()) return;
    auto doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) return;
    auto it = doc.find("eos_token_id");
    if (it == doc.end()) return;
    if (it->is_number_integer()) add_unique(ids, it->get<std::int64_t>());
    if (it->is_array()) {
        for (const auto& v : *it)
            if (v.is_number_integer()) add_unique(ids, v.get<std::int64_t>());
    }
}

// Newer transformers save the template as chat_template.jinja; older ones inside
// tokenizer_config.json.
Result<std::string> load_hf_chat_template(const std::string& dir) {
    const std::string jinja = dir + "/chat_template.jinja";
    if (is_file(jinja)) return read_text_file(jinja);
    const std::string tok_config = dir + "/tokenizer_config.json";
    if (!is_file(tok_config)) return std::string();
    std::string text = IS_TRY(read_text_file(tok_config));
    auto tmpl = parse_hf_chat_template(text);
    if (!tmpl.ok()) return make_error(tok_config + ": " + tmpl.error().message);
    return tmpl;
}

Result<ModelFiles> load_hf_dir(const std::string& dir, const LoadProgress& progress) {
    const std::string config_path = dir + "/config.json";
    if (!is_file(config_path)) return make_error(dir + ": no config.json in model directory");
    HfConfig hf = IS_TRY(load_hf_config(config_path));
    ModelFiles files;
    files.config = std::move(hf.config);
    (void)IS_TRY(load_safetensors_dir(dir, files.weights, progress));
    if (is_file(dir + "/tokenizer.json")) files.tokenizer_json_path = dir + "/tokenizer.json";
    files.chat_template = IS_TRY(load_hf_chat_template(dir));
    for (std::int64_t id : hf.eos_token_ids) add_unique(files.eos_token_ids, id);
    add_generation_eos(dir, files.eos_token_ids);
    return files;
}

Result<ModelFiles> load_gguf(const std::string& path, const LoadProgress& progress,
                             const LoadOptions& options) {
    ModelFiles files;
    GgufModel gguf = IS_TRY(load_gguf_model(path, files.weights, progress, options.keep_quantized));
    files.config = std::move(gguf.config);
    files.gguf_vocab = std::move(gguf.vocab);
    files.chat_template = std::move(gguf.chat_template);
    files.eos_token_ids = std::move(gguf.eos_token_ids);
    return files;
}

std::string layer_name(std::int64_t layer, std::string_view suffix) {
    return "model.layers." + std::to_string(layer) + "." + std::string(suffix);
}

}  // namespace

Result<ModelFiles> load_model_files(const std::string& path, const LoadProgress& progress,
                                    const LoadOptions& options) {
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    ModelFiles files;
    if (is_dir(p)) {
        files = IS_TRY(load_hf_dir(p, progress));
    } else if (is_file(p)) {
        files = IS_TRY(load_gguf(p, progress, options));
    } else {
        return make_error(path + ": no such model file or directory");
    }
    Status valid = validate_llama_weights(files.config, files.weights);
    if (!valid.ok()) return make_error(path + ": " + valid.error().message);
    return files;
}

Status validate_llama_weights(const ModelConfig& c, const WeightStore& weights) {
    const std::int64_t q_dim = c.num_heads * c.head_dim;
    const std::int64_t kv_dim = c.num_kv_heads * c.head_dim;
    auto check = [&](const std::string& name,
                     std::initializer_list<std::int64_t> shape) -> Status {
        tensor::Tensor t = IS_TRY(weights.get(name, shape));
        if (t.device != tensor::Device::Cpu || t.data == nullptr)
            return make_error("weight " + name + " is not in host memory");
        if (t.dtype == tensor::DType::I32)
            return make_error("weight " + name + " has integer dtype");
        if (tensor::is_block_quantized(t.dtype) && t.rank != 2)
            return make_error("weight " + name + " is block-quantized but not a matrix");
        return {};
    };
    IS_RETURN_IF_ERROR(check("model.embed_tokens.weight", {c.vocab_size, c.hidden_size}));
    for (std::int64_t i = 0; i < c.num_layers; ++i) {
        IS_RETURN_IF_ERROR(check(layer_name(i, "input_layernorm.weight"), {c.hidden_size}));
        IS_RETURN_IF_ERROR(check(layer_name(i, "self_attn.q_proj.weight"), {q_dim, c.hidden_size}));
        IS_RETURN_IF_ERROR(
            check(layer_name(i, "self_attn.k_proj.weight"), {kv_dim, c.hidden_size}));
        IS_RETURN_IF_ERROR(
            check(layer_name(i, "self_attn.v_proj.weight"), {kv_dim, c.hidden_size}));
        IS_RETURN_IF_ERROR(check(layer_name(i, "self_attn.o_proj.weight"), {c.hidden_size, q_dim}));
        if (c.attention_bias) {
            IS_RETURN_IF_ERROR(check(layer_name(i, "self_attn.q_proj.bias"), {q_dim}));
            IS_RETURN_IF_ERROR(check(layer_name(i, "self_attn.k_proj.bias"), {kv_dim}));
            IS_RETURN_IF_ERROR(check(layer_name(i, "self_attn.v_proj.bias"), {kv_dim}));
        }
        IS_RETURN_IF_ERROR(
            check(layer_name(i, "post_attention_layernorm.weight"), {c.hidden_size}));
        IS_RETURN_IF_ERROR(
            check(layer_name(i, "mlp.gate_proj.weight"), {c.intermediate_size, c.hidden_size}));
        IS_RETURN_IF_ERROR(
            check(layer_name(i, "mlp.up_proj.weight"), {c.intermediate_size, c.hidden_size}));
        IS_RETURN_IF_ERROR(
            check(layer_name(i, "mlp.down_proj.weight"), {c.hidden_size, c.intermediate_size}));
    }
    IS_RETURN_IF_ERROR(check("model.norm.weight", {c.hidden_size}));
    if (!c.tie_word_embeddings) {
        IS_RETURN_IF_ERROR(check("lm_head.weight", {c.vocab_size, c.hidden_size}));
    }
    return {};
}

}  // namespace inferscale::model
