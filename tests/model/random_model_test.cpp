// Random-weight models (the benchmarks' 8B shapes start here): fill_random's values follow
// U(offset +- scale), depend only on the seed, and a random model runs to finite, repeatable
// logits.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "model/hf_config.h"
#include "model/llama_model.h"
#include "tensor/quantized.h"
#include "tensor/random_fill.h"

namespace inferscale::model {
namespace {

using tensor::DType;

std::vector<float> fill(backends::cpu::CpuBackend& be, std::uint64_t seed, float scale,
                        float offset, std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    be.fill_random(tensor::Tensor(v.data(), DType::F32, {n}), seed, scale, offset);
    return v;
}

TEST(FillRandom, UniformMomentsAndRange) {
    backends::cpu::CpuBackend be;
    const std::int64_t n = 1 << 20;
    const auto v = fill(be, 42, 0.5f, 2.0f, n);
    double sum = 0, sq = 0;
    for (float x : v) {
        ASSERT_GE(x, 1.5f);
        ASSERT_LT(x, 2.5f);
        sum += x;
        sq += (x - 2.0) * (x - 2.0);
    }
    // Mean 2, variance 0.25 / 3; n = 2^20 puts 5 standard errors well inside these bounds.
    EXPECT_NEAR(sum / n, 2.0, 5 * 0.5 / std::sqrt(3.0 * n));
    EXPECT_NEAR(sq / n, 0.25 / 3, 0.002);
}

TEST(FillRandom, DependsOnlyOnSeed) {
    backends::cpu::CpuBackend be;
    EXPECT_EQ(fill(be, 7, 1.0f, 0.0f, 4096), fill(be, 7, 1.0f, 0.0f, 4096));
    EXPECT_NE(fill(be, 7, 1.0f, 0.0f, 4096), fill(be, 8, 1.0f, 0.0f, 4096));
    // A prefix of a longer fill is the shorter fill: element i depends on (seed, i) alone.
    auto longer = fill(be, 9, 1.0f, 0.0f, 1000);
    longer.resize(10);
    EXPECT_EQ(longer, fill(be, 9, 1.0f, 0.0f, 10));
}

TEST(FillRandom, Bf16IsTheRoundedF32Fill) {
    backends::cpu::CpuBackend be;
    const auto f = fill(be, 3, 0.25f, -1.0f, 1024);
    std::vector<std::uint16_t> b(1024);
    be.fill_random(tensor::Tensor(b.data(), DType::BF16, {1024}), 3, 0.25f, -1.0f);
    for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], tensor::f32_to_bf16(f[i])) << i;
}

std::vector<float> random_model_logits(std::uint64_t seed) {
    const char* fixtures = std::getenv("INFERSCALE_FIXTURES");
    auto cfg = load_hf_config(std::string(fixtures ? fixtures : "tests/fixtures") +
                              "/golden/qwen2/config.json");
    EXPECT_TRUE(cfg.ok()) << (cfg.ok() ? "" : cfg.error().message);
    backends::cpu::CpuBackend be;
    auto model = LlamaModel::create_random(be, cfg->config, seed);
    EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
    auto kv = kv::KvStorage::create(be, model->kv_layout(8, 16));
    auto ws = model->create_workspace(WorkspaceLimits{});
    std::vector<std::int32_t> ids(40), pos(40), pages{0, 1, 2};
    std::iota(pos.begin(), pos.end(), 0);
    for (int i = 0; i < 40; ++i) ids[i] = (i * 37) % static_cast<int>(cfg->config.vocab_size);
    BatchSequence seq{40, 40, pages};
    ForwardBatch batch{ids, pos, {&seq, 1}};
    std::vector<float> logits(static_cast<std::size_t>(cfg->config.vocab_size));
    auto st = model->forward(batch, *kv, *ws, logits);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
    return logits;
}

TEST(RandomModel, FiniteAndRepeatable) {
    const auto a = random_model_logits(1);
    for (float x : a) ASSERT_TRUE(std::isfinite(x));
    EXPECT_EQ(a, random_model_logits(1));
    EXPECT_NE(a, random_model_logits(2));
}

// Random blocks: every scale field holds the scale, the quants depend on the seed alone, and
// the values stay within the span asked for (the scale is chosen from the type's largest
// quant x sub-block scale).
TEST(FillRandom, BlocksKeepTheirScaleAndSpan) {
    backends::cpu::CpuBackend be;
    for (const DType t : {DType::Q8_0, DType::Q4_1, DType::Q5_0, DType::Q2_K, DType::Q3_K,
                          DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                          DType::IQ4_XS}) {
        SCOPED_TRACE(std::string(tensor::dtype_name(t)));
        const std::int64_t n = 4096;
        std::vector<std::uint8_t> a(tensor::dtype_row_bytes(t, n)), b(a.size());
        be.fill_random(tensor::Tensor(a.data(), t, {n}), 5, 0.5f, 0.0f);
        be.fill_random(tensor::Tensor(b.data(), t, {n}), 6, 0.5f, 0.0f);
        EXPECT_NE(a, b);
        const tensor::BlockScaleFields f = tensor::block_scale_fields(t);
        const std::uint16_t bits = tensor::random_block_scale_bits(t, 0.5f);
        for (std::size_t blk = 0; blk < a.size(); blk += tensor::dtype_block_bytes(t)) {
            for (int i = 0; i < f.count; ++i) {
                ASSERT_EQ(a[blk + f.offsets[i]] | a[blk + f.offsets[i] + 1] << 8, bits);
            }
        }
        std::vector<float> values(static_cast<std::size_t>(n));
        tensor::dequantize_blocks(t, a.data(), values.data(), values.size());
        float largest = 0.0f;
        for (float v : values) largest = std::max(largest, std::fabs(v));
        EXPECT_LE(largest, 0.51f);
        EXPECT_GE(largest, 0.1f);
    }
}

// llama.cpp's Q4_K_M mix, against a file its quantizer wrote: the attn_v (and ffn_down) types
// of models/qwen2.5-coder-1.5b.gguf (28 layers) in the order the quantizer met the layers
// (blk.0, blk.1, blk.10, blk.11, ...: i counts tensors met, not layer numbers).
TEST(WeightQuant, Q4KMMixIsLlamaCppsRule) {
    const int q6[] = {1, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1,
                      0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1};
    for (std::int64_t i = 0; i < 28; ++i) {
        const DType want = q6[i] != 0 ? DType::Q6_K : DType::Q4_K;
        EXPECT_EQ(quantized_weight_dtype(WeightQuant::Q4_K_M, WeightRole::Value, i, 28,
                                         DType::BF16), want) << i;
        EXPECT_EQ(quantized_weight_dtype(WeightQuant::Q4_K_M, WeightRole::Down, i, 28,
                                         DType::BF16), want) << i;
        EXPECT_EQ(quantized_weight_dtype(WeightQuant::Q4_K_M, WeightRole::Gate, i, 28,
                                         DType::BF16), DType::Q4_K);
    }
    EXPECT_EQ(quantized_weight_dtype(WeightQuant::Q4_K_M, WeightRole::Output, 0, 28, DType::BF16),
              DType::Q6_K);
    EXPECT_EQ(quantized_weight_dtype(WeightQuant::None, WeightRole::Down, 0, 28, DType::BF16),
              DType::BF16);
    EXPECT_EQ(parse_weight_quant("Q4_K_M").value(), WeightQuant::Q4_K_M);
    EXPECT_EQ(parse_weight_quant("").value(), WeightQuant::None);
    EXPECT_FALSE(parse_weight_quant("q3_k_s").ok());
}

TEST(RandomModel, Q4KMWeightsRunOnTheCpu) {
    ModelConfig c;
    c.vocab_size = 300;
    c.hidden_size = 256;
    c.intermediate_size = 512;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.max_position_embeddings = 64;
    backends::cpu::CpuBackend be;
    auto model = LlamaModel::create_random(be, c, 3, {.random_quant = WeightQuant::Q4_K_M});
    ASSERT_TRUE(model.ok()) << model.error().message;
    // Block matrices take their blocks' bytes: 4.5 (Q4_K) or 6.5625 (Q6_K) bits per weight.
    EXPECT_LT(model->weight_bytes(), 300u * 256u + 2u * (3u * 256u * 512u + 4u * 256u * 256u));
    auto kv = kv::KvStorage::create(be, model->kv_layout(4, 16));
    auto ws = model->create_workspace(WorkspaceLimits{});
    std::vector<std::int32_t> ids{1, 7, 42, 299}, pos{0, 1, 2, 3}, pages{0};
    BatchSequence seq{4, 4, pages};
    std::vector<float> logits(static_cast<std::size_t>(c.vocab_size));
    ASSERT_TRUE(model->forward({ids, pos, {&seq, 1}}, *kv, *ws, logits).ok());
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace inferscale::model
