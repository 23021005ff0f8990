#include "bench/kernel_timeline_table.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>

namespace inferscale::bench {

Result<TimelineTable> tabulate_steps(std::vector<KernelSpan> spans,
                                     const std::vector<std::uint64_t>& begins,
                                     const std::vector<std::uint64_t>& ends) {
    std::sort(spans.begin(), spans.end(),
              [](const KernelSpan& a, const KernelSpan& b) { return a.start < b.start; });
    struct Sum {
        double calls = 0, busy = 0, exposed = 0;
    };
    std::map<std::string, Sum> sums;
    TimelineTable table;
    double span_sum = 0;
    const std::size_t steps = std::min(begins.size(), ends.size());
    auto it = spans.begin();
    for (std::size_t s = 0; s < steps; ++s) {
        while (it != spans.end() && it->start < begins[s]) ++it;
        std::uint64_t first = 0, latest_end = 0;
        bool any = false;
        for (; it != spans.end() && it->start <= ends[s]; ++it) {
            if (!any) first = latest_end = it->start;
            any = true;
            Sum& sum = sums[it->kernel];
            sum.calls += 1;
            sum.busy += static_cast<double>(it->end - it->start);
            if (it->end > latest_end) {
                sum.exposed += static_cast<double>(it->end - latest_end);
                latest_end = it->end;
            }
        }
        if (!any) continue;
        ++table.steps;
        span_sum += static_cast<double>(latest_end - first);
    }
    if (table.steps == 0) return make_error("no kernel ran inside the bracketed steps");
    const double per_step = 1e3 * table.steps;  // ns -> us, per step
    table.step_us = span_sum / per_step;
    for (const auto& [name, sum] : sums) {
        table.rows.push_back(
            {name, sum.calls / table.steps, sum.busy / per_step, sum.exposed / per_step});
    }
    std::sort(table.rows.begin(), table.rows.end(), [](const TimelineRow& a, const TimelineRow& b) {
        return a.exposed_us > b.exposed_us;
    });
    return table;
}

std::string short_kernel_name(const char* mangled) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
    std::free(demangled);
    int depth = 0;
    std::size_t args = std::string::npos, scope = 0;
    for (std::size_t i = 0; i < name.size(); ++i) {
        const char c = name[i];
        if (c == '<') ++depth;
        if (c == '>') --depth;
        if (depth != 0) continue;
        if (c == '(' && name.compare(i, 21, "(anonymous namespace)") != 0) {
            args = i;
            break;
        }
        if (c == ':' && i + 1 < name.size() && name[i + 1] == ':') scope = i + 2;
        if (c == ' ') scope = i + 1;  // a return type before the name
    }
    return name.substr(scope, args == std::string::npos ? std::string::npos : args - scope);
}

}  // namespace inferscale::bench
