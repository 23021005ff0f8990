#pragma once
// TransferQueue: host-to-device copies on a stream of their own, so they overlap the compute
// stream's work, each followed by an event. A copy's ticket is its position in the queue;
// copies finish in order, so ticket t is done once its event has fired. Created lazily on
// first use on the backend's device; used from the backend's thread only.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <vector>

namespace inferscale::backends::cuda {

class TransferQueue {
  public:
    TransferQueue() = default;
    ~TransferQueue();
    TransferQueue(const TransferQueue&) = delete;
    TransferQueue& operator=(const TransferQueue&) = delete;

    // Enqueues the copy and returns its ticket (>= 1).
    std::uint64_t copy(void* dst, const void* src, std::size_t bytes);
    bool done(std::uint64_t ticket);
    // Makes `compute` wait (on the device) for the transfer.
    void order(cudaStream_t compute, std::uint64_t ticket);

  private:
    struct Pending {
        std::uint64_t ticket;
        cudaEvent_t event;
    };
    // Retires finished transfers from the front.
    void poll();

    cudaStream_t stream_ = nullptr;
    std::deque<Pending> pending_;       // in ticket order
    std::vector<cudaEvent_t> spare_;    // events to reuse
    std::uint64_t next_ = 1;
};

}  // namespace inferscale::backends::cuda
