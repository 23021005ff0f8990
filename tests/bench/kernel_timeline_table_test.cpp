// gpu_bench --timeline's arithmetic (bench/kernel_timeline_table.h) on hand-made timelines:
// charges add up to each step's span, overlap is not charged and gaps are charged to the
// kernel after them, kernels outside the brackets are left out, and kernel names come out of
// real mangled CUDA kernel symbols readable.

#include <gtest/gtest.h>

#include "bench/kernel_timeline_table.h"

namespace inferscale::bench {
namespace {

const TimelineRow& row(const TimelineTable& t, const std::string& kernel) {
    for (const TimelineRow& r : t.rows) {
        if (r.kernel == kernel) return r;
    }
    ADD_FAILURE() << "no row " << kernel;
    static const TimelineRow none;
    return none;
}

TEST(KernelTimelineTable, ChargesWhatEachKernelAddsToTheStep) {
    // Step 1 (ns): a [1000, 11000], b overlaps it [6000, 21000], c after a gap [26000, 31000].
    // Step 2: the same shifted by 100000. A warm-up kernel before step 1 is outside both.
    std::vector<KernelSpan> spans;
    for (std::uint64_t base : {0u, 100000u}) {
        spans.push_back({"c", base + 26000, base + 31000});
        spans.push_back({"a", base + 1000, base + 11000});
        spans.push_back({"b", base + 6000, base + 21000});
    }
    spans.push_back({"warm_up", 0, 500});
    const auto t = tabulate_steps(spans, {800, 100800}, {40000, 140000});
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->steps, 2);
    EXPECT_DOUBLE_EQ(t->step_us, 30.0);
    ASSERT_EQ(t->rows.size(), 3u);
    EXPECT_DOUBLE_EQ(row(*t, "a").exposed_us, 10.0);
    EXPECT_DOUBLE_EQ(row(*t, "b").exposed_us, 10.0);  // 15 busy, 5 of them under a
    EXPECT_DOUBLE_EQ(row(*t, "b").busy_us, 15.0);
    EXPECT_DOUBLE_EQ(row(*t, "c").exposed_us, 10.0);  // 5 of gap, then its own 5
    EXPECT_DOUBLE_EQ(row(*t, "c").calls, 1.0);
    double charged = 0;
    for (const TimelineRow& r : t->rows) charged += r.exposed_us;
    EXPECT_DOUBLE_EQ(charged, t->step_us);
}

TEST(KernelTimelineTable, AHiddenKernelCostsNothing) {
    // b runs entirely under a: no charge, whatever its duration.
    const auto t = tabulate_steps({{"a", 0, 10000}, {"b", 2000, 8000}}, {0}, {20000});
    ASSERT_TRUE(t.ok());
    EXPECT_DOUBLE_EQ(row(*t, "b").exposed_us, 0.0);
    EXPECT_DOUBLE_EQ(row(*t, "b").busy_us, 6.0);
    EXPECT_EQ(t->rows.front().kernel, "a");  // most exposed first
}

TEST(KernelTimelineTable, NoKernelInAnyStepIsAnError) {
    EXPECT_FALSE(tabulate_steps({{"a", 0, 10}}, {100}, {200}).ok());
    EXPECT_FALSE(tabulate_steps({}, {}, {}).ok());
}

TEST(KernelTimelineTable, ShortNamesOfMangledKernels) {
    // Two kernels' symbols as nvcc emits them (file-local namespaces, template arguments), and
    // a cuBLAS kernel's name, which is not mangled.
    EXPECT_EQ(short_kernel_name("_ZN10inferscale8backends4cuda47_GLOBAL__N__596cd56c_14_linear"
                                "_gemv_cu_2f3fda8411gemv_kernelILb1EEEvNS2_10GemvParamsE"),
              "gemv_kernel<true>");
    EXPECT_EQ(short_kernel_name("_ZN10inferscale8backends4cuda39_GLOBAL__N__5eaf9eb3_7_norm_cu_"
                                "e7536b9419rms_norm_vec_kernelIffLi1EEEvPT_PKS4_PKT0_fiS5_"),
              "rms_norm_vec_kernel<float, float, 1>");
    EXPECT_EQ(short_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64"),
              "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64");
}

}  // namespace
}  // namespace inferscale::bench
