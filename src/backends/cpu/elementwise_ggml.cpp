// RMSNorm, SwiGLU, GeGLU and the RoPE rotation with ggml's arithmetic (Arithmetic::Ggml): what
// llama.cpp's CPU backend computes for the same op, bit for bit (see ggml_arith.h). Built with
// -ffp-contract=off, so every fused multiply-add below is one ggml's binary performs too.

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/ggml_arith.h"
#include "base/check.h"

namespace inferscale::backends::cpu {

void rms_norm_ggml(const float* x, const float* weight, float eps, std::int64_t n,
                   std::int64_t hidden, float* out) {
    // ggml_compute_forward_rms_norm_f32: f32 squares summed in order in double, the mean
    // rounded to f32 before eps is added; then x * scale, then the weight (ggml_mul). Each row's
    // sum is one chain of dependent adds, so rows go kRows at a time to overlap their chains.
    constexpr std::int64_t kRows = 4;
#pragma omp parallel for schedule(static) if (n > 8)
    for (std::int64_t t0 = 0; t0 < n; t0 += kRows) {
        const std::int64_t rows = std::min(kRows, n - t0);
        double sum[kRows] = {};
        for (std::int64_t i = 0; i < hidden; ++i) {
            for (std::int64_t r = 0; r < rows; ++r) {
                const float v = x[(t0 + r) * hidden + i];
                sum[r] += static_cast<double>(v * v);
            }
        }
        for (std::int64_t r = 0; r < rows; ++r) {
            const float* row = x + (t0 + r) * hidden;
            const float mean = static_cast<float>(sum[r] / static_cast<double>(hidden));
            const float scale = 1.0f / std::sqrt(mean + eps);
            float* dst = out + (t0 + r) * hidden;
            for (std::int64_t i = 0; i < hidden; ++i) dst[i] = (row[i] * scale) * weight[i];
        }
    }
}

namespace {

template <GgmlIsa I>
void swiglu_with(const float* gate, const float* up, std::int64_t count, float* out) {
    // ggml_vec_swiglu_f32: silu(gate) * up, silu = x / (1 + ggml_v_expf(-x)), vectors of 16
    // (avx512) or 8 (avx2) lanes; count is a multiple of 16 for every model dimension.
#pragma omp parallel for schedule(static) if (count > 16384)
    for (std::int64_t i0 = 0; i0 < count; i0 += 4096) {
        const std::int64_t end = std::min(count, i0 + 4096);
        std::int64_t i = i0;
#if IS_GGML_AVX2
        for (; i + 8 <= end; i += 8) {
            const __m256 g = _mm256_loadu_ps(gate + i);
            const __m256 s = I == GgmlIsa::Avx512 ? ggml::avx512::silu8(g) : ggml::avx2::silu8(g);
            _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
        }
#endif
        for (; i < end; ++i) {
            const float s = I == GgmlIsa::Avx512 ? ggml::avx512::silu(gate[i])
                                                 : ggml::avx2::silu(gate[i]);
            out[i] = s * up[i];
        }
    }
}

}  // namespace

void swiglu_ggml(const float* gate, const float* up, std::int64_t count, float* out,
                 GgmlIsa isa) {
    if (isa == GgmlIsa::Avx512) {
        swiglu_with<GgmlIsa::Avx512>(gate, up, count, out);
    } else {
        swiglu_with<GgmlIsa::Avx2>(gate, up, count, out);
    }
}

void geglu_ggml(const float* gate, const float* up, std::int64_t count, float* out) {
    // ggml_table_gelu_f16, built once: f16 gelu of every f16 input.
    static const std::vector<std::uint16_t> table = [] {
        std::vector<std::uint16_t> t(1 << 16);
        for (std::size_t i = 0; i < t.size(); ++i) {
            const float x = tensor::f16_to_f32(static_cast<std::uint16_t>(i));
            t[i] = tensor::f32_to_f16(gelu_tanh(x));
        }
        return t;
    }();
#pragma omp parallel for schedule(static) if (count > 16384)
    for (std::int64_t i = 0; i < count; ++i) {
        const float x = gate[i];
        if (x <= -10.0f) {
            out[i] = 0.0f;
        } else if (x >= 10.0f) {
            out[i] = x * up[i];
        } else {
            out[i] = tensor::f16_to_f32(table[tensor::f32_to_f16(x)]) * up[i];
        }
    }
}

void rotate_ggml(const float* src, float* dst, std::int64_t half, const float* cos,
                 const float* sin) {
    // ggml's rotate_pairs for GGML_ROPE_TYPE_NORMAL as GCC compiles it when the op runs in place
    // (llama.cpp's graph allocator reuses Q's and K's buffers): x0 c - x1 s and x0 s + x1 c, each
    // with the first product fused. The pair (x0, x1) is (i, i + half) here: the loader undid
    // GGUF's interleaving of Q/K rows.
    for (std::int64_t i = 0; i < half; ++i) {
        const float x0 = src[i], x1 = src[i + half], c = cos[i], s = sin[i];
        dst[i] = std::fma(x0, c, -(x1 * s));
        dst[i + half] = std::fma(x0, s, x1 * c);
    }
}

}  // namespace inferscale::backends::cpu
