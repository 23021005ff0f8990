#include "embed/sentence_encoder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "model/safetensors_loader.h"
#include "model/weight_store.h"

namespace inferscale::embed {

using tensor::DType;
using tensor::Tensor;

struct SentenceEncoder::Layer {
    Tensor wq, bq, wk, bk, wv, bv;            // [hidden, hidden], [hidden]
    Tensor wo, bo;                            // [hidden, hidden], [hidden]
    Tensor attn_norm_weight, attn_norm_bias;  // [hidden]
    Tensor w_in, b_in;                        // [intermediate, hidden], [intermediate]
    Tensor w_out, b_out;                      // [hidden, intermediate], [hidden]
    Tensor out_norm_weight, out_norm_bias;    // [hidden]
};

// Device tensors sized for `tokens` rows and `seqs` sequences (views cut to a batch's rows),
// and the host staging of the same arrays. The residual stream, norms, attention and GELU run
// in f32 on every backend; a linear reads its input in the backend's activation dtype (x_in,
// ctx_in, ffn_in: bf16 copies on CUDA, the f32 tensors themselves on the CPU). In PyTorch with
// bf16 weights, bf16 activations throughout put the lowest cosine to sentence-transformers'
// fp32 embeddings at 0.99983 on the corpus of tools/make_embedding_fixtures.py; bf16 only at
// the linears' inputs keeps it at 0.99990.
struct SentenceEncoder::Workspace {
    std::int64_t tokens = 0, seqs = 0;
    tensor::Buffer buffer;
    Tensor x, q, k, v, ctx, tmp;   // [tokens, hidden] f32
    Tensor ffn;                    // [tokens, intermediate] f32
    Tensor x_in, ctx_in;           // [tokens, hidden] activation dtype
    Tensor ffn_in;                 // [tokens, intermediate] activation dtype
    Tensor ids, positions, types;  // [tokens] i32 (types all 0)
    Tensor seq_indptr;             // [seqs + 1] i32
    std::vector<std::int32_t> host_ids, host_positions, host_indptr;
    std::vector<float> hidden;  // [tokens, hidden] f32
};

namespace {

// The first `rows` rows of a workspace tensor.
Tensor rows_of(Tensor t, std::int64_t rows) {
    t.shape[0] = rows;
    return t;
}

// [rows, heads, head_dim] view of a [.., hidden] tensor.
Tensor heads_of(const Tensor& t, std::int64_t rows, std::int64_t heads, std::int64_t head_dim) {
    return Tensor(t.data, t.dtype, {rows, heads, head_dim}, t.device);
}

std::string model_id(const std::string& dir) {
    std::string name = std::filesystem::path(dir).lexically_normal().filename().string();
    if (name.empty()) name = std::filesystem::path(dir).lexically_normal().parent_path().filename();
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "all-minilm-l6-v2") return "all-MiniLM-L6-v2";
    return name;
}

}  // namespace

SentenceEncoder::SentenceEncoder(tensor::Backend& backend, BertConfig config,
                                 tokenizer::Tokenizer tokenizer, std::string id,
                                 SentenceEncoderOptions options)
    : backend_(backend),
      config_(config),
      tokenizer_(std::move(tokenizer)),
      id_(std::move(id)),
      options_(options),
      ws_(std::make_unique<Workspace>()) {}

SentenceEncoder::~SentenceEncoder() = default;

Result<std::unique_ptr<SentenceEncoder>> SentenceEncoder::load(const std::string& dir,
                                                               tensor::Backend& backend,
                                                               SentenceEncoderOptions options) {
    if (options.max_batch_tokens <= 0) return make_error("max_batch_tokens must be positive");
    BertConfig config = IS_TRY(read_bert_config(dir));
    tokenizer::Tokenizer tok =
        IS_TRY(tokenizer::Tokenizer::from_json_file(dir + "/tokenizer.json"));
    if (tok.vocab_size() > config.vocab_size)
        return make_error(dir + ": tokenizer.json has more ids than the model's vocab_size");
    std::unique_ptr<SentenceEncoder> encoder(
        new SentenceEncoder(backend, config, std::move(tok), model_id(dir), options));
    IS_RETURN_IF_ERROR(encoder->load_weights(dir));
    return encoder;
}

Status SentenceEncoder::load_weights(const std::string& dir) {
    model::WeightStore store;
    const std::string path = dir + "/model.safetensors";
    // position_ids is an I64 buffer transformers saves beside the weights; positions are ours.
    IS_TRY(model::load_safetensors_file(
        path, store, {"embeddings.position_ids", "bert.embeddings.position_ids"}));
    const std::string prefix = store.find("bert.embeddings.word_embeddings.weight") ? "bert." : "";
    const BertConfig& c = config_;
    auto upload = [&](const std::string& name,
                      std::initializer_list<std::int64_t> shape) -> Result<Tensor> {
        auto host = store.get(prefix + name, shape);
        if (!host.ok()) return make_error(path + ": " + host.error().message);
        weights_.push_back(IS_TRY(backend_.upload_weight(*host)));
        return weights_.back().tensor;
    };
    word_embeddings_ =
        IS_TRY(upload("embeddings.word_embeddings.weight", {c.vocab_size, c.hidden}));
    position_embeddings_ =
        IS_TRY(upload("embeddings.position_embeddings.weight", {c.max_positions, c.hidden}));
    type_embeddings_ =
        IS_TRY(upload("embeddings.token_type_embeddings.weight", {c.type_vocab_size, c.hidden}));
    embed_norm_weight_ = IS_TRY(upload("embeddings.LayerNorm.weight", {c.hidden}));
    embed_norm_bias_ = IS_TRY(upload("embeddings.LayerNorm.bias", {c.hidden}));
    layers_.resize(static_cast<std::size_t>(c.layers));
    for (std::int64_t i = 0; i < c.layers; ++i) {
        const std::string p = "encoder.layer." + std::to_string(i) + ".";
        Layer& l = layers_[static_cast<std::size_t>(i)];
        l.wq = IS_TRY(upload(p + "attention.self.query.weight", {c.hidden, c.hidden}));
        l.bq = IS_TRY(upload(p + "attention.self.query.bias", {c.hidden}));
        l.wk = IS_TRY(upload(p + "attention.self.key.weight", {c.hidden, c.hidden}));
        l.bk = IS_TRY(upload(p + "attention.self.key.bias", {c.hidden}));
        l.wv = IS_TRY(upload(p + "attention.self.value.weight", {c.hidden, c.hidden}));
        l.bv = IS_TRY(upload(p + "attention.self.value.bias", {c.hidden}));
        l.wo = IS_TRY(upload(p + "attention.output.dense.weight", {c.hidden, c.hidden}));
        l.bo = IS_TRY(upload(p + "attention.output.dense.bias", {c.hidden}));
        l.attn_norm_weight = IS_TRY(upload(p + "attention.output.LayerNorm.weight", {c.hidden}));
        l.attn_norm_bias = IS_TRY(upload(p + "attention.output.LayerNorm.bias", {c.hidden}));
        l.w_in = IS_TRY(upload(p + "intermediate.dense.weight", {c.intermediate, c.hidden}));
        l.b_in = IS_TRY(upload(p + "intermediate.dense.bias", {c.intermediate}));
        l.w_out = IS_TRY(upload(p + "output.dense.weight", {c.hidden, c.intermediate}));
        l.b_out = IS_TRY(upload(p + "output.dense.bias", {c.hidden}));
        l.out_norm_weight = IS_TRY(upload(p + "output.LayerNorm.weight", {c.hidden}));
        l.out_norm_bias = IS_TRY(upload(p + "output.LayerNorm.bias", {c.hidden}));
    }
    return {};
}

std::vector<std::int32_t> SentenceEncoder::tokenize(std::string_view text) const {
    return tokenizer_.encode_truncated(text, static_cast<std::size_t>(config_.max_seq_length));
}

Status SentenceEncoder::encode(std::span<const std::string> texts, std::span<float> out) {
    std::vector<std::vector<std::int32_t>> ids;
    ids.reserve(texts.size());
    for (const std::string& text : texts) ids.push_back(tokenize(text));
    return encode_ids(ids, out);
}

Result<std::vector<float>> SentenceEncoder::embed(std::span<const std::string> texts) {
    std::vector<float> out(texts.size() * static_cast<std::size_t>(dim()));
    IS_RETURN_IF_ERROR(encode(texts, out));
    return out;
}

Status SentenceEncoder::encode_ids(std::span<const std::vector<std::int32_t>> ids,
                                   std::span<float> out) {
    IS_CHECK(out.size() == ids.size() * static_cast<std::size_t>(dim())) << "encode out size";
    std::size_t first = 0;
    while (first < ids.size()) {
        std::size_t end = first;
        std::int64_t tokens = 0;
        while (end < ids.size()) {
            const auto len = static_cast<std::int64_t>(ids[end].size());
            IS_CHECK(len > 0 && len <= config_.max_seq_length) << "text of " << len << " ids";
            if (end > first && tokens + len > options_.max_batch_tokens) break;
            tokens += len;
            ++end;
        }
        IS_RETURN_IF_ERROR(run_batch(ids.subspan(first, end - first), tokens,
                                     out.data() + first * static_cast<std::size_t>(dim())));
        first = end;
    }
    return {};
}

Status SentenceEncoder::reserve(std::int64_t tokens, std::int64_t seqs) {
    Workspace& w = *ws_;
    if (tokens <= w.tokens && seqs <= w.seqs) return {};
    tokens = std::max(tokens, w.tokens);
    seqs = std::max(seqs, w.seqs);
    const DType act = backend_.activation_dtype();
    const bool narrow = act != DType::F32;
    const std::int64_t h = config_.hidden, inter = config_.intermediate;
    tensor::Arena arena;
    std::size_t off[14] = {};
    for (int i = 0; i < 6; ++i) off[i] = arena.reserve(DType::F32, {tokens, h});
    off[6] = arena.reserve(DType::F32, {tokens, inter});
    for (int i = 7; i < 10; ++i) off[i] = arena.reserve(DType::I32, {tokens});
    off[10] = arena.reserve(DType::I32, {seqs + 1});
    if (narrow) {
        off[11] = arena.reserve(act, {tokens, h});
        off[12] = arena.reserve(act, {tokens, h});
        off[13] = arena.reserve(act, {tokens, inter});
    }
    w.buffer = tensor::Buffer();  // the old workspace goes first: its memory may be needed
    w.buffer = IS_TRY(backend_.allocate(arena.bytes()));
    Tensor* wide[] = {&w.x, &w.q, &w.k, &w.v, &w.ctx, &w.tmp};
    for (int i = 0; i < 6; ++i) *wide[i] = w.buffer.view(DType::F32, {tokens, h}, off[i]);
    w.ffn = w.buffer.view(DType::F32, {tokens, inter}, off[6]);
    w.ids = w.buffer.view(DType::I32, {tokens}, off[7]);
    w.positions = w.buffer.view(DType::I32, {tokens}, off[8]);
    w.types = w.buffer.view(DType::I32, {tokens}, off[9]);
    w.seq_indptr = w.buffer.view(DType::I32, {seqs + 1}, off[10]);
    w.x_in = narrow ? w.buffer.view(act, {tokens, h}, off[11]) : w.x;
    w.ctx_in = narrow ? w.buffer.view(act, {tokens, h}, off[12]) : w.ctx;
    w.ffn_in = narrow ? w.buffer.view(act, {tokens, inter}, off[13]) : w.ffn;
    backend_.fill_zero(w.types);
    w.tokens = tokens;
    w.seqs = seqs;
    return {};
}

Status SentenceEncoder::run_batch(std::span<const std::vector<std::int32_t>> ids,
                                  std::int64_t tokens, float* out) {
    const auto seqs = static_cast<std::int64_t>(ids.size());
    IS_RETURN_IF_ERROR(reserve(tokens, seqs));
    Workspace& w = *ws_;
    const BertConfig& c = config_;
    const std::int64_t h = c.hidden, n = tokens;
    w.host_ids.clear();
    w.host_positions.clear();
    w.host_indptr.assign(1, 0);
    int max_len = 0;
    for (const std::vector<std::int32_t>& text : ids) {
        for (std::size_t i = 0; i < text.size(); ++i) {
            IS_CHECK(text[i] >= 0 && text[i] < c.vocab_size) << "token id " << text[i];
            w.host_ids.push_back(text[i]);
            w.host_positions.push_back(static_cast<std::int32_t>(i));
        }
        w.host_indptr.push_back(static_cast<std::int32_t>(w.host_ids.size()));
        max_len = std::max(max_len, static_cast<int>(text.size()));
    }
    const Tensor tok_ids = rows_of(w.ids, n), positions = rows_of(w.positions, n);
    const Tensor indptr = rows_of(w.seq_indptr, seqs + 1);
    backend_.copy_from_host(tok_ids, w.host_ids.data(), tok_ids.nbytes());
    backend_.copy_from_host(positions, w.host_positions.data(), positions.nbytes());
    backend_.copy_from_host(indptr, w.host_indptr.data(), indptr.nbytes());

    const Tensor x = rows_of(w.x, n), tmp = rows_of(w.tmp, n), ffn = rows_of(w.ffn, n);
    const Tensor q = rows_of(w.q, n), k = rows_of(w.k, n), v = rows_of(w.v, n);
    const Tensor ctx = rows_of(w.ctx, n);
    const Tensor x_in = rows_of(w.x_in, n), ctx_in = rows_of(w.ctx_in, n);
    const Tensor ffn_in = rows_of(w.ffn_in, n);
    // A linear's input in the activation dtype; nothing to do where that is f32.
    auto narrow = [&](const Tensor& from, const Tensor& to) {
        if (to.data != from.data) backend_.convert(from, to);
    };
    backend_.embedding(word_embeddings_, tok_ids, x);
    backend_.embedding(position_embeddings_, positions, tmp);
    backend_.add(x, tmp);
    backend_.embedding(type_embeddings_, rows_of(w.types, n), tmp);
    backend_.add(x, tmp);
    backend_.layer_norm(x, embed_norm_weight_, embed_norm_bias_, c.layer_norm_eps, x);
    narrow(x, x_in);

    tensor::SequenceAttentionArgs attn;
    attn.seq_indptr = indptr;
    attn.host_seq_indptr = w.host_indptr.data();
    attn.num_seqs = static_cast<int>(seqs);
    attn.max_seq_len = max_len;
    attn.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim()));
    const std::int64_t d = c.head_dim();
    for (const Layer& l : layers_) {
        const tensor::LinearTarget qkv[] = {{l.wq, l.bq, q}, {l.wk, l.bk, k}, {l.wv, l.bv, v}};
        backend_.linear(tensor::LinearArgs{x_in, qkv});
        backend_.sequence_attention(heads_of(q, n, c.heads, d), heads_of(k, n, c.heads, d),
                                    heads_of(v, n, c.heads, d), attn, heads_of(ctx, n, c.heads, d));
        narrow(ctx, ctx_in);
        backend_.linear(ctx_in, l.wo, l.bo, tmp);
        backend_.add(x, tmp);
        backend_.layer_norm(x, l.attn_norm_weight, l.attn_norm_bias, c.layer_norm_eps, x);
        narrow(x, x_in);
        backend_.linear(x_in, l.w_in, l.b_in, ffn);
        backend_.gelu(ffn);
        narrow(ffn, ffn_in);
        backend_.linear(ffn_in, l.w_out, l.b_out, tmp);
        backend_.add(x, tmp);
        backend_.layer_norm(x, l.out_norm_weight, l.out_norm_bias, c.layer_norm_eps, x);
        narrow(x, x_in);
    }

    // Mean pooling and normalization on the host: the hidden states are a few KB per text.
    w.hidden.resize(static_cast<std::size_t>(n * h));
    backend_.copy_to_host(w.hidden.data(), x, x.nbytes());
    backend_.synchronize();
    for (std::int64_t s = 0; s < seqs; ++s) {
        float* row = out + s * h;
        std::fill(row, row + h, 0.0f);
        const std::int32_t begin = w.host_indptr[s], end = w.host_indptr[s + 1];
        for (std::int32_t t = begin; t < end; ++t) {
            const float* src = w.hidden.data() + static_cast<std::int64_t>(t) * h;
            for (std::int64_t e = 0; e < h; ++e) row[e] += src[e];
        }
        const float inv_len = 1.0f / static_cast<float>(end - begin);
        float norm = 0.0f;
        for (std::int64_t e = 0; e < h; ++e) {
            row[e] *= inv_len;
            norm += row[e] * row[e];
        }
        // F.normalize's guard: a zero vector stays zero.
        const float inv_norm = 1.0f / std::max(std::sqrt(norm), 1e-12f);
        for (std::int64_t e = 0; e < h; ++e) row[e] *= inv_norm;
    }
    return {};
}

}  // namespace inferscale::embed
