// CudaBackend's pinned host memory and CUDA graph capture of its stream. A captured step is
// instantiated once and replayed with cudaGraphLaunch: one launch instead of hundreds, which
// is what small-batch decode is bound by when every op is a few microseconds.

#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace inferscale::backends::cuda {
namespace {

Error graph_error(const std::string& what, cudaError_t err) {
    return make_error("cuda backend: " + what + ": " + cudaGetErrorName(err) + " (" +
                      cudaGetErrorString(err) + ")");
}

class CudaGraph final : public tensor::CapturedGraph {
  public:
    CudaGraph(int device, cudaGraphExec_t exec) : device_(device), exec_(exec) {}
    ~CudaGraph() override {
        // Teardown failures cannot be handled; the status is ignored on purpose.
        cudaSetDevice(device_);
        cudaGraphExecDestroy(exec_);
    }
    CudaGraph(const CudaGraph&) = delete;
    CudaGraph& operator=(const CudaGraph&) = delete;

    cudaGraphExec_t exec() const { return exec_; }

  private:
    int device_;
    cudaGraphExec_t exec_;
};

}  // namespace

Status CudaBackend::begin_capture() {
    IS_CHECK(!capturing_) << "begin_capture inside a capture";
    activate();
    // ThreadLocal: only this thread's unsafe calls (allocation, synchronization) break it.
    const cudaError_t err = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return graph_error("cudaStreamBeginCapture", err);
    }
    capturing_ = true;
    return {};
}

Result<std::unique_ptr<tensor::CapturedGraph>> CudaBackend::end_capture() {
    IS_CHECK(capturing_) << "end_capture without begin_capture";
    activate();
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamEndCapture(stream_, &graph);
    if (err != cudaSuccess) {
        // An op broke the capture (an illegal call while recording): nothing was run.
        cudaGetLastError();
        if (graph != nullptr) cudaGraphDestroy(graph);
        return graph_error("cudaStreamEndCapture", err);
    }
    cudaGraphExec_t exec = nullptr;
    err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);  // the executable graph keeps its own copy
    if (err != cudaSuccess) {
        cudaGetLastError();
        return graph_error("cudaGraphInstantiate", err);
    }
    // Upload now so the first replay does not pay for it inside a timed step.
    IS_CUDA_CHECK(cudaGraphUpload(exec, stream_));
    return std::unique_ptr<tensor::CapturedGraph>(new CudaGraph(device_, exec));
}

void CudaBackend::replay(const tensor::CapturedGraph& graph) {
    IS_CHECK(!capturing_) << "replay inside a capture";
    const auto* g = dynamic_cast<const CudaGraph*>(&graph);
    IS_CHECK(g != nullptr) << "replay of a graph another backend captured";
    activate();
    IS_CUDA_CHECK(cudaGraphLaunch(g->exec(), stream_));
}

}  // namespace inferscale::backends::cuda
