#pragma once
// Metrics: the server's Prometheus text exposition. Latency histograms are observed by the
// HTTP handlers (what a client sees); gauges and counters come from the engine's stats at
// scrape time.

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "engine/engine.h"

namespace inferscale::server {

// A cumulative histogram of seconds with fixed bucket bounds. Thread-safe.
class Histogram {
  public:
    static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                       1.0,   2.5,  5.0,   10.0, 30.0, 60.0, 120.0};
    void observe(double seconds);
    // Appends the `name` series (with HELP and TYPE lines) to `out`.
    void render(const std::string& name, const std::string& help, std::string& out) const;

  private:
    mutable std::mutex mutex_;
    std::array<std::uint64_t, kBounds.size()> counts_{};
    std::uint64_t count_ = 0;
    double sum_ = 0.0;
};

struct ServerMetrics {
    Histogram ttft;      // request arrival to the first token
    Histogram latency;   // request arrival to the last byte
    std::mutex mutex;
    std::uint64_t http_errors = 0;  // answers with status >= 400

    std::string render(const engine::EngineStats& stats) const;
};

}  // namespace inferscale::server
