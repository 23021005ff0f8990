#pragma once
// The f32 arithmetic of ggml's CPU backend (llama.cpp) around the matmuls, reproduced bit for
// bit for the Ggml arithmetic of the CPU backend (see cpu_backend.h), in the two x86 builds of
// llama.cpp (ggml_isa.h):
//   avx512: 16-lane vectors, so reductions group elements by index mod 16 (or 64), and
//           ggml_v_expf's AVX-512 variant (scalef);
//   avx2:   8-lane vectors, reductions by index mod 8 (or 32), and ggml_v_expf's AVX2 variant
//           (2^n built in the exponent bits, a separate path past |n| > 126).
// Each is computed with AVX2 (an AVX-512 vector as two 8-lane halves) or, without AVX2, lane by
// lane: every form performs the same IEEE operations in the same order, so all give identical
// bits.
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

inline std::uint32_t float_bits(float x) {
    std::uint32_t b;
    std::memcpy(&b, &x, 4);
    return b;
}
inline float bits_float(std::uint32_t b) {
    float x;
    std::memcpy(&x, &b, 4);
    return x;
}

// The polynomial both variants share: j ~ exp(b) - 1 on the reduced argument b, its last term
// either fused (avx512) or a plain product (avx2).
inline float exp_poly(float b, float last) {
    const float u = b * b;
    return std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                             std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                    u, last);
}

// Sums of 8 lanes as the two AVX2 horizontal reductions ggml uses order them.
// hsum8: hsum_float_8, tinyBLAS's hsum and the softmax's sum: ((0+4)+(2+6)) + ((1+5)+(3+7)).
inline float hsum8(const float* v) {
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}
// hadd8: GGML_F32x8_REDUCE's two _mm_hadd_ps: ((0+4)+(1+5)) + ((2+6)+(3+7)).
inline float hadd8(const float* v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

namespace avx512 {

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
    const float p1 = bits_float(static_cast<std::uint32_t>(n1 + 127) << 23);
    const float p2 = bits_float(static_cast<std::uint32_t>(n2 + 127) << 23);
    return (x * p1) * p2;
}

// ggml_v_expf, AVX-512 variant: exp(x) with at most ~1.5 ulp error; 0 below about -104,
// +inf above about 88.7.
inline float expf(float x) {
    const float r = 0x1.8p23f;
    const float z = std::fma(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    if (std::isnan(n)) return n;
    if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : std::numeric_limits<float>::infinity();
    const float j = exp_poly(b, std::fma(0x1.ffffecp-1f, b, 1.0f));
    return scale_pow2(j, static_cast<int>(n));
}

// ggml_v_silu: x / (1 + exp(-x)).
inline float silu(float x) { return x / (1.0f + expf(0.0f - x)); }

}  // namespace avx512

namespace avx2 {

// ggml_v_expf, AVX2 variant. 2^n is k, made by moving the integer n (in z's low mantissa bits)
// into the exponent field; past |n| > 126 the scale is split into two factors s1 * s2, and past
// |n| > 192 the result is s1 * s1 (0 or +inf).
inline float expf(float x) {
    const float r = 0x1.8p23f;
    const float z = std::fma(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    const std::uint32_t e = float_bits(z) << 23;
    const float k = bits_float(e + 0x3f800000u);
    const float j = exp_poly(b, 0x1.ffffecp-1f * b);
    if (!(std::fabs(n) > 126.0f)) return std::fma(j, k, k);
    const std::uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = bits_float(g + 0x7f000000u);
    const float s2 = bits_float(e - g);
    if (std::fabs(n) > 192.0f) return s1 * s1;
    return std::fma(s2, j, s2) * s1;
}

inline float silu(float x) { return x / (1.0f + expf(0.0f - x)); }

}  // namespace avx2

#if IS_GGML_AVX2

inline __m256 exp_poly8(__m256 b, __m256 last) {
    const __m256 u = _mm256_mul_ps(b, b);
    return _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
                                        _mm256_set1_ps(0x1.573e2ep-5f)),
                        u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
                                        _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, last);
}

// n (the nearest integer of x log2 e, held in z's low mantissa bits) and the reduced b.
struct ExpSplit {
    __m256 z, n, b;
};
inline ExpSplit exp_split8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    return {z, n, b};
}

inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// hsum8 of the 8 lanes of v.
inline float hsum8(__m256 v) {
    const __m128 a = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}

// hadd8 of the 8 lanes of v.
inline float hadd8(__m256 v) {
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

namespace avx512 {

// reduce16 of the 16 lanes lo[0..8) hi[0..8).
inline float reduce16(__m256 lo, __m256 hi) {
    const __m256 t3 = _mm256_add_ps(hi, lo);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
    return _mm_cvtss_f32(_mm_add_ss(t8, _mm_movehdup_ps(t8)));
}

// expf on 8 lanes, lane for lane the scalar avx512::expf.
inline __m256 expf8(__m256 x) {
    const ExpSplit s = exp_split8(x);
    const __m256 j = exp_poly8(
        s.b, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), s.b, _mm256_set1_ps(1.0f)));
    const __m256 big = _mm256_cmp_ps(abs8(s.n), _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    // Lanes with |n| > 192 are replaced below; clamp them so the exponent arithmetic stays sane.
    const __m256i ni = _mm256_cvtps_epi32(_mm256_blendv_ps(s.n, _mm256_setzero_ps(), big));
    const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    const __m256 res = _mm256_mul_ps(_mm256_mul_ps(j, p1), p2);
    if (_mm256_movemask_ps(big) == 0) return res;
    const __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(std::numeric_limits<float>::infinity()),
                                        _mm256_setzero_ps(),
                                        _mm256_cmp_ps(s.n, _mm256_setzero_ps(), _CMP_LE_OQ));
    return _mm256_blendv_ps(res, alt, big);
}

inline __m256 silu8(__m256 x) {
    const __m256 e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

}  // namespace avx512

namespace avx2 {

// expf on 8 lanes, lane for lane the scalar avx2::expf.
inline __m256 expf8(__m256 x) {
    const ExpSplit s = exp_split8(x);
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(s.z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
    const __m256 j = exp_poly8(s.b, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), s.b));
    const __m256 wide = _mm256_cmp_ps(abs8(s.n), _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 near = _mm256_fmadd_ps(j, k, k);
    if (_mm256_movemask_ps(wide) == 0) return near;
    const __m256i g = _mm256_and_si256(
        _mm256_castps_si256(_mm256_cmp_ps(s.n, _mm256_setzero_ps(), _CMP_LE_OQ)),
        _mm256_set1_epi32(static_cast<int>(0x82000000u)));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 far = _mm256_cmp_ps(abs8(s.n), _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 split = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    return _mm256_blendv_ps(_mm256_blendv_ps(near, split, wide), _mm256_mul_ps(s1, s1), far);
}

inline __m256 silu8(__m256 x) {
    const __m256 e = expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

}  // namespace avx2

#endif

}  // namespace inferscale::backends::cpu::ggml
