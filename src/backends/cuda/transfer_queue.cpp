#include "backends/cuda/transfer_queue.h"

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {

TransferQueue::~TransferQueue() {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (const Pending& p : pending_) cudaEventDestroy(p.event);
    for (cudaEvent_t e : spare_) cudaEventDestroy(e);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::uint64_t TransferQueue::copy(void* dst, const void* src, std::size_t bytes) {
    if (stream_ == nullptr)
        IS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaEvent_t event = nullptr;
    if (!spare_.empty()) {
        event = spare_.back();
        spare_.pop_back();
    } else {
        IS_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    }
    IS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    IS_CUDA_CHECK(cudaEventRecord(event, stream_));
    pending_.push_back({next_, event});
    return next_++;
}

void TransferQueue::poll() {
    while (!pending_.empty()) {
        const cudaError_t status = cudaEventQuery(pending_.front().event);
        if (status == cudaErrorNotReady) return;
        IS_CUDA_CHECK(status);
        spare_.push_back(pending_.front().event);
        pending_.pop_front();
    }
}

bool TransferQueue::done(std::uint64_t ticket) {
    poll();
    return pending_.empty() || ticket < pending_.front().ticket;
}

void TransferQueue::order(cudaStream_t compute, std::uint64_t ticket) {
    if (done(ticket)) return;
    for (const Pending& p : pending_)
        if (p.ticket == ticket) {
            IS_CUDA_CHECK(cudaStreamWaitEvent(compute, p.event, 0));
            return;
        }
}

// ---- CudaBackend's side of it -------------------------------------------------------------

std::uint64_t CudaBackend::copy_from_host_async(tensor::Tensor dst, const void* src,
                                                std::size_t bytes) {
    IS_CHECK(dst.device == tensor::Device::Cuda) << "copy_from_host_async into host memory";
    IS_CHECK(bytes <= dst.nbytes()) << bytes << " bytes into " << dst.nbytes();
    if (bytes == 0) return 0;
    activate();
    return transfers_.copy(dst.data, src, bytes);
}

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
