#pragma once
// StopMatcher: applies stop strings to streamed text. Text that could still be the start of a
// stop string is held back, so a client never sees a partial stop sequence.

#include <string>
#include <string_view>
#include <vector>

namespace inferscale::sampling {

class StopMatcher {
  public:
    explicit StopMatcher(std::vector<std::string> stops);

    // Appends decoded text; returns the text that is now safe to emit. After a stop string
    // matched, stopped() is true and the returned text ends right before the match.
    std::string push(std::string_view text);
    // The held-back text once generation ends without a match.
    std::string flush();
    bool stopped() const { return stopped_; }

  private:
    std::vector<std::string> stops_;
    std::string pending_;
    bool stopped_ = false;
};

}  // namespace inferscale::sampling
