#include "backends/cuda/transfer_queue.h"

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {

TransferQueue::~TransferQueue() {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (const Pending& p : pending_) cudaEventDestroy(p.event);
    for (const Pending& p : fences_) cudaEventDestroy(p.event);
    for (cudaEvent_t e : spare_) cudaEventDestroy(e);
    for (const Timed& t : timed_) cudaEventDestroy(t.start), cudaEventDestroy(t.end);
    for (cudaEvent_t e : timing_spare_) cudaEventDestroy(e);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

cudaStream_t TransferQueue::stream() {
    if (stream_ == nullptr)
        IS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return stream_;
}

cudaEvent_t TransferQueue::take_event(std::vector<cudaEvent_t>& spare, unsigned flags) {
    cudaEvent_t event = nullptr;
    if (!spare.empty()) {
        event = spare.back();
        spare.pop_back();
    } else {
        IS_CUDA_CHECK(cudaEventCreateWithFlags(&event, flags));
    }
    return event;
}

void TransferQueue::timed_copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    poll_timed();
    const Timed t{take_event(timing_spare_, cudaEventDefault),
                  take_event(timing_spare_, cudaEventDefault), bytes, kind == cudaMemcpyHostToDevice};
    // The start event fires once the stream reaches the copy (after any wait before it).
    IS_CUDA_CHECK(cudaEventRecord(t.start, stream()));
    IS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream()));
    IS_CUDA_CHECK(cudaEventRecord(t.end, stream()));
    timed_.push_back(t);
}

void TransferQueue::poll_timed() {
    while (!timed_.empty()) {
        const Timed& t = timed_.front();
        const cudaError_t status = cudaEventQuery(t.end);
        if (status == cudaErrorNotReady) return;
        IS_CUDA_CHECK(status);
        float ms = 0.0f;
        IS_CUDA_CHECK(cudaEventElapsedTime(&ms, t.start, t.end));
        const auto ns = static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6);
        (t.up ? up_bytes_ : down_bytes_).fetch_add(t.bytes, std::memory_order_relaxed);
        (t.up ? up_ns_ : down_ns_).fetch_add(ns, std::memory_order_relaxed);
        timing_spare_.push_back(t.start);
        timing_spare_.push_back(t.end);
        timed_.pop_front();
    }
}

tensor::TransferTotals TransferQueue::totals() const {
    return {up_bytes_.load(std::memory_order_relaxed), down_bytes_.load(std::memory_order_relaxed),
            static_cast<double>(up_ns_.load(std::memory_order_relaxed)) * 1e-9,
            static_cast<double>(down_ns_.load(std::memory_order_relaxed)) * 1e-9};
}

std::uint64_t TransferQueue::copy(void* dst, const void* src, std::size_t bytes,
                                  cudaMemcpyKind kind, cudaStream_t after) {
    if (after != nullptr) copies_after(fence(after));
    cudaEvent_t event = take_event(spare_, cudaEventDisableTiming);
    timed_copy(dst, src, bytes, kind);
    IS_CUDA_CHECK(cudaEventRecord(event, stream()));
    pending_.push_back({next_, event});
    return next_++;
}

void TransferQueue::copy_untracked(void* dst, const void* src, std::size_t bytes) {
    timed_copy(dst, src, bytes, cudaMemcpyHostToDevice);
}

void TransferQueue::poll(std::deque<Pending>& queue) {
    while (!queue.empty()) {
        const cudaError_t status = cudaEventQuery(queue.front().event);
        if (status == cudaErrorNotReady) return;
        IS_CUDA_CHECK(status);
        spare_.push_back(queue.front().event);
        queue.pop_front();
    }
}

const TransferQueue::Pending* TransferQueue::find(const std::deque<Pending>& queue,
                                                  std::uint64_t id) {
    for (const Pending& p : queue)
        if (p.ticket == id) return &p;
    return nullptr;
}

bool TransferQueue::done(std::uint64_t ticket) {
    poll(pending_);
    poll_timed();
    return pending_.empty() || ticket < pending_.front().ticket;
}

void TransferQueue::order(cudaStream_t compute, std::uint64_t ticket) {
    if (done(ticket)) return;
    if (const Pending* p = find(pending_, ticket))
        IS_CUDA_CHECK(cudaStreamWaitEvent(compute, p->event, 0));
}

std::uint64_t TransferQueue::fence(cudaStream_t compute) {
    poll(fences_);  // so marks nobody asks about do not pile up
    cudaEvent_t event = take_event(spare_, cudaEventDisableTiming);
    IS_CUDA_CHECK(cudaEventRecord(event, compute));
    fences_.push_back({next_fence_, event});
    return next_fence_++;
}

bool TransferQueue::fence_done(std::uint64_t fence) {
    poll(fences_);
    return fences_.empty() || fence < fences_.front().ticket;
}

void TransferQueue::copies_after(std::uint64_t fence) {
    if (fence_done(fence)) return;
    if (const Pending* p = find(fences_, fence))
        IS_CUDA_CHECK(cudaStreamWaitEvent(stream(), p->event, 0));
}

void TransferQueue::wait(std::uint64_t fence, std::uint64_t ticket) {
    if (fence != 0 && !fence_done(fence))
        if (const Pending* p = find(fences_, fence)) IS_CUDA_CHECK(cudaEventSynchronize(p->event));
    if (ticket != 0 && !done(ticket))
        if (const Pending* p = find(pending_, ticket))
            IS_CUDA_CHECK(cudaEventSynchronize(p->event));
}

// ---- CudaBackend's side of it -------------------------------------------------------------

std::uint64_t CudaBackend::copy_from_host_async(tensor::Tensor dst, const void* src,
                                                std::size_t bytes) {
    IS_CHECK(dst.device == tensor::Device::Cuda) << "copy_from_host_async into host memory";
    IS_CHECK(bytes <= dst.nbytes()) << bytes << " bytes into " << dst.nbytes();
    if (bytes == 0) return 0;
    activate();
    return transfers_.copy(dst.data, src, bytes, cudaMemcpyHostToDevice);
}

std::uint64_t CudaBackend::copy_to_host_async(void* dst, const tensor::Tensor& src,
                                              std::size_t bytes) {
    IS_CHECK(src.device == tensor::Device::Cuda) << "copy_to_host_async from host memory";
    IS_CHECK(bytes <= src.nbytes()) << bytes << " bytes from " << src.nbytes();
    if (bytes == 0) return 0;
    activate();
    return transfers_.copy(dst, src.data, bytes, cudaMemcpyDeviceToHost, stream_);
}

std::uint64_t CudaBackend::compute_fence() {
    activate();
    return transfers_.fence(stream_);
}

void CudaBackend::transfer_after(std::uint64_t fence) {
    if (fence == 0) return;
    activate();
    transfers_.copies_after(fence);
}

void CudaBackend::wait_for(std::uint64_t fence, std::uint64_t ticket) {
    if (fence == 0 && ticket == 0) return;
    activate();
    transfers_.wait(fence, ticket);
}

void CudaBackend::copy_from_host_untracked(tensor::Tensor dst, const void* src, std::size_t bytes) {
    IS_CHECK(dst.device == tensor::Device::Cuda) << "copy_from_host_untracked into host memory";
    IS_CHECK(bytes <= dst.nbytes()) << bytes << " bytes into " << dst.nbytes();
    if (bytes == 0) return;
    activate();
    transfers_.copy_untracked(dst.data, src, bytes);
}

tensor::TransferTotals CudaBackend::transfer_totals() const { return transfers_.totals(); }

bool CudaBackend::transfer_done(std::uint64_t ticket) {
    if (ticket == 0) return true;
    activate();
    return transfers_.done(ticket);
}

void CudaBackend::order_after(std::uint64_t ticket) {
    if (ticket == 0) return;
    activate();
    transfers_.order(stream_, ticket);
}

}  // namespace inferscale::backends::cuda
