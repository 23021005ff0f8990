// Linear layers. Prefill (many rows) is compute-bound: OpenBLAS sgemm. Decode (a few rows) is
// memory-bound: each weight row is streamed once and dotted with every input row while it sits
// in L1, and 16-bit weights are widened in registers so they cost half the bandwidth of f32.

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "base/check.h"

namespace inferscale::backends::cpu {
namespace {

using tensor::DType;

// Up to this many rows the GEMV path wins: it reads the weight once, and sgemm's packing
// overhead dominates for skinny problems.
constexpr std::int64_t kGemvMaxRows = 4;
// Weight rows widened to f32 per sgemm call when the weight is 16-bit.
constexpr std::int64_t kConvertChunkRows = 256;

// Weight element i widened to f32 (W: float, or the 16-bit dtype's bits).
template <class W>
float weight_at(const W* w, std::int64_t i, DType dtype) {
    if constexpr (sizeof(W) == 4) {
        return w[i];
    } else {
        return dtype == DType::F16 ? tensor::f16_to_f32(w[i]) : tensor::bf16_to_f32(w[i]);
    }
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const std::uint16_t* p, DType dtype) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if (dtype == DType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Dots one weight row with `n` input rows. Two accumulators per input row hide FMA latency.
template <class W>
void row_dots(const W* w, DType dtype, const float* x, std::int64_t n, std::int64_t in,
              float* dots) {
    __m256 acc0[kGemvMaxRows], acc1[kGemvMaxRows];
    for (std::int64_t t = 0; t < n; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
    std::int64_t i = 0;
    for (; i + 16 <= in; i += 16) {
        __m256 w0, w1;
        if constexpr (sizeof(W) == 4) {
            w0 = load8(w + i);
            w1 = load8(w + i + 8);
        } else {
            w0 = load8(w + i, dtype);
            w1 = load8(w + i + 8, dtype);
        }
        for (std::int64_t t = 0; t < n; ++t) {
            acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * in + i), acc0[t]);
            acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + t * in + i + 8), acc1[t]);
        }
    }
    for (std::int64_t t = 0; t < n; ++t) dots[t] = hsum(_mm256_add_ps(acc0[t], acc1[t]));
    for (; i < in; ++i) {
        const float wi = weight_at(w, i, dtype);
        for (std::int64_t t = 0; t < n; ++t) dots[t] += wi * x[t * in + i];
    }
}

#else  // portable fallback (Debug/ASan builds without -march)

template <class W>
void row_dots(const W* w, DType dtype, const float* x, std::int64_t n, std::int64_t in,
              float* dots) {
    for (std::int64_t t = 0; t < n; ++t) dots[t] = 0.0f;
    for (std::int64_t i = 0; i < in; ++i) {
        const float wi = weight_at(w, i, dtype);
        for (std::int64_t t = 0; t < n; ++t) dots[t] += wi * x[t * in + i];
    }
}

#endif

template <class W>
void gemv(const float* x, std::int64_t n, std::int64_t in, const W* w, DType dtype,
          std::int64_t out, const float* bias, float* y) {
#pragma omp parallel for schedule(static)
    for (std::int64_t o = 0; o < out; ++o) {
        float dots[kGemvMaxRows];
        row_dots(w + o * in, dtype, x, n, in, dots);
        const float b = bias != nullptr ? bias[o] : 0.0f;
        for (std::int64_t t = 0; t < n; ++t) y[t * out + o] = dots[t] + b;
    }
}

void add_bias(float* y, std::int64_t n, std::int64_t out, const float* bias) {
    if (bias == nullptr) return;
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < n; ++t) {
        float* row = y + t * out;
        for (std::int64_t o = 0; o < out; ++o) row[o] += bias[o];
    }
}

}  // namespace

void linear(const float* x, std::int64_t n, std::int64_t in, const void* w, DType w_dtype,
            std::int64_t out, const float* bias, float* y, std::vector<float>& scratch) {
    if (n == 0) return;
    if (n <= kGemvMaxRows) {
        if (w_dtype == DType::F32) {
            gemv(x, n, in, static_cast<const float*>(w), w_dtype, out, bias, y);
        } else {
            gemv(x, n, in, static_cast<const std::uint16_t*>(w), w_dtype, out, bias, y);
        }
        return;
    }
    // One threading runtime only: OpenBLAS runs single-threaded inside our OpenMP team, each
    // thread taking a slice of the output columns. (OpenBLAS's own pthreads would compete with
    // spinning OpenMP workers and halve throughput on a small machine.)
    const int m = static_cast<int>(n), k = static_cast<int>(in), ldc = static_cast<int>(out);
    const std::int64_t chunk = std::min(kConvertChunkRows, out);
    const bool widen = w_dtype != DType::F32;
    const int max_threads = omp_get_max_threads();
    if (widen && static_cast<std::int64_t>(scratch.size()) < max_threads * chunk * in) {
        scratch.resize(static_cast<std::size_t>(max_threads * chunk * in));
    }
#pragma omp parallel
    {
        const std::int64_t threads = omp_get_num_threads(), tid = omp_get_thread_num();
        // Column slices rounded to 16 so every slice starts on a cache line of y.
        const std::int64_t per = (out + threads * 16 - 1) / (threads * 16) * 16;
        const std::int64_t lo = std::min(out, tid * per), hi = std::min(out, lo + per);
        if (!widen) {
            if (hi > lo) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, static_cast<int>(hi - lo),
                            k, 1.0f, x, k, static_cast<const float*>(w) + lo * in, k, 0.0f, y + lo,
                            ldc);
            }
        } else {
            // 16-bit weights: widen a chunk of rows, multiply it into the matching columns.
            const auto* w16 = static_cast<const std::uint16_t*>(w);
            float* buf = scratch.data() + tid * chunk * in;
            for (std::int64_t r0 = lo; r0 < hi; r0 += chunk) {
                const std::int64_t rows = std::min(chunk, hi - r0);
                tensor::convert_to_f32(w_dtype, w16 + r0 * in, buf,
                                       static_cast<std::size_t>(rows * in));
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, static_cast<int>(rows), k,
                            1.0f, x, k, buf, k, 0.0f, y + r0, ldc);
            }
        }
    }
    add_bias(y, n, out, bias);
}

}  // namespace inferscale::backends::cpu
