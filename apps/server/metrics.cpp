#include "apps/server/metrics.h"

#include <cstdio>
#include <initializer_list>
#include <utility>

namespace inferscale::server {
namespace {

std::string number(double value) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", value);
    return buf;
}

// `name="value"` with the exposition format's escapes.
std::string label(const std::string& name, const std::string& value) {
    std::string out = name + "=\"";
    for (char c : value) {
        if (c == '\\' || c == '"') out += '\\';
        out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return out + "\"";
}

void header(std::string& out, const std::string& name, const char* type,
            const std::string& help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// Writes the families of one scrape, each series carrying the model's label.
class Exposition {
  public:
    explicit Exposition(const std::string& model_name)
        : labels_(label("model_name", model_name)) {}

    const std::string& labels() const { return labels_; }
    std::string& out() { return out_; }

    void single(const std::string& name, const char* type, const std::string& help,
                double value) {
        header(out_, name, type, help);
        out_ += name + "{" + labels_ + "} " + number(value) + "\n";
    }

    // One series per value of `key` (a chunk-pool tier, a finish reason, a status).
    void per(const std::string& name, const char* type, const std::string& help, const char* key,
             std::initializer_list<std::pair<std::string, double>> values) {
        header(out_, name, type, help);
        for (const auto& [k, value] : values) series(name, key, k, value);
    }

    void series(const std::string& name, const char* key, const std::string& k, double value) {
        out_ += name + "{" + labels_ + "," + label(key, k) + "} " + number(value) + "\n";
    }

  private:
    std::string labels_;
    std::string out_;
};

}  // namespace

void Histogram::observe(double seconds) {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < kBounds.size(); ++i)
        if (seconds <= kBounds[i]) ++counts_[i];
    ++count_;
    sum_ += seconds;
}

void Histogram::render(const std::string& name, const std::string& help,
                       const std::string& labels, std::string& out) const {
    std::lock_guard lock(mutex_);
    header(out, name, "histogram", help);
    char buf[64];
    for (std::size_t i = 0; i < kBounds.size(); ++i) {
        std::snprintf(buf, sizeof(buf), "%g", kBounds[i]);
        out += name + "_bucket{" + labels + ",le=\"" + buf + "\"} " + std::to_string(counts_[i]) +
               "\n";
    }
    const std::string tail = "{" + labels + "} ";
    out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(count_) + "\n" + name +
           "_sum" + tail + number(sum_) + "\n" + name + "_count" + tail +
           std::to_string(count_) + "\n";
}

void ServerMetrics::observe_end(const engine::StreamEvent& event) {
    if (event.admitted_seconds > 0) queue_time_.observe(event.admitted_seconds);
    const std::int64_t after_first = event.usage.completion_tokens - 1;
    if (after_first > 0)
        time_per_output_token_.observe((event.finished_seconds - event.first_token_seconds) /
                                       double(after_first));
}

void ServerMetrics::count_http_error(int status) {
    std::lock_guard lock(mutex_);
    ++http_errors_[status];
}

std::string ServerMetrics::render(const engine::EngineStats& s, const std::string& model_name,
                                  const engine::EngineStats* extraction) const {
    Exposition e(model_name);
    ttft.render("inferscale_time_to_first_token_seconds", "Request arrival to first token.",
                e.labels(), e.out());
    latency.render("inferscale_request_latency_seconds",
                   "Request arrival to the end of the answer.", e.labels(), e.out());
    queue_time_.render("inferscale_request_queue_time_seconds",
                       "Request arrival to the first engine step that scheduled it.", e.labels(),
                       e.out());
    time_per_output_token_.render("inferscale_time_per_output_token_seconds",
                                  "First token to the last, per output token after the first.",
                                  e.labels(), e.out());
    e.single("inferscale_requests_running", "gauge", "Requests holding KV blocks.",
             double(s.running));
    e.single("inferscale_requests_waiting", "gauge", "Requests queued (queue depth).",
             double(s.waiting));
    e.single("inferscale_requests_waiting_for_memory", "gauge",
             "Queued requests whose memory chunks are being fetched or encoded.",
             double(s.waiting_for_memory));
    e.single("inferscale_memory_facts_to_encode", "gauge",
             "Added facts waiting for background encoding.", double(s.facts_to_encode));
    e.single("inferscale_kv_blocks_total", "gauge", "KV cache blocks.", s.kv_blocks_total);
    e.single("inferscale_kv_blocks_in_use", "gauge", "KV blocks held by requests.",
             s.kv_blocks_used);
    e.single("inferscale_kv_blocks_cached", "gauge", "KV blocks held by the prefix cache.",
             s.kv_blocks_cached);
    e.single("inferscale_kv_cache_usage_ratio", "gauge",
             "KV blocks held by requests over all KV blocks (0 to 1).",
             s.kv_blocks_total > 0 ? double(s.kv_blocks_used) / s.kv_blocks_total : 0.0);
    e.single("inferscale_requests_finished_total", "counter", "Requests answered.",
             double(s.requests_finished));
    e.single("inferscale_requests_cancelled_total", "counter",
             "Requests whose client went away.", double(s.requests_cancelled));
    e.single("inferscale_requests_failed_total", "counter", "Requests that failed.",
             double(s.requests_failed));
    e.per("inferscale_requests_finished_by_reason_total", "counter",
          "Requests ended, by reason: stop (end of generation or a stop string), length (token "
          "limit), abort (client went away), error.",
          "finished_reason",
          {{"stop", double(s.requests_finished - s.requests_finished_length)},
           {"length", double(s.requests_finished_length)},
           {"abort", double(s.requests_cancelled)},
           {"error", double(s.requests_failed)}});
    e.single("inferscale_prompt_tokens_total", "counter",
             "Prompt tokens of ended requests, injected memory included.",
             double(s.prompt_tokens));
    e.single("inferscale_computed_tokens_total", "counter", "Tokens run through the model.",
             double(s.computed_tokens));
    e.single("inferscale_generated_tokens_total", "counter", "Tokens sampled.",
             double(s.generated_tokens));
    e.single("inferscale_injected_tokens_total", "counter",
             "Prompt tokens whose KV was injected from memory chunks.", double(s.injected_tokens));
    e.single("inferscale_prefix_cached_tokens_total", "counter",
             "Prompt tokens served from the prefix cache.", double(s.cached_tokens));
    e.single("inferscale_preemptions_total", "counter", "Requests preempted for KV blocks.",
             double(s.preemptions));
    e.single("inferscale_engine_steps_total", "counter", "Engine steps.", double(s.steps));
    e.single("inferscale_engine_step_seconds_total", "counter",
             "Wall time of engine steps: scheduling, memory, forward, sampling and streaming.",
             s.step_seconds);
    e.single("inferscale_engine_forward_seconds_total", "counter",
             "Time of engine steps spent in the model's forward (the rest is host work).",
             s.forward_seconds);
    e.single("inferscale_memory_requests_total", "counter",
             "Ended requests whose memory chunks were made ready (encoded or promoted).",
             double(s.memory_requests));
    e.single("inferscale_memory_wait_seconds_total", "counter",
             "Time those requests spent between entering the engine and their chunks being ready.",
             s.memory_wait_seconds);
    {
        std::lock_guard lock(mutex_);
        header(e.out(), "inferscale_http_errors_total", "counter",
               "HTTP answers with status >= 400, by status.");
        for (const auto& [status, count] : http_errors_)
            e.series("inferscale_http_errors_total", "status", std::to_string(status),
                     double(count));
    }
    if (s.chunk_pool) {
        const memory::ChunkPoolStats& p = *s.chunk_pool;
        e.per("inferscale_chunk_pool_bytes", "gauge", "Memory chunk bytes per tier.", "tier",
              {{"device", double(p.device.bytes)},
               {"host", double(p.host.bytes)},
               {"disk", double(p.disk.bytes)}});
        e.per("inferscale_chunk_pool_capacity_bytes", "gauge", "Capacity of the bounded tiers.",
              "tier",
              {{"device", double(s.chunk_pool_device_capacity)},
               {"host", double(s.chunk_pool_host_capacity)}});
        e.per("inferscale_chunk_pool_chunks", "gauge", "Memory chunks per tier.", "tier",
              {{"device", double(p.device.chunks)},
               {"host", double(p.host.chunks)},
               {"disk", double(p.disk.chunks)}});
        e.single("inferscale_chunk_pool_hits_total", "counter", "Chunks found in a tier.",
                 double(p.hits()));
        e.single("inferscale_chunk_pool_misses_total", "counter",
                 "Chunks encoded because no tier had them.", double(p.misses));
        e.single("inferscale_chunk_pool_promotions_total", "counter",
                 "Chunks copied up to the device.", double(p.promotions));
        e.single("inferscale_chunk_pool_demotions_total", "counter",
                 "Chunk copies dropped from the device or host tier.", double(p.demotions));
        e.per("inferscale_chunk_pool_moved_bytes_total", "counter",
              "Chunk bytes moved between tiers (up: host to device, down: device to host, "
              "read: disk to host, written: host to disk).",
              "direction",
              {{"up", double(p.bytes_up)},
               {"down", double(p.bytes_down)},
               {"read", double(p.bytes_read)},
               {"written", double(p.bytes_written)}});
        e.single("inferscale_chunk_pool_upload_limit_bytes_per_second", "gauge",
                 "Pinned host-to-device copy rate measured at start (0: no transfer stream): "
                 "the limit for promotions.",
                 p.upload_limit_bytes_per_s);
        e.per("inferscale_transfer_bytes_total", "counter",
              "Bytes the transfer stream copied (up: promotions, down: new encodings).",
              "direction",
              {{"up", double(s.transfers.up_bytes)}, {"down", double(s.transfers.down_bytes)}});
        e.per("inferscale_transfer_seconds_total", "counter",
              "Device time the transfer stream spent on those copies: bytes over seconds is the "
              "achieved bandwidth.",
              "direction", {{"up", s.transfers.up_seconds}, {"down", s.transfers.down_seconds}});
        e.single("inferscale_chunk_pool_served_from_host_total", "counter",
                 "Chunks injected from host memory: the device tier had no room for them.",
                 double(p.served_from_host));
    }
    if (extraction) {
        e.single("inferscale_memory_model_requests_finished_total", "counter",
                 "Fact extraction requests the --memory-model engine answered.",
                 double(extraction->requests_finished));
        e.single("inferscale_memory_model_requests_failed_total", "counter",
                 "Fact extraction requests that failed on the --memory-model engine.",
                 double(extraction->requests_failed));
        e.single("inferscale_memory_model_computed_tokens_total", "counter",
                 "Tokens the --memory-model engine ran through its model.",
                 double(extraction->computed_tokens));
        e.single("inferscale_memory_model_generated_tokens_total", "counter",
                 "Tokens the --memory-model engine sampled.", double(extraction->generated_tokens));
    }
    return e.out();
}

}  // namespace inferscale::server
