// plan_gpu_memory: the budget is utilization * total less what is in use, split between the KV
// cache and the chunk pool's device tier; explicit sizes that do not fit are errors that name
// the numbers.

#include "engine/gpu_memory_plan.h"

#include <gtest/gtest.h>

namespace inferscale::engine {
namespace {

constexpr std::size_t kGiB = std::size_t{1} << 30;

// An 80 GiB GPU with 20 GiB in use; Llama-3.1-8B's KV (32 layers, 8 KV heads of 128, bf16).
GpuMemoryRequest h100() {
    GpuMemoryRequest r;
    r.total_bytes = 80 * kGiB;
    r.free_bytes = 60 * kGiB;
    r.utilization = 0.9;
    r.kv_bytes_per_token = 32 * 2 * 8 * 128 * 2;  // 128 KiB
    r.block_size = 16;
    r.min_kv_tokens = 4096;
    return r;
}

TEST(GpuMemoryPlan, DefaultSplitGivesThePoolItsShareAndKvTheRest) {
    const GpuMemoryPlan p = *plan_gpu_memory(h100());
    EXPECT_EQ(p.in_use_bytes, 20 * kGiB);
    EXPECT_EQ(p.budget_bytes, static_cast<std::size_t>(0.9 * 80 * kGiB) - 20 * kGiB);  // 52 GiB
    EXPECT_EQ(p.device_pool_bytes, static_cast<std::size_t>(kDefaultPoolShare * p.budget_bytes));
    EXPECT_EQ(p.kv_tokens % 16, 0);
    EXPECT_EQ(p.kv_bytes, static_cast<std::size_t>(p.kv_tokens) * (128 << 10));
    EXPECT_LE(p.kv_bytes + p.device_pool_bytes, p.budget_bytes);
    // Whole blocks: one more would not fit.
    EXPECT_GT(p.kv_bytes + 16 * (128 << 10) + p.device_pool_bytes, p.budget_bytes);
    EXPECT_NE(describe(p).find("tokens"), std::string::npos);
}

TEST(GpuMemoryPlan, WithoutMemoryTheKvCacheTakesTheWholeBudget) {
    GpuMemoryRequest r = h100();
    r.with_memory = false;
    const GpuMemoryPlan p = *plan_gpu_memory(r);
    EXPECT_EQ(p.device_pool_bytes, 0u);
    EXPECT_EQ(p.kv_tokens, static_cast<std::int64_t>(p.budget_bytes / (128 << 10)) / 16 * 16);
}

TEST(GpuMemoryPlan, AnExplicitSizeGetsWhatItAsksAndTheOtherTheRest) {
    GpuMemoryRequest r = h100();
    r.kv_tokens = 100008;  // not a whole number of blocks: rounded down
    GpuMemoryPlan p = *plan_gpu_memory(r);
    EXPECT_EQ(p.kv_tokens, 100000);
    EXPECT_EQ(p.device_pool_bytes, p.budget_bytes - std::size_t{100000} * (128 << 10));

    r = h100();
    r.device_pool_bytes = 64 << 20;
    p = *plan_gpu_memory(r);
    EXPECT_EQ(p.device_pool_bytes, std::size_t{64} << 20);
    EXPECT_EQ(p.kv_tokens,
              static_cast<std::int64_t>((p.budget_bytes - (64 << 20)) / (128 << 10)) / 16 * 16);

    r.kv_tokens = 65536;
    p = *plan_gpu_memory(r);
    EXPECT_EQ(p.kv_tokens, 65536);
    EXPECT_EQ(p.device_pool_bytes, std::size_t{64} << 20);
}

TEST(GpuMemoryPlan, SizesThatDoNotFitAreErrorsNamingTheNumbers) {
    GpuMemoryRequest r = h100();
    r.kv_tokens = 393216;  // 48 GiB
    r.device_pool_bytes = std::size_t{40960} << 20;
    auto p = plan_gpu_memory(r);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("--kv-tokens 393216"), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("--device-pool-mb 40960"), std::string::npos);
    EXPECT_NE(p.error().message.find("52.00 GiB"), std::string::npos) << p.error().message;

    r = h100();
    r.device_pool_bytes = 60 * kGiB;
    EXPECT_FALSE(plan_gpu_memory(r).ok());

    r = h100();
    r.free_bytes = 5 * kGiB;  // 75 GiB in use: more than 0.9 of 80
    p = plan_gpu_memory(r);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("no GPU memory left"), std::string::npos);

    r = h100();
    r.device_pool_bytes = 51 * kGiB + (std::size_t{3} << 28);  // leaves 2048 tokens, not 4096
    p = plan_gpu_memory(r);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("fewer than one sequence"), std::string::npos);

    r = h100();
    r.utilization = 1.5;
    EXPECT_FALSE(plan_gpu_memory(r).ok());
}

}  // namespace
}  // namespace inferscale::engine
