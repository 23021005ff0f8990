// LlamaModel::create_random: benchmark weights at real shapes, made on the backend by
// Backend::fill_random so an 8B model costs no host memory and no upload.

#include <cmath>
#include <optional>
#include <string>

#include "model/llama_model.h"
#include "tensor/quantized.h"

namespace inferscale::model {
namespace {

// Hands out one weight after another, each with its own seed (the stream index mixed into the
// model seed), so adding a tensor never shifts the values of the ones before it.
class RandomWeights {
  public:
    RandomWeights(tensor::Backend& backend, std::uint64_t seed) : backend_(backend), seed_(seed) {}

    // U(+-scale) + offset in the backend's activation dtype.
    Result<tensor::DeviceWeight> make(std::initializer_list<std::int64_t> shape, float scale,
                                      float offset = 0.0f) {
        const tensor::DType dtype = backend_.activation_dtype();
        std::int64_t count = 1;
        for (std::int64_t d : shape) count *= d;
        tensor::DeviceWeight w;
        w.storage = IS_TRY(backend_.allocate(static_cast<std::size_t>(count) *
                                             tensor::dtype_size(dtype)));
        w.tensor = w.storage.view(dtype, shape);
        backend_.fill_random(w.tensor, tensor_seed(next_++), scale, offset);
        return w;
    }

    // U(+-1/sqrt(in)): each output of x W^T keeps roughly the rms of x (times 1/sqrt(3)).
    // A block type gets random blocks of about that span.
    Result<tensor::DeviceWeight> matrix(std::int64_t out, std::int64_t in,
                                        std::optional<tensor::DType> blocks = std::nullopt) {
        const float scale = 1.0f / std::sqrt(static_cast<float>(in));
        if (!blocks || !tensor::is_block_quantized(*blocks)) return make({out, in}, scale);
        tensor::DeviceWeight w;
        w.storage = IS_TRY(backend_.allocate(tensor::dtype_row_bytes(*blocks, in) *
                                             static_cast<std::size_t>(out)));
        w.tensor = tensor::Tensor(w.storage.data(), *blocks, {out, in}, backend_.device());
        backend_.fill_random(w.tensor, tensor_seed(next_++), scale, 0.0f);
        return w;
    }

  private:
    std::uint64_t tensor_seed(std::uint64_t stream) const {
        return seed_ ^ (stream * 0xD1B54A32D192ED03ull + 0x8BB84B93962EACC9ull);
    }

    tensor::Backend& backend_;
    std::uint64_t seed_;
    std::uint64_t next_ = 0;
};

}  // namespace

Result<LlamaModel> LlamaModel::create_random(tensor::Backend& backend, const ModelConfig& c,
                                             std::uint64_t seed,
                                             const LlamaModelOptions& options) {
    LlamaModel m = IS_TRY(create_shell(backend, c, options));
    const std::int64_t h = c.hidden_size, q_dim = c.num_heads * c.head_dim,
                       kv_dim = c.num_kv_heads * c.head_dim, ffn = c.intermediate_size;
    RandomWeights rw(backend, seed);
    const WeightQuant quant = options.random_quant;
    if (quant != WeightQuant::None &&
        (h % tensor::kSuperBlock != 0 || ffn % tensor::kSuperBlock != 0 ||
         q_dim % tensor::kSuperBlock != 0)) {
        return make_error("random weights in a K-quant mix need the hidden, intermediate and "
                          "attention sizes to be multiples of 256 (here " + std::to_string(h) +
                          ", " + std::to_string(ffn) + ", " + std::to_string(q_dim) + ")");
    }
    const std::int64_t layers = c.num_layers;
    const auto dtype = [&](WeightRole role, std::int64_t layer) -> std::optional<tensor::DType> {
        if (quant == WeightQuant::None) return std::nullopt;
        return quantized_weight_dtype(quant, role, layer, layers, backend.activation_dtype());
    };
    // Embedding rows of rms ~0.58; the first norm rescales them anyway.
    m.embed_ = quant == WeightQuant::None
                   ? IS_TRY(rw.make({c.vocab_size, h}, 1.0f))
                   : IS_TRY(rw.matrix(c.vocab_size, h, dtype(WeightRole::Embedding, 0)));
    m.final_norm_ = IS_TRY(rw.make({h}, 0.0f, 1.0f));
    if (!c.tie_word_embeddings) {
        m.lm_head_ = IS_TRY(rw.matrix(c.vocab_size, h, dtype(WeightRole::Output, 0)));
    }
    m.layers_.resize(static_cast<std::size_t>(layers));
    for (std::int64_t i = 0; i < layers; ++i) {
        LayerWeights& l = m.layers_[static_cast<std::size_t>(i)];
        l.input_norm = IS_TRY(rw.make({h}, 0.0f, 1.0f));
        const std::int64_t qkv_rows[] = {q_dim, kv_dim, kv_dim};
        if (quant == WeightQuant::None) {
            l.qkv = split_rows(IS_TRY(rw.matrix(q_dim + 2 * kv_dim, h)), qkv_rows);
        } else {  // v may take another block type than q and k: one weight each
            const WeightRole roles[] = {WeightRole::Query, WeightRole::Key, WeightRole::Value};
            for (int p = 0; p < 3; ++p) {
                l.qkv.storage.push_back(IS_TRY(rw.matrix(qkv_rows[p], h, dtype(roles[p], i))));
                l.qkv.parts.push_back(l.qkv.storage.back().tensor);
            }
        }
        l.o = IS_TRY(rw.matrix(h, q_dim, dtype(WeightRole::AttentionOutput, i)));
        if (c.attention_bias) {
            l.qkv_bias = split_rows(IS_TRY(rw.make({q_dim + 2 * kv_dim}, 0.1f)), qkv_rows);
        }
        l.post_norm = IS_TRY(rw.make({h}, 0.0f, 1.0f));
        l.gate = IS_TRY(rw.matrix(ffn, h, dtype(WeightRole::Gate, i)));
        l.up = IS_TRY(rw.matrix(ffn, h, dtype(WeightRole::Up, i)));
        l.down = IS_TRY(rw.matrix(h, ffn, dtype(WeightRole::Down, i)));
        if (c.qk_norm) {
            l.q_norm = IS_TRY(rw.make({c.head_dim}, 0.0f, 1.0f));
            l.k_norm = IS_TRY(rw.make({c.head_dim}, 0.0f, 1.0f));
        }
        if (c.sublayer_output_norms) {
            l.attn_out_norm = IS_TRY(rw.make({h}, 0.0f, 1.0f));
            l.mlp_out_norm = IS_TRY(rw.make({h}, 0.0f, 1.0f));
        }
    }
    backend.synchronize();  // fills are queued; the model is ready when this returns
    return m;
}

}  // namespace inferscale::model
