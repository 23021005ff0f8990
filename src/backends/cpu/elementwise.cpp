// Row-wise and element-wise ops. They are cheap next to the matmuls, so they stay simple loops
// that the compiler vectorizes; only the row loops are parallel.

#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "base/check.h"

namespace inferscale::backends::cpu {

void embedding(const void* table, tensor::DType dtype, std::int64_t vocab, std::int64_t hidden,
               const std::int32_t* ids, std::int64_t n, float* out) {
    const std::size_t row_bytes = tensor::dtype_row_bytes(dtype, hidden);
    for (std::int64_t i = 0; i < n; ++i) {
        IS_CHECK(ids[i] >= 0 && ids[i] < vocab) << "token id " << ids[i] << " vocab " << vocab;
        const void* row = static_cast<const char*>(table) + ids[i] * row_bytes;
        tensor::convert_to_f32(dtype, row, out + i * hidden, static_cast<std::size_t>(hidden));
    }
}

void gather_rows(const float* x, std::int64_t n, std::int64_t k, const std::int32_t* rows,
                 std::int64_t m, float* out) {
    for (std::int64_t i = 0; i < m; ++i) {
        IS_CHECK(rows[i] >= 0 && rows[i] < n) << "row " << rows[i] << " of " << n;
        std::memcpy(out + i * k, x + rows[i] * k, static_cast<std::size_t>(k) * sizeof(float));
    }
}

void rms_norm(const float* x, const float* weight, float eps, std::int64_t n, std::int64_t hidden,
              float* out) {
#pragma omp parallel for schedule(static) if (n > 8)
    for (std::int64_t t = 0; t < n; ++t) {
        const float* row = x + t * hidden;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t i = 0; i < hidden; ++i) sum += row[i] * row[i];
        // Same order as transformers: normalize in f32, then scale by the weight.
        const float inv = 1.0f / std::sqrt(sum / static_cast<float>(hidden) + eps);
        float* dst = out + t * hidden;
        for (std::int64_t i = 0; i < hidden; ++i) dst[i] = weight[i] * (row[i] * inv);
    }
}

void add(float* x, const float* y, std::int64_t count) {
#pragma omp simd
    for (std::int64_t i = 0; i < count; ++i) x[i] += y[i];
}

void swiglu(const float* gate, const float* up, std::int64_t count, float* out) {
#pragma omp parallel for schedule(static) if (count > 16384)
    for (std::int64_t i = 0; i < count; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

float gelu_tanh(float x) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
}

void geglu(const float* gate, const float* up, std::int64_t count, float* out) {
#pragma omp parallel for schedule(static) if (count > 16384)
    for (std::int64_t i = 0; i < count; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
}

void scale(float* x, std::int64_t count, float factor) {
#pragma omp simd
    for (std::int64_t i = 0; i < count; ++i) x[i] *= factor;
}

void rotate_head(const float* src, float* dst, std::int64_t half, const float* cos,
                 const float* sin, bool ggml) {
    if (ggml) {
        rotate_ggml(src, dst, half, cos, sin);
        return;
    }
    // rotate_half: (x1, x2) -> (x1 c - x2 s, x2 c + x1 s)
#pragma omp simd
    for (std::int64_t i = 0; i < half; ++i) {
        const float a = src[i], b = src[i + half];
        dst[i] = a * cos[i] - b * sin[i];
        dst[i + half] = b * cos[i] + a * sin[i];
    }
}

void rope(float* x, std::int64_t n, std::int64_t heads, std::int64_t head_dim,
          const std::int32_t* positions, const float* cos, const float* sin,
          std::int64_t max_positions, bool ggml) {
    const std::int64_t half = head_dim / 2;
    for (std::int64_t t = 0; t < n; ++t) {
        const std::int32_t pos = positions[t];
        IS_CHECK(pos >= 0 && pos < max_positions)
            << "position " << pos << " table " << max_positions;
        const float* c = cos + pos * half;
        const float* s = sin + pos * half;
        for (std::int64_t h = 0; h < heads; ++h) {
            float* v = x + (t * heads + h) * head_dim;
            rotate_head(v, v, half, c, s, ggml);
        }
    }
}

}  // namespace inferscale::backends::cpu
