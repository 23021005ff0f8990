#include "apps/server/metrics.h"

#include <cstdio>
#include <initializer_list>
#include <utility>

namespace inferscale::server {
namespace {

void line(std::string& out, const std::string& name, const char* type, const std::string& help,
          double value) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", value);
    out += name + " " + buf + "\n";
}

// A gauge with one series per chunk-pool tier.
void tiers(std::string& out, const std::string& name, const std::string& help,
           std::initializer_list<std::pair<const char*, std::size_t>> values) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
    for (const auto& [tier, value] : values)
        out += name + "{tier=\"" + tier + "\"} " + std::to_string(value) + "\n";
}

}  // namespace

void Histogram::observe(double seconds) {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < kBounds.size(); ++i)
        if (seconds <= kBounds[i]) ++counts_[i];
    ++count_;
    sum_ += seconds;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
    std::lock_guard lock(mutex_);
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
    char buf[64];
    for (std::size_t i = 0; i < kBounds.size(); ++i) {
        std::snprintf(buf, sizeof(buf), "%g", kBounds[i]);
        out += name + "_bucket{le=\"" + buf + "\"} " + std::to_string(counts_[i]) + "\n";
    }
    std::snprintf(buf, sizeof(buf), "%.9g", sum_);
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n" + name + "_sum " + buf +
           "\n" + name + "_count " + std::to_string(count_) + "\n";
}

std::string ServerMetrics::render(const engine::EngineStats& s) const {
    std::string out;
    ttft.render("inferscale_time_to_first_token_seconds", "Request arrival to first token.", out);
    latency.render("inferscale_request_latency_seconds",
                   "Request arrival to the end of the answer.", out);
    line(out, "inferscale_requests_running", "gauge", "Requests holding KV blocks.",
         double(s.running));
    line(out, "inferscale_requests_waiting", "gauge", "Requests queued (queue depth).",
         double(s.waiting));
    line(out, "inferscale_requests_waiting_for_memory", "gauge",
         "Queued requests whose memory chunks are being fetched or encoded.",
         double(s.waiting_for_memory));
    line(out, "inferscale_memory_facts_to_encode", "gauge",
         "Added facts waiting for background encoding.", double(s.facts_to_encode));
    line(out, "inferscale_kv_blocks_total", "gauge", "KV cache blocks.", s.kv_blocks_total);
    line(out, "inferscale_kv_blocks_in_use", "gauge",
         "KV blocks held by requests.", s.kv_blocks_used);
    line(out, "inferscale_kv_blocks_cached", "gauge", "KV blocks held by the prefix cache.",
         s.kv_blocks_cached);
    line(out, "inferscale_requests_finished_total", "counter", "Requests answered.",
         double(s.requests_finished));
    line(out, "inferscale_requests_cancelled_total", "counter",
         "Requests whose client went away.", double(s.requests_cancelled));
    line(out, "inferscale_requests_failed_total", "counter", "Requests that failed.",
         double(s.requests_failed));
    line(out, "inferscale_computed_tokens_total", "counter", "Tokens run through the model.",
         double(s.computed_tokens));
    line(out, "inferscale_generated_tokens_total", "counter", "Tokens sampled.",
         double(s.generated_tokens));
    line(out, "inferscale_injected_tokens_total", "counter",
         "Prompt tokens whose KV was injected from memory chunks.", double(s.injected_tokens));
    line(out, "inferscale_prefix_cached_tokens_total", "counter",
         "Prompt tokens served from the prefix cache.", double(s.cached_tokens));
    line(out, "inferscale_preemptions_total", "counter", "Requests preempted for KV blocks.",
         double(s.preemptions));
    line(out, "inferscale_engine_steps_total", "counter", "Engine steps.", double(s.steps));
    line(out, "inferscale_engine_step_seconds_total", "counter",
         "Wall time of engine steps: scheduling, memory, forward, sampling and streaming.",
         s.step_seconds);
    line(out, "inferscale_engine_forward_seconds_total", "counter",
         "Time of engine steps spent in the model's forward (the rest is host work).",
         s.forward_seconds);
    if (s.chunk_pool) {
        const memory::ChunkPoolStats& p = *s.chunk_pool;
        tiers(out, "inferscale_chunk_pool_bytes", "Memory chunk bytes per tier.",
              {{"device", p.device.bytes}, {"host", p.host.bytes}, {"disk", p.disk.bytes}});
        tiers(out, "inferscale_chunk_pool_capacity_bytes", "Capacity of the bounded tiers.",
              {{"device", s.chunk_pool_device_capacity}, {"host", s.chunk_pool_host_capacity}});
        tiers(out, "inferscale_chunk_pool_chunks", "Memory chunks per tier.",
              {{"device", p.device.chunks}, {"host", p.host.chunks}, {"disk", p.disk.chunks}});
        line(out, "inferscale_chunk_pool_hits_total", "counter", "Chunks found in a tier.",
             double(p.hits()));
        line(out, "inferscale_chunk_pool_misses_total", "counter",
             "Chunks encoded because no tier had them.", double(p.misses));
        line(out, "inferscale_chunk_pool_promotions_total", "counter",
             "Chunks copied up to the device.", double(p.promotions));
        line(out, "inferscale_chunk_pool_demotions_total", "counter", "Chunks moved down a tier.",
             double(p.demotions));
        line(out, "inferscale_chunk_pool_served_from_host_total", "counter",
             "Chunks injected from host memory: the device tier had no room for them.",
             double(p.served_from_host));
    }
    return out;
}

}  // namespace inferscale::server
