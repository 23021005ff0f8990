#pragma once
// The f32 arithmetic of ggml's CPU backend (llama.cpp) around the matmuls, reproduced bit for
// bit for the Ggml arithmetic of the CPU backend (see cpu_backend.h). llama.cpp compiles ggml
// for the host it is built on (-march=native); what is reproduced here is its AVX-512 build,
// the one the parity test meets on x86 servers: 16-lane vectors, so reductions group elements
// by index mod 16 (or 64), and ggml_v_expf's AVX-512 variant. We compute the same values with
// AVX2 (two 8-lane halves per 16-lane vector) or, without AVX2, lane by lane: every variant
// performs the same IEEE operations in the same order, so all give identical bits.
//
// Include only from files built with -ffp-contract=off: a compiler-fused multiply-add would
// round differently from ggml.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define IS_GGML_AVX2 1
#endif

namespace inferscale::backends::cpu::ggml {

// GCC's _mm512_reduce_add_ps over lanes v[0..16): halves, then quarters, then pairs.
inline float reduce16(const float* v) {
    float t3[8], t6[4];
    for (int i = 0; i < 8; ++i) t3[i] = v[8 + i] + v[i];
    for (int i = 0; i < 4; ++i) t6[i] = t3[4 + i] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

// x * 2^n rounded once, for integral n with |n| <= 192 (AVX-512's scalef): split so that both
// factors are normal floats and the first product is exact.
inline float scale_pow2(float x, int n) {
    const int n1 = n >> 1, n2 = n - n1;
    float p1, p2;
    const std::uint32_t b1 = static_cast<std::uint32_t>(n1 + 127) << 23;
    const std::uint32_t b2 = static_cast<std::uint32_t>(n2 + 127) << 23;
    std::memcpy(&p1, &b1, 4);
    std::memcpy(&p2, &b2, 4);
    return (x * p1) * p2;
}

// ggml_v_expf (AVX-512 variant): exp(x) with at most ~1.5 ulp error; 0 below about -104,
// +inf above about 88.7.
inline float expf(float x) {
    const float r = 0x1.8p23f;
    const float z = std::fma(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    if (std::isnan(n)) return n;
    if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : std::numeric_limits<float>::infinity();
    const float u = b * b;
    const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                      std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                             u, std::fma(0x1.ffffecp-1f, b, 1.0f));
    return scale_pow2(j, static_cast<int>(n));
}

// ggml_v_silu: x / (1 + exp(-x)).
inline float silu(float x) { return x / (1.0f + expf(0.0f - x)); }

#if IS_GGML_AVX2

// reduce16 of the 16 lanes lo[0..8) hi[0..8).
inline float reduce16(__m256 lo, __m256 hi) {
    const __m256 t3 = _mm256_add_ps(hi, lo);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
    return _mm_cvtss_f32(_mm_add_ss(t8, _mm_movehdup_ps(t8)));
}

// expf on 8 lanes, lane for lane the scalar expf above.
inline __m256 expf8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
                                        _mm256_set1_ps(0x1.573e2ep-5f)),
                        u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
                                        _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    // Lanes with |n| > 192 are replaced below; clamp them so the exponent arithmetic stays sane.
    const __m256i ni = _mm256_cvtps_epi32(_mm256_blendv_ps(n, _mm256_setzero_ps(), big));
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    const __m256 res = _mm256_mul_ps(_mm256_mul_ps(j, p1), p2);
    if (_mm256_movemask_ps(big) == 0) return res;
    const __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(std::numeric_limits<float>::infinity()),
                                        _mm256_setzero_ps(),
                                        _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ));
    return _mm256_blendv_ps(res, alt, big);
}

inline __m256 silu8(__m256 x) {
    const __m256 e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

#endif

}  // namespace inferscale::backends::cpu::ggml
