// The CPU backend's ggml arithmetic (Arithmetic::Ggml). Bit-exactness against llama.cpp itself
// is tests/python/test_llama_cpp_parity.py; here: the vector and scalar forms agree bit for
// bit, the approximations stay accurate, the ops match naive double-precision references, and
// attention over un-interleaved Q/K rows sums exactly like ggml over the interleaved ones.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ggml_arith.h"
#include "model/rope_tables.h"

namespace inferscale {
namespace {

using backends::cpu::Arithmetic;
using backends::cpu::CpuBackend;
using backends::cpu::CpuBackendOptions;
using backends::cpu::GgmlIsa;
using tensor::DType;
using tensor::Tensor;
namespace ggml = backends::cpu::ggml;

std::vector<float> random_vec(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

template <class T>
Tensor view(std::vector<T>& v, std::initializer_list<std::int64_t> dims) {
    return Tensor(v.data(), std::is_same_v<T, float> ? DType::F32 : DType::I32, dims);
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

CpuBackend ggml_backend(GgmlIsa isa) {
    return CpuBackend(CpuBackendOptions{.arithmetic = Arithmetic::Ggml, .ggml_isa = isa});
}

// Both builds' exp: accurate, saturating where ggml's does, subnormals kept.
template <float (*Exp)(float), float (*Silu)(float)>
void expect_accurate_exp() {
    for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
        const double want = std::exp(static_cast<double>(x));
        EXPECT_NEAR(Exp(x), want, 2.5 * std::abs(want) * 0x1p-23) << x;
    }
    EXPECT_EQ(Exp(0.0f), 1.0f);
    EXPECT_EQ(Exp(-std::numeric_limits<float>::infinity()), 0.0f);
    EXPECT_EQ(Exp(-200.0f), 0.0f);
    EXPECT_EQ(Exp(200.0f), std::numeric_limits<float>::infinity());
    EXPECT_GT(Exp(-100.0f), 0.0f);  // subnormal, not flushed
    EXPECT_NEAR(Exp(-100.0f), std::exp(-100.0), 1e-45);
    EXPECT_NEAR(Silu(2.0f), 2.0 / (1.0 + std::exp(-2.0)), 1e-6);
}

TEST(GgmlArith, ExpIsAccurateAndSaturatesLikeGgml) {
    expect_accurate_exp<ggml::avx512::expf, ggml::avx512::silu>();
    expect_accurate_exp<ggml::avx2::expf, ggml::avx2::silu>();
}

// The two builds' exp are different approximations: they part on some inputs.
TEST(GgmlArith, TheTwoBuildsRoundExpDifferently) {
    int differ = 0;
    for (float x = -20.0f; x < 20.0f; x += 0.001f) {
        differ += !same_bits(ggml::avx512::expf(x), ggml::avx2::expf(x));
    }
    EXPECT_GT(differ, 100);
}

#if IS_GGML_AVX2
std::vector<float> exp_inputs() {
    std::vector<float> xs{-std::numeric_limits<float>::infinity(), -300.0f, -150.0f, -127.5f,
                          -104.5f, -100.0f, -87.9f, -1e-30f, -0.0f, 0.0f, 1e-30f, 0.5f, 88.5f,
                          89.0f, 127.5f, 150.0f, 300.0f,
                          std::numeric_limits<float>::infinity()};
    std::mt19937 rng(1);
    for (float x : random_vec(4096, rng, 20.0f)) xs.push_back(x);
    for (float x : random_vec(512, rng, 120.0f)) xs.push_back(x);
    while (xs.size() % 16 != 0) xs.push_back(1.0f);
    return xs;
}

template <__m256 (*Exp8)(__m256), __m256 (*Silu8)(__m256), float (*Exp)(float),
          float (*Silu)(float)>
void expect_vector_equals_scalar(const std::vector<float>& xs) {
    for (std::size_t i = 0; i < xs.size(); i += 8) {
        float e[8], s[8];
        _mm256_storeu_ps(e, Exp8(_mm256_loadu_ps(&xs[i])));
        _mm256_storeu_ps(s, Silu8(_mm256_loadu_ps(&xs[i])));
        for (int l = 0; l < 8; ++l) {
            EXPECT_TRUE(same_bits(e[l], Exp(xs[i + l]))) << xs[i + l];
            const float want = Silu(xs[i + l]);
            EXPECT_TRUE(same_bits(s[l], want) || (std::isnan(s[l]) && std::isnan(want)))
                << xs[i + l];
        }
    }
}

TEST(GgmlArith, VectorFormsEqualScalarFormsBitForBit) {
    const std::vector<float> xs = exp_inputs();
    expect_vector_equals_scalar<ggml::avx512::expf8, ggml::avx512::silu8, ggml::avx512::expf,
                                ggml::avx512::silu>(xs);
    expect_vector_equals_scalar<ggml::avx2::expf8, ggml::avx2::silu8, ggml::avx2::expf,
                                ggml::avx2::silu>(xs);
    for (std::size_t i = 0; i < xs.size(); i += 16) {
        const float v = ggml::avx512::reduce16(_mm256_loadu_ps(&xs[i]), _mm256_loadu_ps(&xs[i + 8]));
        EXPECT_TRUE(same_bits(v, ggml::avx512::reduce16(&xs[i])));
        EXPECT_TRUE(same_bits(ggml::hsum8(_mm256_loadu_ps(&xs[i])), ggml::hsum8(&xs[i])));
        EXPECT_TRUE(same_bits(ggml::hadd8(_mm256_loadu_ps(&xs[i])), ggml::hadd8(&xs[i])));
    }
}
#endif

class GgmlIsaTest : public ::testing::TestWithParam<GgmlIsa> {};

TEST_P(GgmlIsaTest, NormSwigluRopeMatchNaive) {
    CpuBackend be = ggml_backend(GetParam());
    std::mt19937 rng(2);
    const std::int64_t n = 6, h = 576;  // rows go four at a time: a full group and a partial one
    std::vector<float> x = random_vec(n * h, rng, 2.0f), w = random_vec(h, rng), y(n * h);
    be.rms_norm(view(x, {n, h}), view(w, {h}), 1e-5f, view(y, {n, h}));
    for (std::int64_t t = 0; t < n; ++t) {
        double ss = 0;
        for (std::int64_t i = 0; i < h; ++i) ss += double(x[t * h + i]) * x[t * h + i];
        const double inv = 1.0 / std::sqrt(ss / h + 1e-5);
        for (std::int64_t i = 0; i < h; ++i)
            EXPECT_NEAR(y[t * h + i], w[i] * x[t * h + i] * inv, 1e-5);
    }
    be.rms_norm(view(x, {n, h}), view(w, {h}), 1e-5f, view(x, {n, h}));  // in place
    EXPECT_EQ(x, y);

    std::vector<float> g = random_vec(1000, rng, 4.0f), u = random_vec(1000, rng), o(1000);
    be.swiglu(view(g, {1, 1000}), view(u, {1, 1000}), view(o, {1, 1000}));
    for (int i = 0; i < 1000; ++i) EXPECT_NEAR(o[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-5);

    // ggml's angles: pos * s^i by repeated multiplication, close to pos * theta^(-2i/d).
    model::RopeParams p;
    p.theta = 100000.0f;
    p.head_dim = 64;
    p.ggml_angles = true;
    const model::HostRopeTables tab = model::make_rope_tables(p, 300);
    for (int pos : {1, 17, 299}) {
        for (int i = 0; i < 32; ++i) {
            const double a = pos * std::pow(100000.0, -2.0 * i / 64);
            EXPECT_NEAR(tab.cos[pos * 32 + i], std::cos(a), 2e-5 * pos) << pos << " " << i;
            EXPECT_NEAR(tab.sin[pos * 32 + i], std::sin(a), 2e-5 * pos) << pos << " " << i;
        }
    }
    std::vector<float> cos = tab.cos, sin = tab.sin, q = random_vec(2 * 64, rng), q0 = q;
    std::vector<std::int32_t> pos{5, 299};
    be.rope({.q = view(q, {2, 1, 64}),
             .positions = view(pos, {2}),
             .tables = {view(cos, {300, 32}), view(sin, {300, 32})}});
    for (int t = 0; t < 2; ++t) {
        for (int i = 0; i < 32; ++i) {
            const double c = cos[pos[t] * 32 + i], s = sin[pos[t] * 32 + i];
            const double a = q0[t * 64 + i], b = q0[t * 64 + 32 + i];
            EXPECT_NEAR(q[t * 64 + i], a * c - b * s, 1e-6);
            EXPECT_NEAR(q[t * 64 + 32 + i], b * c + a * s, 1e-6);
        }
    }
}

struct AttentionCase {
    std::int64_t heads = 4, kvh = 2, d = 64, bs = 4;
    std::vector<int> q_lens{7, 1, 3}, kv_lens{7, 70, 40};
};

// Runs paged attention of `c` on one backend over pages holding k/v (un-paged [kv, kvh, d]
// per sequence, scattered over reversed blocks) and returns out.
std::vector<float> run_attention(CpuBackend& be, const AttentionCase& c,
                                 std::vector<std::vector<float>>& ks,
                                 std::vector<std::vector<float>>& vs, std::vector<float>& q,
                                 bool interleaved) {
    const std::int64_t blocks = 64;
    std::vector<float> kp(blocks * c.bs * c.kvh * c.d), vp(kp.size());
    tensor::KvPages pages{view(kp, {blocks, c.bs, c.kvh, c.d}),
                          view(vp, {blocks, c.bs, c.kvh, c.d})};
    std::vector<std::int32_t> qo{0}, indptr{0}, indices, last;
    int next = 0;
    for (std::size_t s = 0; s < c.kv_lens.size(); ++s) {
        const int kv = c.kv_lens[s];
        const int np = static_cast<int>((kv + c.bs - 1) / c.bs);
        std::vector<std::int32_t> slots;
        for (int j = 0; j < np; ++j) {
            indices.push_back(static_cast<std::int32_t>(blocks - 1 - next++));
        }
        for (int j = 0; j < kv; ++j) {
            const std::int64_t block = indices[indptr.back() + j / c.bs];
            slots.push_back(static_cast<std::int32_t>(block * c.bs + j % c.bs));
        }
        be.write_kv(view(ks[s], {kv, c.kvh, c.d}), view(vs[s], {kv, c.kvh, c.d}),
                    view(slots, {kv}), pages);
        qo.push_back(qo.back() + c.q_lens[s]);
        indptr.push_back(static_cast<std::int32_t>(indices.size()));
        last.push_back(static_cast<std::int32_t>(kv - (np - 1) * c.bs));
    }
    const std::int64_t n = qo.back(), seqs = static_cast<std::int64_t>(c.kv_lens.size());
    std::vector<float> out(n * c.heads * c.d);
    tensor::PagedAttentionArgs args;
    args.qo_indptr = view(qo, {seqs + 1});
    args.indptr = view(indptr, {seqs + 1});
    args.indices = view(indices, {static_cast<std::int64_t>(indices.size())});
    args.last_page_len = view(last, {seqs});
    args.num_seqs = static_cast<int>(seqs);
    args.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    args.qk_ggml_interleaved = interleaved;
    be.paged_attention(view(q, {n, c.heads, c.d}), pages, args, view(out, {n, c.heads, c.d}));
    return out;
}

// Rows of [.., d] from the un-interleaved layout back to ggml's interleaved pairs.
std::vector<float> interleave(const std::vector<float>& x, std::int64_t d) {
    std::vector<float> y(x.size());
    for (std::size_t r = 0; r < x.size() / d; ++r) {
        for (std::int64_t e = 0; e < d; ++e) y[r * d + e] = x[r * d + (e % 2) * (d / 2) + e / 2];
    }
    return y;
}

class GgmlAttentionTest
    : public ::testing::TestWithParam<std::tuple<GgmlIsa, std::int64_t>> {};

TEST_P(GgmlAttentionTest, MatchesNaiveAndSumsInGgmlOrder) {
    AttentionCase c;
    c.d = std::get<1>(GetParam());
    std::mt19937 rng(7);
    std::vector<std::vector<float>> ks, vs, ks_i;
    for (int kv : c.kv_lens) {
        ks.push_back(random_vec(kv * c.kvh * c.d, rng));
        vs.push_back(random_vec(kv * c.kvh * c.d, rng));
        ks_i.push_back(interleave(ks.back(), c.d));
    }
    int n = 0;
    for (int ql : c.q_lens) n += ql;
    std::vector<float> q = random_vec(n * c.heads * c.d, rng, 2.0f), q_i = interleave(q, c.d);
    CpuBackend be = ggml_backend(std::get<0>(GetParam()));
    const std::vector<float> out = run_attention(be, c, ks, vs, q, /*interleaved=*/true);
    // The same rows in ggml's own order, summed in natural order: the very same bits.
    const std::vector<float> out_i = run_attention(be, c, ks_i, vs, q_i, /*interleaved=*/false);
    ASSERT_EQ(out.size(), out_i.size());
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_TRUE(same_bits(out[i], out_i[i])) << i;

    int t = 0;
    for (std::size_t s = 0; s < c.kv_lens.size(); ++s) {
        for (int i = 0; i < c.q_lens[s]; ++i, ++t) {
            const int visible = c.kv_lens[s] - c.q_lens[s] + i + 1;
            for (std::int64_t h = 0; h < c.heads; ++h) {
                const std::int64_t g = h / (c.heads / c.kvh);
                std::vector<double> sc(visible);
                double mx = -1e300, sum = 0;
                for (int j = 0; j < visible; ++j) {
                    double dot = 0;
                    for (std::int64_t e = 0; e < c.d; ++e) {
                        dot += double(q[(t * c.heads + h) * c.d + e]) *
                               ks[s][(j * c.kvh + g) * c.d + e];
                    }
                    sc[j] = dot / std::sqrt(double(c.d));
                    mx = std::max(mx, sc[j]);
                }
                for (double& x : sc) sum += (x = std::exp(x - mx));
                for (std::int64_t e = 0; e < c.d; ++e) {
                    double acc = 0;
                    for (int j = 0; j < visible; ++j) {
                        acc += sc[j] * vs[s][(j * c.kvh + g) * c.d + e];
                    }
                    EXPECT_NEAR(out[(t * c.heads + h) * c.d + e], acc / sum, 2e-5);
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Isas, GgmlIsaTest, ::testing::Values(GgmlIsa::Avx2, GgmlIsa::Avx512));

// 64 and 128: whole steps of either build; the others end in ggml's tail (AVX-512 / AVX2):
// 6: fused / 4 + 2 fused; 76: 64 + 8 + 4 fused / 64 + 8 + 4; 80: 64 + 16 / 64 + 8 + 8;
// 88: 64 + 16 + 8 / 64 + 8 + 8 + 8.
INSTANTIATE_TEST_SUITE_P(HeadDims, GgmlAttentionTest,
                         ::testing::Combine(::testing::Values(GgmlIsa::Avx2, GgmlIsa::Avx512),
                                            ::testing::Values(6, 64, 76, 80, 88, 128)));

// The build to reproduce comes from the options, else from the host (INFERSCALE_CPU_ISA).
TEST(GgmlArith, IsaIsChosenByOptionsOrHost) {
    EXPECT_EQ(backends::cpu::parse_ggml_isa("avx2"), GgmlIsa::Avx2);
    EXPECT_EQ(backends::cpu::parse_ggml_isa("avx512"), GgmlIsa::Avx512);
    EXPECT_EQ(backends::cpu::parse_ggml_isa("sse"), std::nullopt);
    EXPECT_EQ(ggml_backend(GgmlIsa::Avx2).ggml_isa(), GgmlIsa::Avx2);
    EXPECT_EQ(ggml_backend(GgmlIsa::Avx512).ggml_isa(), GgmlIsa::Avx512);
    EXPECT_EQ(CpuBackend().ggml_isa(), backends::cpu::host_ggml_isa());
}

// Auto turns ggml's arithmetic on with the first block-quantized matrix.
TEST(GgmlArith, AutoSwitchesOnBlockQuantizedWeights) {
    CpuBackend be;
    EXPECT_FALSE(be.ggml_arithmetic());
    std::vector<float> w(32 * 2, 0.5f);
    ASSERT_TRUE(be.upload_weight(view(w, {2, 32})).ok());
    EXPECT_FALSE(be.ggml_arithmetic());
    std::vector<std::uint8_t> q4(2 * 20, 0);  // two Q4_1 rows of one block
    ASSERT_TRUE(be.upload_weight(Tensor(q4.data(), DType::Q4_1, {2, 32})).ok());
    EXPECT_TRUE(be.ggml_arithmetic());
    CpuBackendOptions reference_options;
    reference_options.arithmetic = Arithmetic::Reference;
    CpuBackend reference(reference_options);
    ASSERT_TRUE(reference.upload_weight(Tensor(q4.data(), DType::Q4_1, {2, 32})).ok());
    EXPECT_FALSE(reference.ggml_arithmetic());
}

}  // namespace
}  // namespace inferscale
