// upload_stacked: parts of one dtype become consecutive rows of one backend weight (what lets a
// backend run q/k/v as one GEMM), each part a view holding exactly its own rows; parts whose
// dtypes differ are uploaded one by one and still read back exactly.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "model/stacked_weight.h"

namespace inferscale::model {
namespace {

using tensor::DType;
using tensor::Tensor;

std::vector<float> ramp(std::int64_t n, float start) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = start + 0.25f * i;
    return v;
}

std::vector<float> read(const Tensor& t) {
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    tensor::convert_to_f32(t.dtype, t.data, v.data(), v.size());
    return v;
}

TEST(UploadStacked, SameDtypePartsAdjoinInOneWeight) {
    backends::cpu::CpuBackend be;
    std::vector<float> q = ramp(6 * 8, 0.0f), k = ramp(2 * 8, 100.0f), v = ramp(2 * 8, 200.0f);
    const Tensor parts[] = {Tensor(q.data(), DType::F32, {6, 8}),
                            Tensor(k.data(), DType::F32, {2, 8}),
                            Tensor(v.data(), DType::F32, {2, 8})};
    auto s = upload_stacked(be, parts);
    ASSERT_TRUE(s.ok()) << s.error().message;
    ASSERT_EQ(s->storage.size(), 1u);
    ASSERT_EQ(s->parts.size(), 3u);
    EXPECT_EQ(s->storage[0].tensor.shape[0], 10);
    const std::vector<float>* expected[] = {&q, &k, &v};
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(s->parts[i].shape[0], parts[i].shape[0]);
        EXPECT_EQ(s->parts[i].shape[1], 8);
        EXPECT_EQ(read(s->parts[i]), *expected[i]) << "part " << i;
        if (i > 0) {
            const Tensor& prev = s->parts[i - 1];
            EXPECT_EQ(s->parts[i].data, static_cast<const char*>(prev.data) + prev.nbytes());
        }
    }
}

TEST(UploadStacked, MixedDtypesUploadOneByOne) {
    backends::cpu::CpuBackend be;
    std::vector<float> a = ramp(4 * 4, 1.0f), b = ramp(2 * 4, -3.0f);
    std::vector<std::uint16_t> b16(b.size());
    tensor::convert_from_f32(DType::BF16, b.data(), b16.data(), b.size());
    const Tensor parts[] = {Tensor(a.data(), DType::F32, {4, 4}),
                            Tensor(b16.data(), DType::BF16, {2, 4})};
    auto s = upload_stacked(be, parts);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->storage.size(), 2u);
    EXPECT_EQ(read(s->parts[0]), a);
    EXPECT_EQ(read(s->parts[1]), b);  // quarter steps are exact in bf16
}

TEST(SplitRows, PartsCoverTheWeightInOrder) {
    backends::cpu::CpuBackend be;
    std::vector<float> w = ramp(5 * 3, 0.0f);
    auto whole = be.upload_weight(Tensor(w.data(), DType::F32, {5, 3}));
    ASSERT_TRUE(whole.ok());
    const void* base = whole->tensor.data;
    const std::int64_t rows[] = {3, 2};
    const StackedWeight s = split_rows(std::move(*whole), rows);
    ASSERT_EQ(s.parts.size(), 2u);
    EXPECT_EQ(s.parts[0].data, base);
    EXPECT_EQ(read(s.parts[1]), std::vector<float>(w.begin() + 9, w.end()));
}

}  // namespace
}  // namespace inferscale::model
