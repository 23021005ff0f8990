#pragma once
// RequestStream: the channel between the engine's step loop, which produces a request's output,
// and the thread that serves it (an HTTP handler). The engine pushes events; the consumer takes
// whatever has accumulated since its last call, merged into one event, so a slow consumer
// costs one merge, not a queue per token. Cancelling (the client went away) is seen by the
// engine at its next step, which then frees the request's blocks.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace inferscale::engine {

struct Usage {
    std::int64_t prompt_tokens = 0;      // the whole prompt, injected memory included
    std::int64_t completion_tokens = 0;
    std::int64_t cached_tokens = 0;      // prompt tokens not computed: injected or prefix-cached
    std::int64_t memory_tokens = 0;      // prompt tokens that carry memory (kv and prompt modes)
    std::int64_t injected_tokens = 0;    // kv mode: tokens whose KV was injected
};

// A token as text (its bytes; a piece of a multi-byte character is not valid UTF-8 alone) and
// its log-probability under the model.
struct LogprobEntry {
    std::string token;
    float logprob = 0.0f;
};

struct TokenLogprobs {
    LogprobEntry sampled;
    std::vector<LogprobEntry> top;  // most likely first
    bool scored = true;  // false for a prompt's first token: nothing before it predicts it
};

struct StreamEvent {
    std::string text;              // final text since the previous event (never a partial stop)
    std::vector<std::int32_t> token_ids;  // tokens sampled since the previous event
    std::vector<TokenLogprobs> logprobs;  // one per new token, when the request asked for them
    bool first_token = false;      // this event carries the request's first sampled token
    std::vector<float> prompt_logits;  // with first_token, when the request kept them
    // With first_token, under EngineRequest::prompt_logprobs: one per prompt token.
    std::vector<TokenLogprobs> prompt_logprobs;
    bool finished = false;
    const char* finish_reason = "stop";  // "stop" or "length", with finished
    Usage usage;                   // with finished
    // With finished: seconds from submit to the first step that scheduled the request (0: never
    // scheduled), to the first token and to the end, on the engine's clock.
    double admitted_seconds = 0;
    double first_token_seconds = 0;
    double finished_seconds = 0;
    std::optional<Error> error;    // the request failed; finished is set
};

// A fact retrieved for a memory request, best-ranked first: the store's id (decimal), its text
// and the retrieval method's score.
struct RetrievedFact {
    std::string id;
    std::string text;
    double score = 0.0;
};

// A request's whole output, as collect() gathers it.
struct Completion {
    std::string text;
    std::vector<std::int32_t> token_ids;  // end-of-generation token excluded
    std::vector<float> prompt_logits;
    const char* finish_reason = "stop";
    Usage usage;
    double first_token_seconds = 0;
    double finished_seconds = 0;
};

class RequestStream {
  public:
    // Consumer side. Waits up to `timeout` for output: nullopt when none came, or after the
    // finishing event was taken.
    std::optional<StreamEvent> next(std::chrono::milliseconds timeout);
    void cancel();
    // A memory request's retrieved facts (empty for any other); set before submit returns.
    const std::vector<RetrievedFact>& memory_facts() const { return memory_facts_; }

    // Engine side.
    bool cancelled() const;
    void push(StreamEvent event);
    void set_memory_facts(std::vector<RetrievedFact> facts) { memory_facts_ = std::move(facts); }

    // Waits for the request to end, handing each piece of text to `on_text` as it comes. The
    // request's error, if it failed.
    Result<Completion> collect(const std::function<void(std::string_view)>& on_text = {});

  private:
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::optional<StreamEvent> pending_;
    bool done_ = false;  // the finishing event was taken
    bool cancelled_ = false;
    std::vector<RetrievedFact> memory_facts_;
};

}  // namespace inferscale::engine
