#pragma once
// LtMatmul: y[n, out] = x[n, in] W[out, in]^T (+ bias[out]) through cuBLASLt, bf16 inputs with
// f32 accumulation and a bf16 or f32 output. Row-major y = x W^T is column-major
// y^T = W^T-as-stored x^T, i.e. the "TN" problem (m = out, n = rows, k = in) with no copies.
// Each distinct problem (shape, dtypes, bias, pointer alignments) gets a plan — descriptors plus
// an algorithm — built on first use and cached; later calls only enqueue the matmul, so they
// are legal inside CUDA graph capture (build plans in a warm-up run first). With autotuning the
// plan times the heuristic's top candidates on the call's own operands (a few runs each,
// bracketed by events, one host wait) and keeps the fastest: for skinny decode GEMMs the first
// choice is sometimes a split-K variant that loses to a plain one. During capture, or without
// autotuning, the first choice is taken. Owns the handle; the workspace belongs to the caller
// and must outlive this.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "backends/cuda/stream_stopwatch.h"
#include "tensor/dtype.h"

namespace inferscale::backends::cuda {

class LtMatmul {
  public:
    LtMatmul(cublasLtHandle_t handle, void* workspace, std::size_t workspace_bytes,
             bool autotune = true)
        : handle_(handle), workspace_(workspace), workspace_bytes_(workspace_bytes),
          autotune_(autotune) {}
    ~LtMatmul();
    LtMatmul(const LtMatmul&) = delete;
    LtMatmul& operator=(const LtMatmul&) = delete;

    //   x [n, in] bf16, w [out, in] bf16, y [n, out] y_dtype (BF16 or F32),
    //   bias [out] in y_dtype or null (added by the cuBLASLt epilogue).
    // Returns false when cuBLASLt has no algorithm for the problem (then nothing is enqueued);
    // the caller falls back (a separate bias kernel) or treats it as a bug.
    bool run(const void* x, const void* w, void* y, tensor::DType y_dtype, const void* bias,
             std::int64_t n, std::int64_t in, std::int64_t out, cudaStream_t stream);

  private:
    struct Plan {
        bool usable = false;
        cublasLtMatmulDesc_t desc = nullptr;
        cublasLtMatrixLayout_t a = nullptr;  // W as stored: [in, out] column-major
        cublasLtMatrixLayout_t b = nullptr;  // x as stored: [in, n] column-major
        cublasLtMatrixLayout_t c = nullptr;  // y as stored: [out, n] column-major
        cublasLtMatmulAlgo_t algo{};
    };
    // n, in, out, y dtype, has bias, alignment of x, w, y, bias (bytes, capped at 256)
    using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, int, bool, int, int, int, int>;

    // Descriptors plus up to kCandidates heuristic algorithms (best first) in `candidates`.
    Plan make_plan(const Key& key, const void* bias, std::vector<cublasLtMatmulAlgo_t>& candidates) const;
    // The fastest of `candidates` on these operands; the first when none can be timed.
    cublasLtMatmulAlgo_t pick_fastest(const Plan& plan,
                                      const std::vector<cublasLtMatmulAlgo_t>& candidates,
                                      const void* x, const void* w, void* y, cudaStream_t stream);
    static void destroy(Plan& plan);

    static constexpr int kCandidates = 8;
    static constexpr int kTimedRuns = 3;

    // Plans for many batch sizes pile up; past this many the cache starts over.
    static constexpr std::size_t kMaxPlans = 4096;

    cublasLtHandle_t handle_ = nullptr;
    void* workspace_ = nullptr;
    std::size_t workspace_bytes_ = 0;
    bool autotune_ = true;
    StreamStopwatch stopwatch_;  // times the candidates
    std::map<Key, Plan> plans_;
};

}  // namespace inferscale::backends::cuda
