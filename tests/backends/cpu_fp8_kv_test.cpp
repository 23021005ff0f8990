// FP8 (E4M3) KV pages on the CPU backend. Writes round each value over its head's scale as
// tensor::f32_to_e4m3 does (itself checked against PyTorch); attention over FP8 pages gives
// the bits of attention over f32 pages holding the widened values, and stays within FP8's
// precision of attention over the unrounded values; FP8 injection equals f32 injection of the
// widened chunk, rounded as a write rounds.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "kv/kv_storage.h"
#include "model/rope_tables.h"
#include "tensor/dtype.h"

namespace inferscale {
namespace {

using backends::cpu::CpuBackend;
using tensor::DType;
using tensor::Tensor;

constexpr std::int64_t kHeads = 4, kKvHeads = 2, kDim = 8, kBs = 4, kBlocks = 16;

std::vector<float> random_vec(std::size_t n, std::mt19937& rng, float scale) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

template <typename T>
Tensor view(std::vector<T>& v, DType dtype, std::initializer_list<std::int64_t> dims) {
    return Tensor(v.data(), dtype, dims);
}

// FP8 pages widened into f32 pages: e4m3(byte) * the head's scale.
std::vector<float> widened(const std::vector<std::uint8_t>& bytes,
                           const std::vector<float>& scale) {
    std::vector<float> out(bytes.size());
    for (std::size_t i = 0; i < bytes.size(); ++i)
        out[i] = tensor::e4m3_to_f32(bytes[i]) * scale[(i / kDim) % kKvHeads];
    return out;
}

struct Fp8Pages {
    std::vector<std::uint8_t> k = std::vector<std::uint8_t>(kBlocks * kBs * kKvHeads * kDim);
    std::vector<std::uint8_t> v = std::vector<std::uint8_t>(k.size());
    std::vector<float> k_scale{0.02f, 0.0625f}, v_scale{0.01f, 0.03f};
    tensor::KvPages pages() {
        return {view(k, DType::F8_E4M3, {kBlocks, kBs, kKvHeads, kDim}),
                view(v, DType::F8_E4M3, {kBlocks, kBs, kKvHeads, kDim}),
                view(k_scale, DType::F32, {kKvHeads}), view(v_scale, DType::F32, {kKvHeads})};
    }
};

class Fp8AttentionTest : public ::testing::TestWithParam<backends::cpu::Arithmetic> {};

// Two sequences over scattered pages: a prefill of 6 and a decode token at KV length 23.
TEST_P(Fp8AttentionTest, EqualsF32PagesOfTheWidenedValues) {
    const std::vector<int> q_lens{6, 1}, kv_lens{6, 23};
    const std::vector<std::vector<std::int32_t>> tables{{9, 2}, {14, 0, 5, 11, 3, 7}};
    std::mt19937 rng(3);
    CpuBackend be(backends::cpu::CpuBackendOptions{.arithmetic = GetParam()});
    Fp8Pages fp8;
    std::vector<std::vector<float>> ks, vs;
    for (std::size_t s = 0; s < kv_lens.size(); ++s) {
        ks.push_back(random_vec(kv_lens[s] * kKvHeads * kDim, rng, 1.5f));
        vs.push_back(random_vec(kv_lens[s] * kKvHeads * kDim, rng, 0.5f));
        std::vector<std::int32_t> slots;
        for (int j = 0; j < kv_lens[s]; ++j) slots.push_back(tables[s][j / kBs] * kBs + j % kBs);
        be.write_kv(view(ks[s], DType::F32, {kv_lens[s], kKvHeads, kDim}),
                    view(vs[s], DType::F32, {kv_lens[s], kKvHeads, kDim}),
                    view(slots, DType::I32, {kv_lens[s]}), fp8.pages());
        for (int j = 0; j < kv_lens[s]; ++j)
            for (std::int64_t e = 0; e < kKvHeads * kDim; ++e) {
                const std::size_t at = static_cast<std::size_t>(slots[j] * kKvHeads * kDim + e);
                const std::size_t from = static_cast<std::size_t>(j * kKvHeads * kDim + e);
                const std::int64_t h = e / kDim;
                ASSERT_EQ(fp8.k[at], tensor::f32_to_e4m3(ks[s][from] / fp8.k_scale[h]));
                ASSERT_EQ(fp8.v[at], tensor::f32_to_e4m3(vs[s][from] / fp8.v_scale[h]));
            }
    }
    std::vector<std::int32_t> qo{0}, indptr{0}, indices, last;
    for (std::size_t s = 0; s < kv_lens.size(); ++s) {
        qo.push_back(qo.back() + q_lens[s]);
        indices.insert(indices.end(), tables[s].begin(), tables[s].end());
        indptr.push_back(static_cast<std::int32_t>(indices.size()));
        last.push_back(kv_lens[s] - (static_cast<int>(tables[s].size()) - 1) * kBs);
    }
    const std::int64_t n = qo.back();
    std::vector<float> q = random_vec(n * kHeads * kDim, rng, 1.0f), out(q.size());
    tensor::PagedAttentionArgs args;
    args.qo_indptr = view(qo, DType::I32, {3});
    args.indptr = view(indptr, DType::I32, {3});
    args.indices = view(indices, DType::I32, {static_cast<std::int64_t>(indices.size())});
    args.last_page_len = view(last, DType::I32, {2});
    args.num_seqs = 2;
    args.scale = 1.0f / std::sqrt(float(kDim));
    be.paged_attention(view(q, DType::F32, {n, kHeads, kDim}), fp8.pages(), args,
                       view(out, DType::F32, {n, kHeads, kDim}));

    // The same attention over f32 pages of the widened values, in the reference arithmetic.
    std::vector<float> wk = widened(fp8.k, fp8.k_scale), wv = widened(fp8.v, fp8.v_scale);
    std::vector<float> want(q.size());
    CpuBackend reference;
    reference.paged_attention(view(q, DType::F32, {n, kHeads, kDim}),
                              {view(wk, DType::F32, {kBlocks, kBs, kKvHeads, kDim}),
                               view(wv, DType::F32, {kBlocks, kBs, kKvHeads, kDim})},
                              args, view(want, DType::F32, {n, kHeads, kDim}));
    EXPECT_EQ(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)), 0);

    // Against the unrounded values in double: E4M3 keeps 3 mantissa bits, so each K and V
    // element is within 2^-4 of itself relatively (2^-10 scales near zero). Scores of up to
    // ~5 then move by up to ~0.3, so with V ~ 0.5 an output moves by up to about 0.1; most
    // move far less (the mean bound).
    double worst = 0.0, total = 0.0;
    for (int s = 0; s < 2; ++s)
        for (int i = 0; i < q_lens[s]; ++i) {
            const int t = qo[s] + i, visible = kv_lens[s] - q_lens[s] + i + 1;
            for (std::int64_t h = 0; h < kHeads; ++h) {
                const std::int64_t g = h / (kHeads / kKvHeads);
                std::vector<double> sc(visible);
                double mx = -1e300, sum = 0.0;
                for (int j = 0; j < visible; ++j) {
                    double dot = 0.0;
                    for (std::int64_t e = 0; e < kDim; ++e)
                        dot += double(q[(t * kHeads + h) * kDim + e]) *
                               ks[s][(j * kKvHeads + g) * kDim + e];
                    sc[j] = dot / std::sqrt(double(kDim));
                    mx = std::max(mx, sc[j]);
                }
                for (double& x : sc) sum += (x = std::exp(x - mx));
                for (std::int64_t e = 0; e < kDim; ++e) {
                    double acc = 0.0;
                    for (int j = 0; j < visible; ++j)
                        acc += sc[j] * vs[s][(j * kKvHeads + g) * kDim + e];
                    const double err = std::abs(acc / sum - out[(t * kHeads + h) * kDim + e]);
                    worst = std::max(worst, err);
                    total += err;
                }
            }
        }
    EXPECT_LT(worst, 0.1);
    EXPECT_LT(total / static_cast<double>(out.size()), 0.02);
    EXPECT_GT(worst, 0.0);  // the pages really are rounded
}

INSTANTIATE_TEST_SUITE_P(Arithmetic, Fp8AttentionTest,
                         ::testing::Values(backends::cpu::Arithmetic::Reference,
                                           backends::cpu::Arithmetic::Ggml));

// Two chunks (3 and 2 tokens, 2 layers) injected at scattered slots and positions.
TEST(Fp8Inject, EqualsF32InjectionOfTheWidenedChunkRounded) {
    constexpr std::int64_t kLayers = 2, row = kKvHeads * kDim;
    const std::vector<std::int64_t> chunk_tokens{3, 2};
    std::mt19937 rng(9);
    // Per layer: K scales then V scales, as KvStorage lays them out.
    std::vector<float> scales{0.02f, 0.05f, 0.01f, 0.03f, 0.04f, 0.025f, 0.02f, 0.015f};
    std::vector<std::vector<std::uint8_t>> chunks8;
    std::vector<std::vector<float>> chunks32;
    for (std::int64_t t : chunk_tokens) {
        std::vector<float> x = random_vec(kLayers * 2 * t * row, rng, 1.0f);
        std::vector<std::uint8_t> b(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
            const std::int64_t l = static_cast<std::int64_t>(i) / (2 * t * row);
            const bool is_v = (static_cast<std::int64_t>(i) / (t * row)) % 2 == 1;
            const std::int64_t h = (static_cast<std::int64_t>(i) / kDim) % kKvHeads;
            b[i] = tensor::f32_to_e4m3(x[i] / scales[(l * 2 + (is_v ? 1 : 0)) * kKvHeads + h]);
            x[i] = tensor::e4m3_to_f32(b[i]) * scales[(l * 2 + (is_v ? 1 : 0)) * kKvHeads + h];
        }
        chunks8.push_back(std::move(b));
        chunks32.push_back(std::move(x));
    }
    std::vector<std::int32_t> src_chunk{0, 0, 0, 1, 1}, src_row{0, 1, 2, 0, 1};
    std::vector<std::int32_t> positions{5, 6, 7, 30, 31}, slots{17, 18, 19, 40, 41};
    std::vector<std::int32_t> tokens{3, 2};
    model::RopeParams p;
    p.head_dim = kDim;
    model::HostRopeTables rope = model::make_rope_tables(p, 64);
    tensor::RopeTables tables{view(rope.cos, DType::F32, {64, kDim / 2}),
                              view(rope.sin, DType::F32, {64, kDim / 2})};
    const std::int64_t plane = kBlocks * kBs * row;  // one layer's K (or V) pages

    const auto run = [&](auto& pages, auto& chunks, DType dtype) {
        std::vector<std::int32_t> addrs;
        for (auto& c : chunks) {
            const auto a = reinterpret_cast<std::uintptr_t>(c.data());
            addrs.push_back(static_cast<std::int32_t>(a & 0xffffffffu));
            addrs.push_back(static_cast<std::int32_t>(a >> 32));
        }
        tensor::InjectArgs args;
        args.chunk_addrs = view(addrs, DType::I32, {2, 2});
        args.chunk_tokens = view(tokens, DType::I32, {2});
        args.src_chunk = view(src_chunk, DType::I32, {5});
        args.src_row = view(src_row, DType::I32, {5});
        args.positions = view(positions, DType::I32, {5});
        args.slots = view(slots, DType::I32, {5});
        args.layer0 = {Tensor(pages.data(), dtype, {kBlocks, kBs, kKvHeads, kDim}),
                       Tensor(pages.data() + plane, dtype, {kBlocks, kBs, kKvHeads, kDim})};
        if (dtype == DType::F8_E4M3) {
            args.layer0.k_scale = Tensor(scales.data(), DType::F32, {kKvHeads});
            args.layer0.v_scale = Tensor(scales.data() + kKvHeads, DType::F32, {kKvHeads});
            args.scale_stride = 2 * kKvHeads;
        }
        args.layer_stride = 2 * plane;
        args.num_layers = kLayers;
        CpuBackend().inject_chunks(args, tables);
    };
    std::vector<std::uint8_t> pages8(kLayers * 2 * plane);
    std::vector<float> pages32(pages8.size());
    run(pages8, chunks8, DType::F8_E4M3);
    run(pages32, chunks32, DType::F32);
    for (std::size_t i = 0; i < pages8.size(); ++i) {
        const std::int64_t l = static_cast<std::int64_t>(i) / (2 * plane);
        const bool is_v = (static_cast<std::int64_t>(i) / plane) % 2 == 1;
        const std::int64_t h = (static_cast<std::int64_t>(i) / kDim) % kKvHeads;
        const float scale = scales[(l * 2 + (is_v ? 1 : 0)) * kKvHeads + h];
        ASSERT_EQ(pages8[i], tensor::f32_to_e4m3(pages32[i] / scale)) << i;
    }
}

TEST(Fp8KvStorage, PagesCarryTheirLayersScales) {
    CpuBackend be;
    const kv::KvLayout layout{3, 4, kBs, kKvHeads, kDim};
    auto kv = kv::KvStorage::create(be, layout, DType::F8_E4M3);
    ASSERT_TRUE(kv.ok()) << kv.error().message;
    EXPECT_EQ(kv->layout().bytes_per_layer(kv->dtype()),
              static_cast<std::size_t>(4 * kBs * kKvHeads * kDim));
    EXPECT_EQ(kv->scales(), std::vector<float>(3 * 2 * kKvHeads, 1.0f));
    std::vector<float> scales(3 * 2 * kKvHeads);
    for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = 0.5f + static_cast<float>(i);
    kv->set_scales(scales);
    for (std::int64_t l = 0; l < 3; ++l) {
        const tensor::KvPages p = kv->pages(l);
        ASSERT_EQ(p.k.dtype, DType::F8_E4M3);
        for (std::int64_t h = 0; h < kKvHeads; ++h) {
            EXPECT_EQ(p.k_scale.as<const float>()[h], scales[(l * 2) * kKvHeads + h]);
            EXPECT_EQ(p.v_scale.as<const float>()[h], scales[(l * 2 + 1) * kKvHeads + h]);
        }
    }
    EXPECT_FALSE(kv::KvStorage::create(be, layout, DType::BF16).ok());
    const auto f32 = kv::KvStorage::create(be, layout);
    ASSERT_TRUE(f32.ok());
    EXPECT_TRUE(f32->pages(0).k_scale.empty());
}

}  // namespace
}  // namespace inferscale
