#include "model/hf_config.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "base/mapped_file.h"

namespace inferscale::model {
namespace {

using nlohmann::json;

// Field readers: config.json comes from the outside world, so every access checks presence and
// type and reports the field by name instead of letting nlohmann throw.
const json* field(const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

Result<std::int64_t> as_int(const json& v, const char* key) {
    if (v.is_number_unsigned()) {
        if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(
                                        std::numeric_limits<std::int64_t>::max()))
            return make_error(std::string("config field '") + key + "' is out of range");
        return static_cast<std::int64_t>(v.get<std::uint64_t>());
    }
    if (v.is_number_integer()) return v.get<std::int64_t>();
    return make_error(std::string("config field '") + key + "' must be an integer, got " +
                      v.type_name());
}

Result<std::int64_t> required_positive(const json& obj, const char* key) {
    const json* v = field(obj, key);
    if (v == nullptr) return make_error(std::string("config is missing field '") + key + "'");
    std::int64_t n = IS_TRY(as_int(*v, key));
    if (n <= 0)
        return make_error(std::string("config field '") + key + "' must be positive, got " +
                          std::to_string(n));
    return n;
}

Result<std::int64_t> optional_positive(const json& obj, const char* key, std::int64_t fallback) {
    if (field(obj, key) == nullptr) return fallback;
    return required_positive(obj, key);
}

Result<double> optional_number(const json& obj, const char* key, double fallback) {
    const json* v = field(obj, key);
    if (v == nullptr) return fallback;
    if (!v->is_number())
        return make_error(std::string("config field '") + key + "' must be a number, got " +
                          v->type_name());
    return v->get<double>();
}

Result<bool> optional_bool(const json& obj, const char* key, bool fallback) {
    const json* v = field(obj, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean())
        return make_error(std::string("config field '") + key + "' must be a boolean, got " +
                          v->type_name());
    return v->get<bool>();
}

Result<std::string> optional_string(const json& obj, const char* key) {
    const json* v = field(obj, key);
    if (v == nullptr) return std::string();
    if (!v->is_string())
        return make_error(std::string("config field '") + key + "' must be a string, got " +
                          v->type_name());
    return v->get<std::string>();
}

Result<Architecture> parse_architecture(const json& obj) {
    std::string arch;
    if (const json* list = field(obj, "architectures")) {
        if (!list->is_array() || list->empty() || !(*list)[0].is_string())
            return make_error("config field 'architectures' must be a non-empty list of strings");
        arch = (*list)[0].get<std::string>();
        if (arch == "LlamaForCausalLM") return Architecture::Llama;
        if (arch == "MistralForCausalLM") return Architecture::Mistral;
        if (arch == "Qwen2ForCausalLM") return Architecture::Qwen2;
        return make_error("unsupported architecture '" + arch +
                          "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)");
    }
    std::string type = IS_TRY(optional_string(obj, "model_type"));
    if (type == "llama") return Architecture::Llama;
    if (type == "mistral") return Architecture::Mistral;
    if (type == "qwen2") return Architecture::Qwen2;
    if (type.empty()) return make_error("config has neither 'architectures' nor 'model_type'");
    return make_error("unsupported model_type '" + type + "' (supported: llama, mistral, qwen2)");
}

// rope_scaling (or, in newer transformers, rope_parameters) -> RopeScaling. Only "llama3" changes
// the frequencies in a way we implement; anything else would silently give wrong logits.
Status parse_rope_scaling(const json& scaling, const char* key, RopeScaling& out) {
    if (!scaling.is_object())
        return make_error(std::string("config field '") + key + "' must be an object");
    std::string type = IS_TRY(optional_string(scaling, "rope_type"));
    if (type.empty()) type = IS_TRY(optional_string(scaling, "type"));
    if (type.empty() || type == "default") return {};
    if (type != "llama3")
        return make_error(std::string("config field '") + key + "' has unsupported rope type '" +
                          type + "' (only llama3 is supported)");
    const json* factor = field(scaling, "factor");
    if (factor == nullptr || !factor->is_number() || factor->get<double>() <= 0)
        return make_error(std::string("config field '") + key +
                          ".factor' must be a positive number");
    out.factor = static_cast<float>(factor->get<double>());
    out.low_freq_factor =
        static_cast<float>(IS_TRY(optional_number(scaling, "low_freq_factor", 1.0)));
    out.high_freq_factor =
        static_cast<float>(IS_TRY(optional_number(scaling, "high_freq_factor", 4.0)));
    out.original_max_position_embeddings =
        IS_TRY(optional_positive(scaling, "original_max_position_embeddings", 8192));
    if (out.high_freq_factor <= out.low_freq_factor)
        return make_error(std::string("config field '") + key +
                          "': high_freq_factor must exceed low_freq_factor");
    return {};
}

Status parse_token_ids(const json& obj, HfConfig& out) {
    if (const json* bos = field(obj, "bos_token_id")) {
        out.config.bos_token_id = IS_TRY(as_int(*bos, "bos_token_id"));
    }
    const json* eos = field(obj, "eos_token_id");
    if (eos == nullptr) return {};
    if (eos->is_array()) {
        for (const json& id : *eos) out.eos_token_ids.push_back(IS_TRY(as_int(id, "eos_token_id")));
    } else {
        out.eos_token_ids.push_back(IS_TRY(as_int(*eos, "eos_token_id")));
    }
    if (!out.eos_token_ids.empty()) out.config.eos_token_id = out.eos_token_ids.front();
    return {};
}

}  // namespace

Result<HfConfig> parse_hf_config(std::string_view json_text, std::string name) {
    json obj = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded()) return make_error("config.json is not valid JSON");
    if (!obj.is_object()) return make_error("config.json must hold a JSON object");

    HfConfig out;
    ModelConfig& c = out.config;
    c.name = std::move(name);
    c.architecture = IS_TRY(parse_architecture(obj));
    c.vocab_size = IS_TRY(required_positive(obj, "vocab_size"));
    c.hidden_size = IS_TRY(required_positive(obj, "hidden_size"));
    c.intermediate_size = IS_TRY(required_positive(obj, "intermediate_size"));
    c.num_layers = IS_TRY(required_positive(obj, "num_hidden_layers"));
    c.num_heads = IS_TRY(required_positive(obj, "num_attention_heads"));
    c.num_kv_heads = IS_TRY(optional_positive(obj, "num_key_value_heads", c.num_heads));
    if (c.num_heads % c.num_kv_heads != 0)
        return make_error("config: num_attention_heads (" + std::to_string(c.num_heads) +
                          ") is not a multiple of num_key_value_heads (" +
                          std::to_string(c.num_kv_heads) + ")");
    if (field(obj, "head_dim") == nullptr && c.hidden_size % c.num_heads != 0)
        return make_error("config: hidden_size is not a multiple of num_attention_heads and no "
                          "head_dim is given");
    c.head_dim = IS_TRY(optional_positive(obj, "head_dim", c.hidden_size / c.num_heads));
    if (c.head_dim % 2 != 0)
        return make_error("config: head_dim " + std::to_string(c.head_dim) + " must be even");
    c.max_position_embeddings = IS_TRY(required_positive(obj, "max_position_embeddings"));
    // As transformers reads it: Mistral's window defaults to 4096 when the field is absent and
    // null turns it off (v0.3); Qwen2 uses its window only with use_sliding_window.
    if (c.architecture == Architecture::Mistral) {
        c.sliding_window = obj.contains("sliding_window")
                               ? IS_TRY(optional_positive(obj, "sliding_window", 0))
                               : 4096;
    } else if (c.architecture == Architecture::Qwen2 &&
               IS_TRY(optional_bool(obj, "use_sliding_window", false))) {
        c.sliding_window = IS_TRY(optional_positive(obj, "sliding_window", 4096));
    }
    // Defaults below are the transformers config classes' own defaults.
    c.rms_norm_eps = static_cast<float>(IS_TRY(optional_number(obj, "rms_norm_eps", 1e-6)));
    c.rope_theta = static_cast<float>(IS_TRY(optional_number(obj, "rope_theta", 10000.0)));
    if (const json* params = field(obj, "rope_parameters")) {
        // transformers >= 5 moves rope_theta and the scaling into one object.
        IS_RETURN_IF_ERROR(parse_rope_scaling(*params, "rope_parameters", c.rope_scaling));
        c.rope_theta = static_cast<float>(IS_TRY(optional_number(*params, "rope_theta",
                                                                 c.rope_theta)));
    }
    if (const json* scaling = field(obj, "rope_scaling")) {
        IS_RETURN_IF_ERROR(parse_rope_scaling(*scaling, "rope_scaling", c.rope_scaling));
    }
    if (c.rms_norm_eps <= 0) return make_error("config field 'rms_norm_eps' must be positive");
    if (c.rope_theta <= 0) return make_error("config field 'rope_theta' must be positive");
    // Qwen2's q/k/v projections always carry a bias; its config has no attention_bias field.
    c.attention_bias = c.architecture == Architecture::Qwen2 ||
                       IS_TRY(optional_bool(obj, "attention_bias", false));
    c.tie_word_embeddings = IS_TRY(optional_bool(obj, "tie_word_embeddings", false));
    IS_RETURN_IF_ERROR(parse_token_ids(obj, out));
    out.torch_dtype = IS_TRY(optional_string(obj, "torch_dtype"));
    if (out.torch_dtype.empty()) out.torch_dtype = IS_TRY(optional_string(obj, "dtype"));
    return out;
}

Result<HfConfig> load_hf_config(const std::string& path) {
    auto text = read_text_file(path);
    if (!text.ok()) return text.error();
    std::string name = path;
    if (auto slash = name.rfind('/'); slash != std::string::npos) {
        name = name.substr(0, slash);  // the model directory names the model
        if (auto s2 = name.rfind('/'); s2 != std::string::npos) name = name.substr(s2 + 1);
    }
    auto parsed = parse_hf_config(*text, name);
    if (!parsed.ok()) return make_error(path + ": " + parsed.error().message);
    return parsed;
}

Result<std::string> parse_hf_chat_template(std::string_view tokenizer_config_json) {
    json obj = json::parse(tokenizer_config_json.begin(), tokenizer_config_json.end(), nullptr,
                           false);
    if (obj.is_discarded() || !obj.is_object())
        return make_error("tokenizer_config.json is not a valid JSON object");
    const json* tmpl = field(obj, "chat_template");
    if (tmpl == nullptr) return std::string();
    if (tmpl->is_string()) return tmpl->get<std::string>();
    if (tmpl->is_array()) {
        std::string first;
        for (const json& entry : *tmpl) {
            if (!entry.is_object()) continue;
            const json* t = field(entry, "template");
            if (t == nullptr || !t->is_string()) continue;
            const json* n = field(entry, "name");
            if (n != nullptr && n->is_string() && n->get<std::string>() == "default")
                return t->get<std::string>();
            if (first.empty()) first = t->get<std::string>();
        }
        return first;
    }
    return make_error("tokenizer_config.json field 'chat_template' must be a string or a list");
}

}  // namespace inferscale::model
