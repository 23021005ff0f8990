// The Gemma 3 270M GGUF (scripts/fetch_model.sh gemma3-270m; skipped when absent): its config
// as llama.cpp reads it (five sliding-window layers with RoPE base 10000 to one global layer,
// the attention scale, the Gemma flags), its norms under their Hugging Face names, and its
// SentencePiece vocabulary without a space prefix.

#include <gtest/gtest.h>

#include <sys/stat.h>

#include "loader_test_util.h"
#include "model/model_files.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::model {
namespace {

TEST(Gemma3Gguf, ConfigNormsAndVocabulary) {
    const std::string path = test::models_dir() + "/gemma3-270m.gguf";
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) GTEST_SKIP() << path << " absent";
    auto r = load_model_files(path, {}, LoadOptions{.keep_quantized = true});
    ASSERT_TRUE(r.ok()) << r.error().message;

    const ModelConfig& c = r->config;
    EXPECT_EQ(c.architecture, Architecture::Gemma3);
    EXPECT_EQ(c.num_layers, 18);
    EXPECT_EQ(c.hidden_size, 640);
    EXPECT_EQ(c.num_heads, 4);
    EXPECT_EQ(c.num_kv_heads, 1);
    EXPECT_EQ(c.head_dim, 256);
    EXPECT_EQ(c.vocab_size, 262144);
    EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
    EXPECT_FLOAT_EQ(c.rope_local_theta, 1e4f);
    EXPECT_FLOAT_EQ(c.query_pre_attn_scalar, 256.0f);
    EXPECT_TRUE(c.tie_word_embeddings && c.scale_embeddings && c.qk_norm &&
                c.sublayer_output_norms);
    EXPECT_EQ(c.activation, Activation::GeluTanh);
    for (std::int64_t layer = 0; layer < c.num_layers; ++layer)
        EXPECT_EQ(c.layer_window(layer), layer % 6 == 5 ? 0 : 512) << "layer " << layer;

    for (const char* name :
         {"model.layers.3.self_attn.q_norm.weight", "model.layers.3.self_attn.k_norm.weight",
          "model.layers.3.post_attention_layernorm.weight",
          "model.layers.3.pre_feedforward_layernorm.weight",
          "model.layers.3.post_feedforward_layernorm.weight"})
        EXPECT_NE(r->weights.find(name), nullptr) << name;
    EXPECT_EQ(r->weights.find("lm_head.weight"), nullptr);

    auto tok = tokenizer::Tokenizer::from_vocab(r->gguf_vocab);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    // llama.cpp: BOS (2), no space prefix, the pieces of "The capital of France is".
    EXPECT_EQ(tok->encode("The capital of France is", true),
              (std::vector<std::int32_t>{2, 818, 5279, 529, 7001, 563}));
}

}  // namespace
}  // namespace inferscale::model
