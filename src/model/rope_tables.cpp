#include "model/rope_tables.h"

#include <cmath>

#include "base/check.h"

namespace inferscale::model {

RopeParams rope_params(const ModelConfig& config) {
    return RopeParams{config.rope_theta, config.head_dim, config.rope_scaling,
                      config.rope_freq_factors};
}

std::vector<float> rope_inv_freq(const RopeParams& p) {
    IS_CHECK(p.head_dim > 0 && p.head_dim % 2 == 0) << "head_dim " << p.head_dim;
    const std::int64_t half = p.head_dim / 2;
    std::vector<float> inv(static_cast<std::size_t>(half));
    // transformers: 1 / base ** (arange(0, dim, 2).float() / dim), all in f32.
    for (std::int64_t i = 0; i < half; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(p.head_dim);
        inv[i] = 1.0f / std::pow(p.theta, exponent);
    }
    if (!p.freq_factors.empty()) {
        IS_CHECK(p.scaling.factor == 0.0f) << "rope frequency factors with llama3 scaling";
        IS_CHECK(static_cast<std::int64_t>(p.freq_factors.size()) == half)
            << p.freq_factors.size() << " rope frequency factors for head_dim " << p.head_dim;
        for (std::int64_t i = 0; i < half; ++i) inv[i] /= p.freq_factors[i];
        return inv;
    }
    if (p.scaling.factor == 0.0f) return inv;

    // llama3: long wavelengths are slowed by `factor`, short ones kept, the band between
    // interpolated smoothly.
    const float factor = p.scaling.factor;
    const float low = p.scaling.low_freq_factor, high = p.scaling.high_freq_factor;
    const float old_ctx = static_cast<float>(p.scaling.original_max_position_embeddings);
    const float low_freq_wavelen = old_ctx / low;
    const float high_freq_wavelen = old_ctx / high;
    constexpr float kTwoPi = 6.283185307179586f;
    for (std::int64_t i = 0; i < half; ++i) {
        const float wavelen = kTwoPi / inv[i];
        float scaled = wavelen > low_freq_wavelen ? inv[i] / factor : inv[i];
        const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
        if (medium) {
            const float smooth = (old_ctx / wavelen - low) / (high - low);
            scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
        }
        inv[i] = scaled;
    }
    return inv;
}

HostRopeTables make_rope_tables(const RopeParams& params, std::int64_t max_positions) {
    IS_CHECK(max_positions > 0) << "max_positions " << max_positions;
    const std::vector<float> inv = rope_inv_freq(params);
    HostRopeTables t;
    t.max_positions = max_positions;
    t.half_dim = static_cast<std::int64_t>(inv.size());
    t.cos.resize(static_cast<std::size_t>(max_positions * t.half_dim));
    t.sin.resize(t.cos.size());
    if (params.ggml_angles) {
        IS_CHECK(params.scaling.factor == 0.0f) << "ggml angles with rope scaling";
        // ggml_rope_cache_init: the angle of pair i is pos * s^i, one f32 multiply per step; a
        // frequency factor divides that rounded product (not s^i), so the f32 result is ggml's.
        const float step = std::pow(params.theta, -2.0f / static_cast<float>(params.head_dim));
        const std::vector<float>& ff = params.freq_factors;
        for (std::int64_t pos = 0; pos < max_positions; ++pos) {
            float angle = static_cast<float>(pos);
            for (std::int64_t i = 0; i < t.half_dim; ++i, angle *= step) {
                const float a = ff.empty() ? angle : angle / ff[i];
                t.cos[pos * t.half_dim + i] = std::cos(a);
                t.sin[pos * t.half_dim + i] = std::sin(a);
            }
        }
        return t;
    }
    for (std::int64_t pos = 0; pos < max_positions; ++pos) {
        for (std::int64_t i = 0; i < t.half_dim; ++i) {
            // The angle is rounded to f32 before cos/sin, as in the reference.
            const float angle = static_cast<float>(pos) * inv[i];
            t.cos[pos * t.half_dim + i] = std::cos(angle);
            t.sin[pos * t.half_dim + i] = std::sin(angle);
        }
    }
    return t;
}

}  // namespace inferscale::model
