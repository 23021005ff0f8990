// LlamaModel::stage: checks a batch (validate) and packs its metadata (MetaLayout) into the
// workspace's pinned host staging and uploads it with a single copy, so a step costs one
// host-to-device transfer however many arrays the ops read. Padding (for replayable decode
// buckets) is added here.

#include <algorithm>
#include <string>

#include "model/llama_model.h"
#include "tensor/views.h"

namespace inferscale::model {
namespace {

using tensor::Tensor;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

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
    if (!batch.allowed_tokens.empty() &&
        (batch.logits != LogitsSelection::LastPerSequence ||
         static_cast<std::int64_t>(batch.allowed_tokens.size()) != num_seqs * ws.mask_words)) {
        return make_error("forward: allowed-token masks need last-token logits and " +
                          std::to_string(ws.mask_words) + " words per sequence");
    }
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

Status LlamaModel::stage(const ForwardBatch& batch, const kv::KvStorage& kv, ForwardWorkspace& ws,
                         const StageOptions& o) {
    IS_RETURN_IF_ERROR(validate(batch, kv, ws));
    const WorkspaceLimits& lim = ws.limits;
    const std::int64_t bs = kv.layout().block_size;
    const auto real_n = static_cast<std::int64_t>(batch.token_ids.size());
    const auto real_s = static_cast<std::int64_t>(batch.sequences.size());
    std::int64_t n = real_n, s = real_s;
    if (o.pad_to > 0 || o.fixed_max_kv_len > 0) {
        if (batch.logits != LogitsSelection::LastPerSequence || batch.capture != nullptr ||
            batch.before_layer != nullptr || !batch.allowed_tokens.empty() || real_n != real_s) {
            return make_error("forward: padded or fixed-size steps take decode batches only (one "
                              "token per sequence, last-token logits, no capture, no layer "
                              "hook, no allowed-token masks)");
        }
        if (o.pad_to > 0) {
            if (o.pad_to < real_s) return make_error("forward: batch larger than its padding");
            if (o.pad_to > lim.max_tokens || o.pad_to > lim.max_seqs ||
                o.pad_to > lim.max_logit_rows) {
                return make_error("forward: padded batch exceeds the workspace limits");
            }
            n = s = o.pad_to;
        }
        for (const BatchSequence& seq : batch.sequences) {
            if (o.fixed_max_kv_len > 0 && seq.kv_len > o.fixed_max_kv_len) {
                return make_error("forward: kv_len " + std::to_string(seq.kv_len) +
                                  " over the fixed bound " + std::to_string(o.fixed_max_kv_len));
            }
        }
    }
    const std::int64_t rows = batch.logits == LogitsSelection::LastPerSequence ? s
                              : batch.logits == LogitsSelection::AllTokens     ? n
                                                                               : 0;
    const KvCapture* cap = batch.capture;
    const std::int64_t m = cap != nullptr ? static_cast<std::int64_t>(cap->rows.size()) : 0;
    if (m > lim.max_tokens) return make_error("forward: too many capture rows");
    std::int64_t pages = s - real_s;  // one page per padding sequence
    for (const BatchSequence& seq : batch.sequences) pages += ceil_div(seq.kv_len, bs);
    if (pages > lim.max_pages) return make_error("forward: too many pages for the workspace");
    const MetaLayout l = MetaLayout::make(n, s, rows, m);
    IS_CHECK(l.end(pages) <= ws.meta_capacity) << "metadata layout over capacity";

    std::int32_t* h = ws.host_meta();
    std::copy(batch.token_ids.begin(), batch.token_ids.end(), h + l.token_ids);
    std::copy(batch.positions.begin(), batch.positions.end(), h + l.positions);
    // Padding rows: token 0 at position 0, nothing written to the KV.
    std::fill(h + l.token_ids + real_n, h + l.token_ids + n, 0);
    std::fill(h + l.positions + real_n, h + l.positions + n, 0);
    std::int32_t* slots = h + l.slots;
    std::int32_t* qo = h + l.qo_indptr;
    std::int32_t* indptr = h + l.page_indptr;
    std::int32_t* last = h + l.last_page_len;
    std::int32_t* logit_rows = h + l.logit_rows;
    std::int32_t* indices = h + l.page_indices;
    qo[0] = 0;
    indptr[0] = 0;
    std::int64_t token = 0, page = 0;
    for (std::int64_t i = 0; i < real_s; ++i) {
        const BatchSequence& seq = batch.sequences[i];
        const std::int64_t needed = ceil_div(seq.kv_len, bs);
        for (std::int64_t j = seq.kv_len - seq.num_tokens; j < seq.kv_len; ++j) {
            slots[token++] = static_cast<std::int32_t>(seq.pages[j / bs] * bs + j % bs);
        }
        std::copy_n(seq.pages.begin(), needed, indices + page);
        page += needed;
        qo[i + 1] = static_cast<std::int32_t>(token);
        indptr[i + 1] = static_cast<std::int32_t>(page);
        last[i] = static_cast<std::int32_t>(seq.kv_len - (needed - 1) * bs);
        if (batch.logits == LogitsSelection::LastPerSequence) logit_rows[i] = qo[i + 1] - 1;
    }
    // Padding sequences attend to one KV entry of the first sequence's first page: a valid
    // read whose result is thrown away.
    for (std::int64_t i = real_s; i < s; ++i) {
        slots[token++] = -1;
        indices[page++] = batch.sequences[0].pages[0];
        qo[i + 1] = static_cast<std::int32_t>(token);
        indptr[i + 1] = static_cast<std::int32_t>(page);
        last[i] = 1;
        logit_rows[i] = qo[i + 1] - 1;
    }
    IS_CHECK(token == n && page == pages) << "metadata staging miscounted";
    if (batch.logits == LogitsSelection::AllTokens) {
        for (std::int64_t i = 0; i < n; ++i) logit_rows[i] = static_cast<std::int32_t>(i);
    }
    if (m > 0) std::copy(cap->rows.begin(), cap->rows.end(), h + l.capture_rows);

    const std::int64_t count = l.end(pages);
    backend_->copy_from_host(tensor::leading(ws.meta, count), h,
                             static_cast<std::size_t>(count) * sizeof(std::int32_t));
    const bool masked = !batch.allowed_tokens.empty();
    if (masked) {
        std::copy(batch.allowed_tokens.begin(), batch.allowed_tokens.end(),
                  reinterpret_cast<std::uint32_t*>(ws.host_allowed()));
        backend_->copy_from_host(tensor::leading(ws.allowed_tokens, real_s), ws.host_allowed(),
                                 batch.allowed_tokens.size_bytes());
    }

    StagedStep& st = ws.step;
    st.num_tokens = n;
    st.num_seqs = s;
    st.logit_rows = rows;
    st.capture_rows = m;
    st.num_pages = pages;
    st.fixed_max_kv_len = o.fixed_max_kv_len;
    st.layout = l;
    st.capture_k = cap != nullptr ? cap->k : tensor::Tensor();
    st.capture_v = cap != nullptr ? cap->v : tensor::Tensor();
    st.before_layer = batch.before_layer;
    st.masked = masked;
    return {};
}

}  // namespace inferscale::model
