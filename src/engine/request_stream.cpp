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
            p.new_tokens += event.new_tokens;
            p.logprobs.insert(p.logprobs.end(), std::make_move_iterator(event.logprobs.begin()),
                              std::make_move_iterator(event.logprobs.end()));
            p.first_token = p.first_token || event.first_token;
            p.finished = event.finished;
            p.finish_reason = event.finish_reason;
            p.usage = event.usage;
            if (event.error) p.error = std::move(event.error);
        }
    }
    ready_.notify_one();
}

}  // namespace inferscale::engine
