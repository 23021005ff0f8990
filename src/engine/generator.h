#pragma once
// generate(): one sequence from prompt to finish on a LocalModel: chunked prefill, then one
// decode step per token through the paged KV cache, sampling, end-of-generation and stop
// strings. Streams text as it becomes final. Blocks are taken from the model's BlockPool and
// returned before the call ends, whatever the outcome.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/local_model.h"
#include "sampling/sampling_params.h"

namespace inferscale::engine {

enum class FinishReason { Stop, Length };  // Stop: EOS or a stop string; Length: max tokens or
                                           // context

struct Generation {
    std::vector<std::int32_t> token_ids;  // sampled tokens, end-of-generation token excluded
    std::string text;                     // decoded, cut before a matched stop string
    FinishReason finish_reason = FinishReason::Length;
    double prefill_seconds = 0.0;  // prompt forward passes up to the first sampled token
    double decode_seconds = 0.0;   // every later token
    std::int64_t prefilled_tokens = 0;  // prompt tokens run through the model (not injected)
    std::vector<float> prompt_logits;   // [vocab] f32, only with keep_prompt_logits
};

// Receives each piece of final text as soon as it is known.
using TextSink = std::function<void(std::string_view)>;

struct GenerateOptions {
    // The prompt's first `prefix_tokens` tokens already have their KV in `prefix_blocks`
    // (memory injection wrote it; whole blocks, prefix_tokens < prompt length): only the rest
    // of the prompt is prefilled, attending over the prefix. generate() takes the blocks over
    // and returns them to the pool when it ends, on every path.
    std::vector<kv::BlockId> prefix_blocks;
    std::int64_t prefix_tokens = 0;
    // Copy the logits after the last prompt token into Generation::prompt_logits (tests).
    bool keep_prompt_logits = false;
};

// An Error for an empty prompt, a prompt that leaves no room in the context, invalid sampling
// parameters, or too few free KV blocks.
Result<Generation> generate(LocalModel& model, const std::vector<std::int32_t>& prompt,
                            const sampling::SamplingParams& params, const TextSink& sink = {});
// The same with an already computed KV prefix (see GenerateOptions). Also an Error when the
// prefix blocks cannot hold the prefix or the prefix is not shorter than the prompt.
Result<Generation> generate(LocalModel& model, const std::vector<std::int32_t>& prompt,
                            const sampling::SamplingParams& params, const TextSink& sink,
                            GenerateOptions options);

const char* finish_reason_name(FinishReason reason);

}  // namespace inferscale::engine
