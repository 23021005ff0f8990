// The encoder ops (BERT-style models): LayerNorm with bias, exact GELU, and bidirectional
// attention over packed sequences. Plain f32 in transformers' order of operations, so the
// sentence encoder matches sentence-transformers at fp32 tolerances.

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "base/check.h"

namespace inferscale::backends::cpu {

void layer_norm(const float* x, const float* weight, const float* bias, float eps, std::int64_t n,
                std::int64_t hidden, float* out) {
#pragma omp parallel for schedule(static) if (n > 8)
    for (std::int64_t t = 0; t < n; ++t) {
        const float* row = x + t * hidden;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t i = 0; i < hidden; ++i) sum += row[i];
        const float mean = sum / static_cast<float>(hidden);
        float var = 0.0f;
#pragma omp simd reduction(+ : var)
        for (std::int64_t i = 0; i < hidden; ++i) var += (row[i] - mean) * (row[i] - mean);
        const float inv = 1.0f / std::sqrt(var / static_cast<float>(hidden) + eps);
        float* dst = out + t * hidden;
        for (std::int64_t i = 0; i < hidden; ++i)
            dst[i] = (row[i] - mean) * inv * weight[i] + bias[i];
    }
}

void gelu_erf(float* x, std::int64_t count) {
    constexpr float kInvSqrt2 = 0.7071067811865476f;
#pragma omp parallel for schedule(static) if (count > 16384)
    for (std::int64_t i = 0; i < count; ++i)
        x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void sequence_attention(const float* q, const float* k, const float* v, std::int64_t heads,
                        std::int64_t head_dim, const std::int32_t* seq_indptr, int num_seqs,
                        float scale, float* out) {
    const std::int64_t row = heads * head_dim;
    const std::int64_t n = seq_indptr[num_seqs];
#pragma omp parallel
    {
        std::vector<float> scores;  // one query's scores, grown to the longest sequence
#pragma omp for schedule(dynamic, 4)
        for (std::int64_t item = 0; item < n * heads; ++item) {
            const std::int64_t t = item / heads, h = item % heads;
            const std::int32_t* seq = std::upper_bound(seq_indptr, seq_indptr + num_seqs + 1,
                                                       static_cast<std::int32_t>(t)) -
                                      1;
            const std::int64_t begin = seq[0], len = seq[1] - seq[0];
            scores.resize(static_cast<std::size_t>(len));
            const float* qh = q + t * row + h * head_dim;
            float max_score = -INFINITY;
            for (std::int64_t j = 0; j < len; ++j) {
                const float* kh = k + (begin + j) * row + h * head_dim;
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (std::int64_t e = 0; e < head_dim; ++e) dot += qh[e] * kh[e];
                scores[j] = dot * scale;
                max_score = std::max(max_score, scores[j]);
            }
            float total = 0.0f;
            for (std::int64_t j = 0; j < len; ++j) {
                scores[j] = std::exp(scores[j] - max_score);
                total += scores[j];
            }
            float* oh = out + t * row + h * head_dim;
            std::fill(oh, oh + head_dim, 0.0f);
            for (std::int64_t j = 0; j < len; ++j) {
                const float p = scores[j] / total;
                const float* vh = v + (begin + j) * row + h * head_dim;
#pragma omp simd
                for (std::int64_t e = 0; e < head_dim; ++e) oh[e] += p * vh[e];
            }
        }
    }
}

}  // namespace inferscale::backends::cpu
