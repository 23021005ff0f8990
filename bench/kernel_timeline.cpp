#include "bench/kernel_timeline.h"

#include <cupti.h>

#include <cstdlib>
#include <mutex>
#include <utility>

namespace inferscale::bench {
namespace {

// CUPTI hands records over in buffers it asks for and returns on its own threads.
std::mutex g_mutex;
std::vector<KernelSpan> g_records;
bool g_active = false;

constexpr std::size_t kBufferBytes = std::size_t{8} << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = kBufferBytes;
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* record = nullptr;
    std::vector<KernelSpan> got;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        got.push_back({short_kernel_name(k->name), k->start, k->end});
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

// Ends the collection's claim on the records (start() makes it).
void release() {
    const std::lock_guard<std::mutex> lock(g_mutex);
    g_active = false;
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
        g_active = true;
        g_records.clear();
    }
    if (CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        r != CUPTI_SUCCESS) {
        release();
        return cupti_error("register callbacks", r);
    }
    if (CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        r != CUPTI_SUCCESS) {
        release();
        return cupti_error("enable kernel records", r);
    }
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
    release();
}

void KernelTimeline::begin_step() { begins_.push_back(now()); }
void KernelTimeline::end_step() { ends_.push_back(now()); }

Result<TimelineTable> KernelTimeline::finish() {
    if (!active_) return make_error("the kernel timeline is not collecting");
    active_ = false;
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (CUptiResult r = cuptiActivityFlushAll(1); r != CUPTI_SUCCESS) {
        release();
        return cupti_error("flush", r);
    }
    std::vector<KernelSpan> records;
    {
        const std::lock_guard<std::mutex> lock(g_mutex);
        records.swap(g_records);
        g_active = false;
    }
    return tabulate_steps(std::move(records), begins_, ends_);
}

}  // namespace inferscale::bench
