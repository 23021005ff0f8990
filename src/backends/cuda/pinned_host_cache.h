#pragma once
// Pinned host buffers kept for reuse. cudaMallocHost of a few megabytes takes a millisecond or
// more and cudaFreeHost waits for the whole device; a chunk pool moving chunks between the
// device and host tiers would pay both per chunk and per move (a demotion allocates, a
// finished promotion frees). Freed buffers are kept by exact size, up to a byte cap, and
// handed out again for the same size.

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

namespace inferscale::backends::cuda {

class PinnedHostCache {
  public:
    explicit PinnedHostCache(std::size_t cap_bytes) : cap_(cap_bytes) {}
    ~PinnedHostCache();
    PinnedHostCache(const PinnedHostCache&) = delete;
    PinnedHostCache& operator=(const PinnedHostCache&) = delete;

    // `bytes` of pinned memory (the current device's context), a kept buffer of exactly that
    // size when there is one; null when pinned memory is exhausted.
    void* allocate(std::size_t bytes);
    // Keeps p for reuse, or frees it when that would pass the cap. p from allocate.
    void free(void* p);

    std::size_t kept_bytes() const;

  private:
    mutable std::mutex mutex_;
    std::unordered_map<void*, std::size_t> live_;  // handed out: their sizes
    std::multimap<std::size_t, void*> kept_;       // size -> freed buffers
    std::size_t kept_bytes_ = 0;
    std::size_t cap_;
};

}  // namespace inferscale::backends::cuda
