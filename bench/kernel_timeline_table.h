#pragma once
// The arithmetic of gpu_bench --timeline (kernel_timeline.h), apart from CUPTI so that it is
// tested on any machine: kernels grouped into host-bracketed steps and charged with how far
// each moved its step's end.

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace inferscale::bench {

// One kernel as it ran: a readable name and its start and end on the GPU clock (ns).
struct KernelSpan {
    std::string kernel;
    std::uint64_t start = 0, end = 0;
};

struct TimelineRow {
    std::string kernel;
    double calls = 0;       // per step
    double busy_us = 0;     // per step: the kernels' own durations
    double exposed_us = 0;  // per step: how far they moved the step's end
};

struct TimelineTable {
    int steps = 0;
    double step_us = 0;             // mean span from the first kernel's start to the last end
    std::vector<TimelineRow> rows;  // most exposed first
};

// Step s holds the kernels whose start lies in [begins[s], ends[s]]. In start order, each
// kernel is charged end - (the latest end before it), or nothing when it ends earlier, so a
// step's charges add up to its span: a gap before a kernel is charged to it, overlap is not.
// An error when no kernel falls in any step.
Result<TimelineTable> tabulate_steps(std::vector<KernelSpan> spans,
                                     const std::vector<std::uint64_t>& begins,
                                     const std::vector<std::uint64_t>& ends);

// "void ns::(anonymous namespace)::gemv_kernel<true>(ns::Params)" as "gemv_kernel<true>":
// demangled, without return type, scopes and parameters; a name that is not mangled as is.
std::string short_kernel_name(const char* mangled);

}  // namespace inferscale::bench
