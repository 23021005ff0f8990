#include "embed/bert_config.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "base/mapped_file.h"

namespace inferscale::embed {
namespace {

using nlohmann::json;

Result<json> read_json(const std::string& path) {
    const std::string text = IS_TRY(read_text_file(path));
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return make_error(path + ": not a JSON object");
    return j;
}

bool file_exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

Result<std::int64_t> positive(const json& j, const char* key, const std::string& path) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0)
        return make_error(path + ": '" + key + "' must be a positive integer");
    return it->get<std::int64_t>();
}

Status read_model_config(const std::string& path, BertConfig& c) {
    const json j = IS_TRY(read_json(path));
    const std::string type = j.value("model_type", std::string());
    if (type != "bert") return make_error(path + ": model_type '" + type + "', expected bert");
    const std::string act = j.value("hidden_act", std::string("gelu"));
    if (act != "gelu") return make_error(path + ": hidden_act '" + act + "', expected gelu");
    const std::string pos = j.value("position_embedding_type", std::string("absolute"));
    if (pos != "absolute")
        return make_error(path + ": position_embedding_type '" + pos + "', expected absolute");
    c.vocab_size = IS_TRY(positive(j, "vocab_size", path));
    c.hidden = IS_TRY(positive(j, "hidden_size", path));
    c.layers = IS_TRY(positive(j, "num_hidden_layers", path));
    c.heads = IS_TRY(positive(j, "num_attention_heads", path));
    c.intermediate = IS_TRY(positive(j, "intermediate_size", path));
    c.max_positions = IS_TRY(positive(j, "max_position_embeddings", path));
    c.type_vocab_size = IS_TRY(positive(j, "type_vocab_size", path));
    if (c.hidden % c.heads != 0)
        return make_error(path + ": hidden_size is not a multiple of num_attention_heads");
    const auto eps = j.find("layer_norm_eps");
    if (eps != j.end()) {
        if (!eps->is_number() || eps->get<double>() <= 0)
            return make_error(path + ": 'layer_norm_eps' must be a positive number");
        c.layer_norm_eps = eps->get<float>();
    }
    return {};
}

Status read_pooling(const std::string& path) {
    const json j = IS_TRY(read_json(path));
    for (const char* other :
         {"pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
          "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"}) {
        if (j.value(other, false))
            return make_error(path + ": " + other + " is not supported (mean pooling only)");
    }
    if (!j.value("pooling_mode_mean_tokens", false))
        return make_error(path + ": pooling_mode_mean_tokens must be true");
    return {};
}

}  // namespace

Result<BertConfig> read_bert_config(const std::string& dir) {
    BertConfig c;
    IS_RETURN_IF_ERROR(read_model_config(dir + "/config.json", c));
    IS_RETURN_IF_ERROR(read_pooling(dir + "/1_Pooling/config.json"));
    c.max_seq_length = c.max_positions;
    const std::string sbert = dir + "/sentence_bert_config.json";
    if (file_exists(sbert)) {
        const json j = IS_TRY(read_json(sbert));
        if (j.contains("max_seq_length"))
            c.max_seq_length = IS_TRY(positive(j, "max_seq_length", sbert));
        if (c.max_seq_length > c.max_positions)
            return make_error(sbert + ": max_seq_length " + std::to_string(c.max_seq_length) +
                              " exceeds max_position_embeddings " +
                              std::to_string(c.max_positions));
    }
    return c;
}

}  // namespace inferscale::embed
