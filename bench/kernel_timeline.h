#pragma once
// KernelTimeline: when each kernel of a step really ran on the GPU, from CUPTI's activity
// records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, which leaves concurrency and programmatic
// dependent launch as they are), for the steps of a CUDA-graph replay that per-op events
// cannot see into. Steps are bracketed on the host (begin_step / end_step after the step's
// synchronization) in CUPTI's clock; a kernel belongs to the step its start falls in. The
// table then charges each kernel with how far it moved the step's end (its end minus the latest
// end before it): these add up to the step, so overlapped kernels cost what they did not hide.

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace inferscale::bench {

struct TimelineRow {
    std::string kernel;         // demangled, namespaces and arguments dropped
    double calls = 0;           // per step
    double busy_us = 0;         // per step: the kernels' own durations
    double exposed_us = 0;      // per step: how far they moved the step's end
};

struct TimelineTable {
    int steps = 0;
    double step_us = 0;  // mean span from the first kernel's start to the last one's end
    std::vector<TimelineRow> rows;  // most exposed first
};

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
