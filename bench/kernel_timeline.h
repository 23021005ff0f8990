#pragma once
// KernelTimeline: when each kernel of a step really ran on the GPU, from CUPTI's activity
// records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, which leaves concurrency and programmatic
// dependent launch as they are), for the steps of a CUDA-graph replay that per-op events
// cannot see into. Steps are bracketed on the host (begin_step / end_step after the step's
// synchronization) in CUPTI's clock and tabulated by tabulate_steps (kernel_timeline_table.h):
// each kernel is charged with how far it moved its step's end, so the charges add up to the
// step and overlapped kernels cost what they did not hide.

#include <cstdint>
#include <vector>

#include "bench/kernel_timeline_table.h"

namespace inferscale::bench {

class KernelTimeline {
  public:
    // Starts collecting (one timeline at a time in a process); an error when CUPTI is absent or
    // refuses.
    static Result<KernelTimeline> start();
    KernelTimeline(KernelTimeline&& other) noexcept;
    KernelTimeline& operator=(KernelTimeline&&) = delete;
    ~KernelTimeline();

    void begin_step();
    void end_step();
    // Stops collecting and tabulates the bracketed steps.
    Result<TimelineTable> finish();

  private:
    KernelTimeline() = default;
    bool active_ = false;
    std::vector<std::uint64_t> begins_, ends_;
};

}  // namespace inferscale::bench
