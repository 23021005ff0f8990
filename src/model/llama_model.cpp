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


std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

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
    const HostRopeTables host = make_rope_tables(rope, m.max_positions_);
    const std::size_t table_bytes = host.cos.size() * sizeof(float);
    tensor::Arena arena;
    const std::size_t cos_off = arena.reserve(DType::F32, {m.max_positions_, host.half_dim});
    const std::size_t sin_off = arena.reserve(DType::F32, {m.max_positions_, host.half_dim});
    m.rope_buffer_ = IS_TRY(backend.allocate(arena.bytes()));
    m.rope_.cos = m.rope_buffer_.view(DType::F32, {m.max_positions_, host.half_dim}, cos_off);
    m.rope_.sin = m.rope_buffer_.view(DType::F32, {m.max_positions_, host.half_dim}, sin_off);
    backend.copy_from_host(m.rope_.cos, host.cos.data(), table_bytes);
    backend.copy_from_host(m.rope_.sin, host.sin.data(), table_bytes);
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
        l.post_norm =
            IS_TRY(upload(backend, weights, layer_name(i, "post_attention_layernorm.weight"), {h}));
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

Status LlamaModel::validate(const ForwardBatch& batch, const kv::KvStorage& kv,
                            const ForwardWorkspace& ws) const {
    const WorkspaceLimits& lim = ws.limits;
    const auto n = static_cast<std::int64_t>(batch.token_ids.size());
    const auto num_seqs = static_cast<std::int64_t>(batch.sequences.size());
    const kv::KvLayout& layout = kv.layout();
    if (n == 0 || num_seqs == 0) return make_error("forward: empty batch");
    if (n > lim.max_tokens) {
        return make_error("forward: " + std::to_string(n) + " tokens exceed the workspace limit " +
                          std::to_string(lim.max_tokens));
    }
    if (num_seqs > lim.max_seqs) return make_error("forward: too many sequences for the workspace");
    if (static_cast<std::int64_t>(batch.positions.size()) != n) {
        return make_error("forward: positions and token ids differ in length");
    }
    if (layout.num_layers != config_.num_layers || layout.num_kv_heads != config_.num_kv_heads ||
        layout.head_dim != config_.head_dim) {
        return make_error("forward: kv storage layout does not match the model");
    }
    for (std::int64_t i = 0; i < n; ++i) {
        if (batch.token_ids[i] < 0 || batch.token_ids[i] >= config_.vocab_size) {
            return make_error("forward: token id " + std::to_string(batch.token_ids[i]) +
                              " outside the vocabulary");
        }
        if (batch.positions[i] < 0 || batch.positions[i] >= max_positions_) {
            return make_error("forward: position " + std::to_string(batch.positions[i]) +
                              " outside the RoPE table of " + std::to_string(max_positions_));
        }
    }
    std::int64_t tokens = 0, pages = 0;
    for (const BatchSequence& s : batch.sequences) {
        if (s.num_tokens <= 0 || s.kv_len < s.num_tokens) {
            return make_error("forward: a sequence needs new tokens and kv_len >= num_tokens");
        }
        const std::int64_t needed = ceil_div(s.kv_len, layout.block_size);
        if (static_cast<std::int64_t>(s.pages.size()) < needed) {
            return make_error("forward: kv_len " + std::to_string(s.kv_len) + " needs " +
                              std::to_string(needed) + " pages, got " +
                              std::to_string(s.pages.size()));
        }
        for (std::int64_t p = 0; p < needed; ++p) {
            if (s.pages[p] < 0 || s.pages[p] >= layout.num_blocks) {
                return make_error("forward: page id " + std::to_string(s.pages[p]) +
                                  " outside the kv storage");
            }
        }
        tokens += s.num_tokens;
        pages += needed;
    }
    if (tokens != n) return make_error("forward: sequence token counts do not sum to the batch");
    if (pages > lim.max_pages) return make_error("forward: too many pages for the workspace");
    const std::int64_t rows = num_logit_rows(batch);
    if (rows > lim.max_logit_rows)
        return make_error("forward: too many logit rows for the workspace");
    if (const KvCapture* cap = batch.capture) {
        const auto m = static_cast<std::int64_t>(cap->rows.size());
        for (std::int32_t r : cap->rows) {
            if (r < 0 || r >= n) return make_error("forward: capture row outside the batch");
        }
        for (const Tensor* t : {&cap->k, &cap->v}) {
            if (t->rank != 4 || t->shape[0] != config_.num_layers || t->shape[1] != m ||
                t->shape[2] != config_.num_kv_heads || t->shape[3] != config_.head_dim ||
                t->dtype != backend_->activation_dtype() || t->device != backend_->device()) {
                return make_error("forward: capture tensors must be [layers, rows, kv_heads, d]");
            }
        }
    }
    return {};
}

Status LlamaModel::forward(const ForwardBatch& batch, kv::KvStorage& kv, ForwardWorkspace& ws,
                           std::span<float> logits) {
    const std::int64_t rows = num_logit_rows(batch);
    if (static_cast<std::int64_t>(logits.size()) < rows * config_.vocab_size) {
        return make_error("forward: logits span too small");
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
    args.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
    args.fixed_max_kv_len = st.fixed_max_kv_len;
    // The GGUF loader un-interleaves the rotary pairs of llama/mistral Q/K rows (not qwen2's).
    args.qk_ggml_interleaved = config_.architecture != Architecture::Qwen2;

    const std::int64_t n = st.num_tokens;
    be.embedding(embed_.tensor, meta(l.token_ids, n), leading(ws.hidden, n));
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
    if (sample) be.argmax(out, leading(ws.sampled_ids, rows));
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

void LlamaModel::run_layer(std::int64_t layer, const tensor::PagedAttentionArgs& attn_args,
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
    const tensor::RopeArgs attention{
        heads(q, c.num_heads),    heads(k, c.num_kv_heads), positions,       rope_,
        heads(v, c.num_kv_heads), meta(l.slots, n),         kv.pages(layer), &attn_args,
        heads(attn, c.num_heads)};
    if (const std::int64_t m = st.capture_rows; m > 0) {
        be.linear({normed, qkv});
        // K is still unrotated here: the memory-injection chunk format wants it that way.
        const Tensor rows = meta(l.capture_rows, m);
        const std::int64_t kv_dim = c.num_kv_heads * c.head_dim;
        be.gather_rows(k, rows, reshaped(tensor::index0(st.capture_k, layer), {m, kv_dim}));
        be.gather_rows(v, rows, reshaped(tensor::index0(st.capture_v, layer), {m, kv_dim}));
        be.rope(attention);
    } else {
        be.linear({normed, qkv, tensor::LinearEpilogue::RopeAttention, &attention});
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
    be.add_rms_norm(residual, out, w.post_norm.tensor, c.rms_norm_eps, out);
    const Tensor gate = leading(ws.gate, carried);
    const tensor::LinearTarget gate_up[] = {{w.gate.tensor, Tensor(), gate},
                                            {w.up.tensor, Tensor(), leading(ws.up, carried)}};
    be.linear({out, gate_up, tensor::LinearEpilogue::SwiGLU});
    be.linear(gate, w.down.tensor, Tensor(), out);
    if (!last_layer) {
        be.add_rms_norm(residual, out, layers_[layer + 1].input_norm.tensor, c.rms_norm_eps,
                        out);
    } else {
        be.add(residual, out);  // the final norm runs in enqueue
    }
}

}  // namespace inferscale::model
