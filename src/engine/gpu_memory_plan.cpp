#include "engine/gpu_memory_plan.h"

#include <cmath>
#include <cstdio>

namespace inferscale::engine {
namespace {

std::string gib(std::size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
    return buf;
}

}  // namespace

Result<GpuMemoryPlan> plan_gpu_memory(const GpuMemoryRequest& r) {
    if (!(r.utilization > 0.0 && r.utilization <= 1.0))
        return make_error(ErrorKind::InvalidArgument,
                          "--gpu-memory-utilization must be in (0, 1], got " +
                              std::to_string(r.utilization));
    GpuMemoryPlan plan;
    plan.total_bytes = r.total_bytes;
    plan.in_use_bytes = r.total_bytes - std::min(r.free_bytes, r.total_bytes);
    const auto share =
        static_cast<std::size_t>(std::floor(r.utilization * static_cast<double>(r.total_bytes)));
    const std::string context = "the GPU has " + gib(r.total_bytes) + ", " +
                                gib(plan.in_use_bytes) +
                                " in use by the weights, the workspace and others; "
                                "--gpu-memory-utilization " +
                                std::to_string(r.utilization).substr(0, 4) + " allows " +
                                gib(share);
    if (share <= plan.in_use_bytes)
        return make_error(ErrorKind::Failed,
                          "no GPU memory left for the KV cache: " + context);
    plan.budget_bytes = share - plan.in_use_bytes;
    const std::size_t per_block = r.kv_bytes_per_token * static_cast<std::size_t>(r.block_size);
    const auto kv_bytes_of = [&](std::int64_t tokens) {
        return static_cast<std::size_t>(tokens) * r.kv_bytes_per_token;
    };

    // An explicit KV size in whole blocks.
    std::optional<std::int64_t> kv_tokens = r.kv_tokens;
    if (kv_tokens) *kv_tokens = *kv_tokens / r.block_size * r.block_size;
    if (kv_tokens && r.device_pool_bytes) {
        const std::size_t want = kv_bytes_of(*kv_tokens) + *r.device_pool_bytes;
        if (want > plan.budget_bytes)
            return make_error(ErrorKind::InvalidArgument,
                              "--kv-tokens " + std::to_string(*kv_tokens) + " (" +
                                  gib(kv_bytes_of(*kv_tokens)) + ") and --device-pool-mb " +
                                  std::to_string(*r.device_pool_bytes >> 20) + " need " +
                                  gib(want) + ", more than the " + gib(plan.budget_bytes) +
                                  " left: " + context);
        plan.kv_tokens = *kv_tokens;
        plan.device_pool_bytes = *r.device_pool_bytes;
    } else if (kv_tokens) {
        if (kv_bytes_of(*kv_tokens) > plan.budget_bytes)
            return make_error(ErrorKind::InvalidArgument,
                              "--kv-tokens " + std::to_string(*kv_tokens) + " needs " +
                                  gib(kv_bytes_of(*kv_tokens)) + ", more than the " +
                                  gib(plan.budget_bytes) + " left: " + context);
        plan.kv_tokens = *kv_tokens;
        plan.device_pool_bytes = r.with_memory ? plan.budget_bytes - kv_bytes_of(*kv_tokens) : 0;
    } else {
        std::size_t pool = 0;
        if (r.device_pool_bytes) {
            pool = *r.device_pool_bytes;
        } else if (r.with_memory) {
            pool = static_cast<std::size_t>(kDefaultPoolShare *
                                            static_cast<double>(plan.budget_bytes));
        }
        if (pool > plan.budget_bytes)
            return make_error(ErrorKind::InvalidArgument,
                              "--device-pool-mb " + std::to_string(pool >> 20) +
                                  " is more than the " + gib(plan.budget_bytes) + " left: " +
                                  context);
        plan.device_pool_bytes = pool;
        plan.kv_tokens = static_cast<std::int64_t>((plan.budget_bytes - pool) / per_block) *
                         r.block_size;
    }
    plan.kv_bytes = kv_bytes_of(plan.kv_tokens);
    if (plan.kv_tokens < r.min_kv_tokens)
        return make_error(ErrorKind::InvalidArgument,
                          "the KV cache would hold " + std::to_string(plan.kv_tokens) +
                              " tokens, fewer than one sequence at the full context (" +
                              std::to_string(r.min_kv_tokens) + "): " + context +
                              " (lower --device-pool-mb or --max-context, or raise "
                              "--gpu-memory-utilization)");
    return plan;
}

std::string describe(const GpuMemoryPlan& p) {
    return "GPU memory: " + gib(p.total_bytes) + " in all, " + gib(p.in_use_bytes) +
           " in use before the KV cache (weights, workspace, context); " + gib(p.budget_bytes) +
           " left within --gpu-memory-utilization: KV cache " + gib(p.kv_bytes) + " (" +
           std::to_string(p.kv_tokens) + " tokens), chunk pool device tier " +
           gib(p.device_pool_bytes);
}

}  // namespace inferscale::engine
