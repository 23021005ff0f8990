// The tensor-core decode kernel's schedule choice (decode_schedule.h) at the shapes measured on
// the H200, where each pick was checked against the other schedule forced in the same call:
// Llama-3.1-8B's 8 kv heads at
// gpu_bench's 1K context (1024 tokens and 23 decoded, a 1056-token bound: 33 tiles of 32
// tokens, 1 to 17 splits of 64 tokens at least), 132 SMs x 2 CTAs of 4 warps.

#include "backends/cuda/decode_schedule.h"

#include <gtest/gtest.h>

namespace inferscale::backends::cuda {
namespace {

constexpr std::int64_t kCtas = 264, kCtaWarps = 4;

// Batch `batch` of 8 kv heads at a bound of `tiles` tiles of 32 tokens (splits of 64 tokens
// at least, items of 1024 at most).
TcSchedule pick(std::int64_t batch, DecodeSchedule wanted = DecodeSchedule::Auto,
                std::int64_t tiles = 33) {
    return choose_tc_schedule(wanted, batch * 8, kCtas, kCtaWarps, tiles, tiles / 32,
                              (tiles + 1) / 2);
}

TEST(DecodeScheduleTest, PicksWhatMeasuredFasterOnTheH200) {
    // Batch 1: CTA items, split (warp items forced: 1.038x the step time).
    EXPECT_FALSE(pick(1).warp_items);
    EXPECT_GT(pick(1).splits, 1);
    // Batches 32 and 64: CTA items unsplit, no merge (warp items: 0.963x and 0.98x tok/s).
    for (const std::int64_t batch : {32, 64}) {
        EXPECT_FALSE(pick(batch).warp_items) << batch;
        EXPECT_EQ(pick(batch).splits, 1) << batch;
    }
    // Batches 128 and 256: warp items unsplit (CTA items forced: 0.86x and 0.83x).
    for (const std::int64_t batch : {128, 256}) {
        EXPECT_TRUE(pick(batch).warp_items) << batch;
        EXPECT_EQ(pick(batch).splits, 1) << batch;
    }
}

TEST(DecodeScheduleTest, WarpItemsSplitWhereTheyWouldIdle) {
    // Batch 64 on warp items: 512 pairs leave half of 1056 warps idle unsplit, so 2 splits of
    // 17 tiles and the merge; CTA items stream 2 rounds of 9 tiles a warp.
    const TcSchedule warp = pick(64, DecodeSchedule::WarpItems);
    EXPECT_TRUE(warp.warp_items);
    EXPECT_EQ(warp.splits, 2);
    EXPECT_EQ(warp.rounds, 17 + kMergeRounds);
    const TcSchedule cta = pick(64, DecodeSchedule::CtaItems);
    EXPECT_FALSE(cta.warp_items);
    EXPECT_EQ(cta.splits, 1);
    EXPECT_EQ(cta.rounds, 18);
}

// Other bounds around 1K keep the picks: a split that saves one round does not win when it
// costs the merge (without the merge in the count, batch 256 at 34 tiles took 17 splits).
TEST(DecodeScheduleTest, PicksHoldAroundTheBound) {
    for (const std::int64_t tiles : {32, 34, 35}) {
        for (const std::int64_t batch : {1, 32, 64, 128, 256}) {
            const TcSchedule at = pick(batch, DecodeSchedule::Auto, tiles);
            EXPECT_EQ(at.warp_items, pick(batch).warp_items) << tiles << " " << batch;
            EXPECT_EQ(at.splits > 1, pick(batch).splits > 1) << tiles << " " << batch;
        }
    }
}

TEST(DecodeScheduleTest, AutoNeverCostsMoreThanEitherForced) {
    for (std::int64_t batch = 1; batch <= 512; ++batch) {
        const std::int64_t warp = pick(batch, DecodeSchedule::WarpItems).rounds;
        const std::int64_t cta = pick(batch, DecodeSchedule::CtaItems).rounds;
        EXPECT_EQ(pick(batch).rounds, std::min(warp, cta)) << batch;
    }
}

TEST(DecodeScheduleTest, SplitsStayWithinBounds) {
    for (std::int64_t batch = 1; batch <= 512; batch *= 2) {
        for (const DecodeSchedule wanted : {DecodeSchedule::WarpItems, DecodeSchedule::CtaItems}) {
            const TcSchedule s = pick(batch, wanted);
            EXPECT_GE(s.splits, 1);
            EXPECT_LE(s.splits, 17);
        }
    }
    // A bound below the wanted minimum wins (no more splits than the workspace holds).
    EXPECT_EQ(choose_tc_schedule(DecodeSchedule::Auto, 8, kCtas, kCtaWarps, 33, 3, 2).splits, 2);
}

}  // namespace
}  // namespace inferscale::backends::cuda
