#include "engine/kv_scales.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/local_model.h"
#include "memory/kv_chunk.h"

namespace inferscale::engine {
namespace {

// Varied prose, figures and code, so every head sees more than one kind of token.
constexpr const char* kCalibrationText =
    "The user moved to Lisbon in March 2023 and works as a nurse at the city hospital. "
    "She has two cats, Mango and Pepper, and is allergic to peanuts. Her brother Tom plays "
    "the cello; their parents live near Porto. Meeting notes: budget 14,500 EUR, deadline "
    "2024-06-30, owner: Ana (ana@example.org). Q: What is 17 * 23? A: 391.\n"
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    "Le chat dort sur le canapé. Der Zug fährt um 8:15 Uhr ab. 東京は日本の首都です。 "
    "{\"name\": \"Bob\", \"age\": 42, \"tags\": [\"chess\", \"hiking\"]}";

constexpr float kE4m3Max = 448.0f;
constexpr float kSmallest = 1e-6f;  // a head that was all zeros still gets a usable scale

}  // namespace

std::vector<float> kv_scales_from_rows(std::span<const float> k, std::span<const float> v,
                                       std::int64_t num_layers, std::int64_t rows,
                                       std::int64_t num_kv_heads, std::int64_t head_dim) {
    const std::int64_t half = head_dim / 2;
    std::vector<float> scales(static_cast<std::size_t>(num_layers * 2 * num_kv_heads));
    for (std::int64_t l = 0; l < num_layers; ++l)
        for (std::int64_t h = 0; h < num_kv_heads; ++h) {
            float k_max = kSmallest, v_max = kSmallest;
            for (std::int64_t r = 0; r < rows; ++r) {
                const std::size_t at =
                    static_cast<std::size_t>(((l * rows + r) * num_kv_heads + h) * head_dim);
                for (std::int64_t i = 0; i < half; ++i)
                    k_max = std::max(k_max, std::hypot(k[at + i], k[at + i + half]));
                for (std::int64_t i = 0; i < head_dim; ++i)
                    v_max = std::max(v_max, std::abs(v[at + i]));
            }
            scales[static_cast<std::size_t>((l * 2) * num_kv_heads + h)] =
                k_max * kScaleMargin / kE4m3Max;
            scales[static_cast<std::size_t>((l * 2 + 1) * num_kv_heads + h)] =
                v_max * kScaleMargin / kE4m3Max;
        }
    return scales;
}

Status calibrate_kv_scales(LocalModel& lm) {
    kv::KvStorage& kv = lm.kv();
    IS_CHECK(kv.fp8()) << "calibrate_kv_scales: the KV cache is not FP8";
    const model::ModelConfig& c = lm.config();
    std::vector<std::int32_t> tokens = lm.tokenizer().encode(kCalibrationText);
    const std::int64_t limit =
        std::min<std::int64_t>(lm.workspace().limits.max_tokens, lm.max_context());
    if (static_cast<std::int64_t>(tokens.size()) > limit)
        tokens.resize(static_cast<std::size_t>(limit));
    const auto n = static_cast<std::int64_t>(tokens.size());
    const std::int64_t bs = lm.block_size();
    kv::ScratchBlocks scratch(lm.blocks());
    std::vector<kv::BlockId> blocks;
    if (!scratch.take(static_cast<std::int32_t>((n + bs - 1) / bs), blocks))
        return make_error("FP8 KV calibration: not enough free KV blocks");

    tensor::Backend& be = lm.backend();
    const tensor::DType act = be.activation_dtype();
    const std::int64_t plane = c.num_layers * n * c.num_kv_heads * c.head_dim;
    const std::size_t plane_bytes = static_cast<std::size_t>(plane) * tensor::dtype_size(act);
    tensor::Buffer capture_buffer = IS_TRY(be.allocate(2 * plane_bytes));
    std::vector<std::int32_t> rows(static_cast<std::size_t>(n)), positions(rows.size());
    std::iota(rows.begin(), rows.end(), 0);
    std::iota(positions.begin(), positions.end(), 0);
    model::KvCapture capture;
    capture.rows = rows;
    capture.k = capture_buffer.view(act, {c.num_layers, n, c.num_kv_heads, c.head_dim});
    capture.v =
        capture_buffer.view(act, {c.num_layers, n, c.num_kv_heads, c.head_dim}, plane_bytes);
    const model::BatchSequence seq{static_cast<std::int32_t>(n), static_cast<std::int32_t>(n),
                                   blocks};
    model::ForwardBatch batch;
    batch.token_ids = tokens;
    batch.positions = positions;
    batch.sequences = {&seq, 1};
    batch.logits = model::LogitsSelection::None;
    batch.capture = &capture;
    IS_RETURN_IF_ERROR(lm.model().forward(batch, kv, lm.workspace(), {}));

    std::vector<std::uint8_t> raw(2 * plane_bytes);
    be.copy_to_host(
        raw.data(),
        capture_buffer.view(tensor::DType::I32, {static_cast<std::int64_t>(raw.size() / 4)}),
        raw.size());
    std::vector<float> k(static_cast<std::size_t>(plane)), v(k.size());
    tensor::convert_to_f32(act, raw.data(), k.data(), k.size());
    tensor::convert_to_f32(act, raw.data() + plane_bytes, v.data(), v.size());
    kv.set_scales(kv_scales_from_rows(k, v, c.num_layers, n, c.num_kv_heads, c.head_dim));
    return {};
}

std::string kv_scales_digest(std::span<const float> scales) {
    return memory::text_hash(
               std::string_view(reinterpret_cast<const char*>(scales.data()), scales.size_bytes()))
        .substr(0, 16);
}

}  // namespace inferscale::engine
