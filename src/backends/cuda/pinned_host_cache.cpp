#include "backends/cuda/pinned_host_cache.h"

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {

PinnedHostCache::~PinnedHostCache() {
    for (const auto& [bytes, p] : kept_) cudaFreeHost(p);  // teardown: errors are moot
}

void* PinnedHostCache::allocate(std::size_t bytes) {
    bytes = bytes > 0 ? bytes : 64;
    {
        std::lock_guard lock(mutex_);
        if (auto it = kept_.find(bytes); it != kept_.end()) {
            void* p = it->second;
            kept_.erase(it);
            kept_bytes_ -= bytes;
            live_.emplace(p, bytes);
            return p;
        }
    }
    void* p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
        cudaGetLastError();  // out of pinned memory is the caller's to handle
        return nullptr;
    }
    std::lock_guard lock(mutex_);
    live_.emplace(p, bytes);
    return p;
}

void PinnedHostCache::free(void* p) {
    if (p == nullptr) return;
    std::size_t bytes = 0;
    {
        std::lock_guard lock(mutex_);
        const auto it = live_.find(p);
        IS_CHECK(it != live_.end()) << "free of a pinned buffer this cache did not hand out";
        bytes = it->second;
        live_.erase(it);
        if (kept_bytes_ + bytes <= cap_) {
            kept_.emplace(bytes, p);
            kept_bytes_ += bytes;
            return;
        }
    }
    IS_CUDA_CHECK(cudaFreeHost(p));
}

std::size_t PinnedHostCache::kept_bytes() const {
    std::lock_guard lock(mutex_);
    return kept_bytes_;
}

}  // namespace inferscale::backends::cuda
