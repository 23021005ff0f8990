// SentenceEncoder on the CPU backend against sentence-transformers: the ids it feeds the model
// and the embeddings (cosine >= 0.9999 per sentence) on the corpus of
// tools/make_embedding_fixtures.py; batching (one call, many calls, small token budgets) does
// not change a text's embedding. Skips without models/all-minilm-l6-v2
// (scripts/fetch_embedding_model.sh).

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "backends/cpu/cpu_backend.h"
#include "embed_fixture.h"
#include "embed/sentence_encoder.h"

namespace inferscale::embed {
namespace {

class SentenceEncoderTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!testing::model_present()) GTEST_SKIP() << testing::kSkipMessage;
        fixture_ = testing::read_fixture();
        auto loaded = SentenceEncoder::load(testing::model_dir(), cpu_);
        ASSERT_TRUE(loaded.ok()) << loaded.error().message;
        encoder_ = std::move(*loaded);
    }

    backends::cpu::CpuBackend cpu_;
    std::unique_ptr<SentenceEncoder> encoder_;
    testing::Fixture fixture_;
};

TEST_F(SentenceEncoderTest, Shape) {
    EXPECT_EQ(encoder_->id(), "all-MiniLM-L6-v2");
    EXPECT_EQ(encoder_->dim(), fixture_.dim);
    EXPECT_EQ(encoder_->config().max_seq_length, fixture_.max_seq_length);
}

TEST_F(SentenceEncoderTest, TokenIdsMatchSentenceTransformers) {
    for (const testing::Case& c : fixture_.cases) {
        SCOPED_TRACE(c.text);
        EXPECT_EQ(encoder_->tokenize(c.text), c.ids);
    }
}

TEST_F(SentenceEncoderTest, EmbeddingsMatchSentenceTransformers) {
    std::vector<std::string> texts;
    for (const testing::Case& c : fixture_.cases) texts.push_back(c.text);
    const auto dim = static_cast<std::size_t>(encoder_->dim());
    std::vector<float> out(texts.size() * dim);
    ASSERT_TRUE(encoder_->encode(texts, out).ok());
    for (std::size_t i = 0; i < texts.size(); ++i) {
        SCOPED_TRACE(texts[i]);
        const std::span<const float> row(out.data() + i * dim, dim);
        EXPECT_NEAR(testing::norm(row), 1.0, 1e-5);
        EXPECT_GE(testing::cosine(row, fixture_.cases[i].embedding), 0.9999);
    }
}

// A text's embedding does not depend on what it is batched with: one call of all texts, one
// call per text, and batches cut by a small token budget agree.
TEST_F(SentenceEncoderTest, BatchingDoesNotChangeEmbeddings) {
    std::vector<std::string> texts;
    for (const testing::Case& c : fixture_.cases) texts.push_back(c.text);
    const auto dim = static_cast<std::size_t>(encoder_->dim());
    std::vector<float> together(texts.size() * dim), alone(texts.size() * dim);
    ASSERT_TRUE(encoder_->encode(texts, together).ok());
    for (std::size_t i = 0; i < texts.size(); ++i) {
        ASSERT_TRUE(
            encoder_->encode(std::span(&texts[i], 1), std::span(&alone[i * dim], dim)).ok());
    }
    SentenceEncoderOptions small;
    small.max_batch_tokens = 64;
    auto budgeted = SentenceEncoder::load(testing::model_dir(), cpu_, small);
    ASSERT_TRUE(budgeted.ok());
    std::vector<float> cut(texts.size() * dim);
    ASSERT_TRUE((*budgeted)->encode(texts, cut).ok());
    for (std::size_t i = 0; i < texts.size(); ++i) {
        SCOPED_TRACE(texts[i]);
        const std::span<const float> a(&together[i * dim], dim), b(&alone[i * dim], dim),
            c(&cut[i * dim], dim);
        EXPECT_GE(testing::cosine(a, b), 0.999999);
        EXPECT_GE(testing::cosine(a, c), 0.999999);
    }
}

TEST(SentenceEncoderLoad, MissingFolderIsAnError) {
    backends::cpu::CpuBackend cpu;
    auto loaded = SentenceEncoder::load("/nonexistent/all-minilm-l6-v2", cpu);
    ASSERT_FALSE(loaded.ok());
    EXPECT_NE(loaded.error().message.find("/nonexistent/all-minilm-l6-v2"), std::string::npos)
        << loaded.error().message;
}

}  // namespace
}  // namespace inferscale::embed
