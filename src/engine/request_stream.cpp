#include "engine/request_stream.h"

#include <iterator>

namespace inferscale::engine {

std::optional<StreamEvent> RequestStream::next(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (done_) return std::nullopt;
    if (!ready_.wait_for(lock, timeout, [&] { return pending_.has_value(); })) return std::nullopt;
    StreamEvent event = std::move(*pending_);
    pending_.reset();
    done_ = event.finished;
    return event;
}

void RequestStream::cancel() {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
}

bool RequestStream::cancelled() const {
    std::lock_guard lock(mutex_);
    return cancelled_;
}

void RequestStream::push(StreamEvent event) {
    {
        std::lock_guard lock(mutex_);
        if (!pending_) {
            pending_ = std::move(event);
        } else {
            StreamEvent& p = *pending_;
            p.text += event.text;
            p.token_ids.insert(p.token_ids.end(), event.token_ids.begin(), event.token_ids.end());
            p.logprobs.insert(p.logprobs.end(), std::make_move_iterator(event.logprobs.begin()),
                              std::make_move_iterator(event.logprobs.end()));
            p.first_token = p.first_token || event.first_token;
            if (event.first_token) {
                p.prompt_logits = std::move(event.prompt_logits);
                p.prompt_logprobs = std::move(event.prompt_logprobs);
            }
            p.finished = event.finished;
            p.finish_reason = event.finish_reason;
            p.usage = event.usage;
            p.admitted_seconds = event.admitted_seconds;
            p.first_token_seconds = event.first_token_seconds;
            p.finished_seconds = event.finished_seconds;
            if (event.error) p.error = std::move(event.error);
        }
    }
    ready_.notify_one();
}

Result<Completion> RequestStream::collect(const std::function<void(std::string_view)>& on_text) {
    Completion out;
    while (true) {
        std::optional<StreamEvent> event = next(std::chrono::milliseconds(1000));
        if (!event) continue;
        if (event->error) return std::move(*event->error);
        if (on_text && !event->text.empty()) on_text(event->text);
        out.text += event->text;
        out.token_ids.insert(out.token_ids.end(), event->token_ids.begin(),
                             event->token_ids.end());
        if (event->first_token) out.prompt_logits = std::move(event->prompt_logits);
        if (!event->finished) continue;
        out.finish_reason = event->finish_reason;
        out.usage = event->usage;
        out.first_token_seconds = event->first_token_seconds;
        out.finished_seconds = event->finished_seconds;
        return out;
    }
}

}  // namespace inferscale::engine
