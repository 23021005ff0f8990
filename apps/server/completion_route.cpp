// POST /v1/chat/completions and /v1/completions: one engine request per choice (each prompt
// times n), answered as one body or as one event stream whose chunks carry their choice's
// index. With memory.store, the first choice's answer is the exchange stored (exchange_memory.h).

#include <httplib.h>

#include <algorithm>
#include <chrono>

#include "apps/server/access_log.h"
#include "apps/server/completion_writer.h"
#include "apps/server/exchange_memory.h"
#include "apps/server/http_server.h"
#include "toolcall/call_parser.h"

namespace inferscale::server {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Parsed calls as the answer carries them: each with a new id, those past the first dropped
// unless the request allows parallel calls (`already`: calls of the choice taken before).
std::vector<jinja::ToolCall> answer_calls(const std::vector<toolcall::ParsedCall>& calls,
                                          std::size_t already, bool parallel) {
    std::vector<jinja::ToolCall> out;
    for (const toolcall::ParsedCall& c : calls) {
        if (!parallel && already + out.size() >= 1) break;
        out.push_back({toolcall::new_call_id(), c.name, c.arguments});
    }
    return out;
}

// The choices of one call in flight: their streams and what has come back so far.
struct Choices {
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    std::vector<std::string> echoes;  // per choice: the prompt text it starts with, or empty
    std::vector<ChoiceOutput> outputs;
    std::vector<bool> finished;
    // Per choice, with tools: its output read as content and calls as it streams.
    std::vector<toolcall::CallParser> parsers;
    std::size_t num_finished = 0;
    int n = 1;
    bool first_token_seen = false;
    engine::Usage usage;  // the prompts counted once each, every choice's completion tokens

    void cancel() const {
        for (const auto& s : streams) s->cancel();
    }
    bool done() const { return num_finished == streams.size(); }
    // Takes a finishing event of choice `i` into the totals.
    void finish(std::size_t i, const engine::StreamEvent& event) {
        finished[i] = true;
        ++num_finished;
        outputs[i].finish_reason = event.finish_reason;
        usage.completion_tokens += event.usage.completion_tokens;
        if (i % static_cast<std::size_t>(n) != 0) return;  // a copy of a counted prompt
        usage.prompt_tokens += event.usage.prompt_tokens;
        usage.cached_tokens += event.usage.cached_tokens;
        usage.memory_tokens += event.usage.memory_tokens;
        usage.injected_tokens += event.usage.injected_tokens;
    }
};

// One streaming answer: what the content provider needs between its calls.
struct StreamState {
    Choices choices;
    CompletionWriter writer;
    bool include_usage = false;
    bool logprobs = false;  // the request asked for them
    bool parallel_tool_calls = true;
    Clock::time_point start;
    bool finished = false;
    std::unique_ptr<ExchangeMemory> exchange;  // memory.store: stored once the answer is done
    std::string answer;                        // with `exchange`: the first choice's content
};

// The text a choice's answer starts with under `echo`: its prompt.
std::string echo_text(const engine::EngineRequest& prompt, const tokenizer::Tokenizer& tok) {
    return prompt.prompt ? *prompt.prompt : tok.decode(prompt.prompt_token_ids);
}

// The call's token counts, for its access-log line.
void record_usage(const engine::Usage& usage) {
    AccessRecord& record = access_record();
    record.prompt_tokens = usage.prompt_tokens;
    record.completion_tokens = usage.completion_tokens;
}

}  // namespace

void HttpServer::handle_completion(const httplib::Request& req, httplib::Response& res,
                                   bool chat) {
    const Clock::time_point start = Clock::now();
    const ApiKey* key = authenticate(ctx_, req, res);
    if (!key) return;
    const engine::LocalModel& model = ctx_.engine.model();
    auto parsed = parse_completion_call(req.body, chat,
                                        {ctx_.options.model_name, model.config().vocab_size,
                                         &model.grammars(), ctx_.tool_template},
                                        ctx_.options.memory);
    if (auto* error = std::get_if<ApiError>(&parsed)) return send_error(res, *error);
    CompletionCall call = std::move(std::get<CompletionCall>(parsed));
    const std::string& user = call.prompts.front().user;
    access_record().user = user;
    if (!user.empty() && !key->may_access(user))
        return send_error(res, {403, "this API key may not act for user '" + user + "'",
                                "permission_error", "user", "forbidden_user"});
    if (!ctx_.store)
        for (engine::EngineRequest& r : call.prompts) r.memory_mode = engine::MemoryMode::None;
    std::unique_ptr<ExchangeMemory> exchange;
    if (call.store_question) {
        if (!ctx_.extraction)
            return send_error(res, bad_request("'memory.store' needs a server with a memory store",
                                               "memory.store"));
        auto reserved = ExchangeMemory::reserve(ctx_, user, std::move(*call.store_question));
        if (auto* error = std::get_if<ApiError>(&reserved)) return send_error(res, *error);
        exchange = std::move(std::get<std::unique_ptr<ExchangeMemory>>(reserved));
        res.set_header(kMemoryEventHeader, std::to_string(exchange->event_id()));
    }
    const bool logprobs = call.prompts.front().sampling.logprobs >= 0;

    Choices choices;
    choices.n = call.n;
    for (const engine::EngineRequest& prompt : call.prompts) {
        const std::string echo = call.echo ? echo_text(prompt, model.tokenizer()) : "";
        choices.echoes.insert(choices.echoes.end(), call.n, echo);
    }
    for (engine::EngineRequest& r : choice_requests(call)) {
        auto submitted = ctx_.engine.submit(std::move(r));
        if (!submitted.ok()) {
            choices.cancel();
            return send_error(res, from_error(submitted.error()));
        }
        choices.streams.push_back(std::move(submitted).value());
    }
    choices.outputs.resize(choices.streams.size());
    choices.finished.assign(choices.streams.size(), false);
    if (call.tool_format)
        choices.parsers.assign(choices.streams.size(),
                               toolcall::CallParser(*call.tool_format, call.tool_names));

    if (!call.stream) {
        for (std::size_t i = 0; i < choices.streams.size(); ++i) {
            ChoiceOutput& out = choices.outputs[i];
            out.text = choices.echoes[i];
            while (!choices.finished[i]) {
                auto event = choices.streams[i]->next(std::chrono::milliseconds(200));
                if (!event) continue;
                if (event->first_token && !choices.first_token_seen) {
                    choices.first_token_seen = true;
                    ctx_.metrics.ttft.observe(seconds_since(start));
                }
                out.text += event->text;
                out.logprobs.insert(out.logprobs.end(), event->prompt_logprobs.begin(),
                                    event->prompt_logprobs.end());
                out.logprobs.insert(out.logprobs.end(), event->logprobs.begin(),
                                    event->logprobs.end());
                if (!event->finished) continue;
                if (event->error) {
                    choices.cancel();
                    return send_error(res, from_error(*event->error));
                }
                choices.finish(i, *event);
                ctx_.metrics.observe_end(*event);
            }
            if (call.tool_format) {
                toolcall::ParsedOutput parsed =
                    toolcall::parse_output(*call.tool_format, out.text, call.tool_names);
                out.text = std::move(parsed.content);
                out.tool_calls = answer_calls(parsed.calls, 0, call.parallel_tool_calls);
                if (!out.tool_calls.empty()) out.finish_reason = "tool_calls";
            }
        }
        if (exchange) exchange->store(choices.outputs.front().text);
        ctx_.metrics.latency.observe(seconds_since(start));
        record_usage(choices.usage);
        CompletionWriter writer(chat, ctx_.options.model_name, choices.outputs.size());
        if (call.return_facts) writer.report_memory_facts(choices.streams.front()->memory_facts());
        return send_json(res, writer.response(choices.outputs, choices.usage, logprobs));
    }

    const std::size_t num_choices = choices.streams.size();
    auto state = std::make_shared<StreamState>(StreamState{
        std::move(choices), CompletionWriter(chat, ctx_.options.model_name, num_choices),
        call.include_usage, logprobs, call.parallel_tool_calls, start, false, std::move(exchange),
        std::string()});
    if (call.return_facts)
        state->writer.report_memory_facts(state->choices.streams.front()->memory_facts());
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, state](std::size_t, httplib::DataSink& sink) {
            if (state->finished) return false;
            Choices& c = state->choices;
            if (!sink.is_writable()) {
                c.cancel();
                return false;
            }
            std::string out;
            bool failed = false;
            // What choice `i` sent since the last call, as chunks into `out`.
            const auto take = [&](std::size_t i, engine::StreamEvent& event) {
                if (event.first_token && !c.first_token_seen) {
                    c.first_token_seen = true;
                    ctx_.metrics.ttft.observe(seconds_since(state->start));
                }
                if (event.error) {
                    out += CompletionWriter::error_event(from_error(*event.error));
                    failed = true;
                    return;
                }
                if (event.first_token) {
                    event.text = c.echoes[i] + event.text;
                    event.logprobs.insert(event.logprobs.begin(), event.prompt_logprobs.begin(),
                                          event.prompt_logprobs.end());
                }
                // With tools the text goes through the call parser: content now, calls as
                // they complete, a possible call held back.
                std::vector<jinja::ToolCall> calls;
                if (!c.parsers.empty()) {
                    toolcall::CallParser& parser = c.parsers[i];
                    const std::size_t before = c.outputs[i].tool_calls.size();
                    toolcall::ParseDelta d = parser.push(event.text);
                    if (event.finished) {
                        toolcall::ParseDelta end = parser.finish();
                        d.content += end.content;
                        d.calls.insert(d.calls.end(), end.calls.begin(), end.calls.end());
                    }
                    event.text = std::move(d.content);
                    calls = answer_calls(d.calls, before, state->parallel_tool_calls);
                    c.outputs[i].tool_calls.insert(c.outputs[i].tool_calls.end(), calls.begin(),
                                                   calls.end());
                }
                if (i == 0 && state->exchange) state->answer += event.text;
                // Logprobs go out with their tokens, also when the text is held back (a
                // possible stop string, a partial character, a possible tool call).
                if (!event.text.empty() || event.first_token || !event.logprobs.empty())
                    out += state->writer.chunk(i, event.text, nullptr,
                                               state->logprobs ? &event.logprobs : nullptr);
                if (!calls.empty())
                    out += state->writer.tool_calls_chunk(
                        i, calls, c.outputs[i].tool_calls.size() - calls.size());
                if (event.finished) {
                    if (!c.outputs[i].tool_calls.empty()) event.finish_reason = "tool_calls";
                    out += state->writer.chunk(i, "", event.finish_reason, nullptr);
                    c.finish(i, event);
                    ctx_.metrics.observe_end(event);
                }
            };
            // Whatever any choice has ready; with nothing ready, a short wait on the first
            // unfinished one (the provider is called again).
            std::size_t first_open = c.streams.size();
            for (std::size_t i = 0; i < c.streams.size() && !failed; ++i) {
                if (c.finished[i]) continue;
                first_open = std::min(first_open, i);
                if (auto event = c.streams[i]->next(std::chrono::milliseconds(0))) take(i, *event);
            }
            if (out.empty() && !failed && first_open < c.streams.size()) {
                if (auto event = c.streams[first_open]->next(std::chrono::milliseconds(50)))
                    take(first_open, *event);
            }
            const bool ended = failed || c.done();
            if (failed) c.cancel();
            if (c.done() && !failed) {
                if (state->exchange) state->exchange->store(state->answer);
                record_usage(c.usage);
                if (state->include_usage) out += state->writer.usage_chunk(c.usage);
            }
            if (ended) out += CompletionWriter::kDone;
            if (!out.empty() && !sink.write(out.data(), out.size())) {
                c.cancel();
                return false;
            }
            if (ended) {
                state->finished = true;
                ctx_.metrics.latency.observe(seconds_since(state->start));
                sink.done();
            }
            return true;
        },
        [state](bool) {
            // The answer ended, or the client went away: requests still running stop.
            if (!state->finished) state->choices.cancel();
        });
}

}  // namespace inferscale::server
