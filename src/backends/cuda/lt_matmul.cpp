#include "backends/cuda/lt_matmul.h"

#include <functional>
#include <optional>

#include "backends/cuda/cuda_check.h"
#include "base/log.h"
#include "base/timer.h"

namespace inferscale::backends::cuda {
namespace {

int alignment_of(const void* p) {
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    int align = 256;
    while (align > 1 && addr % static_cast<std::uintptr_t>(align) != 0) align /= 2;
    return align;
}

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
    IS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <class T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
              const T& value) {
    IS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

}  // namespace

LtMatmul::~LtMatmul() {
    for (auto& [key, plan] : plans_) destroy(plan);
    if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void LtMatmul::destroy(Plan& plan) {
    // Destruction failures cannot be acted on; the status is ignored on purpose.
    if (plan.desc != nullptr) cublasLtMatmulDescDestroy(plan.desc);
    if (plan.a != nullptr) cublasLtMatrixLayoutDestroy(plan.a);
    if (plan.b != nullptr) cublasLtMatrixLayoutDestroy(plan.b);
    if (plan.c != nullptr) cublasLtMatrixLayoutDestroy(plan.c);
    plan = Plan{};
}

LtMatmul::Plan LtMatmul::make_descriptors(const Key& key, const void* bias) const {
    const auto [n, in, out, y_dtype_int, has_bias, align_x, align_w, align_y, align_bias] = key;
    const auto y_type =
        static_cast<tensor::DType>(y_dtype_int) == tensor::DType::F32 ? CUDA_R_32F : CUDA_R_16BF;
    Plan plan;
    IS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    if (has_bias) {
        // The bias has y's dtype: the epilogue's default, so no BIAS_DATA_TYPE is needed.
        set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
        // Set now so the heuristic sees a real pointer; every run sets its own again.
        set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    }
    const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
    IS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, u(in), u(out), in));
    IS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, u(in), u(n), in));
    IS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, y_type, u(out), u(n), out));
    return plan;
}

std::vector<cublasLtMatmulAlgo_t> LtMatmul::candidates(const Plan& plan, const Key& key) const {
    const auto [n, in, out, y_dtype_int, has_bias, align_x, align_w, align_y, align_bias] = key;
    cublasLtMatmulPreference_t pref = nullptr;
    IS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
             static_cast<std::uint64_t>(workspace_bytes_));
    // Views into workspaces are not always 256-byte aligned: rule out kernels that need more.
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<std::uint32_t>(align_w));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<std::uint32_t>(align_x));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<std::uint32_t>(align_y));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<std::uint32_t>(align_y));
    (void)align_bias;  // part of the key only: the epilogue's needs are checked by the heuristic

    cublasLtMatmulHeuristicResult_t results[kCandidates]{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, kCandidates, results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    std::vector<cublasLtMatmulAlgo_t> algos;
    if (status == CUBLAS_STATUS_SUCCESS) {
        for (int i = 0; i < found; ++i) {
            if (results[i].state == CUBLAS_STATUS_SUCCESS) algos.push_back(results[i].algo);
        }
    }
    return algos;
}

bool LtMatmul::accepts(const Plan& plan, const cublasLtMatmulAlgo_t& algo) const {
    cublasLtMatmulHeuristicResult_t result{};
    return cublasLtMatmulAlgoCheck(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c, &algo,
                                   &result) == CUBLAS_STATUS_SUCCESS &&
           result.state == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= workspace_bytes_;
}

LtMatmul::Plan LtMatmul::build_plan(const Key& key, const void* x, const void* w, void* y,
                                    const void* bias, cudaStream_t stream) {
    Plan plan = make_descriptors(key, bias);
    const std::int64_t n = std::get<0>(key);
    Key bucket_key = key;
    std::get<0>(bucket_key) = tuning_bucket(n);
    if (const cublasLtMatmulAlgo_t* tuned = tuned_.find(bucket_key, n);
        tuned != nullptr && accepts(plan, *tuned)) {
        plan.algo = *tuned;
        plan.usable = true;
        return plan;
    }
    const std::vector<cublasLtMatmulAlgo_t> algos = candidates(plan, key);
    if (algos.empty()) return plan;
    plan.algo = algos.front();
    plan.usable = true;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    IS_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (!autotune_ || capture != cudaStreamCaptureStatusNone) return plan;
    if (algos.size() > 1) {
        const Timer tuning;
        const Choice choice = pick_fastest(plan, algos, x, w, y, stream);
        plan.algo = algos[choice.index];
        IS_LOG(Debug) << "cuBLASLt: tuned [" << n << " x " << std::get<1>(key)
                      << "] -> " << std::get<2>(key) << " for bucket " << std::get<0>(bucket_key)
                      << " over " << algos.size() << " algorithms in " << tuning.millis()
                      << " ms: candidate " << choice.index << " at " << choice.ms
                      << " ms per run, the heuristic's first at " << choice.first_ms << " ms";
    }
    // A smaller n than the bucket's lands here only when cuBLASLt refused its algorithm.
    tuned_.record(bucket_key, n, plan.algo);
    return plan;
}

LtMatmul::Choice LtMatmul::pick_fastest(const Plan& plan,
                                        const std::vector<cublasLtMatmulAlgo_t>& candidates,
                                        const void* x, const void* w, void* y,
                                        cudaStream_t stream) {
    const float alpha = 1.0f, beta = 0.0f;
    std::vector<std::function<bool()>> runs;
    for (const cublasLtMatmulAlgo_t& algo : candidates) {
        // A candidate the library refuses at run time is skipped: the heuristic only
        // estimates.
        runs.emplace_back([&, algo_ptr = &algo] {
            return cublasLtMatmul(handle_, plan.desc, &alpha, w, plan.a, x, plan.b, &beta, y,
                                  plan.c, y, plan.c, algo_ptr, workspace_, workspace_bytes_,
                                  stream) == CUBLAS_STATUS_SUCCESS;
        });
    }
    const std::vector<std::optional<float>> ms =
        stopwatch_.race(stream, kTimedRuns, kTimingRounds, runs);
    Choice choice;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        if (ms[i] && (!ms[choice.index] || *ms[i] < *ms[choice.index])) choice.index = i;
    }
    if (ms[choice.index]) choice.ms = *ms[choice.index] / kTimedRuns;
    if (ms[0]) choice.first_ms = *ms[0] / kTimedRuns;
    return choice;
}

bool LtMatmul::run(const void* x, const void* w, void* y, tensor::DType y_dtype, const void* bias,
                   std::int64_t n, std::int64_t in, std::int64_t out, cudaStream_t stream) {
    if (n == 0 || out == 0) return true;
    const Key key{n,
                  in,
                  out,
                  static_cast<int>(y_dtype),
                  bias != nullptr,
                  alignment_of(x),
                  alignment_of(w),
                  alignment_of(y),
                  bias != nullptr ? alignment_of(bias) : 0};
    auto it = plans_.find(key);
    if (it == plans_.end()) {
        if (plans_.size() >= kMaxPlans) {
            for (auto& [k, plan] : plans_) destroy(plan);
            plans_.clear();
        }
        it = plans_.emplace(key, build_plan(key, x, w, y, bias, stream)).first;
    }
    Plan& plan = it->second;
    if (!plan.usable) return false;
    if (bias != nullptr) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    const float alpha = 1.0f, beta = 0.0f;
    IS_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, w, plan.a, x, plan.b, &beta, y,
                                   plan.c, y, plan.c, &plan.algo, workspace_, workspace_bytes_,
                                   stream));
    return true;
}

}  // namespace inferscale::backends::cuda
