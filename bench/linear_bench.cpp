#include "bench/linear_bench.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cuda/linear_small.h"
#include "tensor/views.h"

namespace inferscale::bench {
namespace {

using tensor::DType;
using tensor::Tensor;

constexpr int kWarmup = 3;
constexpr int kRepeats = 20;
// Back-to-back calls per sample, as a decode graph runs them: one launch alone would time the
// event and launch latency more than the kernel.
constexpr int kCallsPerSample = 10;

struct Group {
    const char* name;
    std::int64_t in;
    std::vector<std::int64_t> outs;
};

// Median ms of one linear of the targets.
double time_group(backends::cuda::CudaBackend& backend, StepTimer& timer, const Tensor& x,
                  const std::vector<tensor::LinearTarget>& targets) {
    Samples s;
    for (int i = 0; i < kWarmup + kRepeats; ++i) {
        timer.start();
        for (int k = 0; k < kCallsPerSample; ++k) backend.linear({x, targets});
        const double ms = timer.stop_ms() / kCallsPerSample;
        if (i >= kWarmup) s.ms.push_back(ms);
    }
    return s.median();
}

}  // namespace

Status run_linear_sweep(backends::cuda::CudaBackend& backend, StepTimer& timer,
                        const model::ModelConfig& c, const Progress& progress,
                        nlohmann::json& out) {
    const std::int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
    const std::vector<Group> groups = {
        {"qkv", c.hidden_size, {q_dim, kv_dim, kv_dim}},
        {"k", c.hidden_size, {kv_dim}},
        {"o", q_dim, {c.hidden_size}},
        {"gate_up", c.hidden_size, {c.intermediate_size, c.intermediate_size}},
        {"down", c.intermediate_size, {c.hidden_size}}};
    const std::vector<std::int64_t> rows = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128};
    const std::int64_t max_rows = rows.back();
    const backends::cuda::LinearPathOptions restore = backend.linear_path_options();
    progress("linears: cuBLASLt per target, stacked, and the small-batch kernels: mma (register-"
             "fed up to 16 tokens, cluster from 17) and GEMV (bytes = weights + x + y)");
    std::printf("%-8s %-18s %4s %12s %12s %10s %12s %10s %12s %10s\n", "group", "shape", "n",
                "cublasLt us", "stacked us", "TB/s", "mma us", "TB/s", "gemv us", "TB/s");
    for (const Group& g : groups) {
        std::int64_t outs = 0;
        for (std::int64_t o : g.outs) outs += o;
        // One weight for the group, its targets consecutive row ranges (as the model stacks
        // q/k/v), so the stacked path can take multi-target groups.
        tensor::Buffer wb = IS_TRY(backend.allocate(static_cast<std::size_t>(outs * g.in) * 2));
        tensor::Buffer xb = IS_TRY(backend.allocate(static_cast<std::size_t>(max_rows * g.in) * 2));
        backend.fill_random(wb.view(DType::BF16, {outs, g.in}), 22, 1.0f / 64.0f, 0.0f);
        backend.fill_random(xb.view(DType::BF16, {max_rows, g.in}), 21, 1.0f, 0.0f);
        std::vector<tensor::Buffer> keep;
        std::vector<tensor::LinearTarget> targets;
        std::int64_t row0 = 0;
        for (std::int64_t o : g.outs) {
            tensor::Buffer yb =
                IS_TRY(backend.allocate(static_cast<std::size_t>(max_rows * o) * 2));
            const Tensor w = tensor::rows(wb.view(DType::BF16, {outs, g.in}), row0, o);
            targets.push_back({w, Tensor(), yb.view(DType::BF16, {max_rows, o})});
            keep.push_back(std::move(yb));
            row0 += o;
        }
        const double weight_bytes = static_cast<double>(outs * g.in) * 2.0;
        backend.synchronize();
        for (std::int64_t n : rows) {
            const Tensor x = xb.view(DType::BF16, {n, g.in});
            std::vector<tensor::LinearTarget> sized = targets;
            for (tensor::LinearTarget& t : sized)
                t.y = Tensor(t.y.data, DType::BF16, {n, t.w.shape[0]}, t.y.device);
            const double bytes = weight_bytes + 2.0 * static_cast<double>(n) * (g.in + outs);
            // One path at a time, untimed.
            const auto only = [&](int small_max_rows, bool stacked, bool gemv) {
                backends::cuda::LinearPathOptions o = restore;
                o.small_max_rows = small_max_rows;
                o.stacked = stacked;
                o.autotune = false;
                o.gemv = gemv;
                backend.set_linear_path_options(o);
            };
            only(0, false, false);
            const double lt_ms = time_group(backend, timer, x, sized);
            double stacked_ms = 0.0, small_ms = 0.0, gemv_ms = 0.0;
            if (g.outs.size() > 1) {
                only(0, true, false);
                stacked_ms = time_group(backend, timer, x, sized);
            }
            if (n <= backends::cuda::kSmallLinearMaxRows) {
                only(static_cast<int>(n), false, false);
                small_ms = time_group(backend, timer, x, sized);
            }
            if (n == 1) {
                only(1, false, true);
                gemv_ms = time_group(backend, timer, x, sized);
            }
            const std::string shape =
                "[" + std::to_string(outs) + " x " + std::to_string(g.in) + "]";
            const auto tbs = [bytes](double ms) {
                return ms > 0.0 ? bytes / (ms * 1e-3) / 1e12 : 0.0;
            };
            std::printf("%-8s %-18s %4lld %12.2f %12.2f %10.2f %12.2f %10.2f %12.2f %10.2f\n",
                        g.name, shape.c_str(), static_cast<long long>(n), lt_ms * 1e3,
                        stacked_ms * 1e3,
                        tbs(stacked_ms > 0.0 ? std::min(lt_ms, stacked_ms) : lt_ms),
                        small_ms * 1e3, tbs(small_ms), gemv_ms * 1e3, tbs(gemv_ms));
            out["linears"].push_back({{"group", g.name},
                                      {"shape", shape},
                                      {"n", n},
                                      {"bytes", bytes},
                                      {"cublaslt_ms", lt_ms},
                                      {"stacked_ms", stacked_ms},
                                      {"small_ms", small_ms},
                                      {"gemv_ms", gemv_ms}});
        }
    }
    std::fflush(stdout);
    backend.set_linear_path_options(restore);
    return {};
}

}  // namespace inferscale::bench
