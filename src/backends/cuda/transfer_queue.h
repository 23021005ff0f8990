#pragma once
// TransferQueue: copies between host and device on a stream of their own, so they overlap the
// compute stream's work, each followed by an event. A copy's ticket is its position in the
// queue; copies finish in order, so ticket t is done once its event has fired. Fences are
// events on the compute stream, numbered the same way, so either side can wait for the other
// on the device. Every copy is also timed between two timing events, so totals() gives the
// device time spent copying per direction. Created lazily on first use on the backend's
// device; used from the backend's thread only, except totals().

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <vector>

#include "tensor/backend.h"

namespace inferscale::backends::cuda {

class TransferQueue {
  public:
    TransferQueue() = default;
    ~TransferQueue();
    TransferQueue(const TransferQueue&) = delete;
    TransferQueue& operator=(const TransferQueue&) = delete;

    // Enqueues the copy and returns its ticket (>= 1). With `after` (a compute stream), the
    // copy waits for the work issued there so far.
    std::uint64_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                       cudaStream_t after = nullptr);
    // Enqueues a host-to-device copy with no event: a later copy's ticket covers it.
    void copy_untracked(void* dst, const void* src, std::size_t bytes);
    bool done(std::uint64_t ticket);
    // Makes `compute` wait (on the device) for the transfer.
    void order(cudaStream_t compute, std::uint64_t ticket);

    // A mark after the work issued on `compute` so far (>= 1).
    std::uint64_t fence(cudaStream_t compute);
    bool fence_done(std::uint64_t fence);
    // Makes later copies wait (on the device) for the fence.
    void copies_after(std::uint64_t fence);
    // Waits on the host for the fence and the transfer (0: none).
    void wait(std::uint64_t fence, std::uint64_t ticket);
    // The copies finished so far (as last seen by the backend's thread): any thread.
    tensor::TransferTotals totals() const;

  private:
    struct Pending {
        std::uint64_t ticket;
        cudaEvent_t event;
    };
    struct Timed {
        cudaEvent_t start, end;
        std::size_t bytes;
        bool up;
    };
    // Retires finished events from the front of `queue`.
    void poll(std::deque<Pending>& queue);
    // Adds the copies whose end event has fired to the totals.
    void poll_timed();
    // Enqueues the copy between its two timing events.
    void timed_copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);

    static const Pending* find(const std::deque<Pending>& queue, std::uint64_t id);
    cudaStream_t stream();
    // An event from `spare`, or a new one with these flags.
    static cudaEvent_t take_event(std::vector<cudaEvent_t>& spare, unsigned flags);

    cudaStream_t stream_ = nullptr;
    std::deque<Pending> pending_;       // in ticket order
    std::deque<Pending> fences_;        // in fence order
    std::vector<cudaEvent_t> spare_;    // events to reuse
    std::deque<Timed> timed_;           // in copy order
    std::vector<cudaEvent_t> timing_spare_;
    std::atomic<std::uint64_t> up_bytes_{0}, down_bytes_{0}, up_ns_{0}, down_ns_{0};
    std::uint64_t next_ = 1;
    std::uint64_t next_fence_ = 1;
};

}  // namespace inferscale::backends::cuda
