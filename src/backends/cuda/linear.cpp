// CudaBackend::linear and linear_group. A few tokens (decode, short prompts) make a linear a
// pure weight stream, where cuBLASLt's tiles leave bandwidth unused (1024 x 4096 at one token
// measured 0.69 TB/s on the H200): those go to the small-batch kernel, which also runs all
// targets of a group in one launch. Larger batches are GEMMs and go to cuBLASLt per target.

#include <functional>
#include <optional>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_checks.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/linear_small.h"
#include "backends/cuda/lt_matmul.h"
#include "base/log.h"

namespace inferscale::backends::cuda {
namespace {

using tensor::DType;
using tensor::Tensor;

void check_target(const Tensor& x, const tensor::LinearTarget& t) {
    check_device(t.w, DType::BF16, 2, "linear w");
    check_device(t.y, 2, "linear y");
    check_activation(t.y, "linear y");
    const std::int64_t n = x.shape[0], in = x.shape[1], out = t.w.shape[0];
    IS_CHECK(t.w.shape[1] == in && t.y.shape[0] == n && t.y.shape[1] == out && in > 0)
        << "linear shapes x [" << n << "," << in << "] w [" << out << "," << t.w.shape[1] << "] y ["
        << t.y.shape[0] << "," << t.y.shape[1] << "]";
    if (!t.bias.empty()) {
        check_device(t.bias, 1, "linear bias");
        check_activation(t.bias, "linear bias");
        IS_CHECK_EQ(t.bias.shape[0], out);
    }
}

}  // namespace

void CudaBackend::linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y) {
    const tensor::LinearTarget target{w, bias, y};
    linear_group(x, {&target, 1});
}

void CudaBackend::linear_group(const Tensor& x, std::span<const tensor::LinearTarget> targets) {
    check_device(x, DType::BF16, 2, "linear x");
    for (const tensor::LinearTarget& t : targets) check_target(x, t);
    if (x.shape[0] == 0 || targets.empty()) return;
    activate();
    if (x.shape[0] <= options_.small_linear.max_rows && small_linear_wins(x, targets) &&
        small_linear(x, targets)) {
        return;
    }
    for (const tensor::LinearTarget& t : targets) lt_linear(x, t);
}

bool CudaBackend::small_linear_wins(const Tensor& x,
                                    std::span<const tensor::LinearTarget> targets) {
    if (!options_.small_linear.autotune) return true;
    // One decision per token-count bucket (tuning_buckets.h), as cuBLASLt tunes.
    const std::int64_t n = x.shape[0];
    std::vector<std::int64_t> key{tuning_bucket(n), x.shape[1],
                                  static_cast<std::int64_t>(targets[0].y.dtype)};
    for (const tensor::LinearTarget& t : targets) {
        key.push_back(t.w.shape[0]);
        key.push_back(t.bias.empty() ? 0 : 1);
    }
    if (const bool* wins = small_linear_wins_.find(key, n)) return *wins;
    if (capturing_) return true;  // no timing inside a capture; not remembered
    // Each timing runs its path once untimed first (cuBLASLt builds and tunes its plans then),
    // then kTimedRuns times, the two paths alternating for two rounds. The outputs are
    // overwritten by the caller's run.
    constexpr int kTimedRuns = 5, kRounds = 2;
    const std::function<bool()> paths[] = {
        [&] { return small_linear(x, targets); },
        [&] {
            for (const tensor::LinearTarget& t : targets) lt_linear(x, t);
            return true;
        }};
    const std::vector<std::optional<float>> ms =
        tune_stopwatch_.race(stream_, kTimedRuns, kRounds, paths);
    const std::optional<float> small_ms = ms[0];
    const float lt_ms = *ms[1];  // cuBLASLt always runs
    const bool wins = small_ms && *small_ms < lt_ms;
    IS_LOG(Debug) << "small linear: " << n << " rows x " << x.shape[1] << ", "
                  << targets.size() << " targets: kernel "
                  << (small_ms ? std::to_string(*small_ms / kTimedRuns) + " ms" : "not taken")
                  << ", cuBLASLt " << lt_ms / kTimedRuns << " ms";
    small_linear_wins_.record(key, n, wins);
    return wins;
}

bool CudaBackend::small_linear(const Tensor& x, std::span<const tensor::LinearTarget> targets) {
    if (targets.empty() || targets.size() > kSmallLinearMaxTargets) return false;
    SmallLinearTarget small[kSmallLinearMaxTargets];
    const DType y_dtype = targets[0].y.dtype;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const tensor::LinearTarget& t = targets[i];
        if (t.y.dtype != y_dtype) return false;  // one launch writes one output dtype
        small[i] = {t.w.data, t.bias.empty() ? nullptr : t.bias.data,
                    !t.bias.empty() && t.bias.dtype == DType::F32, t.y.data, t.w.shape[0]};
    }
    const SmallLinearScratch scratch{linear_partials_,
                                     options_.small_linear_scratch_bytes / sizeof(float),
                                     linear_counters_, kSmallLinearCounters, num_sms_};
    return launch_small_linear(x.data, x.shape[0], x.shape[1], {small, targets.size()},
                               y_dtype == DType::F32, scratch, stream_);
}

void CudaBackend::lt_linear(const Tensor& x, const tensor::LinearTarget& t) {
    const std::int64_t n = x.shape[0], in = x.shape[1], out = t.w.shape[0];
    if (!t.bias.empty() && options_.fuse_bias && t.bias.dtype == t.y.dtype &&
        matmul_->run(x.data, t.w.data, t.y.data, t.y.dtype, t.bias.data, n, in, out, stream_)) {
        return;
    }
    IS_CHECK(matmul_->run(x.data, t.w.data, t.y.data, t.y.dtype, nullptr, n, in, out, stream_))
        << "cuBLASLt has no algorithm for [" << n << "," << in << "] x [" << out << "," << in
        << "]^T";
    if (!t.bias.empty()) {
        launch_add_bias(t.y.data, t.y.dtype, t.bias.data, t.bias.dtype, n, out, stream_);
    }
}

}  // namespace inferscale::backends::cuda
