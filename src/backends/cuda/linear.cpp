// CudaBackend::linear: a group of targets on one of three paths (LinearPath). A few tokens
// (decode, short prompts) make a linear a pure weight stream, where cuBLASLt's tiles leave
// bandwidth unused (1024 x 4096 at one token measured 0.69 TB/s on the H200): the small-batch
// kernel runs all targets of a group in one launch there. Targets stacked in memory (q/k/v) can
// run as one cuBLASLt GEMM whose output is split into the targets' rows. Otherwise each target
// is its own GEMM, every second one on a side stream at few tokens (gate beside up). Which one
// is fastest depends on the shape and the token count, so it is timed once per shape and
// bucket; which small-batch kernel runs for how many tokens is kLinearKernels' (linear_small.h).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/linear_small.h"
#include "backends/cuda/lt_matmul.h"
#include "base/log.h"
#include "tensor/ops_checks.h"

namespace inferscale::backends::cuda {
namespace {

using tensor::DType;
using tensor::Tensor;

bool has_block_weights(std::span<const tensor::LinearTarget> targets) {
    for (const tensor::LinearTarget& t : targets) {
        if (tensor::is_block_quantized(t.w.dtype)) return true;
    }
    return false;
}

void check_target(const Tensor& x, const tensor::LinearTarget& t) {
    if (tensor::is_block_quantized(t.w.dtype)) {
        check_device(t.w, 2, "linear w");
    } else {
        check_device(t.w, DType::BF16, 2, "linear w");
    }
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

void CudaBackend::linear(const tensor::LinearArgs& args) {
    tensor::check_linear_epilogue(args);
    switch (args.epilogue) {
        case tensor::LinearEpilogue::None: linear_group(args.x, args.targets); return;
        case tensor::LinearEpilogue::SwiGLU:
            if (!gated_gemv(args.x, args.targets)) run_unfused(args);
            return;
        case tensor::LinearEpilogue::GeGLU: run_unfused(args); return;
        case tensor::LinearEpilogue::RopeAttention: linear_rope_attention(args); return;
    }
}

void CudaBackend::check_linear_group(const Tensor& x,
                                     std::span<const tensor::LinearTarget> targets) {
    check_device(x, DType::BF16, 2, "linear x");
    for (const tensor::LinearTarget& t : targets) check_target(x, t);
}

void CudaBackend::linear_group(const Tensor& x, std::span<const tensor::LinearTarget> targets) {
    check_linear_group(x, targets);
    if (x.shape[0] == 0 || targets.empty()) return;
    activate();
    if (has_block_weights(targets)) {
        quantized_linear_group(x, targets);
        return;
    }
    switch (choose_linear_path(x, targets)) {
        case LinearPath::SmallKernel:
            if (small_linear(x, targets)) return;
            break;  // the kernel refused the problem: per target
        case LinearPath::Stacked: stacked_linear(x, targets); return;
        case LinearPath::PerTarget: break;
    }
    per_target_linear(x, targets);
}

LinearPath CudaBackend::choose_linear_path(const Tensor& x,
                                           std::span<const tensor::LinearTarget> targets) {
    if (has_block_weights(targets)) return LinearPath::PerTarget;  // quantized_linear_group
    const LinearPathOptions& o = options_.linear_paths;
    const bool small_ok = x.shape[0] <= o.small_max_rows;
    const bool stacked_ok = o.stacked && stackable(x, targets);
    if (!small_ok && !stacked_ok) return LinearPath::PerTarget;
    const LinearPath untimed = small_ok ? LinearPath::SmallKernel : LinearPath::Stacked;
    if (!options_.linear_paths.autotune) return untimed;
    // One decision per token-count bucket (tuning_buckets.h), as cuBLASLt tunes.
    const std::int64_t n = x.shape[0];
    std::vector<std::int64_t> key{tuning_bucket(n), x.shape[1],
                                  static_cast<std::int64_t>(targets[0].y.dtype), small_ok,
                                  stacked_ok};
    for (const tensor::LinearTarget& t : targets) {
        key.push_back(t.w.shape[0]);
        key.push_back(t.bias.empty() ? 0 : 1);
    }
    if (const LinearPath* path = linear_paths_.find(key, n)) return *path;
    if (capturing_) return untimed;  // no timing inside a capture; not remembered
    // Each timing runs its path once untimed first (cuBLASLt builds and tunes its plans then),
    // then kTimedRuns times, the paths alternating for two rounds. The outputs are
    // overwritten by the caller's run.
    constexpr int kTimedRuns = 5, kRounds = 2;
    std::vector<LinearPath> paths{LinearPath::PerTarget};
    std::vector<std::function<bool()>> runs{[&] {
        per_target_linear(x, targets);
        return true;
    }};
    if (small_ok) {
        paths.push_back(LinearPath::SmallKernel);
        runs.emplace_back([&] { return small_linear(x, targets); });
    }
    if (stacked_ok) {
        paths.push_back(LinearPath::Stacked);
        runs.emplace_back([&] {
            stacked_linear(x, targets);
            return true;
        });
    }
    const std::vector<std::optional<float>> ms =
        tune_stopwatch_.race(stream_, kTimedRuns, kRounds, runs);
    std::size_t best = 0;  // per target always runs
    std::string times;
    static constexpr const char* kNames[] = {"kernel", "per-target cuBLASLt", "stacked cuBLASLt"};
    for (std::size_t i = 0; i < paths.size(); ++i) {
        if (ms[i] && *ms[i] < *ms[best]) best = i;
        times += std::string(i > 0 ? ", " : "") + kNames[static_cast<int>(paths[i])] + " " +
                 (ms[i] ? std::to_string(*ms[i] / kTimedRuns) + " ms" : "not taken");
    }
    IS_LOG(Debug) << "linear paths: " << n << " rows x " << x.shape[1] << ", " << targets.size()
                  << " targets: " << times << " -> " << kNames[static_cast<int>(paths[best])];
    linear_paths_.record(key, n, paths[best]);
    return paths[best];
}

bool CudaBackend::stackable(const Tensor& x, std::span<const tensor::LinearTarget> targets) const {
    if (targets.size() < 2 || targets.size() > static_cast<std::size_t>(kMaxColumnParts)) {
        return false;
    }
    const auto adjoins = [](const Tensor& prev, const Tensor& next) {
        return next.data == static_cast<const char*>(prev.data) + prev.nbytes() &&
               next.dtype == prev.dtype;
    };
    const tensor::LinearTarget& first = targets[0];
    const std::size_t elem = tensor::dtype_size(first.y.dtype);
    std::int64_t outs = 0;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const tensor::LinearTarget& t = targets[i];
        if (t.y.dtype != first.y.dtype || t.bias.empty() != first.bias.empty() ||
            (t.w.shape[0] * static_cast<std::int64_t>(elem)) % 16 != 0 ||
            reinterpret_cast<std::uintptr_t>(t.y.data) % 16 != 0) {
            return false;
        }
        if (i > 0 && (!adjoins(targets[i - 1].w, t.w) ||
                      (!t.bias.empty() && !adjoins(targets[i - 1].bias, t.bias)))) {
            return false;
        }
        outs += t.w.shape[0];
    }
    return static_cast<std::size_t>(x.shape[0] * outs) * elem <=
           options_.stacked_linear_scratch_bytes;
}

Tensor CudaBackend::stacked_gemm(const Tensor& x, std::span<const tensor::LinearTarget> targets) {
    std::int64_t outs = 0;
    for (const tensor::LinearTarget& t : targets) outs += t.w.shape[0];
    tensor::LinearTarget stack = targets[0];
    stack.w.shape[0] = outs;
    if (!stack.bias.empty()) stack.bias.shape[0] = outs;
    stack.y = Tensor(stacked_output_, targets[0].y.dtype, {x.shape[0], outs}, tensor::Device::Cuda);
    lt_linear(x, stack, {stream_, matmul_.get()});
    return stack.y;
}

void CudaBackend::split_stacked(const Tensor& stacked,
                                std::span<const tensor::LinearTarget> targets) {
    const auto elem = static_cast<std::int64_t>(tensor::dtype_size(stacked.dtype));
    ColumnParts parts;
    for (const tensor::LinearTarget& t : targets) {
        parts.dst[parts.count] = t.y.data;
        parts.bytes[parts.count++] = t.w.shape[0] * elem;
    }
    launch_split_columns(stacked.data, stacked.shape[0], parts, stream_);
}

void CudaBackend::stacked_linear(const Tensor& x, std::span<const tensor::LinearTarget> targets) {
    split_stacked(stacked_gemm(x, targets), targets);
}

namespace {

// The targets as the small-batch launches take them; false when they differ in output dtype
// (one launch writes one) or are too many.
bool to_small_targets(std::span<const tensor::LinearTarget> targets,
                      SmallLinearTarget (&small)[kSmallLinearMaxTargets]) {
    if (targets.empty() || targets.size() > kSmallLinearMaxTargets) return false;
    for (std::size_t i = 0; i < targets.size(); ++i) {
        const tensor::LinearTarget& t = targets[i];
        if (t.y.dtype != targets[0].y.dtype) return false;
        small[i] = {t.w.data, t.bias.empty() ? nullptr : t.bias.data,
                    !t.bias.empty() && t.bias.dtype == DType::F32, t.y.data, t.w.shape[0]};
    }
    return true;
}

}  // namespace

SmallLinearScratch CudaBackend::small_linear_scratch() const {
    return {linear_partials_, options_.small_linear_scratch_bytes / sizeof(float),
            linear_counters_, kSmallLinearCounters, num_sms_, cluster_linear_limits_};
}

bool CudaBackend::small_linear(const Tensor& x, std::span<const tensor::LinearTarget> targets) {
    SmallLinearTarget small[kSmallLinearMaxTargets];
    if (!to_small_targets(targets, small)) return false;
    return launch_small_linear(x.data, x.shape[0], x.shape[1], {small, targets.size()},
                               targets[0].y.dtype == DType::F32, options_.linear_paths.gemv,
                               small_linear_scratch(), stream_);
}

bool CudaBackend::gated_gemv(const Tensor& x, std::span<const tensor::LinearTarget> gate_up) {
    check_linear_group(x, gate_up);
    if (has_block_weights(gate_up)) {
        activate();
        return quantized_gated_gemv(x, gate_up);
    }
    const std::int64_t n = x.shape[0];
    if (n < 1 || linear_kernel(n) != LinearKernel::Gemv || !options_.linear_paths.gemv) {
        return false;
    }
    SmallLinearTarget small[kSmallLinearMaxTargets];
    if (gate_up[0].y.dtype != DType::BF16 || !to_small_targets(gate_up, small)) return false;
    activate();
    if (choose_linear_path(x, gate_up) != LinearPath::SmallKernel) return false;
    return launch_gated_gemv(x.data, x.shape[1], {small, 2}, small_linear_scratch(), stream_);
}

void CudaBackend::per_target_linear(const Tensor& x,
                                    std::span<const tensor::LinearTarget> targets) {
    const GemmLane main{stream_, matmul_.get()};
    if (targets.size() < 2 || x.shape[0] > options_.linear_paths.concurrent_max_rows) {
        for (const tensor::LinearTarget& t : targets) lt_linear(x, t, main);
        return;
    }
    const GemmLane side{side_stream_, side_matmul_.get()};
    IS_CUDA_CHECK(cudaEventRecord(fork_event_, stream_));
    IS_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_event_));
    for (std::size_t i = 0; i < targets.size(); ++i) lt_linear(x, targets[i], i % 2 ? side : main);
    IS_CUDA_CHECK(cudaEventRecord(join_event_, side_stream_));
    IS_CUDA_CHECK(cudaStreamWaitEvent(stream_, join_event_));
}

void CudaBackend::lt_linear(const Tensor& x, const tensor::LinearTarget& t, GemmLane lane) {
    const std::int64_t n = x.shape[0], in = x.shape[1], out = t.w.shape[0];
    if (!t.bias.empty() && options_.fuse_bias && t.bias.dtype == t.y.dtype &&
        lane.matmul->run(x.data, t.w.data, t.y.data, t.y.dtype, t.bias.data, n, in, out,
                         lane.stream)) {
        return;
    }
    IS_CHECK(lane.matmul->run(x.data, t.w.data, t.y.data, t.y.dtype, nullptr, n, in, out,
                              lane.stream))
        << "cuBLASLt has no algorithm for [" << n << "," << in << "] x [" << out << "," << in
        << "]^T";
    if (!t.bias.empty()) {
        launch_add_bias(t.y.data, t.y.dtype, t.bias.data, t.bias.dtype, n, out, lane.stream);
    }
}

}  // namespace inferscale::backends::cuda
