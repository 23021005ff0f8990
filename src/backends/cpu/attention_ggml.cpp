// Paged causal GQA attention with ggml's arithmetic (Arithmetic::Ggml), the way llama.cpp's
// CPU backend computes it without flash attention over an f32 KV cache, in its AVX-512 build
// (W = 16 lanes a vector) or its AVX2 build (W = 8; ggml_isa.h):
//   kq  = K q                      ggml_vec_dot_f32: 4 x W fma lanes over head_dim
//   p   = softmax(kq * scale)      ggml_v_expf, the sum in double W lanes at a time, then
//                                  p *= (float)(1 / sum)
//   out = V^T p                    prefill (several queries): tinyBLAS sgemm, W fma lanes over
//                                  KV positions; decode (one query): ggml_vec_dot_f32, 4 x W
// A KV position's lane is its index in the sequence (llama.cpp's cache cell when one sequence
// starts at cell 0). llama.cpp pads the KV length to a multiple of 256 with masked cells; they
// add exact zeros, so stopping at the last visible position gives the same sums. The prefill /
// decode choice is made per sequence from its query count (llama.cpp makes it per batch), so a
// sequence's result never depends on what it is batched with.
//
// The horizontal sums differ per build: AVX-512 reduces a vector with _mm512_reduce_add_ps
// (avx512::reduce16) everywhere; AVX2 with hsum8 in the softmax and tinyBLAS and with hadd8 at
// the end of ggml_vec_dot_f32 (ggml_arith.h).

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/ggml_arith.h"
#include "base/check.h"

namespace inferscale::backends::cpu {
namespace {

constexpr std::int64_t kMaxHeadDim = 512;

// Lanes of one vector, and of ggml_vec_dot_f32's four accumulators.
template <GgmlIsa I>
constexpr int kWidth = I == GgmlIsa::Avx512 ? 16 : 8;
template <GgmlIsa I>
constexpr int kStep = 4 * kWidth<I>;

// The horizontal sum of one vector's lanes in the softmax and tinyBLAS (`dot_end` false), or
// at the end of ggml_vec_dot_f32 (true).
template <GgmlIsa I>
float vector_sum(const float* lanes, bool dot_end) {
    if constexpr (I == GgmlIsa::Avx512) {
        return ggml::avx512::reduce16(lanes);
    } else {
        return dot_end ? ggml::hadd8(lanes) : ggml::hsum8(lanes);
    }
}

// Where element e of ggml's head row sits in ours (see PagedAttentionArgs::qk_ggml_interleaved).
inline std::int64_t ggml_element(std::int64_t e, std::int64_t d, bool interleaved) {
    return interleaved ? (e % 2) * (d / 2) + e / 2 : e;
}

#if IS_GGML_AVX2
// ggml_vec_dot_f32's whole steps, AVX-512 build: 4 x 16 lanes, combined (a0 + a2) + (a1 + a3)
// and reduced by reduce16.
float dot_steps_avx512(const float* x, const float* y, std::int64_t n, std::int64_t np,
                       bool interleaved) {
    __m256 a[8];
    for (auto& v : a) v = _mm256_setzero_ps();
    if (interleaved) {
        // ggml element 64r + 16k + l is ours j * n/2 + 32r + 8k + l/2 with j = l % 2: even
        // lanes come from the first half, odd ones from the second. a[4j + k] holds them.
        const std::int64_t half = n / 2;
        for (std::int64_t r = 0; r < np / 64; ++r) {
            for (int j = 0; j < 2; ++j) {
                for (int k = 0; k < 4; ++k) {
                    const std::int64_t m = j * half + 32 * r + 8 * k;
                    a[4 * j + k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + m), _mm256_loadu_ps(y + m),
                                                   a[4 * j + k]);
                }
            }
        }
        // Combined lanes: even ones e[0..8), odd ones o[0..8). reduce16 of the interleaved
        // 16 adds lanes 8 apart, then 4 apart, then 2, then 1: e and o only meet last, and
        // each alone is summed in hsum8's order.
        const __m256 e = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
        const __m256 o = _mm256_add_ps(_mm256_add_ps(a[4], a[6]), _mm256_add_ps(a[5], a[7]));
        return ggml::hsum8(e) + ggml::hsum8(o);
    }
    for (std::int64_t i = 0; i < np; i += 64) {
        for (int j = 0; j < 8; ++j) {
            a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * j), _mm256_loadu_ps(y + i + 8 * j),
                                   a[j]);
        }
    }
    // a[2k] / a[2k+1] are lanes 0-7 / 8-15 of ggml's accumulator k.
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
    return ggml::avx512::reduce16(lo, hi);
}

// The same for the AVX2 build: 4 x 8 lanes, combined (a0 + a2) + (a1 + a3), reduced by hadd8.
float dot_steps_avx2(const float* x, const float* y, std::int64_t n, std::int64_t np,
                     bool interleaved) {
    if (interleaved) {
        // ggml element 32r + 8k + l is ours j * n/2 + 16r + 4k + l/2 with j = l % 2: the even
        // lanes of accumulator k are e[k], the odd ones o[k], 4 each.
        const std::int64_t half = n / 2;
        __m128 e[4], o[4];
        for (int k = 0; k < 4; ++k) e[k] = o[k] = _mm_setzero_ps();
        for (std::int64_t r = 0; r < np / 32; ++r) {
            for (int k = 0; k < 4; ++k) {
                const std::int64_t m = 16 * r + 4 * k;
                e[k] = _mm_fmadd_ps(_mm_loadu_ps(x + m), _mm_loadu_ps(y + m), e[k]);
                o[k] = _mm_fmadd_ps(_mm_loadu_ps(x + half + m), _mm_loadu_ps(y + half + m), o[k]);
            }
        }
        const __m128 ce = _mm_add_ps(_mm_add_ps(e[0], e[2]), _mm_add_ps(e[1], e[3]));
        const __m128 co = _mm_add_ps(_mm_add_ps(o[0], o[2]), _mm_add_ps(o[1], o[3]));
        // hadd8 of lanes (ce0, co0, ce1, co1, ce2, co2, ce3, co3).
        const __m128 pe = _mm_add_ps(ce, _mm_movehl_ps(ce, ce));
        const __m128 po = _mm_add_ps(co, _mm_movehl_ps(co, co));
        float fe[4], fo[4];
        _mm_storeu_ps(fe, pe);
        _mm_storeu_ps(fo, po);
        return (fe[0] + fo[0]) + (fe[1] + fo[1]);
    }
    __m256 a[4];
    for (auto& v : a) v = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < np; i += 32) {
        for (int k = 0; k < 4; ++k) {
            a[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k), _mm256_loadu_ps(y + i + 8 * k),
                                   a[k]);
        }
    }
    return ggml::hadd8(_mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3])));
}
#endif

// ggml_vec_dot_f32 over ggml's element order: fma into 4 x W lanes over whole 4W-element steps,
// lanes combined (a0 + a2) + (a1 + a3) and reduced; the tail as GCC vectorizes ggml's scalar
// `sumf += x[i] * y[i]` loop: rounded products added in order, W at a time, then W/2 once, the
// last few fused (checked against both builds' exported ggml_vec_dot_f32 for n from 6 to 128).
template <GgmlIsa I>
float dot(const float* x, const float* y, std::int64_t n, bool interleaved) {
    constexpr int W = kWidth<I>, S = kStep<I>;
    const std::int64_t np = n & ~std::int64_t{S - 1};
    float s = 0.0f;
    if (np > 0) {
#if IS_GGML_AVX2
        s = I == GgmlIsa::Avx512 ? dot_steps_avx512(x, y, n, np, interleaved)
                                 : dot_steps_avx2(x, y, n, np, interleaved);
#else
        float a[S] = {};
        for (std::int64_t i = 0; i < np; i += S) {
            for (int e = 0; e < S; ++e) {
                const std::int64_t m = ggml_element(i + e, n, interleaved);
                a[e] = std::fma(x[m], y[m], a[e]);
            }
        }
        float lanes[W];
        for (int l = 0; l < W; ++l) lanes[l] = (a[l] + a[2 * W + l]) + (a[W + l] + a[3 * W + l]);
        s = vector_sum<I>(lanes, /*dot_end=*/true);
#endif
    }
    const auto product = [&](std::int64_t e) {
        const std::int64_t m = ggml_element(e, n, interleaved);
        return x[m] * y[m];
    };
    std::int64_t i = np;
    for (; n - i >= W; i += W) {
        for (int e = 0; e < W; ++e) s += product(i + e);
    }
    if (n - i >= W / 2) {
        for (int e = 0; e < W / 2; ++e) s += product(i + e);
        i += W / 2;
    }
    for (; i < n; ++i) {
        const std::int64_t m = ggml_element(i, n, interleaved);
        s = std::fma(x[m], y[m], s);
    }
    return s;
}

// exp(s - max) of scores[0..count) in place, zero-padded to a multiple of W, and their sum as
// ggml_vec_soft_max_f32 forms it: each W lanes reduced in f32, accumulated in double.
template <GgmlIsa I>
double exp_and_sum(float* scores, std::int64_t count, float max) {
    constexpr int W = kWidth<I>;
    const std::int64_t padded = (count + W - 1) / W * W;
    std::fill(scores + count, scores + padded, -std::numeric_limits<float>::infinity());
    double sum = 0.0;
    for (std::int64_t c = 0; c < padded; c += W) {
        float* e = scores + c;
#if IS_GGML_AVX2
        const __m256 m = _mm256_set1_ps(max);
        if constexpr (I == GgmlIsa::Avx512) {
            const __m256 lo = ggml::avx512::expf8(_mm256_sub_ps(_mm256_loadu_ps(e), m));
            const __m256 hi = ggml::avx512::expf8(_mm256_sub_ps(_mm256_loadu_ps(e + 8), m));
            _mm256_storeu_ps(e, lo);
            _mm256_storeu_ps(e + 8, hi);
            sum += static_cast<double>(ggml::avx512::reduce16(lo, hi));
        } else {
            const __m256 v = ggml::avx2::expf8(_mm256_sub_ps(_mm256_loadu_ps(e), m));
            _mm256_storeu_ps(e, v);
            sum += static_cast<double>(ggml::hsum8(v));
        }
#else
        for (int l = 0; l < W; ++l) {
            e[l] = I == GgmlIsa::Avx512 ? ggml::avx512::expf(e[l] - max)
                                        : ggml::avx2::expf(e[l] - max);
        }
        sum += static_cast<double>(vector_sum<I>(e, /*dot_end=*/false));
#endif
    }
    return sum;
}

// out[i] = sum_j p[j] v_j[i] with `Lanes` accumulators per output: position j feeds lane
// j % Lanes by fma in position order. W lanes are tinyBLAS's; 4 W are ggml_vec_dot_f32's four
// accumulators, combined (a0 + a2) + (a1 + a3) before the reduction. `acc` holds Lanes * d
// floats; lane l of output i is acc[l * d + i].
template <GgmlIsa I, int Lanes>
void weighted_values(const float* p, std::int64_t count, const float* const* rows, std::int64_t d,
                     float* acc, float* out) {
    constexpr int W = kWidth<I>;
    constexpr bool kDot = Lanes == kStep<I>;
    static_assert(Lanes == W || kDot);
    // Lanes no position reaches stay zero; the others start from it with their first fma.
    if (count < Lanes) std::fill(acc + count * d, acc + Lanes * d, 0.0f);
    for (std::int64_t j = 0; j < count; ++j) {
        float* a = acc + (j % Lanes) * d;
        const float* v = rows[j];
        const float w = p[j];
        const bool first = j < Lanes;
        std::int64_t i = 0;
#if IS_GGML_AVX2
        const __m256 wv = _mm256_set1_ps(w);
        for (; i + 8 <= d; i += 8) {
            const __m256 prev = first ? _mm256_setzero_ps() : _mm256_loadu_ps(a + i);
            _mm256_storeu_ps(a + i, _mm256_fmadd_ps(_mm256_loadu_ps(v + i), wv, prev));
        }
#endif
        for (; i < d; ++i) a[i] = std::fma(v[i], w, first ? 0.0f : a[i]);
    }
    if constexpr (kDot) {
        for (int l = 0; l < W; ++l) {
            float* a = acc + l * d;
            const float* b = acc + (W + l) * d;
            const float* c = acc + (2 * W + l) * d;
            const float* e = acc + (3 * W + l) * d;
            for (std::int64_t i = 0; i < d; ++i) a[i] = (a[i] + c[i]) + (b[i] + e[i]);
        }
    }
    float lanes[W];
    for (std::int64_t i = 0; i < d; ++i) {
        for (int l = 0; l < W; ++l) lanes[l] = acc[l * d + i];
        out[i] = vector_sum<I>(lanes, /*dot_end=*/kDot);
    }
}

template <GgmlIsa I>
void attention_with(const float* q, std::int64_t n, std::int64_t heads, const PagedKvView& pages,
                    const AttentionMeta& meta, float* out) {
    const std::int64_t d = pages.head_dim, bs = pages.block_size, kvh = pages.kv_heads;
    IS_CHECK(d <= kMaxHeadDim) << "head_dim " << d;
    IS_CHECK(heads % kvh == 0) << heads << " heads, " << kvh << " kv heads";
    IS_CHECK_EQ(meta.qo_indptr[meta.num_seqs], n);
    const std::int64_t token_stride = kvh * d;  // one token's row inside a page
    const std::int64_t items = n * heads;

#pragma omp parallel
    {
        // Per thread: scores (padded to W), K/V row pointers, and the value accumulators.
        std::vector<float> scores;
        std::vector<const float*> k_rows, v_rows;
        std::vector<float> acc(static_cast<std::size_t>(kStep<I> * d));
        // nowait: the end of the parallel region is the only barrier.
#pragma omp for schedule(dynamic, 2) nowait
        for (std::int64_t item = 0; item < items; ++item) {
            const AttentionItem a = locate_item(meta, item, heads, kvh, d, bs);
            const std::int64_t visible = a.visible;
            if (static_cast<std::int64_t>(scores.size()) < visible + 16) {
                scores.resize(static_cast<std::size_t>(visible + 16));
                k_rows.resize(scores.size());
                v_rows.resize(scores.size());
            }
            for (std::int64_t p = 0; p * bs < visible; ++p) {
                const std::int64_t block = a.page_ids[p];
                IS_CHECK(block >= 0 && block < pages.num_blocks) << "block " << block;
                const std::int64_t first = (block * bs) * token_stride + a.kv_offset;
                for (std::int64_t j = p * bs; j < std::min(visible, (p + 1) * bs); ++j) {
                    k_rows[j] = pages.k_f32() + first + (j - p * bs) * token_stride;
                    v_rows[j] = pages.v_f32() + first + (j - p * bs) * token_stride;
                }
            }
            // Positions before the window are llama.cpp's masked cells: -inf scores, weight 0.
            std::fill(scores.begin(), scores.begin() + a.first,
                      -std::numeric_limits<float>::infinity());
            float max = -std::numeric_limits<float>::infinity();
            for (std::int64_t j = a.first; j < visible; ++j) {
                scores[j] = dot<I>(k_rows[j], q + item * d, d, meta.qk_ggml_interleaved) * meta.scale;
                max = std::max(max, scores[j]);
            }
            const double sum = exp_and_sum<I>(scores.data(), visible, max);
            const float inv = static_cast<float>(1.0 / sum);
            for (std::int64_t j = 0; j < visible; ++j) scores[j] *= inv;
            float* o = out + item * d;
            if (a.q_len > 1) {
                weighted_values<I, kWidth<I>>(scores.data(), visible, v_rows.data(), d, acc.data(), o);
            } else {
                weighted_values<I, kStep<I>>(scores.data(), visible, v_rows.data(), d, acc.data(), o);
            }
        }
    }
}

}  // namespace

void paged_attention_ggml(const float* q, std::int64_t n, std::int64_t heads,
                          const PagedKvView& pages, const AttentionMeta& meta, float* out,
                          GgmlIsa isa) {
    if (isa == GgmlIsa::Avx512) {
        attention_with<GgmlIsa::Avx512>(q, n, heads, pages, meta, out);
    } else {
        attention_with<GgmlIsa::Avx2>(q, n, heads, pages, meta, out);
    }
}

}  // namespace inferscale::backends::cpu
