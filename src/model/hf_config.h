#pragma once
// Hugging Face config.json -> ModelConfig for LlamaForCausalLM, MistralForCausalLM and
// Qwen2ForCausalLM. Every failure is an Error naming the offending field; nothing throws.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/model_config.h"

namespace inferscale::model {

struct HfConfig {
    ModelConfig config;
    // Every end-of-sequence id the config lists (eos_token_id may be an int or a list); the
    // first one is config.eos_token_id. Empty when the config names none.
    std::vector<std::int64_t> eos_token_ids;
    std::string torch_dtype;  // "bfloat16", "float16", "float32" or empty when absent
};

// Parses the text of a config.json. `name` is only used for ModelConfig::name.
Result<HfConfig> parse_hf_config(std::string_view json_text, std::string name = {});

// Reads and parses the config.json at `path`; errors are prefixed with the path.
Result<HfConfig> load_hf_config(const std::string& path);

// The chat template from a tokenizer_config.json text: its "chat_template" string, or from the
// list form ([{name, template}]) the one named "default", else the first. Empty when absent.
Result<std::string> parse_hf_chat_template(std::string_view tokenizer_config_json);

}  // namespace inferscale::model
