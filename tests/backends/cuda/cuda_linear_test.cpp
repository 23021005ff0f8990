// CUDA linear on cuBLASLt (bf16 x bf16 -> bf16 or f32 with f32 accumulation) against the CPU
// backend on the same bf16-rounded inputs, with and without the fused bias epilogue. The
// small-batch kernel is switched off here; cuda_linear_group_test covers it.

#include "cuda_test_util.h"

namespace inferscale::cuda_test {
namespace {

struct LinearCase {
    std::int64_t n, in, out;
    bool bias;
    DType y_dtype;
    bool fuse_bias;
};

class CudaLinearTest : public CudaTest, public ::testing::WithParamInterface<LinearCase> {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o;
        o.fuse_bias = GetParam().fuse_bias;
        o.linear_paths.small_max_rows = 0;
        return o;
    }
};

TEST_P(CudaLinearTest, MatchesCpu) {
    const LinearCase c = GetParam();
    std::vector<float> x = random_bf16(c.n * c.in, rng_),
                       w = random_bf16(c.out * c.in, rng_, 0.05f), b = random_bf16(c.out, rng_);
    auto dw = gpu_->upload_weight(host_view(w, {c.out, c.in}));
    ASSERT_TRUE(dw.ok());
    Tensor dbias;
    tensor::DeviceWeight bias_weight;
    DeviceTensor bias_f32;
    if (c.bias) {
        if (c.y_dtype == DType::F32) {
            // An f32 bias (matching f32 logits) is what the fused epilogue takes for f32 y.
            bias_f32 = device_from(*gpu_, b, DType::F32, {c.out});
            dbias = bias_f32.tensor;
        } else {
            auto up = gpu_->upload_weight(host_view(b, {c.out}));
            ASSERT_TRUE(up.ok());
            bias_weight = std::move(*up);
            dbias = bias_weight.tensor;
        }
    }
    DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {c.n, c.in});
    DeviceTensor y = device_empty(*gpu_, c.y_dtype, {c.n, c.out});
    poison(*gpu_, y.tensor);
    gpu_->linear(dx.tensor, dw->tensor, dbias, y.tensor);

    std::vector<float> ref(c.n * c.out);
    cpu_.linear(host_view(x, {c.n, c.in}), host_view(w, {c.out, c.in}),
                c.bias ? host_view(b, {c.out}) : Tensor(), host_view(ref, {c.n, c.out}));
    EXPECT_LT(rel_error(download(*gpu_, y.tensor), ref),
              c.y_dtype == DType::F32 ? 1e-3 : kBf16Tolerance);

    // A second call reuses the cached plan and must give the same bits.
    const std::vector<float> first = download(*gpu_, y.tensor);
    poison(*gpu_, y.tensor);
    gpu_->linear(dx.tensor, dw->tensor, dbias, y.tensor);
    EXPECT_EQ(download(*gpu_, y.tensor), first);
}

// cuBLASLt tunes per power-of-two token-count bucket and reuses a bucket's algorithm only for
// token counts up to the one it was tuned at; larger ones tune again. Every count of this walk
// (reuse below the tuned count, retuning above it, crossing buckets) must still be right.
TEST_F(CudaTest, LinearStaysRightAcrossTokenCountsOfABucket) {
    const std::int64_t in = 512, out = 768, max_n = 128;
    std::vector<float> x = random_bf16(max_n * in, rng_), w = random_bf16(out * in, rng_, 0.05f);
    auto dw = gpu_->upload_weight(host_view(w, {out, in}));
    ASSERT_TRUE(dw.ok());
    DeviceTensor dx = device_from(*gpu_, x, DType::BF16, {max_n, in});
    DeviceTensor y = device_empty(*gpu_, DType::BF16, {max_n, out});
    for (const std::int64_t n : {38, 43, 33, 64, 111, 128, 100, 65}) {
        SCOPED_TRACE(n);
        const Tensor xn(dx.tensor.data, DType::BF16, {n, in}, dx.tensor.device);
        const Tensor yn(y.tensor.data, DType::BF16, {n, out}, y.tensor.device);
        poison(*gpu_, y.tensor);
        gpu_->linear(xn, dw->tensor, Tensor(), yn);
        std::vector<float> ref(static_cast<std::size_t>(n * out));
        cpu_.linear(host_view(x, {n, in}), host_view(w, {out, in}), Tensor(),
                    host_view(ref, {n, out}));
        std::vector<float> got = download(*gpu_, y.tensor);
        got.resize(ref.size());
        EXPECT_LT(rel_error(got, ref), kBf16Tolerance);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaLinearTest,
    ::testing::Values(LinearCase{1, 256, 384, false, DType::BF16, true},
                      LinearCase{3, 256, 384, true, DType::BF16, true},
                      LinearCase{3, 256, 384, true, DType::BF16, false},
                      LinearCase{17, 896, 128, true, DType::BF16, true},
                      LinearCase{128, 512, 1024, false, DType::BF16, true},
                      LinearCase{300, 1024, 512, true, DType::BF16, true},
                      LinearCase{4, 64, 1000, false, DType::F32, true},   // logits
                      LinearCase{5, 128, 777, true, DType::F32, true},    // odd vocab
                      LinearCase{5, 128, 777, true, DType::F32, false},
                      LinearCase{7, 72, 300, true, DType::BF16, true}));  // odd everything

}  // namespace
}  // namespace inferscale::cuda_test
