#include "model/gguf_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/gguf_dequant.h"
#include "model/gguf_file.h"

namespace inferscale::model {
namespace {

// Which rows a tensor needs un-permuted: llama.cpp's converter interleaves the two rotate_half
// halves of every head of Q (by num_heads) and K (by num_kv_heads) for llama-style rotary.
enum class QkPermute { None, Q, K };

struct HfName {
    std::string name;
    QkPermute permute = QkPermute::None;
};

// GGUF tensor name -> Hugging Face name (see weight_store.h); an Error for anything else, since
// a tensor we do not understand means the model computes something we would not. Gemma 3's
// ffn_norm is its pre-MLP norm: Hugging Face calls that pre_feedforward_layernorm and the norm
// of the attention output post_attention_layernorm.
Result<HfName> to_hf_name(const std::string& g, bool gemma) {
    if (g == "token_embd.weight") return HfName{"model.embed_tokens.weight"};
    if (g == "output_norm.weight") return HfName{"model.norm.weight"};
    if (g == "output.weight") return HfName{"lm_head.weight"};
    if (g.rfind("blk.", 0) == 0) {
        const std::size_t dot = g.find('.', 4);
        const std::string layer = g.substr(4, dot == std::string::npos ? 0 : dot - 4);
        const bool numeric = !layer.empty() && layer.size() < 7 &&
                             std::all_of(layer.begin(), layer.end(),
                                         [](char c) { return c >= '0' && c <= '9'; });
        if (numeric) {
            const std::string rest = g.substr(dot + 1);
            const std::string prefix = "model.layers." + layer + ".";
            struct Row {
                const char* gguf;
                const char* hf;
                QkPermute permute;
            };
            static constexpr Row kRows[] = {
                {"attn_norm.weight", "input_layernorm.weight", QkPermute::None},
                {"attn_q.weight", "self_attn.q_proj.weight", QkPermute::Q},
                {"attn_q.bias", "self_attn.q_proj.bias", QkPermute::Q},
                {"attn_k.weight", "self_attn.k_proj.weight", QkPermute::K},
                {"attn_k.bias", "self_attn.k_proj.bias", QkPermute::K},
                {"attn_v.weight", "self_attn.v_proj.weight", QkPermute::None},
                {"attn_v.bias", "self_attn.v_proj.bias", QkPermute::None},
                {"attn_output.weight", "self_attn.o_proj.weight", QkPermute::None},
                {"ffn_norm.weight", "post_attention_layernorm.weight", QkPermute::None},
                {"ffn_gate.weight", "mlp.gate_proj.weight", QkPermute::None},
                {"ffn_up.weight", "mlp.up_proj.weight", QkPermute::None},
                {"ffn_down.weight", "mlp.down_proj.weight", QkPermute::None},
            };
            static constexpr Row kGemmaRows[] = {
                {"ffn_norm.weight", "pre_feedforward_layernorm.weight", QkPermute::None},
                {"post_attention_norm.weight", "post_attention_layernorm.weight", QkPermute::None},
                {"post_ffw_norm.weight", "post_feedforward_layernorm.weight", QkPermute::None},
                {"attn_q_norm.weight", "self_attn.q_norm.weight", QkPermute::None},
                {"attn_k_norm.weight", "self_attn.k_norm.weight", QkPermute::None},
            };
            if (gemma) {
                for (const Row& r : kGemmaRows)
                    if (rest == r.gguf) return HfName{prefix + r.hf, r.permute};
            }
            for (const Row& r : kRows)
                if (rest == r.gguf) return HfName{prefix + r.hf, r.permute};
        }
    }
    return make_error("unexpected tensor '" + g + "' for a llama/mistral/qwen2/gemma3 model");
}

Result<std::int64_t> opt_int(const GgufFile& g, const std::string& key, std::int64_t fallback) {
    return g.find(key) == nullptr ? Result<std::int64_t>(fallback) : g.get_int(key);
}

Result<std::int64_t> positive(const GgufFile& g, const std::string& key) {
    std::int64_t v = IS_TRY(g.get_int(key));
    if (v <= 0) return make_error("metadata '" + key + "' must be positive");
    return v;
}

// Gemma 3's fixed choices, as llama.cpp makes them: five sliding-window layers (RoPE base 10000)
// to one global layer, the attention scale of Gemma's reference code (27B: hidden / heads), no
// logit soft-capping (llama.cpp applies none to Gemma 3, whatever the file says).
Status read_gemma3(const GgufFile& g, ModelConfig& c) {
    c.sliding_window = IS_TRY(positive(g, "gemma3.attention.sliding_window"));
    c.sliding_window_pattern = 6;
    c.rope_local_theta = 10000.0f;
    c.query_pre_attn_scalar =
        static_cast<float>(c.num_layers == 62 ? c.hidden_size / c.num_heads : c.head_dim);
    c.scale_embeddings = true;
    c.qk_norm = true;
    c.sublayer_output_norms = true;
    c.activation = Activation::GeluTanh;
    return {};
}

Result<ModelConfig> read_config(const GgufFile& g, const std::string& arch) {
    ModelConfig c;
    if (arch == "llama") c.architecture = Architecture::Llama;
    else if (arch == "mistral") c.architecture = Architecture::Mistral;
    else if (arch == "qwen2") c.architecture = Architecture::Qwen2;
    else if (arch == "gemma3") c.architecture = Architecture::Gemma3;
    else
        return make_error("unsupported architecture '" + arch +
                          "' (supported: llama, mistral, qwen2, gemma3)");
    const std::string p = arch + ".";
    c.num_layers = IS_TRY(positive(g, p + "block_count"));
    c.hidden_size = IS_TRY(positive(g, p + "embedding_length"));
    c.intermediate_size = IS_TRY(positive(g, p + "feed_forward_length"));
    c.num_heads = IS_TRY(positive(g, p + "attention.head_count"));
    c.num_kv_heads = c.num_heads;
    if (g.find(p + "attention.head_count_kv"))
        c.num_kv_heads = IS_TRY(positive(g, p + "attention.head_count_kv"));
    if (c.num_heads % c.num_kv_heads != 0)
        return make_error("attention.head_count is not a multiple of attention.head_count_kv");
    if (g.find(p + "attention.key_length")) {
        c.head_dim = IS_TRY(positive(g, p + "attention.key_length"));
    } else {
        if (c.hidden_size % c.num_heads != 0)
            return make_error("embedding_length is not a multiple of attention.head_count");
        c.head_dim = c.hidden_size / c.num_heads;
    }
    if (c.head_dim % 2 != 0) return make_error("head dimension must be even");
    const std::int64_t value_len = IS_TRY(opt_int(g, p + "attention.value_length", c.head_dim));
    const std::int64_t rope_dims = IS_TRY(opt_int(g, p + "rope.dimension_count", c.head_dim));
    if (value_len != c.head_dim || rope_dims != c.head_dim)
        return make_error("partial rotary or distinct key/value head sizes are not supported");
    c.max_position_embeddings = IS_TRY(positive(g, p + "context_length"));
    c.rms_norm_eps =
        static_cast<float>(IS_TRY(g.get_float(p + "attention.layer_norm_rms_epsilon")));
    if (c.rms_norm_eps <= 0) return make_error("layer_norm_rms_epsilon must be positive");
    if (g.find(p + "rope.freq_base"))
        c.rope_theta = static_cast<float>(IS_TRY(g.get_float(p + "rope.freq_base")));
    if (c.rope_theta <= 0) return make_error("rope.freq_base must be positive");
    // Linear / YaRN scaling would silently change logits; refuse rather than ignore it.
    std::string scaling = "none";
    if (g.find(p + "rope.scaling.type")) scaling = IS_TRY(g.get_string(p + "rope.scaling.type"));
    if (scaling != "none")
        return make_error("unsupported rope scaling type '" + scaling + "'");
    if (g.find(p + "rope.scale_linear")) {
        double f = IS_TRY(g.get_float(p + "rope.scale_linear"));
        if (f != 1.0) return make_error("unsupported linear rope scaling (rope.scale_linear)");
    }
    c.attention_bias = c.architecture == Architecture::Qwen2;
    if (c.architecture == Architecture::Gemma3) IS_RETURN_IF_ERROR(read_gemma3(g, c));
    return c;
}

Result<std::vector<std::string>> string_array(const GgufFile& g, const char* key) {
    const GgufValue* v = g.find(key);
    if (v == nullptr) return std::vector<std::string>{};
    if (v->type != GgufType::Array || v->elem_type != GgufType::String)
        return make_error(std::string("metadata '") + key + "' must be an array of strings");
    return v->strings;
}

Result<std::int64_t> token_id(const GgufFile& g, const char* key, std::size_t n_tokens,
                              bool strict) {
    if (g.find(key) == nullptr) return std::int64_t{-1};
    std::int64_t id = IS_TRY(g.get_int(key));
    if (n_tokens > 0 && (id < 0 || static_cast<std::size_t>(id) >= n_tokens)) {
        if (strict)
            return make_error(std::string("metadata '") + key + "' = " + std::to_string(id) +
                              " is outside the vocabulary of " + std::to_string(n_tokens));
        return std::int64_t{-1};  // an unusable optional id means "none", as llama.cpp treats it
    }
    return id;
}

}  // namespace

Result<tokenizer::VocabData> read_gguf_vocab(const GgufFile& g) {
    tokenizer::VocabData v;
    if (g.find("tokenizer.ggml.model")) v.model = IS_TRY(g.get_string("tokenizer.ggml.model"));
    if (g.find("tokenizer.ggml.pre")) v.pre = IS_TRY(g.get_string("tokenizer.ggml.pre"));
    v.tokens = IS_TRY(string_array(g, "tokenizer.ggml.tokens"));
    v.merges = IS_TRY(string_array(g, "tokenizer.ggml.merges"));
    const std::size_t n = v.tokens.size();
    if (const GgufValue* s = g.find("tokenizer.ggml.scores")) {
        if (s->type != GgufType::Array || s->ints.size() + s->floats.size() != s->array_size ||
            s->array_size != n)
            return make_error("metadata 'tokenizer.ggml.scores' must be a numeric array with one "
                              "entry per token");
        if (!s->floats.empty()) {
            for (double f : s->floats) v.scores.push_back(static_cast<float>(f));
        } else {
            for (std::int64_t i : s->ints) v.scores.push_back(static_cast<float>(i));
        }
    }
    if (const GgufValue* t = g.find("tokenizer.ggml.token_type")) {
        if (t->type != GgufType::Array || t->ints.size() != t->array_size || t->array_size != n)
            return make_error("metadata 'tokenizer.ggml.token_type' must be an integer array "
                              "with one entry per token");
        for (std::int64_t x : t->ints) {
            if (x < 0 || x > static_cast<std::int64_t>(tokenizer::TokenType::Byte))
                return make_error("metadata 'tokenizer.ggml.token_type' has invalid type " +
                                  std::to_string(x));
            v.token_types.push_back(static_cast<tokenizer::TokenType>(x));
        }
    }
    v.bos_id = IS_TRY(token_id(g, "tokenizer.ggml.bos_token_id", n, true));
    v.eos_id = IS_TRY(token_id(g, "tokenizer.ggml.eos_token_id", n, true));
    v.unk_id = IS_TRY(token_id(g, "tokenizer.ggml.unknown_token_id", n, false));
    v.pad_id = IS_TRY(token_id(g, "tokenizer.ggml.padding_token_id", n, false));
    // llama.cpp's defaults: SentencePiece vocabularies add BOS and a leading space.
    v.add_bos = v.model == "llama";
    v.add_space_prefix = v.model == "llama";
    if (g.find("tokenizer.ggml.add_bos_token"))
        v.add_bos = IS_TRY(g.get_bool("tokenizer.ggml.add_bos_token"));
    if (g.find("tokenizer.ggml.add_space_prefix"))
        v.add_space_prefix = IS_TRY(g.get_bool("tokenizer.ggml.add_space_prefix"));
    return v;
}

namespace {

std::vector<std::int64_t> read_eos_ids(const GgufFile& g, const tokenizer::VocabData& v) {
    std::vector<std::int64_t> ids;
    if (v.eos_id >= 0) ids.push_back(v.eos_id);
    for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
        auto id = token_id(g, key, v.tokens.size(), false);
        if (id.ok() && *id >= 0 && std::find(ids.begin(), ids.end(), *id) == ids.end())
            ids.push_back(*id);
    }
    return ids;
}

Status check_qk_rows(const GgufTensorInfo& info, std::int64_t rows, std::int64_t heads,
                     std::int64_t head_dim) {
    if (rows == heads * head_dim) return {};
    return make_error("tensor '" + info.name + "' has " + std::to_string(rows) +
                      " rows, expected " + std::to_string(heads) + " heads x " +
                      std::to_string(head_dim));
}

// Dequantizes (or views) one tensor into the store under its Hugging Face name. With
// `keep_quantized`, block-quantized matrices stay in block form: a view into the map, or an
// owned copy when Q/K rows must be reordered (a row is whole blocks, so rows move as bytes).
Status load_tensor(const GgufTensorInfo& info, const std::uint8_t* src, const ModelConfig& c,
                   bool keep_quantized, WeightStore& store) {
    HfName hf = IS_TRY(to_hf_name(info.name, c.architecture == Architecture::Gemma3));
    // Only llama-style (NORM) rotary is converted with interleaved rows; qwen2 and gemma3 use
    // NeoX rotary, which already pairs the rotate_half halves, so their rows are in HF order.
    if (!ggml_interleaves_qk(c.architecture)) hf.permute = QkPermute::None;
    if (!ggml_type_supported(info.type))
        return make_error("tensor '" + info.name + "' has unsupported type " +
                          ggml_type_name(info.type) +
                          " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                          "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
    tensor::Tensor t;
    t.dtype = tensor::DType::F32;
    t.rank = static_cast<int>(info.ne.size());
    for (int i = 0; i < t.rank; ++i) t.shape[i] = info.ne[info.ne.size() - 1 - i];  // HF order
    const std::size_t n = static_cast<std::size_t>(info.numel());
    const std::int64_t heads = hf.permute == QkPermute::Q ? c.num_heads : c.num_kv_heads;
    const std::int64_t rows = t.rank == 0 ? 0 : t.shape[0];
    if (hf.permute != QkPermute::None)
        IS_RETURN_IF_ERROR(check_qk_rows(info, rows, heads, c.head_dim));

    const std::optional<tensor::DType> block = block_dtype(info.type);
    if (keep_quantized && block.has_value() && t.rank == 2) {
        t.dtype = *block;
        if (hf.permute == QkPermute::None) {
            t.data = const_cast<std::uint8_t*>(src);  // read-only map; weights are never written
        } else {
            const std::size_t bytes = t.nbytes();
            auto* dst = static_cast<std::uint8_t*>(store.allocate(bytes));
            std::memcpy(dst, src, bytes);
            unpermute_qk_row_bytes(dst, rows, bytes / static_cast<std::size_t>(rows), heads);
            t.data = dst;
        }
        store.add(std::move(hf.name), t);
        return {};
    }

    const bool aligned = reinterpret_cast<std::uintptr_t>(src) % alignof(float) == 0;
    if (info.type == static_cast<std::uint32_t>(GgmlType::F32) && hf.permute == QkPermute::None &&
        aligned) {
        t.data = const_cast<std::uint8_t*>(src);  // read-only map; weights are never written
        store.add(std::move(hf.name), t);
        return {};
    }
    float* dst = static_cast<float*>(store.allocate(n * sizeof(float)));
    dequantize_to_f32(info.type, src, dst, n);
    if (hf.permute != QkPermute::None) {
        unpermute_qk_rows(dst, rows, rows == 0 ? 0 : static_cast<std::int64_t>(n) / rows, heads);
    }
    t.data = dst;
    store.add(std::move(hf.name), t);
    return {};
}

// rope_freqs.weight: llama.cpp's converter writes Llama 3.1 "llama3" scaling as one divisor per
// rotary pair. A factor that is not finite and positive would turn angles into inf or NaN.
Result<std::vector<float>> read_rope_freqs(const GgufTensorInfo& info, const std::uint8_t* src,
                                           const ModelConfig& c) {
    const std::int64_t half = c.head_dim / 2;
    if (info.ne.size() != 1 || info.ne[0] != half)
        return make_error("tensor 'rope_freqs.weight' must have shape [" + std::to_string(half) +
                          "] (head_dim / 2), got " + std::to_string(info.ne.size()) +
                          " dimensions of " + std::to_string(info.ne.empty() ? 0 : info.ne[0]));
    if (!ggml_type_supported(info.type))
        return make_error("tensor 'rope_freqs.weight' has unsupported type " +
                          ggml_type_name(info.type));
    std::vector<float> factors(static_cast<std::size_t>(half));
    dequantize_to_f32(info.type, src, factors.data(), factors.size());
    for (std::size_t i = 0; i < factors.size(); ++i)
        if (!std::isfinite(factors[i]) || factors[i] <= 0.0f)
            return make_error("tensor 'rope_freqs.weight' holds " + std::to_string(factors[i]) +
                              " at " + std::to_string(i) +
                              ": rope frequency factors must be finite and positive");
    return factors;
}

}  // namespace

void unpermute_qk_row_bytes(std::uint8_t* data, std::int64_t rows, std::size_t row_bytes,
                            std::int64_t n_heads) {
    IS_CHECK(n_heads > 0 && rows % (2 * n_heads) == 0) << rows << " rows, " << n_heads << " heads";
    const std::int64_t head_dim = rows / n_heads;
    const std::int64_t half = head_dim / 2;
    std::vector<std::uint8_t> head(static_cast<std::size_t>(head_dim) * row_bytes);
    for (std::int64_t h = 0; h < n_heads; ++h) {
        std::uint8_t* base = data + static_cast<std::size_t>(h * head_dim) * row_bytes;
        std::memcpy(head.data(), base, head.size());
        // GGUF row 2i + s holds HF row s * half + i (s = which rotate_half half, i = pair index).
        for (std::int64_t i = 0; i < half; ++i)
            for (std::int64_t s = 0; s < 2; ++s)
                std::memcpy(base + static_cast<std::size_t>(s * half + i) * row_bytes,
                            head.data() + static_cast<std::size_t>(2 * i + s) * row_bytes,
                            row_bytes);
    }
}

void unpermute_qk_rows(float* data, std::int64_t rows, std::int64_t row_len, std::int64_t n_heads) {
    unpermute_qk_row_bytes(reinterpret_cast<std::uint8_t*>(data), rows,
                           static_cast<std::size_t>(row_len) * sizeof(float), n_heads);
}

Result<GgufModel> load_gguf_model(const std::string& path, WeightStore& store,
                                  const GgufProgress& progress, bool keep_quantized) {
    GgufFile g = IS_TRY(GgufFile::open(path));
    auto fail = [&](const Error& e) { return make_error(path + ": " + e.message); };

    auto arch = g.get_string("general.architecture");
    if (!arch.ok()) return fail(arch.error());
    auto config = read_config(g, *arch);
    if (!config.ok()) return fail(config.error());
    auto vocab = read_gguf_vocab(g);
    if (!vocab.ok()) return fail(vocab.error());

    GgufModel out;
    out.config = std::move(*config);
    out.vocab = std::move(*vocab);
    ModelConfig& c = out.config;
    std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    c.name = name;
    if (g.find("tokenizer.chat_template")) {
        auto tmpl = g.get_string("tokenizer.chat_template");
        if (!tmpl.ok()) return fail(tmpl.error());
        out.chat_template = std::move(*tmpl);
    }
    c.bos_token_id = out.vocab.bos_id;
    c.eos_token_id = out.vocab.eos_id;
    out.eos_token_ids = read_eos_ids(g, out.vocab);

    bool has_output = false;
    const GgufTensorInfo* embd = nullptr;
    for (const GgufTensorInfo& t : g.tensors()) {
        if (t.name == "output.weight") has_output = true;
        if (t.name == "token_embd.weight") embd = &t;
        if (t.name == "blk.0.attn_q.bias") c.attention_bias = true;
    }
    c.tie_word_embeddings = !has_output;
    const std::string vocab_key = *arch + ".vocab_size";
    if (g.find(vocab_key)) {
        auto n = g.get_int(vocab_key);
        if (!n.ok()) return fail(n.error());
        c.vocab_size = *n;
    } else if (!out.vocab.tokens.empty()) {
        c.vocab_size = static_cast<std::int64_t>(out.vocab.tokens.size());
    } else if (embd != nullptr && embd->ne.size() == 2) {
        c.vocab_size = embd->ne[1];
    }

    // The map moves into the store first so F32 views stay valid for the store's lifetime.
    const std::uint64_t data_start = g.data_start();
    const std::vector<GgufTensorInfo>& infos = g.tensors();
    const MappedFile& kept = store.keep_file(g.release_file());
    const std::size_t total = infos.size();
    for (std::size_t i = 0; i < total; ++i) {
        const std::uint8_t* src = kept.data() + data_start + infos[i].offset;
        if (infos[i].name == "rope_freqs.weight") {
            auto factors = read_rope_freqs(infos[i], src, c);
            if (!factors.ok()) return fail(factors.error());
            c.rope_freq_factors = std::move(*factors);
        } else {
            Status s = load_tensor(infos[i], src, c, keep_quantized, store);
            if (!s.ok()) return fail(s.error());
        }
        if (progress) progress(i + 1, total);
    }
    return out;
}

}  // namespace inferscale::model
