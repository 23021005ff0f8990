#pragma once
// How one GPU's memory is shared out at start-up, as vLLM's --gpu-memory-utilization does: the
// process may hold `utilization` of the GPU's total memory. Whatever is already in use when the
// plan is made (the weights, the forward workspace, the CUDA context, other processes) comes
// off that share first; the rest, the budget, goes to the KV cache's blocks and the chunk pool's
// device tier. The remaining (1 - utilization) of the GPU is headroom for what is allocated
// later and small: cuBLASLt workspaces, CUDA graphs, the chunk encoder's capture buffers.
//
// Either size may be given; the other gets the rest of the budget. With neither, the chunk pool
// takes kDefaultPoolShare of the budget (none when the server runs without memory) and the KV
// cache the rest.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"

namespace inferscale::engine {

inline constexpr double kDefaultPoolShare = 0.5;

struct GpuMemoryRequest {
    std::size_t total_bytes = 0;  // the GPU's memory
    std::size_t free_bytes = 0;   // free now, after the weights and the workspace
    double utilization = 0.9;     // in (0, 1]
    std::size_t kv_bytes_per_token = 0;  // K and V of every layer
    std::int64_t block_size = 16;
    std::int64_t min_kv_tokens = 0;      // one sequence at the full context
    std::optional<std::int64_t> kv_tokens = std::nullopt;         // explicit --kv-tokens
    std::optional<std::size_t> device_pool_bytes = std::nullopt;  // explicit --device-pool-mb
    bool with_memory = true;  // whether the chunk pool takes a share
};

struct GpuMemoryPlan {
    std::size_t total_bytes = 0;
    std::size_t in_use_bytes = 0;  // before the plan: weights, workspace, context, others
    std::size_t budget_bytes = 0;  // utilization * total - in use
    std::int64_t kv_tokens = 0;    // a multiple of the block size
    std::size_t kv_bytes = 0;
    std::size_t device_pool_bytes = 0;
};

// The plan, or an Error naming the numbers: utilization outside (0, 1], nothing left past what
// is in use, explicit sizes that together exceed the budget, or a KV cache smaller than one
// full-context sequence.
Result<GpuMemoryPlan> plan_gpu_memory(const GpuMemoryRequest& request);

// One line for the start-up log: the GPU's total, what was in use, the budget and its split.
std::string describe(const GpuMemoryPlan& plan);

}  // namespace inferscale::engine
