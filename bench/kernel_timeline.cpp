#include "bench/kernel_timeline.h"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

namespace inferscale::bench {
namespace {

struct Record {
    std::string name;
    std::uint64_t start = 0, end = 0;
};

// CUPTI hands records over in buffers it asks for and returns on its own threads.
std::mutex g_mutex;
std::vector<Record> g_records;
bool g_active = false;

constexpr std::size_t kBufferBytes = std::size_t{8} << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = kBufferBytes;
    *max_records = 0;
}

// "ns::(anonymous namespace)::gemv_kernel<true>(ns::Params)" -> "gemv_kernel<true>".
std::string short_name(const char* mangled) {
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
        if (depth == 0 && c == '(' && name.compare(i, 21, "(anonymous namespace)") != 0) {
            args = i;
            break;
        }
        if (depth == 0 && c == ':' && i + 1 < name.size() && name[i + 1] == ':') scope = i + 2;
    }
    return name.substr(scope, args == std::string::npos ? std::string::npos : args - scope);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* record = nullptr;
    std::vector<Record> got;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        got.push_back({short_name(k->name), k->start, k->end});
    }
    std::free(buffer);
    const std::lock_guard<std::mutex> lock(g_mutex);
    g_records.insert(g_records.end(), got.begin(), got.end());
}

Error cupti_error(const char* what, CUptiResult r) {
    const char* text = nullptr;
    cuptiGetResultString(r, &text);
    return make_error(std::string("CUPTI ") + what + ": " + (text != nullptr ? text : "?"));
}

std::uint64_t now() {
    std::uint64_t t = 0;
    cuptiGetTimestamp(&t);
    return t;
}

}  // namespace

Result<KernelTimeline> KernelTimeline::start() {
    {
        const std::lock_guard<std::mutex> lock(g_mutex);
        if (g_active) return make_error("a kernel timeline is already collecting");
        g_records.clear();
    }
    if (CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        r != CUPTI_SUCCESS) {
        return cupti_error("register callbacks", r);
    }
    if (CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        r != CUPTI_SUCCESS) {
        return cupti_error("enable kernel records", r);
    }
    g_active = true;
    KernelTimeline t;
    t.active_ = true;
    return t;
}

KernelTimeline::KernelTimeline(KernelTimeline&& other) noexcept
    : active_(std::exchange(other.active_, false)),
      begins_(std::move(other.begins_)),
      ends_(std::move(other.ends_)) {}

KernelTimeline::~KernelTimeline() {
    if (!active_) return;
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(1);
    g_active = false;
}

void KernelTimeline::begin_step() { begins_.push_back(now()); }
void KernelTimeline::end_step() { ends_.push_back(now()); }

Result<TimelineTable> KernelTimeline::finish() {
    if (!active_) return make_error("the kernel timeline is not collecting");
    active_ = false;
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (CUptiResult r = cuptiActivityFlushAll(1); r != CUPTI_SUCCESS) {
        g_active = false;
        return cupti_error("flush", r);
    }
    std::vector<Record> records;
    {
        const std::lock_guard<std::mutex> lock(g_mutex);
        records.swap(g_records);
        g_active = false;
    }
    std::sort(records.begin(), records.end(),
              [](const Record& a, const Record& b) { return a.start < b.start; });
    struct Sum {
        double calls = 0, busy = 0, exposed = 0;
    };
    std::map<std::string, Sum> sums;
    TimelineTable table;
    double span_sum = 0;
    const std::size_t steps = std::min(begins_.size(), ends_.size());
    auto it = records.begin();
    for (std::size_t s = 0; s < steps; ++s) {
        while (it != records.end() && it->start < begins_[s]) ++it;
        std::uint64_t first = 0, latest_end = 0;
        bool any = false;
        for (; it != records.end() && it->start <= ends_[s]; ++it) {
            if (!any) first = latest_end = it->start;
            any = true;
            Sum& sum = sums[it->name];
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
    const double per_step = 1e3 * table.steps;  // ns -> us per step
    table.step_us = span_sum / per_step;
    for (const auto& [name, sum] : sums) {
        table.rows.push_back({name, sum.calls / table.steps, sum.busy / per_step,
                              sum.exposed / per_step});
    }
    std::sort(table.rows.begin(), table.rows.end(), [](const TimelineRow& a, const TimelineRow& b) {
        return a.exposed_us > b.exposed_us;
    });
    return table;
}

}  // namespace inferscale::bench
