// Paged causal GQA attention with ggml's arithmetic (Arithmetic::Ggml), the way llama.cpp's
// CPU backend computes it without flash attention over an f32 KV cache:
//   kq  = K q                      ggml_vec_dot_f32: 4 x 16 fma lanes over head_dim
//   p   = softmax(kq * scale)      ggml_v_expf, the sum in double 16 lanes at a time, then
//                                  p *= (float)(1 / sum)
//   out = V^T p                    prefill (several queries): tinyBLAS sgemm, 16 fma lanes over
//                                  KV positions; decode (one query): ggml_vec_dot_f32, 64 lanes
// A KV position's lane is its index in the sequence (llama.cpp's cache cell when one sequence
// starts at cell 0). llama.cpp pads the KV length to a multiple of 256 with masked cells; they
// add exact zeros, so stopping at the last visible position gives the same sums. The prefill /
// decode choice is made per sequence from its query count (llama.cpp makes it per batch), so a
// sequence's result never depends on what it is batched with.

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

// Where element e of ggml's head row sits in ours (see PagedAttentionArgs::qk_ggml_interleaved).
inline std::int64_t ggml_element(std::int64_t e, std::int64_t d, bool interleaved) {
    return interleaved ? (e % 2) * (d / 2) + e / 2 : e;
}

#if IS_GGML_AVX2
// (v[0] + v[4]) + (v[2] + v[6]) + ... : reduce16's last two steps on lanes taken two apart.
inline float sum_pairs(__m256 v) {
    const __m128 a = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}
#endif

// ggml_vec_dot_f32 as built for AVX-512, over ggml's element order: fma into 4 x 16 lanes over
// whole 64-element steps, lanes combined (a0 + a2) + (a1 + a3) and reduced; the tail as GCC
// vectorizes ggml's scalar `sumf += x[i] * y[i]` loop: rounded products added in order, 16 and
// then 8 at a time, the last few fused.
float dot(const float* x, const float* y, std::int64_t n, bool interleaved) {
    const std::int64_t np = n & ~std::int64_t{63};
    float s = 0.0f;
    if (np > 0) {
#if IS_GGML_AVX2
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
                        a[4 * j + k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + m),
                                                       _mm256_loadu_ps(y + m), a[4 * j + k]);
                    }
                }
            }
            // Combined lanes: even ones e[0..8), odd ones o[0..8). reduce16 of the interleaved
            // 16 adds lanes 8 apart, then 4 apart, then 2, then 1: e and o only meet last.
            const __m256 e = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
            const __m256 o = _mm256_add_ps(_mm256_add_ps(a[4], a[6]), _mm256_add_ps(a[5], a[7]));
            s = sum_pairs(e) + sum_pairs(o);
        } else {
            for (std::int64_t i = 0; i < np; i += 64) {
                for (int j = 0; j < 8; ++j) {
                    a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * j),
                                           _mm256_loadu_ps(y + i + 8 * j), a[j]);
                }
            }
            // a[2k] / a[2k+1] are lanes 0-7 / 8-15 of ggml's accumulator k.
            const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
            const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
            s = ggml::reduce16(lo, hi);
        }
#else
        float a[64] = {};
        for (std::int64_t i = 0; i < np; i += 64) {
            for (int e = 0; e < 64; ++e) {
                const std::int64_t m = ggml_element(i + e, n, interleaved);
                a[e] = std::fma(x[m], y[m], a[e]);
            }
        }
        float lanes[16];
        for (int l = 0; l < 16; ++l) lanes[l] = (a[l] + a[32 + l]) + (a[16 + l] + a[48 + l]);
        s = ggml::reduce16(lanes);
#endif
    }
    const auto product = [&](std::int64_t e) {
        const std::int64_t m = ggml_element(e, n, interleaved);
        return x[m] * y[m];
    };
    std::int64_t i = np;
    for (; n - i >= 16; i += 16) {
        for (int e = 0; e < 16; ++e) s += product(i + e);
    }
    if (n - i >= 8) {
        for (int e = 0; e < 8; ++e) s += product(i + e);
        i += 8;
    }
    for (; i < n; ++i) {
        const std::int64_t m = ggml_element(i, n, interleaved);
        s = std::fma(x[m], y[m], s);
    }
    return s;
}

// exp(s - max) of scores[0..count) in place, zero-padded to a multiple of 16, and their sum as
// ggml_vec_soft_max_f32 forms it: each 16 lanes reduced in f32, accumulated in double.
double exp_and_sum(float* scores, std::int64_t count, float max) {
    const std::int64_t padded = (count + 15) / 16 * 16;
    std::fill(scores + count, scores + padded, -std::numeric_limits<float>::infinity());
    double sum = 0.0;
    for (std::int64_t c = 0; c < padded; c += 16) {
        float* e = scores + c;
#if IS_GGML_AVX2
        const __m256 m = _mm256_set1_ps(max);
        const __m256 lo = ggml::expf8(_mm256_sub_ps(_mm256_loadu_ps(e), m));
        const __m256 hi = ggml::expf8(_mm256_sub_ps(_mm256_loadu_ps(e + 8), m));
        _mm256_storeu_ps(e, lo);
        _mm256_storeu_ps(e + 8, hi);
        sum += static_cast<double>(ggml::reduce16(lo, hi));
#else
        for (int l = 0; l < 16; ++l) e[l] = ggml::expf(e[l] - max);
        sum += static_cast<double>(ggml::reduce16(e));
#endif
    }
    return sum;
}

// out[i] = sum_j p[j] v_j[i] with `lanes` accumulators per output: position j feeds lane
// j % lanes by fma in position order. 16 lanes are tinyBLAS's; 64 are ggml_vec_dot_f32's four
// 16-lane accumulators, combined (a0 + a2) + (a1 + a3) before the reduction. `acc` holds
// lanes * d floats; lane l of output i is acc[l * d + i].
template <int Lanes>
void weighted_values(const float* p, std::int64_t count, const float* const* rows, std::int64_t d,
                     float* acc, float* out) {
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
    if constexpr (Lanes == 64) {
        for (int l = 0; l < 16; ++l) {
            float* a = acc + l * d;
            const float* b = acc + (16 + l) * d;
            const float* c = acc + (32 + l) * d;
            const float* e = acc + (48 + l) * d;
            for (std::int64_t i = 0; i < d; ++i) a[i] = (a[i] + c[i]) + (b[i] + e[i]);
        }
    }
    // reduce16 over the lanes of every output, several outputs at once.
    float t3[8];
    for (std::int64_t i = 0; i < d; ++i) {
        for (int k = 0; k < 8; ++k) t3[k] = acc[(8 + k) * d + i] + acc[k * d + i];
        const float t6[4] = {t3[4] + t3[0], t3[5] + t3[1], t3[6] + t3[2], t3[7] + t3[3]};
        out[i] = (t6[0] + t6[2]) + (t6[1] + t6[3]);
    }
}

}  // namespace

void paged_attention_ggml(const float* q, std::int64_t n, std::int64_t heads,
                          const PagedKvView& pages, const AttentionMeta& meta, float* out) {
    const std::int64_t d = pages.head_dim, bs = pages.block_size, kvh = pages.kv_heads;
    IS_CHECK(d <= kMaxHeadDim) << "head_dim " << d;
    IS_CHECK(heads % kvh == 0) << heads << " heads, " << kvh << " kv heads";
    IS_CHECK_EQ(meta.qo_indptr[meta.num_seqs], n);
    const std::int64_t token_stride = kvh * d;  // one token's row inside a page
    const std::int64_t items = n * heads;

#pragma omp parallel
    {
        // Per thread: scores (padded to 16), K/V row pointers, and the value accumulators.
        std::vector<float> scores;
        std::vector<const float*> k_rows, v_rows;
        std::vector<float> acc(static_cast<std::size_t>(64 * d));
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
                    k_rows[j] = pages.k + first + (j - p * bs) * token_stride;
                    v_rows[j] = pages.v + first + (j - p * bs) * token_stride;
                }
            }
            float max = -std::numeric_limits<float>::infinity();
            for (std::int64_t j = 0; j < visible; ++j) {
                scores[j] = dot(k_rows[j], q + item * d, d, meta.qk_ggml_interleaved) * meta.scale;
                max = std::max(max, scores[j]);
            }
            const double sum = exp_and_sum(scores.data(), visible, max);
            const float inv = static_cast<float>(1.0 / sum);
            for (std::int64_t j = 0; j < visible; ++j) scores[j] *= inv;
            float* o = out + item * d;
            if (a.q_len > 1) {
                weighted_values<16>(scores.data(), visible, v_rows.data(), d, acc.data(), o);
            } else {
                weighted_values<64>(scores.data(), visible, v_rows.data(), d, acc.data(), o);
            }
        }
    }
}

}  // namespace inferscale::backends::cpu
