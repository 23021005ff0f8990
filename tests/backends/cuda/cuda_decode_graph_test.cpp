// DecodeGraphRunner on the CUDA backend: graph-replayed decode (padded buckets, fixed-size
// attention launches, device argmax) against eager forward with host logits, step by step, on
// the golden fixtures (head_dim 16/32: the all-rows attention path) and on a random model with
// head_dim 128 (the tensor-core prefill, the split-KV decode and its merge). See
// tests/model/decode_compare.h for the lockstep comparison.
//
// Tolerance: the two paths differ only in summation order (GEMM algorithms per padded row
// count, split counts sized from the fixed bound): relative L2 error of each row's logits
// <= 2e-2, and the replayed id equals the eager argmax wherever the top-2 margin is clear.

#include <cstdio>

#include "../../model/decode_compare.h"
#include "cuda_test_util.h"
#include "model/model_files.h"

namespace inferscale::cuda_test {
namespace {

std::string golden_dir(const std::string& name) {
    const char* env = std::getenv("INFERSCALE_FIXTURES");
    return std::string(env != nullptr ? env : "tests/fixtures") + "/golden/" + name;
}

void expect_close(const decode_test::DecodeComparison& r, const char* what) {
    std::printf("%s: %d graphs, max rel error %.3g, ids agree %d/%d (clear rows %d/%d)\n", what,
                r.graphs, r.max_rel_error, r.agree, r.tokens, r.clear_agree, r.clear_rows);
    EXPECT_GE(r.graphs, 2) << "both buckets should have been recorded";
    EXPECT_LT(r.max_rel_error, 2e-2);
    EXPECT_EQ(r.clear_agree, r.clear_rows);
}

class CudaDecodeGraphTest : public CudaTest {};

// head_dim 128: the tensor-core prefill, the split-KV decode and its merge.
model::ModelConfig random_config() {
    model::ModelConfig c;
    c.vocab_size = 1000;
    c.hidden_size = 512;
    c.intermediate_size = 1024;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 128;
    c.max_position_embeddings = 2048;
    return c;
}

TEST_F(CudaDecodeGraphTest, GoldenModelReplayMatchesEager) {
    const std::string dir = golden_dir("llama_gqa");
    auto files = model::load_model_files(dir);
    if (!files.ok()) GTEST_SKIP() << "no fixture " << dir << " (set INFERSCALE_FIXTURES)";
    auto m = model::LlamaModel::create(*gpu_, files->config, files->weights,
                                       {.max_positions = 128});
    ASSERT_TRUE(m.ok()) << m.error().message;
    expect_close(decode_test::compare_decode(*m, {7, 12, 3}, 6, 4), "golden llama_gqa");
}

TEST_F(CudaDecodeGraphTest, RandomModelReplayMatchesEager) {
    const model::ModelConfig c = random_config();
    auto m = model::LlamaModel::create_random(*gpu_, c, 5);
    ASSERT_TRUE(m.ok()) << m.error().message;
    // Prompts long enough (several hundred tokens) that decode splits the KV.
    expect_close(decode_test::compare_decode(*m, {600, 300, 45}, 6, 16), "random d=128");
}

TEST_F(CudaDecodeGraphTest, RandomQ4KMModelReplayMatchesEager) {
    const model::ModelConfig c = random_config();
    auto m = model::LlamaModel::create_random(
        *gpu_, c, 5, {.random_quant = model::WeightQuant::Q4_K_M});
    ASSERT_TRUE(m.ok()) << m.error().message;
    // Block weights: the prefill dequantizes them for cuBLASLt, the replayed decode steps run
    // the quantized GEMV.
    expect_close(decode_test::compare_decode(*m, {300, 45}, 6, 16), "random q4_k_m");
}

}  // namespace
}  // namespace inferscale::cuda_test
