// The encoder ops on CUDA (layer_norm, convert, gelu, sequence_attention) against the CPU backend
// fed the same bf16-rounded inputs, in bf16 and f32 activations; then SentenceEncoder on the GPU
// against sentence-transformers' embeddings (tests/fixtures/embed,
// tools/make_embedding_fixtures.py; skipped when models/all-minilm-l6-v2 is absent).

#include <numeric>
#include <span>

#include "cuda_test_util.h"
#include "embed/embed_fixture.h"
#include "embed/sentence_encoder.h"

namespace inferscale::cuda_test {
namespace {

class CudaEncoderTest : public CudaTest {};

// f32 activations differ from the CPU only by summation order.
constexpr double kF32Tolerance = 1e-5;

// The bar for the encoder's embeddings, on every backend.
constexpr double kCudaMinCosine = 0.9999;

double tolerance(DType dtype) { return dtype == DType::BF16 ? kBf16Tolerance : kF32Tolerance; }

TEST_F(CudaEncoderTest, LayerNormMatchesCpu) {
    for (auto [hidden, n] : {std::pair<std::int64_t, std::int64_t>{384, 1}, {384, 37}, {1000, 5}}) {
        // An offset mean, so a kernel that skips the centering fails.
        std::vector<float> x = random_bf16(n * hidden, rng_, 3.0f);
        for (float& e : x) e = tensor::bf16_to_f32(tensor::f32_to_bf16(e + 2.0f));
        std::vector<float> w = random_bf16(hidden, rng_), b = random_bf16(hidden, rng_);
        auto dw = gpu_->upload_weight(host_view(w, {hidden}));
        auto db = gpu_->upload_weight(host_view(b, {hidden}));
        ASSERT_TRUE(dw.ok() && db.ok());
        std::vector<float> ref(n * hidden);
        cpu_.layer_norm(host_view(x, {n, hidden}), host_view(w, {hidden}), host_view(b, {hidden}),
                        1e-12f, host_view(ref, {n, hidden}));
        for (DType dtype : {DType::BF16, DType::F32}) {
            DeviceTensor dx = device_from(*gpu_, x, dtype, {n, hidden});
            DeviceTensor out = device_empty(*gpu_, dtype, {n, hidden});
            poison(*gpu_, out.tensor);
            gpu_->layer_norm(dx.tensor, dw->tensor, db->tensor, 1e-12f, out.tensor);
            EXPECT_LT(rel_error(download(*gpu_, out.tensor), ref), tolerance(dtype))
                << hidden << "x" << n;
            gpu_->layer_norm(dx.tensor, dw->tensor, db->tensor, 1e-12f, dx.tensor);  // in place
            EXPECT_EQ(download(*gpu_, dx.tensor), download(*gpu_, out.tensor));
        }
    }
}

// f32 -> bf16 rounds as the CPU's conversion does, bit for bit; bf16 -> f32 is exact.
TEST_F(CudaEncoderTest, ConvertMatchesCpu) {
    const std::int64_t n = 5, k = 384;
    std::vector<float> x(n * k);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    for (float& e : x) e = dist(rng_);
    std::vector<std::uint16_t> ref(x.size());
    cpu_.convert(host_view(x, {n, k}), Tensor(ref.data(), DType::BF16, {n, k}));
    DeviceTensor src = device_from(*gpu_, x, DType::F32, {n, k});
    DeviceTensor narrow = device_empty(*gpu_, DType::BF16, {n, k});
    DeviceTensor wide = device_empty(*gpu_, DType::F32, {n, k});
    poison(*gpu_, narrow.tensor);
    poison(*gpu_, wide.tensor);
    gpu_->convert(src.tensor, narrow.tensor);
    gpu_->convert(narrow.tensor, wide.tensor);
    std::vector<float> ref_wide(x.size());
    tensor::convert_to_f32(DType::BF16, ref.data(), ref_wide.data(), ref.size());
    EXPECT_EQ(download(*gpu_, narrow.tensor), ref_wide);
    EXPECT_EQ(download(*gpu_, wide.tensor), ref_wide);
}

TEST_F(CudaEncoderTest, GeluMatchesCpu) {
    const std::int64_t n = 7, k = 1536;
    std::vector<float> x = random_bf16(n * k, rng_, 3.0f);
    std::vector<float> ref = x;
    cpu_.gelu(host_view(ref, {n, k}));
    for (DType dtype : {DType::BF16, DType::F32}) {
        DeviceTensor dx = device_from(*gpu_, x, dtype, {n, k});
        gpu_->gelu(dx.tensor);
        EXPECT_LT(rel_error(download(*gpu_, dx.tensor), ref), tolerance(dtype));
    }
}

// Ragged sequences (one row, a short one, one longer than a block's threads), so a row that
// reads past its sequence or misses part of it fails.
TEST_F(CudaEncoderTest, SequenceAttentionMatchesCpu) {
    const std::int64_t heads = 12, d = 32;
    std::vector<std::int32_t> indptr{0, 1, 8, 41, 171};
    const std::int64_t n = indptr.back();
    std::vector<float> q = random_bf16(n * heads * d, rng_), k = random_bf16(n * heads * d, rng_),
                       v = random_bf16(n * heads * d, rng_);
    tensor::SequenceAttentionArgs args;
    args.host_seq_indptr = indptr.data();
    args.num_seqs = static_cast<int>(indptr.size()) - 1;
    args.max_seq_len = 130;
    args.scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::vector<float> ref(n * heads * d);
    cpu_.sequence_attention(host_view(q, {n, heads, d}), host_view(k, {n, heads, d}),
                            host_view(v, {n, heads, d}), args, host_view(ref, {n, heads, d}));
    DeviceTensor d_indptr = device_ints(*gpu_, indptr);
    args.seq_indptr = d_indptr.tensor;
    for (DType dtype : {DType::BF16, DType::F32}) {
        DeviceTensor dq = device_from(*gpu_, q, dtype, {n, heads, d});
        DeviceTensor dk = device_from(*gpu_, k, dtype, {n, heads, d});
        DeviceTensor dv = device_from(*gpu_, v, dtype, {n, heads, d});
        DeviceTensor out = device_empty(*gpu_, dtype, {n, heads, d});
        poison(*gpu_, out.tensor);
        gpu_->sequence_attention(dq.tensor, dk.tensor, dv.tensor, args, out.tensor);
        EXPECT_LT(rel_error(download(*gpu_, out.tensor), ref), tolerance(dtype));
    }
}

// all-MiniLM-L6-v2 on the GPU (bf16 weights, bf16 linear inputs) against
// sentence-transformers' fp32 embeddings, all texts in one call.
TEST_F(CudaEncoderTest, SentenceEncoderMatchesSentenceTransformers) {
    if (!embed::testing::model_present()) GTEST_SKIP() << embed::testing::kSkipMessage;
    const embed::testing::Fixture fixture = embed::testing::read_fixture();
    auto loaded = embed::SentenceEncoder::load(embed::testing::model_dir(), *gpu_);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    embed::SentenceEncoder& encoder = **loaded;
    std::vector<std::string> texts;
    for (const auto& c : fixture.cases) texts.push_back(c.text);
    const auto dim = static_cast<std::size_t>(encoder.dim());
    std::vector<float> out(texts.size() * dim);
    ASSERT_TRUE(encoder.encode(texts, out).ok());
    double worst = 1.0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        SCOPED_TRACE(texts[i]);
        const std::span<const float> row(out.data() + i * dim, dim);
        const double cos = embed::testing::cosine(row, fixture.cases[i].embedding);
        worst = std::min(worst, cos);
        EXPECT_GE(cos, kCudaMinCosine);
    }
    std::printf("lowest cosine against sentence-transformers on CUDA: %.6f\n", worst);
}

}  // namespace
}  // namespace inferscale::cuda_test
