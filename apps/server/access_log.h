#pragma once
// The access log: one line per HTTP request on stderr (time, method, path, status, user,
// prompt and completion tokens where the route knows them, latency), as text or as one JSON
// object (base/log.h's format). cpp-httplib runs a request's routing, handler, streamed
// content and logger on one worker thread, so the route's part of the line lives with that
// thread from begin_access_record() to write_access_line().

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace inferscale::server {

struct AccessRecord {
    std::chrono::steady_clock::time_point start;
    std::string user;  // the request's `user`, where it named one
    std::optional<std::int64_t> prompt_tokens;
    std::optional<std::int64_t> completion_tokens;
};

// Starts the record of the request this thread now serves.
void begin_access_record();
// The record of the request this thread serves, for the route to fill in.
AccessRecord& access_record();
// Writes the request's line.
void write_access_line(const httplib::Request& req, const httplib::Response& res);

}  // namespace inferscale::server
