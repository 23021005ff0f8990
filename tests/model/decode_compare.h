#pragma once
// Shared by decode_runner_test (CPU) and cuda_decode_graph_test: runs the same greedy decode
// twice in lockstep, once by plain LlamaModel::forward (host logits) on one KV cache and once
// through DecodeGraphRunner (padded buckets; graphs where the backend has them) on a second,
// identically prefilled cache, and reports the largest relative logits error and the token
// agreement. Both paths are fed the eager path's tokens, so one near-tie cannot make the runs
// diverge.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kv/kv_storage.h"
#include "model/decode_graphs.h"
#include "model/llama_model.h"

namespace inferscale::decode_test {

struct DecodeComparison {
    double max_rel_error = 0.0;
    int tokens = 0;        // compared tokens
    int agree = 0;         // runner id == eager argmax
    int clear_rows = 0;    // rows whose top-2 margin exceeds the tolerance
    int clear_agree = 0;   // ... and agree
    int graphs = 0;        // graphs the runner recorded
};

inline std::int32_t argmax_row(const float* row, std::int64_t vocab) {
    return static_cast<std::int32_t>(std::max_element(row, row + vocab) - row);
}

// `prompt_lens` sequences (prompt tokens derived from the index), prefilled in one eager
// forward on each cache; then `steps` decode steps of all of them, then `steps` of the first
// one alone (a second bucket).
inline DecodeComparison compare_decode(model::LlamaModel& m, const std::vector<int>& prompt_lens,
                                       int steps, std::int64_t block_size) {
    tensor::Backend& be = m.backend();
    const std::int64_t vocab = m.config().vocab_size;
    const auto seqs = static_cast<std::int64_t>(prompt_lens.size());
    // The first sequence decodes in both phases: 2 * steps tokens past its prompt.
    const int max_len = *std::max_element(prompt_lens.begin(), prompt_lens.end()) + 2 * steps + 1;
    const std::int64_t pages_per_seq = (max_len + block_size - 1) / block_size;
    const std::int64_t num_blocks = pages_per_seq * seqs + 1;
    auto kv_a = kv::KvStorage::create(be, m.kv_layout(num_blocks, block_size));
    auto kv_b = kv::KvStorage::create(be, m.kv_layout(num_blocks, block_size));
    IS_CHECK(kv_a.ok() && kv_b.ok()) << "kv";
    const std::int64_t prompt_tokens = std::accumulate(prompt_lens.begin(), prompt_lens.end(), 0);
    const model::WorkspaceLimits lim{.max_tokens = std::max<std::int64_t>(prompt_tokens, 8),
                                     .max_seqs = 8,
                                     .max_pages = num_blocks * 2,
                                     .max_logit_rows = 8};
    auto ws_a = m.create_workspace(lim);
    auto ws_b = m.create_workspace(lim);
    IS_CHECK(ws_a.ok() && ws_b.ok()) << "workspace";
    model::DecodeGraphOptions go;
    go.buckets = {1, 2, 4, 8};
    go.max_kv_len = static_cast<std::int32_t>(pages_per_seq * block_size);
    auto runner = model::DecodeGraphRunner::create(m, *kv_b, *ws_b, go);
    IS_CHECK(runner.ok()) << runner.error().message;

    // Pages scrambled across sequences (sequence s owns blocks s, s + seqs, ...).
    std::vector<std::vector<std::int32_t>> pages(seqs);
    for (std::int64_t s = 0; s < seqs; ++s) {
        for (std::int64_t p = 0; p < pages_per_seq; ++p) {
            pages[s].push_back(static_cast<std::int32_t>(s + p * seqs));
        }
    }
    std::vector<int> len(prompt_lens);
    std::vector<std::int32_t> next(seqs);
    {
        std::vector<std::int32_t> tokens, positions;
        std::vector<model::BatchSequence> bs;
        for (std::int64_t s = 0; s < seqs; ++s) {
            for (int j = 0; j < len[s]; ++j) {
                tokens.push_back(static_cast<std::int32_t>((j * 31 + s * 17 + 1) % vocab));
                positions.push_back(j);
            }
            bs.push_back({len[s], len[s], pages[s]});
        }
        const model::ForwardBatch b{tokens, positions, bs};
        std::vector<float> logits(seqs * vocab);
        IS_CHECK(m.forward(b, *kv_a, *ws_a, logits).ok()) << "prefill a";
        IS_CHECK(m.forward(b, *kv_b, *ws_b, logits).ok()) << "prefill b";
        for (std::int64_t s = 0; s < seqs; ++s) next[s] = argmax_row(&logits[s * vocab], vocab);
    }

    DecodeComparison r;
    std::vector<float> eager(seqs * vocab), replayed(seqs * vocab);
    std::vector<std::int32_t> ids(seqs);
    for (int phase = 0; phase < 2; ++phase) {
        const std::int64_t active = phase == 0 ? seqs : 1;
        for (int step = 0; step < steps; ++step) {
            std::vector<std::int32_t> tokens, positions;
            std::vector<model::BatchSequence> bs;
            for (std::int64_t s = 0; s < active; ++s) {
                tokens.push_back(next[s]);
                positions.push_back(len[s]);
                bs.push_back({1, len[s] + 1, pages[s]});
            }
            const model::ForwardBatch b{tokens, positions, bs};
            const std::size_t n = static_cast<std::size_t>(active * vocab);
            const Status eager_status = m.forward(b, *kv_a, *ws_a, std::span(eager).first(n));
            IS_CHECK(eager_status.ok()) << "eager: " << eager_status.error().message;
            const Status st = runner->decode(b, ids, std::span(replayed).first(n));
            IS_CHECK(st.ok()) << st.error().message;
            for (std::int64_t s = 0; s < active; ++s) {
                const float* e = &eager[s * vocab];
                const float* g = &replayed[s * vocab];
                double num = 0.0, den = 0.0;
                for (std::int64_t i = 0; i < vocab; ++i) {
                    num += (e[i] - g[i]) * static_cast<double>(e[i] - g[i]);
                    den += static_cast<double>(e[i]) * e[i];
                }
                r.max_rel_error = std::max(r.max_rel_error, std::sqrt(num / std::max(den, 1e-30)));
                const std::int32_t want = argmax_row(e, vocab);
                std::vector<float> sorted(e, e + vocab);
                std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(),
                                 std::greater<float>());
                // "Clear": the top-2 margin is well above bf16 noise relative to the row's
                // scale (tiny random checkpoints have small logits).
                double sq = 0.0;
                for (std::int64_t i = 0; i < vocab; ++i) sq += static_cast<double>(e[i]) * e[i];
                const double rms = std::sqrt(sq / static_cast<double>(vocab));
                const bool clear = sorted[0] - sorted[1] > 0.05 * rms;
                ++r.tokens;
                r.agree += ids[s] == want;
                r.clear_rows += clear;
                r.clear_agree += clear && ids[s] == want;
                // The runner's id is the argmax of its own logits, always.
                EXPECT_EQ(ids[s], argmax_row(g, vocab));
                next[s] = want;
                ++len[s];
            }
        }
    }
    r.graphs = runner->graphs_captured();
    EXPECT_TRUE(runner->graph_error().empty()) << runner->graph_error();
    return r;
}

}  // namespace inferscale::decode_test
