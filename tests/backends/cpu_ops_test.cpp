// CPU backend ops against naive double-precision references.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "model/rope_tables.h"

namespace inferscale {
namespace {

using backends::cpu::CpuBackend;
using tensor::DType;
using tensor::Tensor;

std::vector<float> random_vec(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

Tensor view(std::vector<float>& v, std::initializer_list<std::int64_t> dims) {
    return Tensor(v.data(), DType::F32, dims);
}
Tensor view(std::vector<std::int32_t>& v, std::initializer_list<std::int64_t> dims) {
    return Tensor(v.data(), DType::I32, dims);
}

float max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return static_cast<float>(m);
}

class LinearTest : public ::testing::TestWithParam<std::tuple<DType, int>> {};

TEST_P(LinearTest, MatchesNaive) {
    const auto [dtype, n] = GetParam();
    const std::int64_t in = 72, out = 300;  // `in` not a multiple of 16: exercises the tails
    std::mt19937 rng(7);
    std::vector<float> x = random_vec(n * in, rng), w = random_vec(out * in, rng, 0.1f),
                       bias = random_vec(out, rng);
    // Round the weight to its dtype so the reference sees the same values.
    std::vector<std::uint16_t> w16(w.size());
    if (dtype != DType::F32) {
        tensor::convert_from_f32(dtype, w.data(), w16.data(), w.size());
        tensor::convert_to_f32(dtype, w16.data(), w.data(), w.size());
    }
    CpuBackend be;
    Tensor host_w = dtype == DType::F32 ? view(w, {out, in}) : Tensor(w16.data(), dtype, {out, in});
    auto dw = be.upload_weight(host_w);
    ASSERT_TRUE(dw.ok());
    EXPECT_EQ(dw->tensor.dtype, dtype);  // matrices keep their precision
    auto db = be.upload_weight(view(bias, {out}));
    ASSERT_TRUE(db.ok());
    std::vector<float> y(n * out);
    be.linear(view(x, {n, in}), dw->tensor, db->tensor, view(y, {n, out}));

    std::vector<double> ref(n * out);
    for (int t = 0; t < n; ++t)
        for (std::int64_t o = 0; o < out; ++o) {
            double s = bias[o];
            for (std::int64_t i = 0; i < in; ++i) s += double(x[t * in + i]) * w[o * in + i];
            ref[t * out + o] = s;
        }
    EXPECT_LT(max_abs_diff(y, ref), 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(DtypesAndRows, LinearTest,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::Values(1, 3, 4, 5, 40)));

TEST(CpuOps, RmsNormMatchesNaive) {
    const std::int64_t n = 5, h = 96;
    std::mt19937 rng(3);
    std::vector<float> x = random_vec(n * h, rng, 3.0f), w = random_vec(h, rng), y(n * h);
    CpuBackend be;
    be.rms_norm(view(x, {n, h}), view(w, {h}), 1e-5f, view(y, {n, h}));
    std::vector<double> ref(n * h);
    for (std::int64_t t = 0; t < n; ++t) {
        double ss = 0;
        for (std::int64_t i = 0; i < h; ++i) ss += double(x[t * h + i]) * x[t * h + i];
        const double inv = 1.0 / std::sqrt(ss / h + 1e-5);
        for (std::int64_t i = 0; i < h; ++i) ref[t * h + i] = w[i] * x[t * h + i] * inv;
    }
    EXPECT_LT(max_abs_diff(y, ref), 1e-5f);
    // In place gives the same answer.
    be.rms_norm(view(x, {n, h}), view(w, {h}), 1e-5f, view(x, {n, h}));
    EXPECT_EQ(x, y);
}

TEST(CpuOps, GatedActivationsEmbeddingGather) {
    CpuBackend be;
    std::vector<float> g{-2.0f, 0.0f, 1.5f}, u{1.0f, 2.0f, -3.0f}, o(3);
    be.swiglu(view(g, {1, 3}), view(u, {1, 3}), view(o, {1, 3}));
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(o[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-6);
    be.geglu(view(g, {1, 3}), view(u, {1, 3}), view(o, {1, 3}));
    const auto gelu = [](double x) {
        return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    };
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(o[i], gelu(g[i]) * u[i], 1e-6);
    // ggml's: gelu looked up at the f16 gate, rounded to f16 (a relative 2^-11 each); exact
    // past +-10.
    CpuBackend ggml(
        backends::cpu::CpuBackendOptions{.arithmetic = backends::cpu::Arithmetic::Ggml});
    std::vector<float> wide{-12.0f, -2.0f, 0.3f, 1.5f, 11.0f}, ones(5, 1.0f), wo(5);
    ggml.geglu(view(wide, {1, 5}), view(ones, {1, 5}), view(wo, {1, 5}));
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(wo[i], gelu(wide[i]), 2e-3 * std::abs(gelu(wide[i])));
    EXPECT_EQ(wo[0], 0.0f);
    EXPECT_EQ(wo[4], 11.0f);

    std::vector<float> table{0, 1, 10, 11, 20, 21};  // [3, 2]
    std::vector<std::uint16_t> table16(6);
    tensor::convert_from_f32(DType::BF16, table.data(), table16.data(), 6);
    std::vector<std::int32_t> ids{2, 0, 2};
    std::vector<float> e(6);
    be.embedding(Tensor(table16.data(), DType::BF16, {3, 2}), view(ids, {3}), view(e, {3, 2}));
    EXPECT_EQ(e, (std::vector<float>{20, 21, 0, 1, 20, 21}));
    std::vector<std::int32_t> rows{1};
    std::vector<float> r(2);
    be.gather_rows(view(e, {3, 2}), view(rows, {1}), view(r, {1, 2}));
    EXPECT_EQ(r, (std::vector<float>{0, 1}));
}

// llama3 inverse frequencies against the formula in double precision.
TEST(RopeTables, Llama3ScalingMatchesFormula) {
    model::RopeParams p;
    p.theta = 500000.0f;
    p.head_dim = 64;
    p.scaling = model::RopeScaling{8.0f, 1.0f, 4.0f, 64};
    const std::vector<float> inv = model::rope_inv_freq(p);
    ASSERT_EQ(inv.size(), 32u);
    int low = 0, mid = 0, high = 0;
    for (int i = 0; i < 32; ++i) {
        const double base = 1.0 / std::pow(500000.0, 2.0 * i / 64);
        const double wavelen = 2 * M_PI / base;
        double expect;
        if (wavelen < 64.0 / 4) {
            expect = base, ++high;
        } else if (wavelen > 64.0 / 1) {
            expect = base / 8, ++low;
        } else {
            const double smooth = (64.0 / wavelen - 1) / (4 - 1);
            expect = (1 - smooth) * base / 8 + smooth * base, ++mid;
        }
        EXPECT_NEAR(inv[i], expect, 1e-6 * expect) << i;
    }
    EXPECT_GT(low, 0);  // all three bands are covered
    EXPECT_GT(mid, 0);
    EXPECT_GT(high, 0);
    p.scaling.factor = 0.0f;  // no scaling: plain theta^(-2i/d)
    EXPECT_NEAR(model::rope_inv_freq(p)[5], 1.0 / std::pow(500000.0, 10.0 / 64), 1e-7);
}

TEST(CpuOps, RopeRotateHalfMatchesNaive) {
    model::RopeParams p;
    p.theta = 10000.0f;
    p.head_dim = 16;
    const model::HostRopeTables tables = model::make_rope_tables(p, 100);
    const std::vector<float> inv = model::rope_inv_freq(p);
    const std::int64_t n = 3, heads = 2, d = 16;
    std::mt19937 rng(11);
    std::vector<float> x = random_vec(n * heads * d, rng), orig = x;
    std::vector<std::int32_t> pos{0, 7, 99};
    std::vector<float> cos = tables.cos, sin = tables.sin;
    CpuBackend be;
    be.rope({.q = view(x, {n, heads, d}),
             .positions = view(pos, {n}),
             .tables = {view(cos, {100, d / 2}), view(sin, {100, d / 2})}});
    std::vector<double> ref(x.size());
    for (std::int64_t t = 0; t < n; ++t)
        for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t i = 0; i < d; ++i) {
                const std::int64_t base = (t * heads + h) * d;
                const double a = double(pos[t]) * inv[i % (d / 2)];
                // x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1)
                const double rot = i < d / 2 ? -orig[base + i + d / 2] : orig[base + i - d / 2];
                ref[base + i] = orig[base + i] * std::cos(a) + rot * std::sin(a);
            }
    EXPECT_LT(max_abs_diff(x, ref), 2e-5f);
}

// Three sequences with different query/KV lengths over scattered, out-of-order pages:
// a prefill from 0, a chunk continuing at 21, and a decode token at 40; with the whole causal
// prefix and with a sliding window of 7 tokens, in the reference and in ggml's arithmetic.
class PagedAttentionTest
    : public ::testing::TestWithParam<std::tuple<int, backends::cpu::Arithmetic>> {};

TEST_P(PagedAttentionTest, MatchesNaiveCausalGqa) {
    const auto [window, arithmetic] = GetParam();
    const std::int64_t heads = 4, kvh = 2, d = 8, bs = 4, blocks = 32;
    const std::vector<int> q_lens{6, 5, 1}, kv_lens{6, 26, 41};
    std::mt19937 rng(5);
    std::vector<std::vector<std::int32_t>> tables;
    std::vector<std::int32_t> perm(blocks);
    for (int i = 0; i < blocks; ++i) perm[i] = blocks - 1 - (i * 7) % blocks;  // a shuffle
    int next = 0;
    for (int kv : kv_lens) {
        tables.emplace_back();
        for (int p = 0; p < (kv + bs - 1) / bs; ++p) tables.back().push_back(perm[next++]);
    }
    CpuBackend be(backends::cpu::CpuBackendOptions{.arithmetic = arithmetic});
    std::vector<float> kpages(blocks * bs * kvh * d), vpages(kpages.size());
    tensor::KvPages pages{view(kpages, {blocks, bs, kvh, d}), view(vpages, {blocks, bs, kvh, d})};
    // Full K/V of every sequence, written through write_kv.
    std::vector<std::vector<float>> ks, vs;
    for (std::size_t s = 0; s < kv_lens.size(); ++s) {
        ks.push_back(random_vec(kv_lens[s] * kvh * d, rng));
        vs.push_back(random_vec(kv_lens[s] * kvh * d, rng));
        std::vector<std::int32_t> slots;
        for (int j = 0; j < kv_lens[s]; ++j) slots.push_back(tables[s][j / bs] * bs + j % bs);
        be.write_kv(view(ks[s], {kv_lens[s], kvh, d}), view(vs[s], {kv_lens[s], kvh, d}),
                    view(slots, {kv_lens[s]}), pages);
    }
    std::vector<std::int32_t> qo{0}, indptr{0}, indices, last;
    for (std::size_t s = 0; s < kv_lens.size(); ++s) {
        qo.push_back(qo.back() + q_lens[s]);
        indices.insert(indices.end(), tables[s].begin(), tables[s].end());
        indptr.push_back(static_cast<std::int32_t>(indices.size()));
        last.push_back(kv_lens[s] - (static_cast<int>(tables[s].size()) - 1) * bs);
    }
    const std::int64_t n = qo.back();
    std::vector<float> q = random_vec(n * heads * d, rng), out(q.size());
    tensor::PagedAttentionArgs args;
    args.qo_indptr = view(qo, {4});
    args.indptr = view(indptr, {4});
    args.indices = view(indices, {static_cast<std::int64_t>(indices.size())});
    args.last_page_len = view(last, {3});
    args.num_seqs = 3;
    args.scale = 1.0f / std::sqrt(float(d));
    args.window = window;
    be.paged_attention(view(q, {n, heads, d}), pages, args, view(out, {n, heads, d}));

    std::vector<double> ref(out.size());
    for (int s = 0; s < 3; ++s)
        for (int i = 0; i < q_lens[s]; ++i) {
            const int t = qo[s] + i, visible = kv_lens[s] - q_lens[s] + i + 1;
            const int first = window > 0 ? std::max(0, visible - window) : 0;
            for (int h = 0; h < heads; ++h) {
                const int g = h / (heads / kvh);
                std::vector<double> sc(visible, -1e300);
                double mx = -1e300, sum = 0;
                for (int j = first; j < visible; ++j) {
                    double dot = 0;
                    for (int e = 0; e < d; ++e)
                        dot += double(q[(t * heads + h) * d + e]) * ks[s][(j * kvh + g) * d + e];
                    sc[j] = dot / std::sqrt(double(d));
                    mx = std::max(mx, sc[j]);
                }
                for (double& x : sc) sum += (x = std::exp(x - mx));
                for (int e = 0; e < d; ++e) {
                    double acc = 0;
                    for (int j = first; j < visible; ++j)
                        acc += sc[j] * vs[s][(j * kvh + g) * d + e];
                    ref[(t * heads + h) * d + e] = acc / sum;
                }
            }
        }
    EXPECT_LT(max_abs_diff(out, ref), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(WindowsAndArithmetic, PagedAttentionTest,
                         ::testing::Combine(::testing::Values(0, 7),
                                            ::testing::Values(backends::cpu::Arithmetic::Reference,
                                                              backends::cpu::Arithmetic::Ggml)));

}  // namespace
}  // namespace inferscale
