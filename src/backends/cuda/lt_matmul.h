#pragma once
// LtMatmul: y[n, out] = x[n, in] W[out, in]^T (+ bias[out]) through cuBLASLt, bf16 inputs with
// f32 accumulation and a bf16 or f32 output. Row-major y = x W^T is column-major
// y^T = W^T-as-stored x^T, i.e. the "TN" problem (m = out, n = rows, k = in) with no copies.
// Each distinct problem (shape, dtypes, bias, pointer alignments) gets a plan — descriptors plus
// an algorithm — built on first use and cached; later calls only enqueue the matmul, so they
// are legal inside CUDA graph capture (build plans in a warm-up run first). With autotuning the
// algorithm is chosen per token-count bucket (tuning_buckets.h) by timing the heuristic's top
// candidates on the call's own operands (two rounds of a few runs each, bracketed by events, a
// host wait per candidate): for skinny decode GEMMs the first choice is sometimes a split-K
// variant that loses to a plain one. A bucket's algorithm serves a smaller n when cuBLASLt
// accepts it for the exact shape. During capture, or without autotuning, the heuristic's first
// choice is taken. Owns the handle; the workspace belongs to the caller and
// must outlive this.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "backends/cuda/stream_stopwatch.h"
#include "backends/cuda/tuning_buckets.h"
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

    // Descriptors only (plan.usable stays false).
    Plan make_descriptors(const Key& key, const void* bias) const;
    // Up to kCandidates heuristic algorithms for the plan, best first.
    std::vector<cublasLtMatmulAlgo_t> candidates(const Plan& plan, const Key& key) const;
    // Whether cuBLASLt accepts `algo` for the plan's exact shape and this workspace.
    bool accepts(const Plan& plan, const cublasLtMatmulAlgo_t& algo) const;
    // Builds the plan of a key seen for the first time: the bucket's tuned algorithm when
    // cuBLASLt accepts it, else the heuristic's (tuned on these operands when allowed).
    Plan build_plan(const Key& key, const void* x, const void* w, void* y, const void* bias,
                    cudaStream_t stream);
    struct Choice {
        std::size_t index = 0;  // into the candidates
        float ms = 0;           // its time per run (0: none could be timed)
        float first_ms = 0;     // the heuristic's first choice's
    };
    // The fastest of `candidates` on these operands; the first when none can be timed.
    Choice pick_fastest(const Plan& plan, const std::vector<cublasLtMatmulAlgo_t>& candidates,
                        const void* x, const void* w, void* y, cudaStream_t stream);
    static void destroy(Plan& plan);

    static constexpr int kCandidates = 8;
    static constexpr int kTimedRuns = 3;
    static constexpr int kTimingRounds = 2;

    // Plans for many batch sizes pile up; past this many the cache starts over.
    static constexpr std::size_t kMaxPlans = 4096;

    cublasLtHandle_t handle_ = nullptr;
    void* workspace_ = nullptr;
    std::size_t workspace_bytes_ = 0;
    bool autotune_ = true;
    StreamStopwatch stopwatch_;  // times the candidates
    std::map<Key, Plan> plans_;
    // The tuned algorithm of each bucket: a Key whose n is tuning_bucket(n).
    BucketChoices<Key, cublasLtMatmulAlgo_t> tuned_;
};

}  // namespace inferscale::backends::cuda
