#include "engine/chunk_encoder.h"

#include <algorithm>
#include <numeric>

#include "tensor/views.h"

namespace inferscale::engine {

using tensor::Tensor;

Result<ChunkEncoder> ChunkEncoder::create(tensor::Backend& backend, model::LlamaModel& model,
                                          kv::KvStorage& kv, kv::BlockPool& blocks,
                                          model::ForwardWorkspace& ws) {
    if (backend.activation_dtype() != kv.dtype() && !kv.fp8())
        return make_error("chunk encoder: activation and KV dtypes differ on this backend");
    const model::ModelConfig& c = model.config();
    ChunkEncoder enc;
    enc.backend_ = &backend;
    enc.model_ = &model;
    enc.kv_ = &kv;
    enc.blocks_ = &blocks;
    enc.ws_ = &ws;
    enc.max_tokens_ = ws.limits.max_tokens;
    enc.max_seqs_ = std::min(ws.limits.max_seqs, ws.limits.max_pages);
    const std::size_t plane =
        static_cast<std::size_t>(c.num_layers * enc.max_tokens_ * c.num_kv_heads * c.head_dim) *
        tensor::dtype_size(backend.activation_dtype());
    enc.capture_buffer_ = IS_TRY(backend.allocate(2 * plane));
    enc.row_index_ = IS_TRY(backend.allocate(static_cast<std::size_t>(enc.max_tokens_) * 4));
    std::vector<std::int32_t> iota(static_cast<std::size_t>(enc.max_tokens_));
    std::iota(iota.begin(), iota.end(), 0);
    backend.copy_from_host(enc.row_index_.view(tensor::DType::I32, {enc.max_tokens_}), iota.data(),
                           iota.size() * sizeof(std::int32_t));
    return enc;
}

Result<std::vector<memory::KvChunk>> ChunkEncoder::encode(
    std::span<const ChunkRequest> requests, const Allocate& allocate) {
    const model::ModelConfig& c = model_->config();
    const std::int64_t max_len = model_->max_positions();
    const std::int64_t bs = kv_->layout().block_size;
    const tensor::DType dtype = kv_->dtype();

    std::vector<Sequence> seqs(requests.size());
    std::vector<memory::KvChunk> chunks;
    chunks.reserve(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const ChunkRequest& r = requests[i];
        const auto t = static_cast<std::int64_t>(r.fact_tokens.size());
        if (t == 0)
            return make_error("chunk encoder: fact '" + r.identity.fact_id + "' has no tokens");
        if (t > max_len)
            return make_error("chunk encoder: fact '" + r.identity.fact_id + "' has " +
                              std::to_string(t) + " tokens; the model takes " +
                              std::to_string(max_len));
        // Keep the newest context tokens that fit next to the fact.
        const auto ctx = static_cast<std::int64_t>(r.context_tokens.size());
        const std::int64_t keep = std::min(ctx, max_len - t);
        Sequence& s = seqs[i];
        s.tokens.assign(r.context_tokens.end() - keep, r.context_tokens.end());
        s.tokens.insert(s.tokens.end(), r.fact_tokens.begin(), r.fact_tokens.end());
        s.context_len = keep;
        const std::size_t bytes =
            static_cast<std::size_t>(c.num_layers * 2 * t * c.num_kv_heads * c.head_dim) *
            tensor::dtype_size(dtype);
        tensor::Buffer buf = IS_TRY(allocate ? allocate(bytes) : backend_->allocate(bytes));
        chunks.emplace_back(r.identity, r.fact_tokens, c.num_layers, c.num_kv_heads, c.head_dim,
                            dtype, std::move(buf));
    }

    // Pack whole sequences into steps; a sequence longer than a step runs alone, in pieces.
    kv::ScratchBlocks scratch(*blocks_);  // returned on every path out of encode()
    std::vector<Piece> step;
    std::int64_t step_tokens = 0;
    auto flush = [&]() -> Status {
        if (step.empty()) return {};
        IS_RETURN_IF_ERROR(run_step(step, seqs, chunks));
        step.clear();
        step_tokens = 0;
        scratch.release_all();
        return {};
    };
    auto claim_blocks = [&](Sequence& s) -> Status {
        const auto needed =
            static_cast<std::int32_t>((static_cast<std::int64_t>(s.tokens.size()) + bs - 1) / bs);
        if (!scratch.take(needed, s.blocks))
            return make_error("chunk encoder: not enough free KV blocks to encode a fact");
        return {};
    };
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        Sequence& s = seqs[i];
        const auto len = static_cast<std::int64_t>(s.tokens.size());
        if (len <= max_tokens_) {
            if (step_tokens + len > max_tokens_ ||
                static_cast<std::int64_t>(step.size()) >= max_seqs_ ||
                blocks_->num_free() * bs < len)
                IS_RETURN_IF_ERROR(flush());
            IS_RETURN_IF_ERROR(claim_blocks(s));
            step.push_back({static_cast<std::int64_t>(i), 0, len});
            step_tokens += len;
            continue;
        }
        IS_RETURN_IF_ERROR(flush());
        IS_RETURN_IF_ERROR(claim_blocks(s));
        for (std::int64_t start = 0; start < len; start += max_tokens_) {
            const Piece piece{static_cast<std::int64_t>(i), start,
                              std::min(max_tokens_, len - start)};
            IS_RETURN_IF_ERROR(run_step({&piece, 1}, seqs, chunks));
        }
        scratch.release_all();
    }
    IS_RETURN_IF_ERROR(flush());
    for (Sequence& s : seqs) s.blocks.clear();
    return chunks;
}

Status ChunkEncoder::run_step(std::span<const Piece> pieces, std::span<Sequence> seqs,
                              std::span<memory::KvChunk> chunks) {
    const model::ModelConfig& c = model_->config();
    const std::int64_t row = c.num_kv_heads * c.head_dim;
    ids_.clear();
    positions_.clear();
    capture_rows_.clear();
    batch_seqs_.clear();
    // Where each piece's fact rows sit: in the capture (first row) and in its chunk.
    struct Copy {
        std::int64_t seq, capture_row, chunk_row, count;
    };
    std::vector<Copy> copies;
    copies.reserve(pieces.size());
    for (const Piece& p : pieces) {
        const Sequence& s = seqs[static_cast<std::size_t>(p.seq)];
        const auto batch_row = static_cast<std::int64_t>(ids_.size());
        for (std::int64_t j = p.start; j < p.start + p.count; ++j) {
            ids_.push_back(s.tokens[static_cast<std::size_t>(j)]);
            positions_.push_back(static_cast<std::int32_t>(j));
        }
        const std::int64_t first = std::max(p.start, s.context_len);
        const std::int64_t last = p.start + p.count;
        if (first < last) {
            copies.push_back({p.seq, static_cast<std::int64_t>(capture_rows_.size()),
                              first - s.context_len, last - first});
            for (std::int64_t j = first; j < last; ++j)
                capture_rows_.push_back(static_cast<std::int32_t>(batch_row + j - p.start));
        }
        model::BatchSequence bseq;
        bseq.num_tokens = static_cast<std::int32_t>(p.count);
        bseq.kv_len = static_cast<std::int32_t>(p.start + p.count);
        bseq.pages = s.blocks;
        batch_seqs_.push_back(bseq);
    }

    const auto m = static_cast<std::int64_t>(capture_rows_.size());
    const tensor::DType act = backend_->activation_dtype();
    const std::size_t plane =
        static_cast<std::size_t>(c.num_layers * max_tokens_ * row) * tensor::dtype_size(act);
    model::KvCapture capture;
    capture.rows = capture_rows_;
    // Views of exactly m rows: the capture is read as [num_layers][m][kvh][d].
    capture.k = capture_buffer_.view(act, {c.num_layers, m, c.num_kv_heads, c.head_dim});
    capture.v = capture_buffer_.view(act, {c.num_layers, m, c.num_kv_heads, c.head_dim}, plane);

    model::ForwardBatch batch;
    batch.token_ids = ids_;
    batch.positions = positions_;
    batch.sequences = batch_seqs_;
    batch.logits = model::LogitsSelection::None;
    batch.capture = m > 0 ? &capture : nullptr;
    IS_RETURN_IF_ERROR(model_->forward(batch, *kv_, *ws_, {}));
    if (m == 0) return {};

    // Capture [layer][m] rows -> chunk [layer][K|V][t] rows: each copy's rows are consecutive
    // in both, so per layer one KV write into the chunk seen as a single page (the cache's
    // FP8 scales round them as the cache would).
    const Tensor index = row_index_.view(tensor::DType::I32, {max_tokens_});
    const std::int64_t kvh = c.num_kv_heads, d = c.head_dim;
    for (const Copy& cp : copies) {
        memory::KvChunk& chunk = chunks[static_cast<std::size_t>(cp.seq)];
        const Tensor slots = tensor::leading(index, cp.count);
        const auto page = [&](const Tensor& plane) {
            const Tensor rows = tensor::rows(plane, cp.chunk_row, cp.count);
            return tensor::reshaped(rows, {1, cp.count, kvh, d});
        };
        for (std::int64_t l = 0; l < c.num_layers; ++l) {
            tensor::KvPages dst = kv_->pages(l);
            dst.k = page(chunk.k(l));
            dst.v = page(chunk.v(l));
            backend_->write_kv(tensor::rows(tensor::index0(capture.k, l), cp.capture_row, cp.count),
                               tensor::rows(tensor::index0(capture.v, l), cp.capture_row, cp.count),
                               slots, dst);
        }
    }
    return {};
}

}  // namespace inferscale::engine
