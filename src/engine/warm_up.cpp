#include "engine/warm_up.h"

#include <algorithm>
#include <vector>

#include "base/timer.h"

namespace inferscale::engine {
namespace {

// The step sizes: powers of two below max_tokens, then max_tokens.
std::vector<std::int64_t> step_sizes(std::int64_t max_tokens) {
    std::vector<std::int64_t> sizes;
    for (std::int64_t t = 1; t < max_tokens; t *= 2) sizes.push_back(t);
    if (max_tokens > 0) sizes.push_back(max_tokens);
    return sizes;
}

}  // namespace

Result<WarmUpReport> warm_up(LocalModel& model, model::DecodeGraphRunner* graphs,
                             std::int64_t max_seqs) {
    const Timer timer;
    WarmUpReport report;
    const std::int64_t block_size = model.block_size();
    for (const std::int64_t tokens : step_sizes(model.workspace().limits.max_tokens)) {
        const std::int64_t seqs = std::min(tokens, max_seqs);
        // Even runs, the remainder on the last sequence.
        std::vector<std::int32_t> counts(static_cast<std::size_t>(seqs),
                                         static_cast<std::int32_t>(tokens / seqs));
        counts.back() += static_cast<std::int32_t>(tokens % seqs);
        std::vector<std::vector<std::int32_t>> pages(counts.size());
        bool allocated = true;
        for (std::size_t s = 0; s < counts.size() && allocated; ++s) {
            const auto blocks =
                static_cast<std::int32_t>((counts[s] + block_size - 1) / block_size);
            allocated = model.blocks().allocate(blocks, pages[s]);
        }
        if (!allocated) {
            for (const std::vector<std::int32_t>& p : pages) model.blocks().release(p);
            ++report.skipped;
            continue;
        }
        std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens), 0), positions;
        std::vector<model::BatchSequence> sequences;
        for (std::size_t s = 0; s < counts.size(); ++s) {
            for (std::int32_t p = 0; p < counts[s]; ++p) positions.push_back(p);
            sequences.push_back(model::BatchSequence{counts[s], counts[s], pages[s]});
        }
        model::ForwardBatch batch;
        batch.token_ids = ids;
        batch.positions = positions;
        batch.sequences = sequences;
        batch.logits = model::LogitsSelection::LastPerSequence;
        std::vector<std::int32_t> sampled(static_cast<std::size_t>(seqs));
        const bool decode = tokens == seqs && graphs != nullptr && graphs->bucket_for(seqs) == seqs;
        const Status st = decode ? graphs->decode(batch, sampled)
                                 : model.model().forward_greedy(batch, model.kv(),
                                                                model.workspace(), sampled);
        for (const std::vector<std::int32_t>& p : pages) model.blocks().release(p);
        IS_RETURN_IF_ERROR(st);
        ++report.steps;
    }
    report.seconds = timer.seconds();
    return report;
}

}  // namespace inferscale::engine
