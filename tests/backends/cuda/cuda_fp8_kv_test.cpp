// FP8 (E4M3) KV pages on the GPU against the CPU backend's FP8 ops (cpu_fp8_kv_test checks
// those against f32 arithmetic on the widened values and PyTorch's rounding): write_kv writes
// the same bytes; attention over those bytes and scales agrees within bf16 output rounding for
// ragged prefill + decode batches, long decode rows split over the KV, a question over a long
// KV (split prefill), head dims with and without a tensor-core prefill kernel, block sizes not
// a multiple of the decode tile, decode rows on each tensor-core schedule and on CUDA cores;
// injection copies V bytes and rounds the rotated K to the same byte, or where the two rotations
// differ in the last f32 bit at a rounding tie, the adjacent one.

#include <cmath>
#include <cstring>
#include <numeric>
#include <tuple>

#include "cuda_test_util.h"
#include "inject/injector.h"
#include "kv/kv_storage.h"

namespace inferscale::cuda_test {
namespace {

struct Seq {
    int q_len;
    int kv_len;
};

struct Fp8Case {
    const char* name;
    int heads, kv_heads, head_dim, block_size;
    std::vector<Seq> seqs;
};

std::vector<std::uint8_t> download_bytes(CudaBackend& gpu, const Tensor& t) {
    std::vector<std::uint8_t> out(t.nbytes());
    gpu.copy_to_host(out.data(), t, out.size());
    gpu.synchronize();
    return out;
}

// Per layer, K scales then V scales of every head, as KvStorage lays them out.
std::vector<float> random_scales(std::int64_t layers, std::int64_t kv_heads, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(0.004f, 0.03f);
    std::vector<float> s(static_cast<std::size_t>(layers * 2 * kv_heads));
    for (float& x : s) x = dist(rng);
    return s;
}

// Which kernel takes the decode rows.
enum class DecodeKernel { TensorCoreWarpItems, TensorCoreCtaItems, CudaCore };

const char* kernel_name(DecodeKernel k) {
    switch (k) {
        case DecodeKernel::TensorCoreWarpItems:
            return "tc_warp_items";
        case DecodeKernel::TensorCoreCtaItems:
            return "tc_cta_items";
        case DecodeKernel::CudaCore:
            break;
    }
    return "cuda_core";
}

class CudaFp8AttentionTest
    : public CudaTest,
      public ::testing::WithParamInterface<std::tuple<Fp8Case, DecodeKernel>> {
  protected:
    CudaBackendOptions options() const override {
        CudaBackendOptions o;
        const DecodeKernel k = std::get<1>(GetParam());
        o.decode.tensor_cores = k != DecodeKernel::CudaCore;
        o.decode.schedule = k == DecodeKernel::TensorCoreCtaItems
                                ? backends::cuda::DecodeSchedule::CtaItems
                                : backends::cuda::DecodeSchedule::WarpItems;
        return o;
    }
};

TEST_P(CudaFp8AttentionTest, WritesAndAttendsAsTheCpu) {
    const Fp8Case& c = std::get<0>(GetParam());
    const std::int64_t kvh = c.kv_heads, d = c.head_dim, bs = c.block_size, row = kvh * d;
    std::int64_t blocks = 5;  // spare blocks no sequence owns
    for (const Seq& s : c.seqs) blocks += (s.kv_len + bs - 1) / bs;
    const kv::KvLayout layout{1, blocks, bs, kvh, d};
    auto cpu_kv = kv::KvStorage::create(cpu_, layout, DType::F8_E4M3).value();
    auto gpu_kv = kv::KvStorage::create(*gpu_, layout, DType::F8_E4M3).value();
    const std::vector<float> scales = random_scales(1, kvh, rng_);
    cpu_kv.set_scales(scales);
    gpu_kv.set_scales(scales);

    // Every sequence's KV, written through shuffled pages on both backends.
    std::vector<std::int32_t> order(static_cast<std::size_t>(blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng_);
    std::vector<std::int32_t> qo{0}, indptr{0}, indices, last, slots;
    std::size_t next = 0;
    for (const Seq& s : c.seqs) {
        const int pages = static_cast<int>((s.kv_len + bs - 1) / bs);
        for (int i = 0; i < pages; ++i) indices.push_back(order[next++]);
        for (int j = 0; j < s.kv_len; ++j)
            slots.push_back(
                static_cast<std::int32_t>(indices[indptr.back() + j / bs] * bs + j % bs));
        qo.push_back(qo.back() + s.q_len);
        indptr.push_back(static_cast<std::int32_t>(indices.size()));
        last.push_back(static_cast<std::int32_t>(s.kv_len - (pages - 1) * bs));
    }
    const auto tokens = static_cast<std::int64_t>(slots.size());
    std::vector<float> k = random_bf16(static_cast<std::size_t>(tokens * row), rng_);
    std::vector<float> v = random_bf16(k.size(), rng_);
    cpu_.write_kv(host_view(k, {tokens, kvh, d}), host_view(v, {tokens, kvh, d}),
                  host_view(slots, {tokens}), cpu_kv.pages(0));
    DeviceTensor dk = device_from(*gpu_, k, DType::BF16, {tokens, kvh, d});
    DeviceTensor dv = device_from(*gpu_, v, DType::BF16, {tokens, kvh, d});
    DeviceTensor dslots = device_ints(*gpu_, slots);
    gpu_->write_kv(dk.tensor, dv.tensor, dslots.tensor, gpu_kv.pages(0));
    const tensor::KvPages cp = cpu_kv.pages(0), gp = gpu_kv.pages(0);
    for (const auto& [cpu_plane, gpu_plane] : {std::pair{cp.k, gp.k}, std::pair{cp.v, gp.v}}) {
        const std::vector<std::uint8_t> got = download_bytes(*gpu_, gpu_plane);
        ASSERT_EQ(std::memcmp(got.data(), cpu_plane.data, got.size()), 0) << c.name;
    }

    const std::int64_t n = qo.back(), s = static_cast<std::int64_t>(c.seqs.size());
    std::vector<float> q = random_bf16(static_cast<std::size_t>(n * c.heads * d), rng_);
    std::vector<float> want(q.size());
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    tensor::PagedAttentionArgs ha;
    ha.qo_indptr = host_view(qo, {s + 1});
    ha.indptr = host_view(indptr, {s + 1});
    ha.indices = host_view(indices, {static_cast<std::int64_t>(indices.size())});
    ha.last_page_len = host_view(last, {s});
    ha.host_qo_indptr = qo.data();
    ha.host_indptr = indptr.data();
    ha.num_seqs = static_cast<int>(s);
    ha.scale = scale;
    cpu_.paged_attention(host_view(q, {n, c.heads, d}), cp, ha, host_view(want, {n, c.heads, d}));

    DeviceTensor dq = device_from(*gpu_, q, DType::BF16, {n, c.heads, d});
    DeviceTensor dout = device_empty(*gpu_, DType::BF16, {n, c.heads, d});
    DeviceTensor dqo = device_ints(*gpu_, qo), dind = device_ints(*gpu_, indptr);
    DeviceTensor dindices = device_ints(*gpu_, indices), dlast = device_ints(*gpu_, last);
    tensor::PagedAttentionArgs da = ha;
    da.qo_indptr = dqo.tensor;
    da.indptr = dind.tensor;
    da.indices = dindices.tensor;
    da.last_page_len = dlast.tensor;
    poison(*gpu_, dout.tensor);
    gpu_->paged_attention(dq.tensor, gp, da, dout.tensor);
    const std::vector<float> got = download(*gpu_, dout.tensor);
    EXPECT_LT(rel_error(got, want), kBf16Tolerance) << c.name;
    const std::int64_t out_row = std::int64_t{c.heads} * d;
    for (std::int64_t t = 0; t < n; ++t) {
        const std::vector<float> a(got.begin() + t * out_row, got.begin() + (t + 1) * out_row);
        const std::vector<float> b(want.begin() + t * out_row, want.begin() + (t + 1) * out_row);
        EXPECT_LT(rel_error(a, b), 2 * kBf16Tolerance) << c.name << " row " << t;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CudaFp8AttentionTest,
    ::testing::Combine(
        ::testing::Values(
            Fp8Case{"ragged_gqa4_d128",
                    8,
                    2,
                    128,
                    16,
                    {{37, 37}, {1, 300}, {64, 200}, {1, 17}, {2, 50}, {1, 1}}},
            Fp8Case{"long_decode_split_gqa4_d128", 32, 8, 128, 16, {{1, 3000}, {1, 700}, {1, 33}}},
            Fp8Case{"question_over_memory_split_prefill", 32, 8, 128, 16, {{43, 1343}, {1, 500}}},
            Fp8Case{"mha_d64", 4, 4, 64, 16, {{20, 20}, {1, 129}}},
            Fp8Case{"gqa3_d24_bs4", 6, 2, 24, 4, {{5, 9}, {1, 40}}},
            Fp8Case{"gqa16_d64_bs8", 32, 2, 64, 8, {{9, 30}, {1, 77}, {1, 200}}}),
        ::testing::Values(DecodeKernel::TensorCoreWarpItems, DecodeKernel::TensorCoreCtaItems,
                          DecodeKernel::CudaCore)),
    [](const auto& info) {
        return std::string(std::get<0>(info.param).name) + "_" +
               kernel_name(std::get<1>(info.param));
    });

memory::KvChunk fp8_chunk(tensor::Backend& be, const std::vector<std::uint8_t>& bytes,
                          std::int64_t tokens, std::int64_t layers, std::int64_t kv_heads,
                          std::int64_t head_dim, const std::string& id) {
    tensor::Buffer buf = be.allocate(bytes.size()).value();
    be.copy_from_host(buf.view(DType::F8_E4M3, {static_cast<std::int64_t>(bytes.size())}),
                      bytes.data(), bytes.size());
    be.synchronize();
    return memory::KvChunk({id, memory::text_hash(id), "test", 0, memory::EncodingMode::Standalone},
                           std::vector<std::int32_t>(static_cast<std::size_t>(tokens), 1), layers,
                           kv_heads, head_dim, DType::F8_E4M3, std::move(buf));
}

// Chunk bytes as encoding writes them: each value over its (layer, K or V, head) scale.
std::vector<std::uint8_t> encoded_chunk(std::int64_t tokens, std::int64_t layers,
                                        std::int64_t kv_heads, std::int64_t d,
                                        const std::vector<float>& scales, std::mt19937& rng) {
    const std::int64_t row = kv_heads * d;
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<std::uint8_t> b(static_cast<std::size_t>(layers * 2 * tokens * row));
    for (std::size_t i = 0; i < b.size(); ++i) {
        const auto at = static_cast<std::int64_t>(i);
        const std::int64_t plane = at / (tokens * row);  // 2 l + (V ? 1 : 0)
        const std::int64_t h = (at / d) % kv_heads;
        b[i] = tensor::f32_to_e4m3(dist(rng) / scales[plane * kv_heads + h]);
    }
    return b;
}

class CudaFp8InjectTest : public CudaTest {};

TEST_F(CudaFp8InjectTest, RoundsTheRotatedKeyAsTheCpu) {
    for (const auto& [layers, kvh, d] :
         {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4, 8, 128},
          {3, 3, 64},
          {2, 2, 24}}) {
        const std::int64_t bs = 16, blocks = 24, max_pos = 512, half = d / 2, row = kvh * d;
        const kv::KvLayout layout{layers, blocks, bs, kvh, d};
        std::vector<float> cos(static_cast<std::size_t>(max_pos * half)), sin(cos.size());
        for (std::int64_t p = 0; p < max_pos; ++p)
            for (std::int64_t i = 0; i < half; ++i) {
                const double a = p * std::pow(10000.0, -2.0 * i / d);
                cos[p * half + i] = static_cast<float>(std::cos(a));
                sin[p * half + i] = static_cast<float>(std::sin(a));
            }
        DeviceTensor dcos = device_from(*gpu_, cos, DType::F32, {max_pos, half});
        DeviceTensor dsin = device_from(*gpu_, sin, DType::F32, {max_pos, half});
        const std::vector<float> scales = random_scales(layers, kvh, rng_);
        const std::vector<std::uint8_t> ba = encoded_chunk(37, layers, kvh, d, scales, rng_);
        const std::vector<std::uint8_t> bb = encoded_chunk(70, layers, kvh, d, scales, rng_);
        memory::KvChunk ca = fp8_chunk(cpu_, ba, 37, layers, kvh, d, "a");
        memory::KvChunk cb = fp8_chunk(cpu_, bb, 70, layers, kvh, d, "b");
        memory::KvChunk ga = fp8_chunk(*gpu_, ba, 37, layers, kvh, d, "a");
        memory::KvChunk gb = fp8_chunk(*gpu_, bb, 70, layers, kvh, d, "b");

        const std::vector<kv::BlockId> seq = {5, 17, 2, 9, 23, 0, 11, 14, 3, 20};
        const std::vector<inject::InjectSpan> cpu_spans = {{&cb, 3, 60, 5}, {&ca, 0, 37, 90}};
        const std::vector<inject::InjectSpan> gpu_spans = {{&gb, 3, 60, 5}, {&ga, 0, 37, 90}};
        auto cpu_kv = kv::KvStorage::create(cpu_, layout, DType::F8_E4M3).value();
        auto gpu_kv = kv::KvStorage::create(*gpu_, layout, DType::F8_E4M3).value();
        cpu_kv.set_scales(scales);
        gpu_kv.set_scales(scales);
        const tensor::RopeTables cpu_tables{host_view(cos, {max_pos, half}),
                                            host_view(sin, {max_pos, half})};
        const tensor::RopeTables gpu_tables{dcos.tensor, dsin.tensor};
        inject::Injector cpu_inj(cpu_, cpu_tables), gpu_inj(*gpu_, gpu_tables);
        ASSERT_TRUE(cpu_inj.inject(cpu_spans, seq, cpu_kv).ok());
        ASSERT_TRUE(gpu_inj.inject(gpu_spans, seq, gpu_kv).ok());
        gpu_->synchronize();
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);

        std::int64_t keys = 0, adjacent = 0;
        for (std::int64_t l = 0; l < layers; ++l) {
            const tensor::KvPages cp = cpu_kv.pages(l), gp = gpu_kv.pages(l);
            const std::vector<std::uint8_t> gk = download_bytes(*gpu_, gp.k);
            const std::vector<std::uint8_t> gv = download_bytes(*gpu_, gp.v);
            const auto* ck = cp.k.as<const std::uint8_t>();
            const auto* cv = cp.v.as<const std::uint8_t>();
            for (const auto& span : cpu_spans)
                for (std::int64_t j = 0; j < span.num_rows; ++j) {
                    const std::int64_t p = span.first_position + j;
                    const std::int64_t slot = seq[p / bs] * bs + p % bs;
                    for (std::int64_t i = 0; i < row; ++i) {
                        const auto at = static_cast<std::size_t>(slot * row + i);
                        ASSERT_EQ(gv[at], cv[at]) << "V layer " << l << " pos " << p;
                        ++keys;
                        if (gk[at] == ck[at]) continue;
                        // Same sign, neighbouring magnitude code: one rounding apart.
                        ASSERT_TRUE((gk[at] ^ ck[at]) < 0x80 &&
                                    std::abs((gk[at] & 0x7f) - (ck[at] & 0x7f)) == 1)
                            << "K layer " << l << " pos " << p << " elem " << i << ": "
                            << int(gk[at]) << " vs " << int(ck[at]);
                        ++adjacent;
                    }
                }
        }
        EXPECT_LT(adjacent * 1000, keys) << "d " << d;  // ties are rare
    }
}

// Random FP8 pages (the benchmarks' KV) are the CPU's bytes: the shared generator, rounded.
TEST_F(CudaFp8InjectTest, RandomFillEqualsTheCpus) {
    const std::int64_t n = 100003;
    std::vector<std::uint8_t> cpu_bytes(static_cast<std::size_t>(n));
    cpu_.fill_random(Tensor(cpu_bytes.data(), DType::F8_E4M3, {n}), 5, 3.0f, 0.5f);
    DeviceTensor d = device_empty(*gpu_, DType::F8_E4M3, {n});
    gpu_->fill_random(d.tensor, 5, 3.0f, 0.5f);
    EXPECT_EQ(download_bytes(*gpu_, d.tensor), cpu_bytes);
    EXPECT_NE(cpu_bytes[0], cpu_bytes[1]);
}

}  // namespace
}  // namespace inferscale::cuda_test
