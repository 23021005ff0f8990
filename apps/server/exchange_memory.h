#pragma once
// ExchangeMemory: what a chat request's `memory: {"store": true}` does. The extraction event is
// reserved when the request is accepted, so its id can go out in a response header before the
// answer exists (streams included); once the answer is complete, the request's last user
// message and the answer are stored and queued exactly as POST /v1/memories with those two
// messages and async_mode queues them (session "api", no agent or run). An answer that fails or
// is abandoned fails the event instead, so it never stays PENDING.

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "apps/server/api_error.h"

namespace inferscale::server {

struct ServerContext;

// The response header that carries the event id, polled at GET /v1/memories/events/{id}.
inline constexpr const char* kMemoryEventHeader = "x-memory-event-id";

class ExchangeMemory {
  public:
    // Reserves the event of `user`'s exchange whose user turn is `question`; a 503 when the
    // extraction queue is full. `ctx` must have an extraction and outlive the object.
    static std::variant<std::unique_ptr<ExchangeMemory>, ApiError> reserve(ServerContext& ctx,
                                                                           std::string user,
                                                                           std::string question);
    // Fails the event unless store() ran.
    ~ExchangeMemory();
    ExchangeMemory(const ExchangeMemory&) = delete;
    ExchangeMemory& operator=(const ExchangeMemory&) = delete;

    std::uint64_t event_id() const { return id_; }
    // Stores the exchange and queues its extraction; at most once.
    void store(const std::string& answer);

  private:
    ExchangeMemory(ServerContext& ctx, std::uint64_t id, std::string user, std::string question)
        : ctx_(ctx), id_(id), user_(std::move(user)), question_(std::move(question)) {}

    ServerContext& ctx_;
    std::uint64_t id_;
    std::string user_;
    std::string question_;
    bool done_ = false;
};

}  // namespace inferscale::server
