// The bundled SmolLM2-135M-Instruct Q4_1 GGUF: loads and validates, its config and vocabulary
// are right, and spot values (Q8_0 embeddings, Q4_1 layers, un-permuted Q/K rows, F32 norms)
// equal the `gguf` package's dequantization recorded in smollm2_spot.json. Skipped when the
// model file is absent.

#include <gtest/gtest.h>

#include <cstring>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "loader_test_util.h"
#include "model/model_files.h"

namespace inferscale::model {
namespace {

TEST(SmolLM2Gguf, LoadsWithReferenceValues) {
    const std::string path = test::models_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) GTEST_SKIP() << path << " absent";

    std::size_t last_done = 0, last_total = 0;
    auto r = load_model_files(path,
                              [&](std::size_t d, std::size_t t) { last_done = d, last_total = t; });
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(last_done, 272u);
    EXPECT_EQ(last_total, 272u);

    const ModelConfig& c = r->config;
    EXPECT_EQ(c.architecture, Architecture::Llama);
    EXPECT_EQ(c.num_layers, 30);
    EXPECT_EQ(c.hidden_size, 576);
    EXPECT_EQ(c.intermediate_size, 1536);
    EXPECT_EQ(c.num_heads, 9);
    EXPECT_EQ(c.num_kv_heads, 3);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.vocab_size, 49152);
    EXPECT_EQ(c.max_position_embeddings, 8192);
    EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_FALSE(c.attention_bias);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_id, 2);

    const tokenizer::VocabData& v = r->gguf_vocab;
    EXPECT_EQ(v.model, "gpt2");
    EXPECT_EQ(v.pre, "smollm");
    EXPECT_EQ(v.tokens.size(), 49152u);
    EXPECT_EQ(v.token_types.size(), 49152u);
    EXPECT_EQ(v.merges.size(), 48900u);
    EXPECT_EQ(v.tokens[1], "<|im_start|>");
    EXPECT_EQ(v.tokens[2], "<|im_end|>");
    EXPECT_EQ(v.unk_id, 0);
    EXPECT_EQ(v.pad_id, 2);
    EXPECT_FALSE(v.add_bos);
    EXPECT_FALSE(v.add_space_prefix);
    EXPECT_NE(r->chat_template.find("im_start"), std::string::npos);
    EXPECT_EQ(r->eos_token_ids, std::vector<std::int64_t>{2});

    auto spots = nlohmann::json::parse(
        test::read_bytes(test::loader_fixture("smollm2_spot.json")), nullptr, false);
    ASSERT_FALSE(spots.is_discarded());
    ASSERT_GT(spots.size(), 10u);
    for (const auto& s : spots) {
        const std::string name = s["name"];
        const tensor::Tensor* t = r->weights.find(name);
        ASSERT_NE(t, nullptr) << name;
        ASSERT_EQ(t->dtype, tensor::DType::F32);
        const std::int64_t row = s["row"];
        const std::int64_t row_len = t->rank == 1 ? 0 : t->shape[1];
        for (std::size_t k = 0; k < s["cols"].size(); ++k) {
            const std::int64_t col = s["cols"][k];
            const float want = s["values"][k].get<float>();
            const float got = t->as<float>()[(row < 0 ? 0 : row * row_len) + col];
            EXPECT_EQ(got, want) << name << "[" << row << ", " << col << "]";
        }
    }
}

}  // namespace
}  // namespace inferscale::model
