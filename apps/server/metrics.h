#pragma once
// Metrics: the server's Prometheus text exposition, every series labelled with the served
// model's id (`model_name`, as vLLM labels its series). Latency histograms are observed by the
// HTTP handlers (what a client sees) and from each request's end (the engine's clock); gauges
// and counters come from the engine's stats at scrape time.

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "engine/engine.h"
#include "engine/request_stream.h"

namespace inferscale::server {

// A cumulative histogram of seconds with fixed bucket bounds. Thread-safe.
class Histogram {
  public:
    static constexpr std::array<double, 16> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,   0.25,   0.5,   1.0,  2.5,   5.0,
                                                       10.0,  30.0,   60.0,  120.0};
    void observe(double seconds);
    // Appends the `name` series (with HELP and TYPE lines) to `out`; `labels` is the label
    // list every series carries (`model_name="m"`).
    void render(const std::string& name, const std::string& help, const std::string& labels,
                std::string& out) const;

  private:
    mutable std::mutex mutex_;
    std::array<std::uint64_t, kBounds.size()> counts_{};
    std::uint64_t count_ = 0;
    double sum_ = 0.0;
};

class ServerMetrics {
  public:
    Histogram ttft;      // request arrival to the first token
    Histogram latency;   // request arrival to the last byte

    // A request's finishing event (not an error): its queue time and time per output token.
    void observe_end(const engine::StreamEvent& event);
    // An answer with status >= 400. Thread-safe.
    void count_http_error(int status);

    // `extraction`: the stats of the engine fact extraction runs on, when it is a second one.
    std::string render(const engine::EngineStats& stats, const std::string& model_name,
                       const engine::EngineStats* extraction = nullptr) const;

  private:
    Histogram queue_time_;             // submit to the first step that scheduled the request
    Histogram time_per_output_token_;  // first token to the last, per token after the first
    mutable std::mutex mutex_;
    std::map<int, std::uint64_t> http_errors_;  // by status
};

}  // namespace inferscale::server
