#pragma once
// What a caller asks the engine for: an EngineRequest, with its memory mode and retrieval
// options. The server's request bodies and the CLI's flags both become one, and both choose
// the memory options through choose_memory, so the two front doors cannot disagree.
//
// Memory modes, answering with a user's facts:
//   kv      the facts' pre-encoded KV chunks are injected (rotated to their positions) and only
//           the footer tail and the conversation are prefilled;
//   prompt  the same facts as text in the system prompt, the identical token stream, all of it
//           prefilled (the Mem0 way);
//   none    the conversation alone.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "grammar/matcher.h"
#include "retrieval/fact_retriever.h"
#include "sampling/sampling_params.h"
#include "template/chat_template.h"

namespace inferscale::engine {

enum class MemoryMode { Kv, Prompt, None };

const char* memory_mode_name(MemoryMode mode);
// "kv", "prompt" or "none"; an Error otherwise.
Result<MemoryMode> parse_memory_mode(std::string_view name);

struct RetrievalOptions {
    int top_k = 5;
    int context_window = 0;  // w: preceding conversation turns each chunk is encoded after
    // bm25, dense or hybrid; unset: the retriever's default (FactRetriever::default_method).
    std::optional<retrieval::RetrievalMethod> method;
};

struct EngineRequest {
    // Chat: rendered with the model's chat template and the generation prompt ...
    std::vector<jinja::ChatMessage> messages;
    // ... with these tools for the template's `tools` (OpenAI function entries), or None. A
    // request whose template renders tools runs without memory.
    jinja::Value tools = jinja::None{};
    // ... or a completion: the raw prompt text (tokenized with the tokenizer's BOS rule) ...
    std::optional<std::string> prompt;
    // ... or a completion of these token ids as they are (used when messages and prompt are
    // empty; each must be inside the model's vocabulary).
    std::vector<std::int32_t> prompt_token_ids;
    sampling::SamplingParams sampling;
    // Structured output: every sampled token keeps the output inside this grammar (compiled
    // for the model's vocabulary: LocalModel::grammars()), and the answer ends when the
    // grammar is complete; null: unconstrained.
    std::shared_ptr<const grammar::CompiledGrammar> grammar;
    // Memory: the user whose facts are retrieved for the last user message. Only chat
    // requests carry memory; mode None ignores the user, and a user with no facts is answered
    // as mode None.
    std::string user;
    MemoryMode memory_mode = MemoryMode::None;
    RetrievalOptions retrieval;
    // The first token's event carries the logits it was sampled from (tests, evaluation).
    bool keep_prompt_logits = false;
    // The first token's event carries each prompt token's log-probability given the tokens
    // before it, with sampling.logprobs alternatives (which must be >= 0; OpenAI's echo with
    // logprobs). The whole prompt is then computed: no prefix-cache hits. Not with memory.
    bool prompt_logprobs = false;
    // Background work (fact extraction): scheduled only with the room foreground requests
    // leave (see Scheduler), so it never delays them by more than sharing a step.
    bool background = false;
};

// The memory options a front door applies when a request leaves them out.
struct MemoryDefaults {
    MemoryMode mode = MemoryMode::Kv;  // for a request with a user
    int top_k = 5;
    int context_window = 0;
    std::optional<retrieval::RetrievalMethod> retrieval = {};
};

// What a request said about memory; unset fields take the defaults.
struct MemoryChoice {
    std::optional<std::string> mode;
    std::optional<std::int64_t> top_k;
    std::optional<std::int64_t> context_window;
    std::optional<std::string> retrieval = {};
};

// The option a choice got wrong ("mode", "top_k", "context_window", "retrieval" or "user")
// and why.
struct MemoryChoiceError {
    std::string option;
    std::string message;
};

// Sets `request`'s memory mode and retrieval options from `choice` over `defaults`, for the
// user already in request.user: without a user the mode is None unless the choice names one
// (then an error on "user"); top_k and context_window must be in [0, 1000].
std::optional<MemoryChoiceError> choose_memory(const MemoryChoice& choice,
                                               const MemoryDefaults& defaults,
                                               EngineRequest& request);

}  // namespace inferscale::engine
