// config.json parsing: every supported architecture, the optional fields, and a clear Error
// naming the field for each missing or wrongly typed one.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/hf_config.h"

namespace inferscale::model {
namespace {

using nlohmann::json;

json base_config() {
    return json{{"architectures", {"LlamaForCausalLM"}},
                {"vocab_size", 128},
                {"hidden_size", 64},
                {"intermediate_size", 96},
                {"num_hidden_layers", 2},
                {"num_attention_heads", 4},
                {"num_key_value_heads", 2},
                {"max_position_embeddings", 512},
                {"rms_norm_eps", 1e-5},
                {"rope_theta", 500000.0},
                {"tie_word_embeddings", true},
                {"bos_token_id", 1},
                {"eos_token_id", 2},
                {"torch_dtype", "bfloat16"}};
}

std::string error_of(const json& j) {
    auto r = parse_hf_config(j.dump());
    EXPECT_FALSE(r.ok()) << j.dump();
    return r.ok() ? std::string() : r.error().message;
}

TEST(HfConfig, ParsesLlama) {
    auto r = parse_hf_config(base_config().dump(), "tiny");
    ASSERT_TRUE(r.ok()) << r.error().message;
    const ModelConfig& c = r->config;
    EXPECT_EQ(c.architecture, Architecture::Llama);
    EXPECT_EQ(c.vocab_size, 128);
    EXPECT_EQ(c.hidden_size, 64);
    EXPECT_EQ(c.intermediate_size, 96);
    EXPECT_EQ(c.num_layers, 2);
    EXPECT_EQ(c.num_heads, 4);
    EXPECT_EQ(c.num_kv_heads, 2);
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_EQ(c.max_position_embeddings, 512);
    EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
    EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
    EXPECT_EQ(c.rope_scaling.factor, 0.0f);
    EXPECT_FALSE(c.attention_bias);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_id, 2);
    EXPECT_EQ(c.name, "tiny");
    EXPECT_EQ(r->eos_token_ids, std::vector<std::int64_t>{2});
    EXPECT_EQ(r->torch_dtype, "bfloat16");
}

TEST(HfConfig, DefaultsForOptionalFields) {
    json j = base_config();
    for (const char* key : {"num_key_value_heads", "rms_norm_eps", "rope_theta",
                            "tie_word_embeddings", "bos_token_id", "eos_token_id", "torch_dtype"})
        j.erase(key);
    j["num_key_value_heads"] = nullptr;  // null means "not set" in HF configs
    auto r = parse_hf_config(j.dump());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->config.num_kv_heads, 4);
    EXPECT_FLOAT_EQ(r->config.rms_norm_eps, 1e-6f);
    EXPECT_FLOAT_EQ(r->config.rope_theta, 10000.0f);
    EXPECT_FALSE(r->config.tie_word_embeddings);
    EXPECT_EQ(r->config.bos_token_id, -1);
    EXPECT_EQ(r->config.eos_token_id, -1);
    EXPECT_TRUE(r->eos_token_ids.empty());
}

TEST(HfConfig, MistralAndQwen2) {
    json j = base_config();
    j["architectures"] = {"MistralForCausalLM"};
    j["head_dim"] = 32;  // Mistral-style explicit head_dim that differs from hidden / heads
    auto r = parse_hf_config(j.dump());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->config.architecture, Architecture::Mistral);
    EXPECT_EQ(r->config.head_dim, 32);

    j = base_config();
    j["architectures"] = {"Qwen2ForCausalLM"};
    r = parse_hf_config(j.dump());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->config.architecture, Architecture::Qwen2);
    EXPECT_TRUE(r->config.attention_bias);

    j = base_config();
    j.erase("architectures");
    j["model_type"] = "qwen2";
    r = parse_hf_config(j.dump());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->config.architecture, Architecture::Qwen2);
}

// Sliding windows as transformers reads them: Mistral 4096 when absent, off when null (v0.3),
// Qwen2's only with use_sliding_window, Llama none.
TEST(HfConfig, SlidingWindow) {
    json j = base_config();
    EXPECT_EQ(parse_hf_config(j.dump())->config.sliding_window, 0);
    j["architectures"] = {"MistralForCausalLM"};
    EXPECT_EQ(parse_hf_config(j.dump())->config.sliding_window, 4096);
    j["sliding_window"] = nullptr;
    EXPECT_EQ(parse_hf_config(j.dump())->config.sliding_window, 0);
    j["sliding_window"] = 256;
    EXPECT_EQ(parse_hf_config(j.dump())->config.sliding_window, 256);
    j["sliding_window"] = -1;
    EXPECT_NE(error_of(j).find("sliding_window"), std::string::npos);
    j = base_config();
    j["architectures"] = {"Qwen2ForCausalLM"};
    j["sliding_window"] = 131072;
    EXPECT_EQ(parse_hf_config(j.dump())->config.sliding_window, 0);
    j["use_sliding_window"] = true;
    EXPECT_EQ(parse_hf_config(j.dump())->config.sliding_window, 131072);
}

TEST(HfConfig, EosListAndAttentionBias) {
    json j = base_config();
    j["eos_token_id"] = {128001, 128008, 128009};
    j["attention_bias"] = true;
    auto r = parse_hf_config(j.dump());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->config.eos_token_id, 128001);
    EXPECT_EQ(r->eos_token_ids, (std::vector<std::int64_t>{128001, 128008, 128009}));
    EXPECT_TRUE(r->config.attention_bias);
}

TEST(HfConfig, Llama3RopeScaling) {
    json j = base_config();
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}};
    auto r = parse_hf_config(j.dump());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FLOAT_EQ(r->config.rope_scaling.factor, 8.0f);
    EXPECT_FLOAT_EQ(r->config.rope_scaling.low_freq_factor, 1.0f);
    EXPECT_FLOAT_EQ(r->config.rope_scaling.high_freq_factor, 4.0f);
    EXPECT_EQ(r->config.rope_scaling.original_max_position_embeddings, 8192);

    j["rope_scaling"] = {{"type", "default"}};
    r = parse_hf_config(j.dump());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->config.rope_scaling.factor, 0.0f);
}

TEST(HfConfig, UnsupportedRopeTypesAreErrors) {
    for (const char* type : {"yarn", "linear", "dynamic", "longrope"}) {
        json j = base_config();
        j["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}};
        std::string msg = error_of(j);
        EXPECT_NE(msg.find("rope_scaling"), std::string::npos) << msg;
        EXPECT_NE(msg.find(type), std::string::npos) << msg;
    }
    json j = base_config();
    j["rope_scaling"] = {{"rope_type", "llama3"}};
    EXPECT_NE(error_of(j).find("factor"), std::string::npos);
}

TEST(HfConfig, MissingFieldsAreNamed) {
    for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "max_position_embeddings"}) {
        json j = base_config();
        j.erase(key);
        std::string msg = error_of(j);
        EXPECT_NE(msg.find(key), std::string::npos) << msg;
        EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
    }
}

TEST(HfConfig, WrongTypesAreNamed) {
    struct Case {
        const char* key;
        json value;
        const char* expect;
    };
    const Case cases[] = {
        {"hidden_size", "64", "integer"},        {"vocab_size", 12.5, "integer"},
        {"num_hidden_layers", -1, "positive"},   {"num_attention_heads", 0, "positive"},
        {"rms_norm_eps", "tiny", "number"},      {"rope_theta", json::array(), "number"},
        {"tie_word_embeddings", 1, "boolean"},   {"attention_bias", "yes", "boolean"},
        {"eos_token_id", "</s>", "integer"},     {"bos_token_id", 1.5, "integer"},
        {"torch_dtype", 16, "string"},           {"rope_scaling", "llama3", "object"},
        {"architectures", "LlamaForCausalLM", "architectures"},
        {"head_dim", "x", "integer"},
    };
    for (const Case& c : cases) {
        json j = base_config();
        j[c.key] = c.value;
        std::string msg = error_of(j);
        EXPECT_NE(msg.find(c.key), std::string::npos) << c.key << ": " << msg;
        EXPECT_NE(msg.find(c.expect), std::string::npos) << c.key << ": " << msg;
    }
}

TEST(HfConfig, UnknownArchitectureAndBadJson) {
    json j = base_config();
    j["architectures"] = {"GPT2LMHeadModel"};
    EXPECT_NE(error_of(j).find("GPT2LMHeadModel"), std::string::npos);
    j.erase("architectures");
    j["model_type"] = "gpt2";
    EXPECT_NE(error_of(j).find("gpt2"), std::string::npos);
    j.erase("model_type");
    EXPECT_NE(error_of(j).find("architectures"), std::string::npos);

    for (const char* text : {"", "{", "[1,2]", "null", "{\"vocab_size\": 1,}"}) {
        auto r = parse_hf_config(text);
        ASSERT_FALSE(r.ok()) << text;
        EXPECT_NE(r.error().message.find("JSON"), std::string::npos) << r.error().message;
    }
}

TEST(HfConfig, InconsistentHeads) {
    json j = base_config();
    j["num_key_value_heads"] = 3;
    EXPECT_NE(error_of(j).find("num_key_value_heads"), std::string::npos);
    j = base_config();
    j["num_attention_heads"] = 5;  // 64 / 5 is not whole and no head_dim is given
    j["num_key_value_heads"] = 5;
    EXPECT_NE(error_of(j).find("head_dim"), std::string::npos);
}

TEST(HfConfig, ChatTemplate) {
    auto t = parse_hf_chat_template(R"({"chat_template": "{{ x }}"})");
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(*t, "{{ x }}");
    t = parse_hf_chat_template(
        R"({"chat_template": [{"name": "tool_use", "template": "T"}, )"
        R"({"name": "default", "template": "D"}]})");
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(*t, "D");
    t = parse_hf_chat_template(R"({"bos_token": "<s>"})");
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(*t, "");
    EXPECT_FALSE(parse_hf_chat_template(R"({"chat_template": 3})").ok());
    EXPECT_FALSE(parse_hf_chat_template("not json").ok());
}

TEST(HfConfig, LoadFromMissingPathNamesIt) {
    auto r = load_hf_config("/nonexistent/dir/config.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("/nonexistent/dir/config.json"), std::string::npos);
}

}  // namespace
}  // namespace inferscale::model
