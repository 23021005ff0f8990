#pragma once
// StreamStopwatch: times work enqueued on a stream between two CUDA events, for the one-off
// choices made outside graph capture (cuBLASLt's algorithm per GEMM plan, the small-batch
// kernel against cuBLASLt per linear group). The events are created on first use.

#include <cuda_runtime_api.h>

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {

class StreamStopwatch {
  public:
    StreamStopwatch() = default;
    ~StreamStopwatch() {
        if (start_ != nullptr) cudaEventDestroy(start_);
        if (stop_ != nullptr) cudaEventDestroy(stop_);
    }
    StreamStopwatch(const StreamStopwatch&) = delete;
    StreamStopwatch& operator=(const StreamStopwatch&) = delete;

    // Runs `run` once untimed (first-launch costs), then `runs` times between the events, and
    // waits for them: the ms of those runs. `run` returns whether it enqueued its work; when
    // one call does not, the rest are skipped and the result is empty.
    template <class Run>
    std::optional<float> time(cudaStream_t stream, int runs, Run&& run) {
        if (start_ == nullptr) IS_CUDA_CHECK(cudaEventCreate(&start_));
        if (stop_ == nullptr) IS_CUDA_CHECK(cudaEventCreate(&stop_));
        if (!run()) return std::nullopt;
        IS_CUDA_CHECK(cudaEventRecord(start_, stream));
        bool ok = true;
        for (int r = 0; r < runs && ok; ++r) ok = run();
        IS_CUDA_CHECK(cudaEventRecord(stop_, stream));
        IS_CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0.0f;
        IS_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        if (!ok) return std::nullopt;
        return ms;
    }

    // Times every contender `rounds` times, alternating them within each round, and keeps
    // each one's best (ms of `runs` runs; empty when it never enqueued): clocks still rising
    // during the first round then favour none of them.
    std::vector<std::optional<float>> race(cudaStream_t stream, int runs, int rounds,
                                           std::span<const std::function<bool()>> contenders) {
        std::vector<std::optional<float>> best(contenders.size());
        for (int round = 0; round < rounds; ++round) {
            for (std::size_t i = 0; i < contenders.size(); ++i) {
                const std::optional<float> ms = time(stream, runs, contenders[i]);
                if (ms && (!best[i] || *ms < *best[i])) best[i] = ms;
            }
        }
        return best;
    }

  private:
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace inferscale::backends::cuda
