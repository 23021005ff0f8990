#pragma once
// Timing helpers for gpu_bench. On CUDA a StepTimer brackets work with events on the backend's
// stream (what the GPU saw, host launch gaps included since the stream idles while the host
// stages); on the CPU backend (a dry run of the bench's own logic) it falls back to the steady
// clock after Backend::synchronize. Also the command-line flags and JSON output that gpu_bench
// and inject_bench share.

#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "base/timer.h"
#include "tensor/backend.h"

namespace inferscale::bench {

class StepTimer {
  public:
    // `stream` null: host clock mode.
    StepTimer(tensor::Backend& backend, cudaStream_t stream, bool use_events)
        : backend_(backend), stream_(stream), use_events_(use_events) {
        if (use_events_) {
            IS_CUDA_CHECK(cudaEventCreate(&start_));
            IS_CUDA_CHECK(cudaEventCreate(&stop_));
        }
    }
    ~StepTimer() {
        if (use_events_) {
            cudaEventDestroy(start_);
            cudaEventDestroy(stop_);
        }
    }
    StepTimer(const StepTimer&) = delete;
    StepTimer& operator=(const StepTimer&) = delete;

    // Each start() first holds the stream for `ms` (a host function that sleeps), so the host
    // has enqueued the whole step before the GPU starts it: the time is then the GPU's alone,
    // without the host's launch pace (events only; 0: no hold).
    void set_queue_ahead_ms(double ms) { queue_ahead_ms_ = ms; }

    void start() {
        if (use_events_) {
            if (queue_ahead_ms_ > 0) {
                IS_CUDA_CHECK(cudaLaunchHostFunc(stream_, &StepTimer::hold, &queue_ahead_ms_));
            }
            IS_CUDA_CHECK(cudaEventRecord(start_, stream_));
        } else {
            backend_.synchronize();
            host_.reset();
        }
    }
    // Waits for the bracketed work; milliseconds since start().
    double stop_ms() {
        if (use_events_) {
            IS_CUDA_CHECK(cudaEventRecord(stop_, stream_));
            IS_CUDA_CHECK(cudaEventSynchronize(stop_));
            float ms = 0.0f;
            IS_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
            return ms;
        }
        backend_.synchronize();
        return host_.millis();
    }

  private:
    static void CUDART_CB hold(void* ms) {
        std::this_thread::sleep_for(
            std::chrono::duration<double, std::milli>(*static_cast<const double*>(ms)));
    }

    tensor::Backend& backend_;
    cudaStream_t stream_ = nullptr;
    bool use_events_ = false;
    double queue_ahead_ms_ = 0.0;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
    Timer host_;
};

// Samples of one measurement; the median resists the odd slow step (clock ramp, page faults).
struct Samples {
    std::vector<double> ms;

    double median() const {
        if (ms.empty()) return 0.0;
        std::vector<double> s = ms;
        std::sort(s.begin(), s.end());
        const std::size_t n = s.size();
        return n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    }
    double min() const { return ms.empty() ? 0.0 : *std::min_element(ms.begin(), ms.end()); }
    double max() const { return ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end()); }
};

// "[  12.3 s] message", flushed at once so a device log shows how far a run got.
class Progress {
  public:
    template <class... Args>
    void operator()(const char* format, Args... args) const {
        std::printf("[%7.1f s] ", clock_.seconds());
        std::printf(format, args...);
        std::printf("\n");
        std::fflush(stdout);
    }
    void operator()(const char* message) const { (*this)("%s", message); }

  private:
    Timer clock_;
};

// The flags every device bench takes: --config (required), --json, --backend, --device.
inline void add_common_options(CLI::App& app, std::string& config_path, std::string& json_path,
                               std::string& backend, int& device) {
    app.add_option("--config", config_path, "Hugging Face config.json")->required();
    app.add_option("--json", json_path, "write the results as JSON here");
    app.add_option("--backend", backend, "cuda, or cpu for a dry run")
        ->check(CLI::IsMember({"cuda", "cpu"}));
    app.add_option("--device", device, "CUDA device index");
}

// One number printed with a printf format, for tables.
inline std::string fmt(const char* format, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

// Writes `out` indented to `path`. False, with "<tool>: cannot write <path>" on stderr, when the
// file cannot be written.
inline bool write_json(const nlohmann::json& out, const std::string& path, const char* tool,
                       const Progress& progress) {
    std::ofstream f(path);
    f << out.dump(2) << "\n";
    if (!f) {
        std::fprintf(stderr, "%s: cannot write %s\n", tool, path.c_str());
        return false;
    }
    progress("wrote %s", path.c_str());
    return true;
}

}  // namespace inferscale::bench
