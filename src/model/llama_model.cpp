#include "model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/rope_tables.h"
#include "tensor/views.h"

namespace inferscale::model {
namespace {

using tensor::DType;
using tensor::leading;
using tensor::reshaped;
using tensor::Tensor;

std::string layer_name(std::int64_t i, const char* rest) {
    return "model.layers." + std::to_string(i) + "." + rest;
}

Result<tensor::DeviceWeight> upload(tensor::Backend& backend, const WeightStore& weights,
                                    const std::string& name,
                                    std::initializer_list<std::int64_t> shape) {
    Tensor host = IS_TRY(weights.get(name, shape));
    return backend.upload_weight(host);
}

// A step that wants fewer logit rows than it has tokens carries only those rows through the
// last layer past attention, gathered into final_hidden (run_layer), where enqueue finds them.
// With as many, every sequence has one token and the rows are the batch's own.
bool gathers_logit_rows(const StagedStep& st) { return st.logit_rows < st.num_tokens; }

}  // namespace

Result<LlamaModel> LlamaModel::create_shell(tensor::Backend& backend, const ModelConfig& c,
                                            const LlamaModelOptions& options, bool ggml_angles) {
    if (c.num_layers <= 0 || c.hidden_size <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 ||
        c.head_dim <= 0 || c.head_dim % 2 != 0 || c.num_heads % c.num_kv_heads != 0 ||
        c.vocab_size <= 0 || c.intermediate_size <= 0) {
        return make_error("llama model: inconsistent config dimensions");
    }
    LlamaModel m;
    m.backend_ = &backend;
    m.config_ = c;
    m.max_positions_ =
        options.max_positions > 0 ? options.max_positions : c.max_position_embeddings;
    if (m.max_positions_ <= 0) return make_error("llama model: no maximum position");

    RopeParams rope = rope_params(c);
    rope.ggml_angles = ggml_angles && rope.scaling.factor == 0.0f;
    std::vector<HostRopeTables> host{make_rope_tables(rope, m.max_positions_)};
    if (c.rope_local_theta > 0.0f && c.rope_local_theta != c.rope_theta) {
        RopeParams local = rope;  // unscaled, as llama.cpp's sliding-window layers
        local.theta = c.rope_local_theta;
        local.scaling = RopeScaling{};
        local.freq_factors.clear();
        host.push_back(make_rope_tables(local, m.max_positions_));
    }
    const std::int64_t half = host[0].half_dim;
    tensor::Arena arena;
    std::vector<std::size_t> offsets;
    for (std::size_t i = 0; i < 2 * host.size(); ++i)
        offsets.push_back(arena.reserve(DType::F32, {m.max_positions_, half}));
    m.rope_buffer_ = IS_TRY(backend.allocate(arena.bytes()));
    tensor::RopeTables* tables[] = {&m.rope_, &m.local_rope_};
    for (std::size_t i = 0; i < host.size(); ++i) {
        tensor::RopeTables& t = *tables[i];
        t.cos = m.rope_buffer_.view(DType::F32, {m.max_positions_, half}, offsets[2 * i]);
        t.sin = m.rope_buffer_.view(DType::F32, {m.max_positions_, half}, offsets[2 * i + 1]);
        const std::size_t bytes = host[i].cos.size() * sizeof(float);
        backend.copy_from_host(t.cos, host[i].cos.data(), bytes);
        backend.copy_from_host(t.sin, host[i].sin.data(), bytes);
    }
    backend.synchronize();  // `host` dies here
    return m;
}

Result<LlamaModel> LlamaModel::create(tensor::Backend& backend, const ModelConfig& c,
                                      const WeightStore& weights,
                                      const LlamaModelOptions& options) {
    // Block-quantized matrices come from a GGUF file, whose reference is llama.cpp: rotate by
    // its angles (a backend that multiplies the blocks computes the other ops as ggml does too).
    const tensor::Tensor* q0 = weights.find(layer_name(0, "self_attn.q_proj.weight"));
    const bool ggml = q0 != nullptr && tensor::is_block_quantized(q0->dtype);
    LlamaModel m = IS_TRY(create_shell(backend, c, options, ggml));
    const std::int64_t h = c.hidden_size, q_dim = c.num_heads * c.head_dim,
                       kv_dim = c.num_kv_heads * c.head_dim, ffn = c.intermediate_size;
    m.embed_ = IS_TRY(upload(backend, weights, "model.embed_tokens.weight", {c.vocab_size, h}));
    m.final_norm_ = IS_TRY(upload(backend, weights, "model.norm.weight", {h}));
    // Some tied checkpoints still ship lm_head; the tie flag decides.
    if (!c.tie_word_embeddings) {
        m.lm_head_ = IS_TRY(upload(backend, weights, "lm_head.weight", {c.vocab_size, h}));
    }
    m.layers_.resize(static_cast<std::size_t>(c.num_layers));
    for (std::int64_t i = 0; i < c.num_layers; ++i) {
        LayerWeights& l = m.layers_[i];
        l.input_norm =
            IS_TRY(upload(backend, weights, layer_name(i, "input_layernorm.weight"), {h}));
        const Tensor qkv_host[] = {
            IS_TRY(weights.get(layer_name(i, "self_attn.q_proj.weight"), {q_dim, h})),
            IS_TRY(weights.get(layer_name(i, "self_attn.k_proj.weight"), {kv_dim, h})),
            IS_TRY(weights.get(layer_name(i, "self_attn.v_proj.weight"), {kv_dim, h}))};
        l.qkv = IS_TRY(upload_stacked(backend, qkv_host));
        l.o =
            IS_TRY(upload(backend, weights, layer_name(i, "self_attn.o_proj.weight"), {h, q_dim}));
        if (c.attention_bias) {
            const Tensor bias_host[] = {
                IS_TRY(weights.get(layer_name(i, "self_attn.q_proj.bias"), {q_dim})),
                IS_TRY(weights.get(layer_name(i, "self_attn.k_proj.bias"), {kv_dim})),
                IS_TRY(weights.get(layer_name(i, "self_attn.v_proj.bias"), {kv_dim}))};
            l.qkv_bias = IS_TRY(upload_stacked(backend, bias_host));
        }
        // Gemma's post_attention_layernorm normalizes the attention output; its MLP input norm
        // is pre_feedforward_layernorm.
        l.post_norm = IS_TRY(upload(backend, weights,
                                    layer_name(i, c.sublayer_output_norms
                                                      ? "pre_feedforward_layernorm.weight"
                                                      : "post_attention_layernorm.weight"),
                                    {h}));
        if (c.qk_norm) {
            l.q_norm = IS_TRY(
                upload(backend, weights, layer_name(i, "self_attn.q_norm.weight"), {c.head_dim}));
            l.k_norm = IS_TRY(
                upload(backend, weights, layer_name(i, "self_attn.k_norm.weight"), {c.head_dim}));
        }
        if (c.sublayer_output_norms) {
            l.attn_out_norm = IS_TRY(
                upload(backend, weights, layer_name(i, "post_attention_layernorm.weight"), {h}));
            l.mlp_out_norm = IS_TRY(
                upload(backend, weights, layer_name(i, "post_feedforward_layernorm.weight"), {h}));
        }
        l.gate = IS_TRY(upload(backend, weights, layer_name(i, "mlp.gate_proj.weight"), {ffn, h}));
        l.up = IS_TRY(upload(backend, weights, layer_name(i, "mlp.up_proj.weight"), {ffn, h}));
        l.down = IS_TRY(upload(backend, weights, layer_name(i, "mlp.down_proj.weight"), {h, ffn}));
    }

    return m;
}

std::size_t LlamaModel::weight_bytes() const {
    std::size_t bytes = embed_.tensor.nbytes() + final_norm_.tensor.nbytes() +
                        lm_head_.tensor.nbytes();
    for (const LayerWeights& l : layers_) {
        for (const tensor::DeviceWeight* w : {&l.input_norm, &l.o, &l.post_norm, &l.gate, &l.up,
                                              &l.down}) {
            bytes += w->tensor.nbytes();
        }
        for (const StackedWeight* s : {&l.qkv, &l.qkv_bias}) {
            for (const tensor::DeviceWeight& w : s->storage) bytes += w.tensor.nbytes();
        }
    }
    return bytes;
}

kv::KvLayout LlamaModel::kv_layout(std::int64_t num_blocks, std::int64_t block_size) const {
    return kv::KvLayout{config_.num_layers, num_blocks, block_size, config_.num_kv_heads,
                        config_.head_dim};
}

Result<ForwardWorkspace> LlamaModel::create_workspace(const WorkspaceLimits& limits) const {
    return ForwardWorkspace::create(*backend_, config_, limits);
}

std::int64_t LlamaModel::num_logit_rows(const ForwardBatch& batch) {
    switch (batch.logits) {
        case LogitsSelection::LastPerSequence:
            return static_cast<std::int64_t>(batch.sequences.size());
        case LogitsSelection::AllTokens:
            return static_cast<std::int64_t>(batch.token_ids.size());
        case LogitsSelection::None:
            return 0;
    }
    return 0;
}

Status LlamaModel::forward(const ForwardBatch& batch, kv::KvStorage& kv, ForwardWorkspace& ws,
                           std::span<float> logits) {
    const std::int64_t rows = num_logit_rows(batch);
    if (static_cast<std::int64_t>(logits.size()) < rows * config_.vocab_size) {
        return make_error("forward: logits span too small");
    }
    if (!batch.allowed_tokens.empty()) {
        return make_error("forward: allowed-token masks are for forward_greedy");
    }
    IS_RETURN_IF_ERROR(stage(batch, kv, ws));
    enqueue(kv, ws, /*sample=*/false);
    read_results(ws, {}, logits.first(static_cast<std::size_t>(rows * config_.vocab_size)));
    return {};
}

Status LlamaModel::forward_greedy(const ForwardBatch& batch, kv::KvStorage& kv,
                                  ForwardWorkspace& ws, std::span<std::int32_t> ids) {
    const std::int64_t rows = num_logit_rows(batch);
    if (rows == 0) return make_error("forward_greedy: the batch selects no logits");
    if (static_cast<std::int64_t>(ids.size()) < rows) {
        return make_error("forward_greedy: ids span too small");
    }
    IS_RETURN_IF_ERROR(stage(batch, kv, ws));
    enqueue(kv, ws, /*sample=*/true);
    read_results(ws, ids.first(static_cast<std::size_t>(rows)), {});
    return {};
}

void LlamaModel::enqueue(kv::KvStorage& kv, ForwardWorkspace& ws, bool sample) {
    const StagedStep& st = ws.step;
    IS_CHECK(st.num_tokens > 0) << "enqueue without a staged step";
    tensor::Backend& be = *backend_;
    const MetaLayout& l = st.layout;
    const auto meta = [&ws](std::int64_t offset, std::int64_t count) {
        return Tensor(ws.meta.as<std::int32_t>() + offset, DType::I32, {count}, ws.meta.device);
    };
    const std::int32_t* host = ws.host_meta();

    tensor::PagedAttentionArgs args;
    const auto s = static_cast<int>(st.num_seqs);
    args.qo_indptr = meta(l.qo_indptr, s + 1);
    args.indptr = meta(l.page_indptr, s + 1);
    // A replayable step reads as many pages as its replays stage: give it the capacity.
    args.indices = meta(l.page_indices, st.fixed_max_kv_len > 0
                                            ? ws.meta_capacity - l.page_indices
                                            : st.num_pages);
    args.last_page_len = meta(l.last_page_len, s);
    // The staged host copies; a fixed-size launch must not depend on them (they change
    // between replays), and the CUDA backend does not read them then.
    args.host_qo_indptr = host + l.qo_indptr;
    args.host_indptr = host + l.page_indptr;
    args.num_seqs = s;
    const float scalar = config_.query_pre_attn_scalar > 0.0f
                             ? config_.query_pre_attn_scalar
                             : static_cast<float>(config_.head_dim);
    args.scale = 1.0f / std::sqrt(scalar);
    args.fixed_max_kv_len = st.fixed_max_kv_len;
    // The GGUF loader un-interleaves the rotary pairs of llama/mistral Q/K rows.
    args.qk_ggml_interleaved = ggml_interleaves_qk(config_.architecture);

    const std::int64_t n = st.num_tokens;
    be.embedding(embed_.tensor, meta(l.token_ids, n), leading(ws.hidden, n));
    if (config_.scale_embeddings) {
        // llama.cpp's factor: sqrtf of the width in f32.
        be.scale(leading(ws.hidden, n), std::sqrt(static_cast<float>(config_.hidden_size)));
    }
    for (std::int64_t layer = 0; layer < config_.num_layers; ++layer) {
        if (st.before_layer != nullptr) (*st.before_layer)(layer);
        run_layer(layer, args, kv, ws);
    }

    const std::int64_t rows = st.logit_rows;
    if (rows == 0) return;
    const Tensor last = leading(ws.final_hidden, rows);
    be.rms_norm(gathers_logit_rows(st) ? last : leading(ws.hidden, n), final_norm_.tensor,
                config_.rms_norm_eps, last);
    const Tensor& head = config_.tie_word_embeddings ? embed_.tensor : lm_head_.tensor;
    const Tensor out = leading(ws.logits, rows);
    be.linear(last, head, Tensor(), out);
    if (sample) {
        be.argmax(out, st.masked ? leading(ws.allowed_tokens, rows) : Tensor(),
                  leading(ws.sampled_ids, rows));
    }
}

void LlamaModel::read_results(ForwardWorkspace& ws, std::span<std::int32_t> ids,
                              std::span<float> logits) {
    tensor::Backend& be = *backend_;
    const auto id_rows = static_cast<std::int64_t>(ids.size());
    IS_CHECK(id_rows <= ws.step.logit_rows) << id_rows << " ids of " << ws.step.logit_rows;
    IS_CHECK(static_cast<std::int64_t>(logits.size()) <= ws.step.logit_rows * config_.vocab_size)
        << "more logits than the step made";
    if (id_rows > 0) {
        be.copy_to_host(ws.host_ids(), leading(ws.sampled_ids, id_rows),
                        static_cast<std::size_t>(id_rows) * sizeof(std::int32_t));
    }
    if (!logits.empty()) be.copy_to_host(logits.data(), ws.logits, logits.size_bytes());
    be.synchronize();
    std::copy_n(ws.host_ids(), id_rows, ids.begin());
}

void LlamaModel::run_layer(std::int64_t layer, const tensor::PagedAttentionArgs& all_layers_args,
                           kv::KvStorage& kv, ForwardWorkspace& ws) {
    tensor::Backend& be = *backend_;
    const LayerWeights& w = layers_[layer];
    const ModelConfig& c = config_;
    const StagedStep& st = ws.step;
    const MetaLayout& l = st.layout;
    const std::int64_t n = st.num_tokens;
    const auto meta = [&ws](std::int64_t offset, std::int64_t count) {
        return Tensor(ws.meta.as<std::int32_t>() + offset, DType::I32, {count}, ws.meta.device);
    };
    const Tensor hidden = leading(ws.hidden, n);  // [n, hidden]
    const Tensor normed = leading(ws.normed, n);  // [n, hidden]
    const Tensor q = leading(ws.q, n);            // [n, heads * d]
    const Tensor k = leading(ws.k, n);            // [n, kvh * d]
    const Tensor v = leading(ws.v, n);            // [n, kvh * d]
    const Tensor attn = leading(ws.attn, n);      // [n, heads * d]
    const Tensor positions = meta(l.positions, n);  // [n] i32

    // Later layers find their input norm in `normed`: the previous layer's last residual add
    // computed it (add_rms_norm).
    if (layer == 0) be.rms_norm(hidden, w.input_norm.tensor, c.rms_norm_eps, normed);
    const auto bias = [&w](std::size_t i) {
        return w.qkv_bias.parts.empty() ? Tensor() : w.qkv_bias.parts[i];
    };
    const tensor::LinearTarget qkv[] = {{w.qkv.parts[0], bias(0), q},
                                        {w.qkv.parts[1], bias(1), k},
                                        {w.qkv.parts[2], bias(2), v}};
    const auto heads = [&](const Tensor& t, std::int64_t h) {
        return reshaped(t, {n, h, c.head_dim});
    };
    tensor::PagedAttentionArgs attn_args = all_layers_args;
    attn_args.window = static_cast<std::int32_t>(c.layer_window(layer));
    const bool local = attn_args.window > 0 && !one_rope_base();
    const tensor::RopeArgs attention{heads(q, c.num_heads),
                                     heads(k, c.num_kv_heads),
                                     positions,
                                     local ? local_rope_ : rope_,
                                     heads(v, c.num_kv_heads),
                                     meta(l.slots, n),
                                     kv.pages(layer),
                                     &attn_args,
                                     heads(attn, c.num_heads)};
    const auto normalize_heads = [&](const Tensor& t, std::int64_t h, const Tensor& weight) {
        const Tensor rows = reshaped(t, {n * h, c.head_dim});
        be.rms_norm(rows, weight, c.rms_norm_eps, rows);
    };
    const std::int64_t m = st.capture_rows;
    if (m == 0 && !c.qk_norm) {
        be.linear({normed, qkv, tensor::LinearEpilogue::RopeAttention, &attention});
    } else {
        be.linear({normed, qkv});
        if (c.qk_norm) {
            normalize_heads(q, c.num_heads, w.q_norm.tensor);
            normalize_heads(k, c.num_kv_heads, w.k_norm.tensor);
        }
        if (m > 0) {
            // K is still unrotated here: the memory-injection chunk format wants it that way.
            const Tensor rows = meta(l.capture_rows, m);
            const std::int64_t kv_dim = c.num_kv_heads * c.head_dim;
            be.gather_rows(k, rows, reshaped(tensor::index0(st.capture_k, layer), {m, kv_dim}));
            be.gather_rows(v, rows, reshaped(tensor::index0(st.capture_v, layer), {m, kv_dim}));
        }
        be.rope(attention);
    }

    // Past attention the last layer feeds only the logits (gathers_logit_rows): a prompt's last
    // token, or nothing for a chunk that does not end it. Every token's K and V are in the
    // cache by now.
    const bool last_layer = layer + 1 == c.num_layers;
    const std::int64_t carried = last_layer ? st.logit_rows : n;
    if (carried == 0) return;
    Tensor residual = hidden, attended = attn;
    if (last_layer && gathers_logit_rows(st)) {
        const Tensor rows = meta(l.logit_rows, carried);
        residual = leading(ws.final_hidden, carried);
        attended = leading(ws.q, carried);  // q is spent once attention has run
        be.gather_rows(hidden, rows, residual);
        be.gather_rows(attn, rows, attended);
    }
    const Tensor out = leading(ws.normed, carried);
    be.linear(attended, w.o.tensor, Tensor(), out);
    if (c.sublayer_output_norms) be.rms_norm(out, w.attn_out_norm.tensor, c.rms_norm_eps, out);
    be.add_rms_norm(residual, out, w.post_norm.tensor, c.rms_norm_eps, out);
    const Tensor gate = leading(ws.gate, carried);
    const tensor::LinearTarget gate_up[] = {{w.gate.tensor, Tensor(), gate},
                                            {w.up.tensor, Tensor(), leading(ws.up, carried)}};
    be.linear({out, gate_up,
               c.activation == Activation::GeluTanh ? tensor::LinearEpilogue::GeGLU
                                                    : tensor::LinearEpilogue::SwiGLU});
    be.linear(gate, w.down.tensor, Tensor(), out);
    if (c.sublayer_output_norms) be.rms_norm(out, w.mlp_out_norm.tensor, c.rms_norm_eps, out);
    if (!last_layer) {
        be.add_rms_norm(residual, out, layers_[layer + 1].input_norm.tensor, c.rms_norm_eps,
                        out);
    } else {
        be.add(residual, out);  // the final norm runs in enqueue
    }
}

}  // namespace inferscale::model
