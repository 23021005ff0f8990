#include "sampling/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace inferscale::sampling {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

std::string StopMatcher::push(std::string_view text) {
    if (stopped_) return {};
    pending_.append(text);
    if (stops_.empty()) return std::exchange(pending_, {});

    std::size_t first_match = std::string::npos;
    for (const std::string& s : stops_) first_match = std::min(first_match, pending_.find(s));
    if (first_match != std::string::npos) {
        stopped_ = true;
        std::string out = pending_.substr(0, first_match);
        pending_.clear();
        return out;
    }
    // Hold back the longest suffix of pending_ that is a proper prefix of some stop string.
    std::size_t hold = 0;
    for (const std::string& s : stops_) {
        const std::size_t max_len = std::min(s.size() - 1, pending_.size());
        for (std::size_t len = max_len; len > hold; --len) {
            if (std::string_view(pending_).substr(pending_.size() - len) ==
                std::string_view(s).substr(0, len)) {
                hold = len;
                break;
            }
        }
    }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string StopMatcher::flush() { return stopped_ ? std::string{} : std::exchange(pending_, {}); }

}  // namespace inferscale::sampling
