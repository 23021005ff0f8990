#include "engine/generator.h"

#include <algorithm>
#include <numeric>

#include "base/timer.h"
#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"

namespace inferscale::engine {
namespace {

// Returns a sequence's blocks to the pool when generation ends, on every path.
class BlockLease {
  public:
    explicit BlockLease(kv::BlockPool& pool) : pool_(pool) {}
    // Takes ownership of blocks already allocated from the pool.
    BlockLease(kv::BlockPool& pool, std::vector<kv::BlockId> adopted)
        : pool_(pool), blocks_(std::move(adopted)) {}
    ~BlockLease() { pool_.release(blocks_); }
    BlockLease(const BlockLease&) = delete;
    BlockLease& operator=(const BlockLease&) = delete;

    // Grows the lease to hold `tokens` tokens; false when the pool is short.
    bool cover(std::int64_t tokens, std::int64_t block_size) {
        const auto needed = static_cast<std::int32_t>((tokens + block_size - 1) / block_size);
        const auto missing = needed - static_cast<std::int32_t>(blocks_.size());
        return missing <= 0 || pool_.allocate(missing, blocks_);
    }
    const std::vector<kv::BlockId>& blocks() const { return blocks_; }

  private:
    kv::BlockPool& pool_;
    std::vector<kv::BlockId> blocks_;
};

}  // namespace

const char* finish_reason_name(FinishReason reason) {
    return reason == FinishReason::Stop ? "stop" : "length";
}

Result<Generation> generate(LocalModel& lm, const std::vector<std::int32_t>& prompt,
                            const sampling::SamplingParams& params, const TextSink& sink) {
    return generate(lm, prompt, params, sink, GenerateOptions{});
}

Result<Generation> generate(LocalModel& lm, const std::vector<std::int32_t>& prompt,
                            const sampling::SamplingParams& params, const TextSink& sink,
                            GenerateOptions options) {
    // Adopt the prefix blocks first, so they go back to the pool whatever fails below.
    BlockLease lease(lm.blocks(), std::move(options.prefix_blocks));
    const std::int64_t prefix = options.prefix_tokens;
    IS_RETURN_IF_ERROR(sampling::validate(params));
    if (prompt.empty()) return make_error("the prompt is empty");
    const auto prompt_len = static_cast<std::int64_t>(prompt.size());
    if (prompt_len >= lm.max_context())
        return make_error("the prompt has " + std::to_string(prompt_len) +
                          " tokens; the context holds " + std::to_string(lm.max_context()));
    const std::int64_t vocab = lm.config().vocab_size;
    for (std::int32_t id : prompt)
        if (id < 0 || id >= vocab)
            return make_error("token id " + std::to_string(id) + " is outside the vocabulary");
    const std::int64_t max_new =
        std::min<std::int64_t>(params.max_tokens, lm.max_context() - prompt_len);

    if (prefix < 0 || prefix >= prompt_len)
        return make_error("the KV prefix must be shorter than the prompt");
    if (prefix > static_cast<std::int64_t>(lease.blocks().size()) * lm.block_size())
        return make_error("the KV prefix is longer than its blocks");
    if (!lease.cover(prompt_len + 1, lm.block_size()))
        return make_error("not enough free KV cache blocks for the prompt");

    sampling::Sampler sampler(params);
    sampling::StopMatcher stops(params.stop);
    tokenizer::IncrementalDecoder decoder(lm.tokenizer());
    std::vector<float> logits(static_cast<std::size_t>(vocab));
    std::vector<std::int32_t> positions(static_cast<std::size_t>(lm.workspace().limits.max_tokens));
    Generation out;
    Timer timer;

    // Runs `count` tokens starting at KV index `start`; logits only for the last step of a run.
    auto step = [&](const std::int32_t* ids, std::int64_t start, std::int64_t count,
                    bool want_logits) -> Status {
        std::iota(positions.begin(), positions.begin() + count, static_cast<std::int32_t>(start));
        model::BatchSequence seq;
        seq.num_tokens = static_cast<std::int32_t>(count);
        seq.kv_len = static_cast<std::int32_t>(start + count);
        seq.pages = lease.blocks();
        model::ForwardBatch batch;
        batch.token_ids = {ids, static_cast<std::size_t>(count)};
        batch.positions = {positions.data(), static_cast<std::size_t>(count)};
        batch.sequences = {&seq, 1};
        batch.logits = want_logits ? model::LogitsSelection::LastPerSequence
                                   : model::LogitsSelection::None;
        return lm.model().forward(batch, lm.kv(), lm.workspace(),
                                  want_logits ? std::span<float>(logits) : std::span<float>());
    };

    const std::int64_t chunk = lm.workspace().limits.max_tokens;
    for (std::int64_t start = prefix; start < prompt_len; start += chunk) {
        const std::int64_t count = std::min(chunk, prompt_len - start);
        IS_RETURN_IF_ERROR(step(prompt.data() + start, start, count, start + count == prompt_len));
    }
    out.prefill_seconds = timer.seconds();
    out.prefilled_tokens = prompt_len - prefix;
    if (options.keep_prompt_logits) out.prompt_logits = logits;
    timer.reset();

    std::int64_t kv_len = prompt_len;
    auto emit = [&](std::string_view text) {
        if (text.empty()) return;
        out.text.append(text);
        if (sink) sink(text);
    };
    for (std::int64_t i = 0; i < max_new; ++i) {
        const std::int32_t token = sampler.sample(logits);
        if (!params.ignore_eos && lm.is_end_of_generation(token)) {
            out.finish_reason = FinishReason::Stop;
            break;
        }
        out.token_ids.push_back(token);
        emit(stops.push(decoder.push(token)));
        if (stops.stopped()) {
            out.finish_reason = FinishReason::Stop;
            break;
        }
        if (i + 1 == max_new) break;
        if (!lease.cover(kv_len + 1, lm.block_size()))
            return make_error("the KV cache ran out of blocks during generation");
        IS_RETURN_IF_ERROR(step(&token, kv_len, 1, true));
        ++kv_len;
    }
    if (!stops.stopped()) emit(stops.push(decoder.flush()));
    if (!stops.stopped()) emit(stops.flush());
    out.decode_seconds = timer.seconds();
    return out;
}

}  // namespace inferscale::engine
