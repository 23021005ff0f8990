// Backend::inject_chunks on the GPU against the CPU op, through inject::Injector on both
// backends: chunks of bf16-rounded random KV are injected at scattered positions and slots of
// every layer; V must be bit-exact, K within one bf16 rounding of the CPU's f32 rotation.
// Covers the 16-byte vector path (head_dim 128, 64) and the scalar fallback (head_dim 24). The
// GPU side injects in two layer ranges, the later one first (Injector::inject_layers, as host
// tier chunks arrive), against the CPU's all-layers inject.

#include <cmath>
#include <cstring>

#include "cuda_test_util.h"
#include "inject/injector.h"
#include "kv/kv_storage.h"

namespace inferscale::cuda_test {
namespace {

struct Shape {
    std::int64_t layers, kv_heads, head_dim;
};

class CudaInjectTest : public CudaTest, public ::testing::WithParamInterface<Shape> {};

memory::KvChunk make_chunk(tensor::Backend& be, const std::vector<float>& values, DType dtype,
                           std::int64_t tokens, const Shape& s, const std::string& id) {
    const std::size_t bytes = values.size() * tensor::dtype_size(dtype);
    tensor::Buffer buf = be.allocate(bytes).value();
    const Tensor all = buf.view(dtype, {static_cast<std::int64_t>(values.size())});
    if (dtype == DType::BF16) {
        std::vector<std::uint16_t> narrow(values.size());
        tensor::convert_from_f32(DType::BF16, values.data(), narrow.data(), values.size());
        be.copy_from_host(all, narrow.data(), bytes);
    } else {
        be.copy_from_host(all, values.data(), bytes);
    }
    be.synchronize();
    return memory::KvChunk({id, memory::text_hash(id), "test", 0, memory::EncodingMode::Standalone},
                           std::vector<std::int32_t>(static_cast<std::size_t>(tokens), 1), s.layers,
                           s.kv_heads, s.head_dim, dtype, std::move(buf));
}

TEST_P(CudaInjectTest, MatchesCpu) {
    const Shape s = GetParam();
    const std::int64_t bs = 16, blocks = 24, max_pos = 512, half = s.head_dim / 2;
    const kv::KvLayout layout{s.layers, blocks, bs, s.kv_heads, s.head_dim};

    // RoPE tables with real-looking angles.
    std::vector<float> cos(static_cast<std::size_t>(max_pos * half)), sin(cos.size());
    for (std::int64_t p = 0; p < max_pos; ++p)
        for (std::int64_t i = 0; i < half; ++i) {
            const double a = p * std::pow(10000.0, -2.0 * i / s.head_dim);
            cos[p * half + i] = static_cast<float>(std::cos(a));
            sin[p * half + i] = static_cast<float>(std::sin(a));
        }
    const tensor::RopeTables cpu_tables{host_view(cos, {max_pos, half}),
                                        host_view(sin, {max_pos, half})};
    DeviceTensor dcos = device_from(*gpu_, cos, DType::F32, {max_pos, half});
    DeviceTensor dsin = device_from(*gpu_, sin, DType::F32, {max_pos, half});
    const tensor::RopeTables gpu_tables{dcos.tensor, dsin.tensor};

    const std::int64_t ta = 37, tb = 70;
    const auto va =
        random_bf16(static_cast<std::size_t>(s.layers * 2 * ta * s.kv_heads * s.head_dim), rng_);
    const auto vb =
        random_bf16(static_cast<std::size_t>(s.layers * 2 * tb * s.kv_heads * s.head_dim), rng_);
    memory::KvChunk ca = make_chunk(cpu_, va, DType::F32, ta, s, "a");
    memory::KvChunk cb = make_chunk(cpu_, vb, DType::F32, tb, s, "b");
    memory::KvChunk ga = make_chunk(*gpu_, va, DType::BF16, ta, s, "a");
    memory::KvChunk gb = make_chunk(*gpu_, vb, DType::BF16, tb, s, "b");

    // Sequence blocks out of order; spans leave gaps and start mid-block.
    const std::vector<kv::BlockId> seq = {5, 17, 2, 9, 23, 0, 11, 14, 3, 20};
    const std::vector<inject::InjectSpan> cpu_spans = {{&cb, 3, 60, 5}, {&ca, 0, 37, 90}};
    const std::vector<inject::InjectSpan> gpu_spans = {{&gb, 3, 60, 5}, {&ga, 0, 37, 90}};

    auto cpu_kv = kv::KvStorage::create(cpu_, layout).value();
    auto gpu_kv = kv::KvStorage::create(*gpu_, layout).value();
    inject::Injector cpu_inj(cpu_, cpu_tables), gpu_inj(*gpu_, gpu_tables);
    ASSERT_TRUE(cpu_inj.inject(cpu_spans, seq, cpu_kv).ok());
    ASSERT_TRUE(gpu_inj.prepare(gpu_spans, seq, gpu_kv).ok());
    gpu_inj.inject_layers(1, s.layers - 1);
    gpu_inj.inject_layers(0, 1);
    gpu_->synchronize();
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);

    const std::int64_t row = s.kv_heads * s.head_dim;
    for (std::int64_t l = 0; l < s.layers; ++l) {
        const tensor::KvPages cp = cpu_kv.pages(l), gp = gpu_kv.pages(l);
        const std::vector<float> gk = download(*gpu_, gp.k), gv = download(*gpu_, gp.v);
        const auto* ck = cp.k.as<const float>();
        const auto* cv = cp.v.as<const float>();
        std::vector<float> out_k, ref_k;
        for (const auto& span : cpu_spans) {
            for (std::int64_t j = 0; j < span.num_rows; ++j) {
                const std::int64_t p = span.first_position + j;
                const std::int64_t slot = seq[p / bs] * bs + p % bs;
                for (std::int64_t i = 0; i < row; ++i) {
                    const std::size_t at = static_cast<std::size_t>(slot * row + i);
                    ASSERT_EQ(gv[at], cv[at]) << "V layer " << l << " pos " << p;
                    out_k.push_back(gk[at]);
                    ref_k.push_back(ck[at]);
                    // One bf16 rounding of the f32 result (2^-8 relative), nothing more.
                    ASSERT_LE(std::abs(gk[at] - ck[at]), std::abs(ck[at]) * (1.0f / 256) + 1e-6f)
                        << "K layer " << l << " pos " << p << " elem " << i;
                }
            }
        }
        EXPECT_LT(rel_error(out_k, ref_k), kBf16Tolerance) << "layer " << l;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaInjectTest,
                         ::testing::Values(Shape{4, 8, 128}, Shape{3, 3, 64}, Shape{2, 2, 24}));

}  // namespace
}  // namespace inferscale::cuda_test
