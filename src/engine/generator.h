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

enum class FinishReason { Stop, Length };  // Stop: EOS or a stop string; Length: max tokens or context

struct Generation {
    std::vector<std::int32_t> token_ids;  // sampled tokens, end-of-generation token excluded
    std::string text;                     // decoded, cut before a matched stop string
    FinishReason finish_reason = FinishReason::Length;
    double prefill_seconds = 0.0;  // prompt forward passes up to the first sampled token
    double decode_seconds = 0.0;   // every later token
};

// Receives each piece of final text as soon as it is known.
using TextSink = std::function<void(std::string_view)>;

// An Error for an empty prompt, a prompt that leaves no room in the context, invalid sampling
// parameters, or too few free KV blocks.
Result<Generation> generate(LocalModel& model, const std::vector<std::int32_t>& prompt,
                            const sampling::SamplingParams& params, const TextSink& sink = {});

const char* finish_reason_name(FinishReason reason);

}  // namespace inferscale::engine
