#pragma once
// Wall-clock stopwatch on the steady clock.

#include <chrono>

namespace inferscale {

class Timer {
  public:
    Timer() : start_(std::chrono::steady_clock::now()) {}
    void reset() { start_ = std::chrono::steady_clock::now(); }
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    double millis() const { return seconds() * 1e3; }

  private:
    std::chrono::steady_clock::time_point start_;
};

}  // namespace inferscale
