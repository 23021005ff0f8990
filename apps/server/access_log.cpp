#include "apps/server/access_log.h"

#include <cstdio>
#include <utility>

#include <httplib.h>

#include "base/log.h"

namespace inferscale::server {
namespace {

thread_local AccessRecord t_record;

std::string optional_count(const std::optional<std::int64_t>& n, const char* absent) {
    return n ? std::to_string(*n) : absent;
}

}  // namespace

void begin_access_record() {
    t_record = AccessRecord{};
    t_record.start = std::chrono::steady_clock::now();
}

AccessRecord& access_record() { return t_record; }

void write_access_line(const httplib::Request& req, const httplib::Response& res) {
    const AccessRecord r = std::exchange(t_record, AccessRecord{});
    // A request cpp-httplib refused before routing it began no record: latency 0.
    const bool begun = r.start != std::chrono::steady_clock::time_point{};
    const double ms = begun ? std::chrono::duration<double, std::milli>(
                                  std::chrono::steady_clock::now() - r.start)
                                  .count()
                            : 0.0;
    char latency[32];
    std::snprintf(latency, sizeof(latency), "%.1f", ms);
    if (log_format() == LogFormat::Json) {
        write_log_line("{\"time\":\"" + utc_timestamp() +
                       "\",\"level\":\"info\",\"type\":\"access\",\"method\":" +
                       json_quoted(req.method) + ",\"path\":" + json_quoted(req.path) +
                       ",\"status\":" + std::to_string(res.status) +
                       ",\"user\":" + (r.user.empty() ? "null" : json_quoted(r.user)) +
                       ",\"prompt_tokens\":" + optional_count(r.prompt_tokens, "null") +
                       ",\"completion_tokens\":" + optional_count(r.completion_tokens, "null") +
                       ",\"latency_ms\":" + latency + "}");
        return;
    }
    write_log_line(utc_timestamp() + " [access] " + req.method + " " + req.path + " " +
                   std::to_string(res.status) + " user=" + (r.user.empty() ? "-" : r.user) +
                   " prompt_tokens=" + optional_count(r.prompt_tokens, "-") +
                   " completion_tokens=" + optional_count(r.completion_tokens, "-") +
                   " latency_ms=" + latency);
}

}  // namespace inferscale::server
