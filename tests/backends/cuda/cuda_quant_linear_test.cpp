// Block-quantized weights on the GPU, every block type, against the CPU's dequantization
// (tensor::dequantize_blocks, itself bit-exact with gguf-py): random blocks (the CPU backend's
// fill_random, scales set so values span about +-0.05) are uploaded as they are, then
//   - an embedding lookup dequantizes rows into f32: equal bit for bit;
//   - the GEMV (1..kQuantGemvMaxRows tokens), which runs on int8 activations (per 32: scale
//     amax / 127, quants round-half-even(x * 127 / amax)), against x' W^T summed in double over
//     the exact dequantized weights and x' = the activations so quantized: only f32
//     accumulation error (relative 1e-5);
//   - past kQuantGemvMaxRows tokens (weights dequantized into bf16 for cuBLASLt) against the
//     same sum over bf16-rounded weights: relative 1e-3, cuBLASLt's f32 accumulation;
//   - one token through several targets at once and through gate and up with SwiGLU (the
//     K-quants' ring GEMV where their rows allow it);
// with a bias, f32 and bf16 outputs, row counts that leave a partial CTA, and `in` from one
// super-block (one warp per row, most lanes of the K-quants' warp idle) through 9 to 32 (the
// K-quants' fast path shares a row among warps there; the other types from 9 on).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "backends/cuda/cuda_kernels.h"
#include "cuda_test_util.h"
#include "kv/kv_storage.h"
#include "model/llama_model.h"
#include "tensor/quantized.h"

namespace inferscale::cuda_test {
namespace {

constexpr DType kBlockTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1,   DType::Q5_0,
                                 DType::Q5_1, DType::Q2_K, DType::Q3_K,   DType::Q4_K,
                                 DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

struct QuantCase {
    DType dtype;
    std::int64_t out, in;
};

std::string case_name(const ::testing::TestParamInfo<QuantCase>& info) {
    return std::string(tensor::dtype_name(info.param.dtype)) + "_" +
           std::to_string(info.param.out) + "x" + std::to_string(info.param.in);
}

std::vector<QuantCase> cases() {
    std::vector<QuantCase> all;
    for (const DType t : kBlockTypes) {
        all.push_back({t, 77, 256});
        all.push_back({t, 300, 2304});
        all.push_back({t, 40, 8192});
    }
    return all;
}

class CudaQuantLinearTest : public CudaTest, public ::testing::WithParamInterface<QuantCase> {
  protected:
    void SetUp() override {
        CudaTest::SetUp();
        if (IsSkipped()) return;
        const QuantCase c = GetParam();
        blocks_.resize(tensor::dtype_row_bytes(c.dtype, c.in) * static_cast<std::size_t>(c.out));
        cpu_.fill_random(Tensor(blocks_.data(), c.dtype, {c.out, c.in}), 7, 0.05f, 0.0f);
        dense_.resize(static_cast<std::size_t>(c.out * c.in));
        tensor::dequantize_blocks(c.dtype, blocks_.data(), dense_.data(), dense_.size());
        auto up = gpu_->upload_weight(Tensor(blocks_.data(), c.dtype, {c.out, c.in}));
        ASSERT_TRUE(up.ok()) << up.error().message;
        weight_ = std::move(*up);
        ASSERT_EQ(weight_.tensor.dtype, c.dtype);  // kept as blocks
        ASSERT_EQ(weight_.storage.bytes(), blocks_.size());
    }

    // y = x W^T + bias in double over `w` [out, in].
    static std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w,
                                        const std::vector<float>& bias, std::int64_t n,
                                        std::int64_t out, std::int64_t in) {
        std::vector<float> y(static_cast<std::size_t>(n * out));
        for (std::int64_t t = 0; t < n; ++t) {
            for (std::int64_t r = 0; r < out; ++r) {
                double sum = bias[r];
                for (std::int64_t k = 0; k < in; ++k) sum += double(x[t * in + k]) * w[r * in + k];
                y[t * out + r] = static_cast<float>(sum);
            }
        }
        return y;
    }

    // x as the GEMV sees it: quantized to int8 per 32 elements and back.
    static std::vector<float> int8_activations(std::vector<float> x) {
        for (std::size_t g = 0; g < x.size(); g += 32) {
            float amax = 0.0f;
            for (std::size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[g + j]));
            const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f, scale = amax / 127.0f;
            for (std::size_t j = 0; j < 32; ++j) x[g + j] = std::nearbyint(x[g + j] * inverse) * scale;
        }
        return x;
    }

    // One linear of n tokens with an f32 bias into y_dtype; its relative error against the
    // reference over `w` (and the activations as the GEMV quantizes them where `int8_x`).
    double linear_error(std::int64_t n, DType y_dtype, const std::vector<float>& w,
                        bool int8_x) {
        const QuantCase c = GetParam();
        std::vector<float> x = random_bf16(static_cast<std::size_t>(n * c.in), rng_);
        std::vector<float> bias = random_bf16(static_cast<std::size_t>(c.out), rng_, 0.1f);
        DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {n, c.in});
        DeviceTensor db = device_from(*gpu_, bias, y_dtype, {c.out});
        DeviceTensor y = device_empty(*gpu_, y_dtype, {n, c.out});
        poison(*gpu_, y.tensor);
        gpu_->linear(dx.tensor, weight_.tensor, db.tensor, y.tensor);
        if (y_dtype == DType::BF16) bias = round_bf16(bias);
        if (int8_x) x = int8_activations(x);
        return rel_error(download(*gpu_, y.tensor), reference(x, w, bias, n, c.out, c.in));
    }

    std::vector<std::uint8_t> blocks_;
    std::vector<float> dense_;  // the blocks dequantized by the CPU
    tensor::DeviceWeight weight_;
};

TEST_P(CudaQuantLinearTest, EmbeddingRowsEqualCpuDequantization) {
    const QuantCase c = GetParam();
    std::vector<std::int32_t> ids = {3, 0, static_cast<std::int32_t>(c.out - 1), 3};
    DeviceTensor dids = device_ints(*gpu_, ids);
    const auto n = static_cast<std::int64_t>(ids.size());
    DeviceTensor out = device_empty(*gpu_, DType::F32, {n, c.in});
    poison(*gpu_, out.tensor);
    gpu_->embedding(weight_.tensor, dids.tensor, out.tensor);
    const std::vector<float> got = download(*gpu_, out.tensor);
    for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t k = 0; k < c.in; ++k) {
            ASSERT_EQ(got[i * c.in + k], dense_[ids[i] * c.in + k]) << "row " << i << " col " << k;
        }
    }
}

TEST_P(CudaQuantLinearTest, GemvMatchesExactDequantization) {
    for (const std::int64_t n : {1, 2, 3, 5, 8}) {
        ASSERT_LE(n, backends::cuda::kQuantGemvMaxRows);
        SCOPED_TRACE(n);
        EXPECT_LT(linear_error(n, DType::F32, dense_, true), 1e-5);
        EXPECT_LT(linear_error(n, DType::BF16, dense_, true), kBf16Tolerance);
    }
}

// One token through several targets of one launch (as q, k and v go) and through gate and up
// with the SwiGLU epilogue: each output against the exact sum, the gated one against
// silu(g) * u of the sums rounded to bf16 as the swiglu kernel takes them.
TEST_P(CudaQuantLinearTest, OneTokenTargetsAndGatedMatchExactDequantization) {
    const QuantCase c = GetParam();
    std::vector<float> x = random_bf16(static_cast<std::size_t>(c.in), rng_);
    const std::vector<float> none(static_cast<std::size_t>(c.out), 0.0f);
    DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {1, c.in});
    DeviceTensor y[3] = {device_empty(*gpu_, DType::BF16, {1, c.out}),
                         device_empty(*gpu_, DType::BF16, {1, c.out}),
                         device_empty(*gpu_, DType::BF16, {1, c.out})};
    const std::vector<float> want = reference(int8_activations(x), dense_, none, 1, c.out, c.in);
    tensor::LinearTarget targets[3];
    for (int i = 0; i < 3; ++i) {
        poison(*gpu_, y[i].tensor);
        targets[i] = {weight_.tensor, {}, y[i].tensor};
    }
    gpu_->linear(tensor::LinearArgs{dx.tensor, targets});
    for (int i = 0; i < 3; ++i) {
        EXPECT_LT(rel_error(download(*gpu_, y[i].tensor), want), kBf16Tolerance) << "target " << i;
    }
    poison(*gpu_, y[0].tensor);
    gpu_->linear(tensor::LinearArgs{dx.tensor, {targets, 2}, tensor::LinearEpilogue::SwiGLU});
    std::vector<float> gated = round_bf16(want);
    for (float& v : gated) v = v / (1.0f + std::exp(-v)) * v;
    EXPECT_LT(rel_error(download(*gpu_, y[0].tensor), gated), kBf16Tolerance);
}

TEST_P(CudaQuantLinearTest, PrefillMatchesBf16Dequantization) {
    const std::vector<float> wide = round_bf16(dense_);
    for (const std::int64_t n : {backends::cuda::kQuantGemvMaxRows + 1, std::int64_t{40}}) {
        SCOPED_TRACE(n);
        EXPECT_LT(linear_error(n, DType::F32, wide, false), 1e-3);
    }
}

// A whole random model in llama.cpp's Q4_K_M mix (Q4_K and Q6_K matrices, a Q4_K embedding
// table), the same bytes on both backends: the GPU's logits against the CPU's, which multiplies
// the blocks as llama.cpp does (Q8_K activations). A prompt of 24 tokens takes the dequantized
// prefill path, one of 4 the GEMV.
std::vector<float> prompt_logits(model::LlamaModel& m, std::int64_t n) {
    auto kv = kv::KvStorage::create(m.backend(), m.kv_layout(8, 16));
    auto ws = m.create_workspace({.max_tokens = 32, .max_seqs = 1, .max_pages = 8,
                                  .max_logit_rows = 32});
    IS_CHECK(kv.ok() && ws.ok()) << "kv, workspace";
    std::vector<std::int32_t> tokens, positions, pages = {0, 1, 2, 3, 4, 5, 6, 7};
    for (std::int64_t j = 0; j < n; ++j) {
        tokens.push_back(static_cast<std::int32_t>((j * 37 + 5) % m.config().vocab_size));
        positions.push_back(static_cast<std::int32_t>(j));
    }
    const model::BatchSequence seq{static_cast<std::int32_t>(n), static_cast<std::int32_t>(n),
                                   pages};
    const model::ForwardBatch b{tokens, positions, {&seq, 1}, model::LogitsSelection::AllTokens};
    std::vector<float> logits(static_cast<std::size_t>(n * m.config().vocab_size));
    const Status st = m.forward(b, *kv, *ws, logits);
    IS_CHECK(st.ok()) << st.error().message;
    return logits;
}

TEST_F(CudaTest, RandomQ4KMModelMatchesCpu) {
    model::ModelConfig c;
    c.vocab_size = 512;
    c.hidden_size = 256;
    c.intermediate_size = 512;
    c.num_layers = 8;  // use_more_bits gives layers 0, 3, 6 and 7 Q6_K v and down
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.max_position_embeddings = 128;
    const model::LlamaModelOptions o{.max_positions = 128,
                                     .random_quant = model::WeightQuant::Q4_K_M};
    auto on_cpu = model::LlamaModel::create_random(cpu_, c, 9, o);
    auto on_gpu = model::LlamaModel::create_random(*gpu_, c, 9, o);
    ASSERT_TRUE(on_cpu.ok() && on_gpu.ok());
    for (const std::int64_t n : {std::int64_t{24}, std::int64_t{4}}) {
        SCOPED_TRACE(n);
        const double err = rel_error(prompt_logits(*on_gpu, n), prompt_logits(*on_cpu, n));
        std::printf("random q4_k_m model, %lld tokens: logits rel err %.4f\n",
                    static_cast<long long>(n), err);
        EXPECT_LT(err, 5e-2);
    }
}

INSTANTIATE_TEST_SUITE_P(BlockTypes, CudaQuantLinearTest, ::testing::ValuesIn(cases()),
                         case_name);

}  // namespace
}  // namespace inferscale::cuda_test
