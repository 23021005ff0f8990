#include "model/decode_graphs.h"

#include <algorithm>

#include "base/timer.h"

namespace inferscale::model {

Result<DecodeGraphRunner> DecodeGraphRunner::create(LlamaModel& model, kv::KvStorage& kv,
                                                    ForwardWorkspace& ws,
                                                    const DecodeGraphOptions& options) {
    if (options.max_kv_len <= 0) return make_error("decode graphs: max_kv_len must be positive");
    DecodeGraphRunner r;
    r.model_ = &model;
    r.backend_ = &model.backend();
    r.kv_ = &kv;
    r.ws_ = &ws;
    r.max_kv_len_ = options.max_kv_len;
    r.use_graphs_ = options.use_graphs && r.backend_->supports_graphs();
    const WorkspaceLimits& lim = ws.limits;
    std::vector<std::int64_t> sizes = options.buckets;
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (std::int64_t b : sizes) {
        // Each padding sequence takes one page entry on top of the real ones; the stage
        // checks the total per step.
        if (b <= 0 || b > lim.max_tokens || b > lim.max_seqs || b > lim.max_logit_rows) continue;
        r.buckets_.push_back(Bucket{b, nullptr});
    }
    if (r.buckets_.empty()) return make_error("decode graphs: no bucket fits the workspace");
    return r;
}

std::int64_t DecodeGraphRunner::bucket_for(std::int64_t num_seqs) const {
    for (const Bucket& b : buckets_) {
        if (b.size >= num_seqs) return b.size;
    }
    return 0;
}

int DecodeGraphRunner::graphs_captured() const {
    return static_cast<int>(std::count_if(buckets_.begin(), buckets_.end(),
                                          [](const Bucket& b) { return b.graph != nullptr; }));
}

Status DecodeGraphRunner::decode(const ForwardBatch& batch, std::span<std::int32_t> ids,
                                 std::span<float> logits) {
    const auto s = static_cast<std::int64_t>(batch.sequences.size());
    const std::int64_t vocab = model_->config().vocab_size;
    auto it = std::find_if(buckets_.begin(), buckets_.end(),
                           [s](const Bucket& b) { return b.size >= s; });
    if (it == buckets_.end()) return make_error("decode graphs: batch larger than every bucket");
    if (static_cast<std::int64_t>(ids.size()) < s)
        return make_error("decode graphs: ids too small");
    if (!logits.empty() && static_cast<std::int64_t>(logits.size()) < s * vocab) {
        return make_error("decode graphs: logits span too small");
    }
    StageOptions so;
    so.pad_to = it->size;
    so.fixed_max_kv_len = max_kv_len_;
    const Timer staging;
    IS_RETURN_IF_ERROR(model_->stage(batch, *kv_, *ws_, so));
    times_.stage_ms = staging.millis();
    const std::span<std::int32_t> out_ids = ids.first(static_cast<std::size_t>(s));
    const std::span<float> out_logits =
        logits.empty() ? logits : logits.first(static_cast<std::size_t>(s * vocab));
    const auto read_results = [&] {
        const Timer waiting;
        model_->read_results(*ws_, out_ids, out_logits);
        times_.wait_ms = waiting.millis();
    };
    if (use_graphs_ && it->graph != nullptr) {
        backend_->replay(*it->graph);
        read_results();
        return {};
    }
    // Eagerly: without graphs, or the bucket's first step (which also builds the GEMM plans,
    // autotuning included, that a capture must not build).
    model_->enqueue(*kv_, *ws_, /*sample=*/true);
    read_results();
    if (!use_graphs_) return {};

    // Record the step just run. Recording runs nothing, so the KV written above stays as is;
    // the recording reads the staged metadata region, which every later stage rewrites.
    if (Status st = backend_->begin_capture(); !st.ok()) {
        use_graphs_ = false;
        graph_error_ = st.error().message;
        return {};
    }
    model_->enqueue(*kv_, *ws_, /*sample=*/true);
    Result<std::unique_ptr<tensor::CapturedGraph>> graph = backend_->end_capture();
    if (!graph.ok()) {
        // Keep serving, eagerly: a capture failure is a performance loss, not a wrong answer.
        use_graphs_ = false;
        graph_error_ = graph.error().message;
        return {};
    }
    it->graph = std::move(graph).value();
    return {};
}

}  // namespace inferscale::model
